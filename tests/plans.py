"""Query plans of MySQL and MariaDB, for tests that hold a query to an index."""

import json
from typing import Any

from django.db import connection

from django_dbqueue.models import Job


def json_plan(sql: str, params: Any = ()) -> dict:
    """``EXPLAIN FORMAT=JSON`` of ``sql``, in the first JSON format on MySQL
    too: MySQL 9's second names the parts differently and cannot explain an
    UPDATE."""
    with connection.cursor() as cursor:
        if not connection.mysql_is_mariadb:
            cursor.execute("SET SESSION explain_json_format_version = 1")
        cursor.execute(f"EXPLAIN FORMAT=JSON {sql}", params)
        return json.loads(cursor.fetchone()[0])


def job_table_access(plan: dict) -> dict:
    """The plan's one access to the job table (MySQL and MariaDB nest it differently)."""
    found, stack = [], [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("table_name") == Job._meta.db_table:
                found.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    assert len(found) == 1, plan
    return found[0]
