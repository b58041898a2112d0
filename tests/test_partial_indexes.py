"""The concurrency-key and batch indexes hold only the jobs with a key or a
batch (migration 0020): partial indexes on PostgreSQL and SQLite, virtual
columns on MySQL, which the queue's queries name there. MariaDB keeps plain
indexes: with indexed virtual columns it could add no column online later."""

import importlib

import pytest
from django.apps import apps
from django.db import connection

from django_dbqueue.models import Job
from django_dbqueue.status import Status
from django_dbqueue.transitions.rows import has_virtual_status, keyed, of_batch
from django_dbqueue.workflows.models import Batch
from tests.conftest import DATABASE, MYSQL_FAMILY, ROOT
from tests.plans import job_table_access, json_plan

pytestmark = pytest.mark.django_db
TABLE = Job._meta.db_table
INDEXES = {"dbqueue_job_keyed_status": "concurrency_key", "dbqueue_job_batched_status": "batch_id"}


def index_definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE])
        elif connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s", [TABLE]
            )
        else:
            cursor.execute(
                "SELECT index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index) "
                "FROM information_schema.statistics "
                "WHERE table_schema = DATABASE() AND table_name = %s GROUP BY index_name",
                [TABLE],
            )
        return {name: definition for name, definition in cursor.fetchall()}


def test_each_index_holds_only_the_rows_it_serves():
    found = index_definitions()
    assert "dbqueue_job_key_status" not in found and "dbqueue_job_batch_status" not in found
    for index, key in INDEXES.items():
        if connection.vendor in ("postgresql", "sqlite"):
            plain = found[index].replace('"', "").replace("(", "").replace(")", "")
            assert f"WHERE {key} IS NOT NULL" in plain, found[index]
            continue
        virtual = {"concurrency_key": "keyed_status", "batch_id": "batched_status"}[key]
        if connection.mysql_is_mariadb:
            assert found[index] == f"{key},status"
            assert not has_virtual_status(connection)
            continue
        assert found[index] == f"{key},{virtual}"
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generation_expression, extra FROM information_schema.columns "
                "WHERE table_schema = DATABASE() AND table_name = %s AND column_name = %s",
                [TABLE, virtual],
            )
            expression, extra = cursor.fetchone()
        assert "VIRTUAL" in extra.upper() and key in expression and "status" in expression


def test_the_queries_find_the_rows_of_each_status():
    batch = Batch.objects.create()
    jobs = [
        Job.objects.create(
            task_path="demo.tasks.noop", concurrency_key="k", concurrency_limit=2, status=status
        )
        for status in (Status.READY, Status.RUNNING, Status.RUNNING, Status.SUCCESSFUL)
    ]
    members = [Job.objects.create(task_path="demo.tasks.noop", batch=batch, status=s) for s in Status.values]
    Job.objects.create(task_path="demo.tasks.noop", status=Status.RUNNING)  # neither keyed nor a member

    assert sorted(keyed(Job.objects.all(), ["k"], [Status.RUNNING]).values_list("pk", flat=True)) == [
        jobs[1].pk,
        jobs[2].pk,
    ]
    assert keyed(Job.objects.all(), ["k", "other"], [Status.READY, Status.SUCCESSFUL]).count() == 2
    for member in members:
        assert list(of_batch(Job.objects.all(), batch.pk, [member.status]).values_list("pk", flat=True)) == [
            member.pk
        ]


@pytest.mark.skipif(
    DATABASE != "mysql", reason="EXPLAIN FORMAT=JSON of MySQL, whose indexes are on virtual columns"
)
def test_on_mysql_the_queries_use_both_parts_of_each_index():
    # Naming status instead of the virtual column uses the index's first
    # part only: every job a key or a batch ever had, finished ones too.
    Job.objects.bulk_create(
        [
            Job(task_path="demo.tasks.noop", concurrency_key=f"k{n % 7}", status=Status.SUCCESSFUL)
            for n in range(300)
        ]
    )
    cases = {
        "dbqueue_job_keyed_status": keyed(Job.objects.all(), ["k1", "k2"], [Status.RUNNING]),
        "dbqueue_job_batched_status": of_batch(Job.objects.all(), 5, [Status.READY]),
    }
    for index, rows in cases.items():
        used = job_table_access(json_plan(*rows.values_list("pk").query.sql_with_params()))
        assert used["key"] == index, used
        assert len(used["used_key_parts"]) == 2, used


@pytest.mark.skipif(DATABASE != "mysql", reason="the MySQL statements of migration 0020")
def test_databases_md_shows_the_statements_the_migration_runs():
    migration = importlib.import_module("django_dbqueue.migrations.0020_partial_indexes")
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        migration.forwards(apps, editor)
    ran = [" ".join(statement.replace("`", "").split()).rstrip(";") for statement in editor.collected_sql]
    page = (ROOT / "docs" / "databases.md").read_text()
    block = page.split("```mysql\n", 1)[1].split("```", 1)[0]
    shown = [" ".join(statement.split()) for statement in block.split(";") if statement.strip()]
    assert shown == ran


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="MySQL's and MariaDB's online DDL")
def test_a_column_can_still_be_added_to_the_job_table_without_copying_it():
    # Why MariaDB has no virtual columns: with an indexed one, MariaDB 10.11
    # adds a column neither instantly nor online (errors 1845 and 1846).
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE {TABLE} ADD COLUMN probe_column int DEFAULT 0 NOT NULL, ALGORITHM=INSTANT"
        )
        cursor.execute(f"ALTER TABLE {TABLE} DROP COLUMN probe_column, ALGORITHM=INSTANT")
