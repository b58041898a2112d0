"""The INSERT of one job or many now lives in transitions/inserts.py, below
both the enqueue path and the workflow cascade (which inserts a batch's
callbacks through the same statement); kept importable here."""

from ..transitions.inserts import (
    column_field,
    insert_job,
    insert_rows,
    insert_rows_statement,
    insert_statement,
    insert_tokened_rows,
    job_fields,
    prepared_values,
    returns_id,
    rows_per_statement,
)

__all__ = [
    "column_field",
    "insert_job",
    "insert_rows",
    "insert_rows_statement",
    "insert_statement",
    "insert_tokened_rows",
    "job_fields",
    "prepared_values",
    "returns_id",
    "rows_per_statement",
]
