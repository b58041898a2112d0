"""A position that cannot be stored costs a job nothing but that position,
on real `runqueue` processes: a stopping worker still gives the job back
(READY, its attempt unspent) and exits 0; a retryable failure stays a
retry and keeps the task's own error; a checkpoint written at once fails
its attempt where it is taken, saying why. "nan" is refused by the queue
(as in arguments), "refused" by the database (a trigger, tests/refusals.py).
A lone surrogate in a progress message is kept as U+FFFD."""

import signal

import pytest

from demo import story_tasks
from demo.models import Execution
from django_dbqueue.models import Job
from tests.conftest import wait_for
from tests.refusals import REFUSAL, refusing_marked_checkpoints  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)
ENV = {"DBQUEUE_LEASE": "4", "DBQUEUE_CANCEL_GRACE": "1"}
INTERRUPTED = "django_dbqueue.exceptions.JobInterrupted"
WHY = {
    "nan": "The checkpoint['cursor'] is the float nan, which cannot be stored as JSON",
    "refused": "the database refused it (",
}


def serve(runqueue, *args: str):  # noqa: ANN001, ANN201
    return runqueue("--processes", "1", "--queue", "slow", *args, **ENV)


def runs(key: str) -> list[str]:
    rows = Execution.objects.filter(key__startswith=f"{key}:").order_by("pk")
    return list(rows.values_list("key", flat=True))


def refusal(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "refused":
        request.getfixturevalue("refusing_marked_checkpoints")


@pytest.mark.parametrize("kind", ["nan", "refused"])
def test_a_stopping_worker_gives_back_a_job_whose_last_position_cannot_be_stored(runqueue, request, kind):
    refusal(kind, request)
    pk = story_tasks.holds_a_bad_position.enqueue("stop", kind).id
    old = serve(runqueue, "--stop-timeout", "1")
    wait_for(lambda: runs("stop"))
    wait_for(lambda: Job.objects.get(pk=pk).checkpoint is not None)

    old.signal_group(signal.SIGTERM)
    assert old.wait(timeout=30) == 0, old.output()[-3000:]

    back = Job.objects.get(pk=pk)
    assert (back.status, back.owner, back.attempts, back.interruptions) == ("READY", None, 0, 1)
    assert back.checkpoint["cursor"] == "good", "the last position saved is kept"
    note = back.errors[-1]
    assert note["exception_class_path"] == INTERRUPTED
    assert "The attempt's last checkpoint was not saved: " in note["traceback"]
    assert WHY[kind] in note["traceback"] and (kind == "nan" or REFUSAL in note["traceback"])
    assert "1 interrupted" in old.output()

    new = serve(runqueue)
    wait_for(lambda: Job.objects.get(pk=pk).status == "SUCCESSFUL")
    assert runs("stop") == ["stop:attempt-1:from-None", "stop:attempt-1:from-good"]
    new.signal(signal.SIGTERM)
    assert new.wait(30) == 0


@pytest.mark.parametrize("kind", ["nan", "refused"])
def test_a_retryable_failure_after_a_position_that_cannot_be_stored_is_retried_with_its_own_error(
    runqueue, request, kind
):
    refusal(kind, request)
    pk = story_tasks.fails_after_a_bad_position.enqueue("retry", kind).id
    worker = serve(runqueue)
    wait_for(lambda: Job.objects.get(pk=pk).status not in ("READY", "RUNNING"))
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output()[-3000:]

    done = Job.objects.get(pk=pk)
    assert (done.status, done.attempts, done.return_value) == ("SUCCESSFUL", 2, "resumed")
    assert runs("retry") == ["retry:attempt-1:from-None", "retry:attempt-2:from-good"]
    [error] = done.errors
    assert error["exception_class_path"] == "builtins.OSError", "the task's own error"
    assert "retry: the disk is full" in error["traceback"]
    assert "The attempt's last checkpoint was not saved: " in error["traceback"]
    assert WHY[kind] in error["traceback"] and (kind == "nan" or REFUSAL in error["traceback"])


@pytest.mark.parametrize("kind", ["nan", "refused"])
def test_a_checkpoint_that_cannot_be_stored_fails_its_attempt_where_it_is_taken(runqueue, request, kind):
    refusal(kind, request)
    pk = story_tasks.saves_a_bad_position.enqueue("at-once", kind).id
    worker = runqueue("--burst", "--queue", "slow", **ENV)
    assert worker.wait(60) == 0, worker.output()[-3000:]

    failed = Job.objects.get(pk=pk)
    assert (failed.status, failed.attempts, failed.checkpoint) == ("FAILED", 1, None)
    [error] = failed.errors
    assert error["exception_class_path"] == "django_dbqueue.exceptions.CheckpointNotStorable"
    said = {
        "nan": "The checkpoint['cursor'] is the float nan, which cannot be stored as JSON",
        "refused": f"The database refused the checkpoint of job {pk} (",
    }[kind]
    assert said in error["traceback"]
    assert "in saves_a_bad_position" in error["traceback"], "raised where the task took it"


def test_a_lone_surrogate_in_a_progress_message_is_kept_as_a_replacement_character(runqueue):
    pk = story_tasks.reports_a_lone_surrogate.enqueue("surrogate").id
    worker = runqueue("--burst", "--queue", "slow", **ENV)
    assert worker.wait(60) == 0, worker.output()[-3000:]

    done = Job.objects.get(pk=pk)
    assert (done.status, done.errors) == ("SUCCESSFUL", [])
    assert done.progress_message == "half \ufffd way"
