"""Sequences: jobs with one sequence key run one at a time, in the order
they were enqueued, with real workers; a FAILED job holds the rest until it
is requeued and succeeds ("hold"), or not ("continue"); a cancelled one
lets the next run (enqueue/sequences.py, the dependencies' "hold" policy)."""

import pytest

from demo import retry_tasks, tasks
from demo.models import Execution
from django_dbqueue import task
from django_dbqueue.models import Job, SequenceTail
from django_dbqueue.tasks_api import InvalidTask, task_backends
from django_dbqueue.worker import Worker
from tests.conftest import drain_in_bursts as drain
from tests.conftest import needs_row_locks
from tests.threads import together

pytestmark = pytest.mark.django_db(transaction=True)


def ran() -> list[str]:
    return list(Execution.objects.order_by("pk").values_list("key", flat=True))


def test_jobs_of_one_key_run_one_at_a_time_in_enqueue_order():
    first = retry_tasks.post_entry.enqueue(1, 1)
    others = [retry_tasks.post_entry.enqueue(1, step) for step in (2, 3)]
    other_key = retry_tasks.post_entry.enqueue(2, 1)
    assert first.status == "READY" and [r.status for r in others] == ["READY", "READY"]  # TaskResult's view
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert [statuses[int(r.id)] for r in (first, *others, other_key)] == [
        "READY",
        "WAITING",
        "WAITING",
        "READY",
    ]
    # A batch of ten may hold every due job: still one of the key at a time.
    assert Worker(task_backends["default"], ["default"], batch=10, burst=True).run() == 0
    drain()
    assert [key for key in ran() if key.startswith("ledger:1:")] == ["ledger:1:1", "ledger:1:2", "ledger:1:3"]
    assert set(Job.objects.values_list("status", flat=True)) == {"SUCCESSFUL"}
    assert SequenceTail.objects.get(key="ledger:1").job_id == int(others[-1].id)


def test_a_failed_job_holds_the_rest_until_it_is_requeued_and_succeeds():
    failing = retry_tasks.post_entry.enqueue(1, 1, True)
    held = [retry_tasks.post_entry.enqueue(1, step) for step in (2, 3)]
    drain()
    assert Job.objects.get(pk=failing.id).status == "FAILED"
    assert [Job.objects.get(pk=r.id).status for r in held] == ["WAITING", "WAITING"]
    late = retry_tasks.post_entry.enqueue(1, 4)
    assert Job.objects.get(pk=late.id).status == "WAITING", "a call after the failure waits behind it too"
    Job.objects.filter(pk=failing.id).update(args=[1, 1, False])  # fixed, as a person would
    assert Job.objects.filter(pk=failing.id).requeue() == 1
    drain()
    assert ran() == ["ledger:1:1", "ledger:1:1", "ledger:1:2", "ledger:1:3", "ledger:1:4"]
    assert set(Job.objects.values_list("status", flat=True)) == {"SUCCESSFUL"}


def test_with_continue_a_failed_job_lets_the_next_run():
    retry_tasks.update_feed.enqueue(1, True)
    retry_tasks.update_feed.enqueue(2)
    drain()
    assert ran() == ["feed:1", "feed:2"]
    assert sorted(Job.objects.values_list("status", flat=True)) == ["FAILED", "SUCCESSFUL"]


def test_a_cancelled_job_lets_the_next_run_and_a_cancelled_waiting_one_is_skipped():
    first = retry_tasks.post_entry.enqueue(3, 1)
    second = retry_tasks.post_entry.enqueue(3, 2)
    third = retry_tasks.post_entry.enqueue(3, 3)
    assert Job.objects.filter(pk=second.id).cancel() == 1
    assert Job.objects.filter(pk=first.id).cancel() == 1
    drain()
    assert ran() == ["ledger:3:3"]
    assert Job.objects.get(pk=third.id).status == "SUCCESSFUL"


def test_a_key_function_returning_none_makes_an_ordinary_job():
    ordinary = task(sequence_key=lambda key: None)(tasks.record.func)
    result = ordinary.enqueue("plain")
    assert Job.objects.get(pk=result.id).status == "READY" and not SequenceTail.objects.exists()


@needs_row_locks
def test_concurrent_producers_of_one_key_make_one_chain():
    def produce(number: int) -> None:
        for step in range(8):
            retry_tasks.post_entry.enqueue(5, number * 100 + step)

    together(produce, 4)  # a thread's exception fails the test
    statuses = list(Job.objects.order_by("pk").values_list("status", flat=True))
    assert statuses.count("READY") == 1 and statuses.count("WAITING") == 31, statuses
    drain(timeout=60)
    steps = [int(key.rsplit(":", 1)[1]) for key in ran()]
    assert len(steps) == 32
    for number in range(4):  # each producer's calls in its own order
        mine = [step for step in steps if step // 100 == number]
        assert mine == sorted(mine)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"sequence_key": "k", "on_sequence_failure": "skip"},
            "on_sequence_failure must be 'hold' or 'continue'",
        ),
        ({"sequence_key": ""}, "sequence_key must be a non-empty string"),
        ({"sequence_key": "k", "unique_key": "u"}, "sequence_key cannot go with unique_key"),
    ],
)
def test_a_sequence_that_cannot_work_is_refused_when_the_task_is_defined(options, message):
    with pytest.raises(InvalidTask, match=message):
        task(**options)(tasks.record.func)


def test_a_sequence_job_cannot_have_parents_too():
    parent = tasks.record.enqueue("p")
    with pytest.raises(InvalidTask, match="cannot be in a sequence too"):
        retry_tasks.post_entry.using(depends_on=[parent]).enqueue(1, 1)
    assert Job.objects.count() == 1
