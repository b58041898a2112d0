"""Counts in the commands' messages read as English: "1 live worker",
"1 job failed in the last 1 minute", "1 job finished more than 1 day ago"."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job, Worker

pytestmark = pytest.mark.django_db


def health(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("queuehealth", *args, stdout=out, stderr=err)
    except SystemExit as exit:
        return int(exit.code or 0), err.getvalue().strip()
    return 0, out.getvalue().strip()


def test_queuehealth_counts_one_worker_and_one_failure_in_the_singular():
    Worker.objects.create(name="h1:1:0", host="h1", pid=1, queues=["default"])

    assert health("--host", "h1") == (0, "OK: 1 live worker on h1.")
    assert health("--host", "h1", "--min-workers", "2") == (
        1,
        "UNHEALTHY: 1 live worker on h1, fewer than 2.",
    )
    Worker.objects.create(name="h1:2:0", host="h1", pid=2, queues=["default"])
    assert health("--host", "h1") == (0, "OK: 2 live workers on h1.")

    Job.objects.create(task_path="demo.tasks.add", status="FAILED", finished_at=read_database_now("default"))
    assert health("--host", "h1", "--max-failures", "0", "--minutes", "1") == (
        1,
        "UNHEALTHY: 1 job failed in the last 1 minute, over 0.",
    )


def test_prunejobs_counts_one_job_and_one_day_in_the_singular():
    old = read_database_now("default") - timedelta(days=3)
    Job.objects.create(task_path="demo.tasks.add", status="FAILED", finished_at=old)
    Job.objects.bulk_create(
        Job(task_path="demo.tasks.add", status="CANCELLED", finished_at=old) for _ in range(2)
    )

    def prune(*args: str) -> list[str]:
        out = io.StringIO()
        call_command("prunejobs", "--older-than", "1", *args, stdout=out)
        return out.getvalue().splitlines()

    assert prune("--status", "FAILED", "--status", "CANCELLED", "--dry-run") == [
        "FAILED: 1 job finished more than 1 day ago would be deleted.",
        "CANCELLED: 2 jobs finished more than 1 day ago would be deleted.",
    ]
    assert prune("--status", "FAILED")[0] == "FAILED: deleted 1 job finished more than 1 day ago."
