"""A trigger that makes the database refuse a job row's checkpoint holding
a mark: it stands for a position the database will not store (PostgreSQL
refuses "\\u0000" in JSON, MySQL a packet over max_allowed_packet), on
every database."""

from collections.abc import Iterator

import pytest
from django.db import connection

from demo.story_tasks import REFUSED_MARK

REFUSAL = "refused by the test trigger"


def create_refusing_trigger(name: str, condition: str, postgres_condition: str | None = None) -> None:
    """A trigger ``name`` that makes the database refuse an UPDATE of a job
    row for which ``condition`` holds (``postgres_condition`` where
    PostgreSQL needs its own spelling), with REFUSAL, on every database."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE UPDATE ON django_dbqueue_job FOR EACH ROW "
                f"BEGIN IF {condition} THEN "
                f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{REFUSAL}'; END IF; END"
            )
        elif connection.vendor == "postgresql":
            cursor.execute(
                f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN "
                f"IF {postgres_condition or condition} THEN RAISE EXCEPTION '{REFUSAL}'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE UPDATE ON django_dbqueue_job "
                f"FOR EACH ROW EXECUTE FUNCTION {name}()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE UPDATE ON django_dbqueue_job FOR EACH ROW "
                f"WHEN {condition} BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END"
            )


def drop_refusing_trigger(name: str) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON django_dbqueue_job")
            cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")
        else:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")


def refuse_marked_checkpoints() -> None:
    create_refusing_trigger(
        "dbq_refuse_checkpoint",
        f"NEW.checkpoint LIKE '%{REFUSED_MARK}%'",
        f"NEW.checkpoint::text LIKE '%{REFUSED_MARK}%'",
    )


@pytest.fixture
def refusing_marked_checkpoints() -> Iterator[None]:
    refuse_marked_checkpoints()
    yield
    drop_refusing_trigger("dbq_refuse_checkpoint")
