"""Debounce: calls with the same unique key within a quiet period make one
run, with the last call's arguments (or the first's), due a quiet period
after the last call and never later than ``max_wait`` after the first; a
job that has started is left alone and the key passes to a new job
(debounce.py, enqueue/unique.py). The cap is tested by moving the pending
job's enqueue time back, not by waiting for it."""

import math
from datetime import timedelta

import pytest
from django.db.models import F

from demo import retry_tasks, tasks
from demo.models import Execution
from django_dbqueue import task
from django_dbqueue.debounce import Debounce
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import InvalidTask
from tests.conftest import drain_in_bursts as drain
from tests.conftest import needs_row_locks
from tests.threads import together

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_burst_of_calls_makes_one_job_with_the_last_calls_arguments_due_after_the_last():
    results = [retry_tasks.reindex.enqueue(7, note) for note in ("a", "b", "c")]
    assert len({result.id for result in results}) == 1, "every call came back with the one pending job"
    [job] = Job.objects.all()
    assert (job.status, job.args, job.unique_key) == ("READY", [7, "c"], "reindex:7")
    assert timedelta(0) < job.run_after - job.enqueued_at < timedelta(seconds=60)
    assert results[-1].args == [7, "c"], "the result the call got reads the job as it is now"
    other = retry_tasks.reindex.enqueue(8, "x")
    assert other.id != results[0].id, "another key is another job"
    drain()
    ran = sorted(Execution.objects.values_list("key", flat=True))
    assert ran == ["reindex:7:c", "reindex:8:x"]


def test_each_call_moves_the_start_and_max_wait_caps_it_from_the_first_call():
    first = Job.objects.get(pk=retry_tasks.reindex.enqueue(1, "first").id)
    retry_tasks.reindex.enqueue(1, "second")
    moved = Job.objects.get(pk=first.pk)
    assert moved.run_after >= first.run_after and moved.enqueued_at == first.enqueued_at
    # The burst began 200 s ago: the next call may not push it past 120 s from then (due at once).
    Job.objects.filter(pk=first.pk).update(enqueued_at=F("enqueued_at") - timedelta(seconds=200))
    retry_tasks.reindex.enqueue(1, "third")
    capped = Job.objects.get(pk=first.pk)
    assert capped.run_after - capped.enqueued_at == timedelta(seconds=120)
    assert capped.args == [1, "third"]


def test_replace_false_keeps_the_first_calls_arguments_and_moves_only_the_start():
    first = Job.objects.get(pk=retry_tasks.send_digest.enqueue(3, "first").id)
    assert first.run_after - first.enqueued_at == timedelta(seconds=60)
    retry_tasks.send_digest.enqueue(3, "second")
    job = Job.objects.get(pk=first.pk)
    assert job.args == [3, "first"] and job.run_after >= first.run_after
    assert Job.objects.count() == 1


def test_a_call_while_the_job_runs_makes_a_new_job_and_the_running_one_keeps_its_arguments():
    pk = retry_tasks.reindex.enqueue(5, "old").id
    Job.objects.filter(pk=pk).update(run_after=F("enqueued_at"))
    [claimed] = Job.objects.claim("w1")
    assert claimed.pk == int(pk)
    new = retry_tasks.reindex.enqueue(5, "new")
    assert new.id != pk
    running, pending = Job.objects.get(pk=pk), Job.objects.get(pk=new.id)
    assert (running.status, running.args, running.unique_key) == ("RUNNING", [5, "old"], None)
    assert (pending.status, pending.args, pending.unique_key) == ("READY", [5, "new"], "reindex:5")
    assert retry_tasks.reindex.enqueue(5, "newer").id == new.id, "the new job takes the calls now"


@needs_row_locks
def test_concurrent_producers_of_one_key_leave_one_pending_job():
    def produce(number: int) -> None:
        for call in range(15):
            retry_tasks.reindex.enqueue(9, f"{number}-{call}")

    together(produce, 6)  # a thread's exception fails the test
    [job] = Job.objects.all()
    assert job.status == "READY" and job.args[0] == 9 and job.unique_key == "reindex:9"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce": 5}, "debounce needs a unique_key"),
        ({"debounce": 5, "unique_key": "k", "on_duplicate": "raise"}, "would raise"),
        ({"debounce": 0, "unique_key": "k"}, "debounce must be a number of seconds"),
        ({"debounce": math.nan, "unique_key": "k"}, "debounce must be a number of seconds"),
        ({"debounce": 400 * 86400, "unique_key": "k"}, "debounce must be a number of seconds"),
        ({"debounce": "5s", "unique_key": "k"}, "debounce must be a number of seconds"),
    ],
)
def test_a_debounce_that_cannot_work_is_refused_when_the_task_is_defined(options, message):
    with pytest.raises(InvalidTask, match=message):
        task(**options)(tasks.record.func)


def test_debounce_is_refused_when_its_own_fields_are_wrong():
    with pytest.raises(InvalidTask, match="must be at least its quiet period"):
        Debounce(10, max_wait=5)
    with pytest.raises(InvalidTask, match="max_wait must be a number of seconds"):
        Debounce(5, max_wait=-1)
    with pytest.raises(InvalidTask, match="replace must be True or False"):
        Debounce(5, replace="yes")
    assert str(Debounce(5, max_wait=60)) == (
        "runs 5 s after the last call of a burst, 60 s at most from a burst's first call, "
        "with the latest call's arguments"
    )
