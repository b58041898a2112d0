"""Figures per task (operations/task_stats.py, ``queuestats --tasks``): the
runs that ended each way in the window, and the last runs' run and wait
times, from rows whose times are written here, by the database's clock."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command

from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
REPORT, MAIL = "demo.tasks.record", "demo.tasks.send_welcome"


def finished(task: str, status: str, *, run: float, wait: float, ago: float = 10.0) -> None:
    end = read_database_now("default") - timedelta(seconds=ago)
    start = end - timedelta(seconds=run)
    Job.objects.create(
        task_path=task,
        status=status,
        run_after=start - timedelta(seconds=wait),
        enqueued_at=start - timedelta(seconds=wait),
        started_at=start,
        last_attempted_at=start,
        finished_at=end,
        attempts=1,
    )


def stats(*args: str) -> dict:
    out = io.StringIO()
    call_command("queuestats", "--tasks", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def test_each_task_has_its_outcomes_and_its_run_and_wait_percentiles():
    for second in range(1, 21):  # runs of 1 to 20 s, each waiting a tenth of that
        finished(REPORT, "SUCCESSFUL", run=second, wait=second / 10)
    finished(REPORT, "FAILED", run=1, wait=0)
    finished(MAIL, "CANCELLED", run=0, wait=3)
    finished(MAIL, "SUCCESSFUL", run=2, wait=1, ago=3600)  # outside the window
    data = stats("--minutes", "5")
    report, mail = data["tasks"]
    assert (report["task"], report["successful"], report["failed"], report["cancelled"]) == (REPORT, 20, 1, 0)
    assert report["sampled"] == 21
    # The median and 95th percentile of 1, 1, 2, ..., 20 s (inclusive quantiles).
    assert (report["run_p50"], report["run_p95"]) == (10.0, 19.0)
    assert (mail["task"], mail["successful"], mail["cancelled"], mail["run_p50"], mail["wait_p50"]) == (
        MAIL,
        0,
        1,
        0.0,
        3.0,
    )
    out = io.StringIO()
    call_command("queuestats", "--tasks", stdout=out)
    text = out.getvalue()
    assert "Tasks that finished jobs in the last 5 min" in text and "19.0s" in text and REPORT in text


def test_no_finished_job_is_an_empty_table():
    assert stats()["tasks"] == []
    out = io.StringIO()
    call_command("queuestats", "--tasks", "--queue", "email", stdout=out)
    assert out.getvalue().rstrip().endswith("(none)")


def test_the_dashboard_lists_the_busiest_tasks_with_their_times(client):
    from tests.admin_helpers import staff

    for second in (1, 2, 3):
        finished(REPORT, "SUCCESSFUL", run=second, wait=0.5)
    client.force_login(staff("viewer", "view_job"))
    page = client.get("/admin/django_dbqueue/job/dashboard/").content.decode()
    assert "Tasks, last 5 minutes" in page and REPORT in page
    assert "2.0s / 2.9s" in page and "500ms / 500ms" in page
