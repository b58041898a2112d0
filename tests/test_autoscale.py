"""The autoscaling signal (operations/autoscale.py): the query
``queuestats --scaler-query`` prints counts the due and the running jobs,
as the queue's own figures do, on each server an autoscaler can query, and
reads only the claim index on MySQL and MariaDB."""

import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job
from django_dbqueue.operations.autoscale import scaler_query
from django_dbqueue.operations.stats import snapshot
from django_dbqueue.options import QueueOptions
from django_dbqueue.worker.process.timeouts import HARD_GRACE
from django_dbqueue.worker.supervisor.stuck import stop_grace
from tests.conftest import DATABASE, MYSQL_FAMILY, ROOT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(DATABASE == "sqlite", reason="autoscalers query MySQL, MariaDB or PostgreSQL"),
]


def fill() -> None:
    now = read_database_now("default")
    add = "demo.tasks.add"
    for seconds in (-60, -1, 0):
        Job.objects.create(task_path=add, queue_name="default", run_after=now + timedelta(seconds=seconds))
    for hours in (1, 24):
        Job.objects.create(task_path=add, queue_name="default", run_after=now + timedelta(hours=hours))
    Job.objects.create(task_path=add, queue_name="default", status="RUNNING", owner="w")
    Job.objects.create(task_path=add, queue_name="default", status="SUCCESSFUL")
    for _ in range(4):
        Job.objects.create(task_path=add, queue_name="email", run_after=now - timedelta(seconds=5))


def printed(*queues: str) -> str:
    out = io.StringIO()
    call_command("queuestats", "--scaler-query", *[f"--queue={q}" for q in queues], stdout=out)
    return out.getvalue().strip()


def wanted(sql: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return int(cursor.fetchone()[0])


def test_the_query_counts_what_the_queues_own_figures_count():
    fill()
    snap = snapshot("default")
    default = snap.queue("default")
    assert wanted(printed("default")) == default.due + default.counts["RUNNING"] == 4
    assert wanted(printed()) == 8, "every queue of the backend's QUEUES"
    out = io.StringIO()
    call_command("queuestats", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert wanted(printed()) == sum(q["due"] + q["running_count"] for q in data["queues"])


def test_a_queue_name_is_quoted_and_a_backslash_refused():
    Job.objects.create(task_path="demo.tasks.add", queue_name="it's")
    assert wanted(scaler_query(connection.vendor, Job._meta.db_table, ["it's"])) == 1
    with pytest.raises(ValueError, match="backslash"):
        scaler_query(connection.vendor, Job._meta.db_table, ["a\\b"])


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="EXPLAIN of MySQL and MariaDB")
def test_it_reads_only_the_claim_index():
    fill()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE TABLE django_dbqueue_job")
        cursor.fetchall()
        # MySQL 9's EXPLAIN may answer as a tree; MariaDB knows only the table.
        explain = "EXPLAIN " if connection.mysql_is_mariadb else "EXPLAIN FORMAT=TRADITIONAL "
        cursor.execute(explain + printed("default"))
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    ready, running = (row for row in rows if row["table"] == "django_dbqueue_job")
    # MySQL and MariaDB number the subqueries apart: tell them by their estimate-free shape.
    if "Using index" not in (ready["Extra"] or "") or ready["key"] != "dbqueue_job_claim_keys":
        ready, running = running, ready
    assert ready["key"] == "dbqueue_job_claim_keys" and "Using index" in (ready["Extra"] or ""), rows
    # The running jobs (as many as the workers' slots) through an index that starts with status.
    starts_with_status = ("dbqueue_job_claim_keys", "dbqueue_job_status_id")
    assert running["key"] in starts_with_status and running["type"] in ("ref", "range"), rows


def test_the_kubernetes_recipe_lines_up_its_stop_and_its_query():
    recipe = (ROOT / "docs" / "deploy" / "keda.yaml").read_text()
    stop = int(re.search(r'name: STOP_TIMEOUT, value: "(\d+)"', recipe).group(1))
    grace = int(re.search(r"terminationGracePeriodSeconds: (\d+)", recipe).group(1))
    # Kubernetes' SIGKILL comes after runqueue gave its jobs back, as systemd's does (test_deploy.py).
    assert grace > stop + stop_grace(QueueOptions()) + HARD_GRACE + 10
    query = re.search(r"query: >-\n((?:          .*\n)+)", recipe).group(1)
    folded = " ".join(line.strip() for line in query.splitlines())
    assert folded == scaler_query("mysql", Job._meta.db_table, ["default"])
