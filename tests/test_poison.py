"""Poison jobs, with real worker processes: each ends as a clear FAILED job
while the rest of the queue keeps flowing."""

import pytest

from demo import tasks
from demo.models import Execution
from django_dbqueue.models import Job
from tests.conftest import needs_row_locks, once_per_run, wait_for

pytestmark = [
    needs_row_locks,
    once_per_run(
        "test_processes.py runs a job that kills its worker (WorkerLost, FAILED), test_claim.py "
        "recovery, test_guarantees.py a JobTimeout"
    ),
    pytest.mark.django_db(transaction=True),
]

WORKER_LOST = "django_dbqueue.exceptions.WorkerLost"


def settled() -> bool:
    return not Job.objects.filter(status__in=["READY", "RUNNING"]).exists()


def test_poison_jobs_each_end_failed_and_the_queue_keeps_flowing(runqueue):
    poison = {
        "exit": tasks.kill_worker.using(priority=5).enqueue("exit"),  # os._exit(9)
        "segfault": tasks.segfault.using(priority=5).enqueue("segfault"),
        "hang": tasks.hang.using(priority=5).enqueue("hang"),
        "stuck": tasks.stuck_in_c.using(priority=5).enqueue("stuck"),
        "object": tasks.returns_object.using(priority=5).enqueue(),
    }
    healthy = [tasks.record.enqueue(f"ok-{i}") for i in range(40)]

    worker = runqueue("--processes", "3", "--batch", "4", DBQUEUE_LEASE="2")
    wait_for(settled, timeout=150, interval=0.5)
    log = worker.output()

    jobs = {name: Job.objects.get(pk=result.id) for name, result in poison.items()}
    assert {name: job.status for name, job in jobs.items()} == dict.fromkeys(poison, "FAILED"), log[-4000:]
    assert Job.objects.filter(pk__in=[r.id for r in healthy], status="SUCCESSFUL").count() == len(healthy)
    assert Execution.objects.filter(key__startswith="ok-").count() >= len(healthy)

    # Killers fail on their own attempts, each death recorded as WorkerLost.
    for name in ("exit", "segfault", "stuck"):
        job = jobs[name]
        assert job.attempts == job.max_attempts, name
        assert job.errors[-1]["exception_class_path"] == WORKER_LOST, name
        assert "stopped heartbeating" in job.errors[-1]["traceback"], name
        assert Execution.objects.filter(key=name).count() <= job.max_attempts + 1, name
    # The hang is freed by its alarm, inside the same worker process.
    # (A batch-mate that killed the worker may have cost it a run too: recorded
    # as WorkerLost, not counted, since no start of it was recorded.)
    hang = jobs["hang"]
    counted = [e for e in hang.errors if e["spent"]]
    assert hang.attempts == hang.max_attempts == len(counted)
    assert {e["exception_class_path"] for e in counted} == {"django_dbqueue.exceptions.JobTimeout"}
    assert all(e["exception_class_path"] == WORKER_LOST for e in hang.errors if not e["spent"])
    assert "longer than its timeout of 1s" in hang.errors[-1]["traceback"]
    # Stuck in C, it ignored the alarm: the supervisor killed its process.
    assert "stuck in a job past its timeout" in log
    # Not JSON: failed at once, since running it again returns the same kind of value.
    returned = jobs["object"]
    assert returned.attempts == 1
    assert (
        "The return value is a builtins.object, which cannot be stored as JSON"
        in (returned.errors[-1]["traceback"])
    )
    assert worker.proc.poll() is None, "the supervisor itself must survive its workers"
