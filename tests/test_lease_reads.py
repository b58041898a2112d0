"""Lease recovery and the heartbeat read the RUNNING jobs through an index
that starts with ``status``, however many finished jobs the table holds:
the lease has no index of its own since migration 0027 (issue 33), so the
plan, not the index's name, is what keeps them cheap."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job
from tests.conftest import DATABASE, MYSQL_FAMILY
from tests.plans import job_table_access, json_plan

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="EXPLAIN FORMAT=JSON of MySQL and MariaDB"),
]
FINISHED = 20_000
RUNNING = 30


def fill() -> None:
    now = read_database_now("default")
    Job.objects.bulk_create(
        Job(task_path="demo.tasks.add", status="SUCCESSFUL", finished_at=now) for _ in range(FINISHED)
    )
    lapsed = now - timedelta(minutes=5)
    Job.objects.bulk_create(
        Job(task_path="demo.tasks.add", status="RUNNING", owner=f"w{n % 3}", lease_expires_at=lapsed)
        for n in range(RUNNING)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {Job._meta.db_table}")
        cursor.fetchall()


def assert_reads_the_running_range(access: dict) -> None:
    assert access["access_type"] in ("ref", "range"), access
    assert access["key"] in ("dbqueue_job_status_id", "dbqueue_job_claim_keys"), access
    # The estimate of rows read is the running jobs', not the table's.
    rows = access["rows"] if "rows" in access else access["rows_examined_per_scan"]
    assert int(rows) < FINISHED / 10, access


def test_recovery_reads_the_running_range_not_the_finished_jobs():
    fill()
    expired = Job.objects.all()._expired().order_by("pk").values_list("pk", flat=True)[:500]
    sql, params = expired.query.sql_with_params()
    assert_reads_the_running_range(job_table_access(json_plan(sql, params)))
    assert Job.objects.expired_count() == RUNNING
    assert Job.objects.recover_expired() == (RUNNING, 0)
    assert Job.objects.filter(status="READY", suspect=True).count() == RUNNING


def test_the_heartbeat_reads_the_running_range_not_the_finished_jobs():
    fill()
    with CaptureQueriesContext(connection) as sent:
        assert Job.objects.extend_leases(["w0", "w1"], 60) == 20
    [heartbeat] = [query["sql"] for query in sent.captured_queries if query["sql"].startswith("UPDATE")]
    assert_reads_the_running_range(job_table_access(json_plan(heartbeat)))
    assert Job.objects.expired_count() == 10
