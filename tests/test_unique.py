"""Unique jobs: one unfinished job per key, freed when the job finishes."""

import threading
from datetime import timedelta

import pytest
from django.db import OperationalError, transaction
from django.utils import timezone

from demo.tasks import add, record_once, singleton
from django_dbqueue import bulk_enqueue, task
from django_dbqueue.db import is_conflict
from django_dbqueue.exceptions import JobAlreadyQueued
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import InvalidTask
from django_dbqueue.transitions import Finished
from tests.conftest import needs_row_locks
from tests.threads import together


@pytest.mark.django_db
def test_a_second_enqueue_of_a_held_key_returns_the_unfinished_job():
    first = record_once.enqueue("a")
    again = record_once.enqueue(key="a")
    other = record_once.enqueue("b")

    assert again.id == first.id and other.id != first.id
    assert Job.objects.get(pk=first.id).unique_key == "record:a"
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_on_duplicate_raise_names_the_holder():
    first = singleton.enqueue()
    with pytest.raises(JobAlreadyQueued, match=f"job {first.id} \\(READY\\) holds") as caught:
        singleton.enqueue()
    assert caught.value.job_id == first.id


@pytest.mark.django_db
def test_a_key_per_call_through_using():
    first = add.using(unique_key="sum").enqueue(1, 2)
    assert add.using(unique_key="sum").enqueue(3, 4).id == first.id
    assert add.enqueue(3, 4).id != first.id, "without a key nothing is unique"


@pytest.mark.django_db
@pytest.mark.parametrize("finish", ["success", "failure", "cancel", "dead worker"])
def test_every_way_of_finishing_frees_the_key(finish):
    job = Job.objects.get(pk=record_once.enqueue("k").id)
    now = timezone.now()
    if finish == "cancel":
        Job.objects.filter(pk=job.pk).cancel()
    else:
        [job] = Job.objects.claim("w", limit=1)
        if finish == "success":
            Job.objects.record_successes("w", [Finished(job, now, now)])
        elif finish == "failure":
            Job.objects.record("w", Finished(job, now, now, status="FAILED"))
        else:  # its worker died on its last attempt, run alone as a suspect
            Job.objects.filter(pk=job.pk).update(suspect=True, attempts=job.max_attempts)
            Job.objects.filter(pk=job.pk).update(lease_expires_at=now - timedelta(seconds=1))
            assert Job.objects.recover_expired() == (0, 1)
    assert Job.objects.get(pk=job.pk).unique_key is None
    assert record_once.enqueue("k").id != str(job.pk), "the key is free for a new job"


@pytest.mark.django_db
def test_a_retry_keeps_the_key():
    job = Job.objects.get(pk=record_once.enqueue("k").id)
    [job] = Job.objects.claim("w", limit=1)
    now = timezone.now()
    Job.objects.record("w", Finished(job, now, now, status="READY", retry_in=timedelta(seconds=5)))
    assert Job.objects.get(pk=job.pk).unique_key == "record:k"
    assert record_once.enqueue("k").id == str(job.pk)


@pytest.mark.django_db
def test_bulk_enqueue_with_keys_returns_the_holder_for_repeats():
    held = record_once.enqueue("x")
    results = bulk_enqueue(record_once, [(("x",), {}), (("y",), {}), (("y",), {}), (("z",), {})])

    ids = [r.id for r in results]
    assert ids[0] == held.id and ids[1] == ids[2] and len(set(ids)) == 3
    assert Job.objects.count() == 3


@pytest.mark.django_db
def test_refused_duplicates_take_no_ids():
    # A failed INSERT would take the next AUTO_INCREMENT id (or sequence
    # value) and leave a gap per refused duplicate.
    first = record_once.enqueue("a")
    for _ in range(5):
        assert record_once.enqueue("a").id == first.id
    held = singleton.enqueue()
    for _ in range(5):
        with pytest.raises(JobAlreadyQueued):
            singleton.enqueue()
    later = add.enqueue(1, 1)
    assert [int(held.id), int(later.id)] == [int(first.id) + 1, int(first.id) + 2]


@pytest.mark.django_db
def test_a_duplicate_inside_a_transaction_leaves_it_usable():
    with transaction.atomic():
        first = record_once.enqueue("t")
        assert record_once.enqueue("t").id == first.id
        add.enqueue(1, 1)
    assert Job.objects.count() == 2


# One key each on every database: case, a trailing space and accents all count.
DISTINCT_KEYS = ["Report-A", "report-a", "REPORT-A ", "répört-a"]


@pytest.mark.django_db
def test_keys_compare_byte_for_byte():
    results = [add.using(unique_key=key).enqueue(i, 0) for i, key in enumerate(DISTINCT_KEYS)]

    assert len({result.id for result in results}) == 4, "four keys, four jobs"
    jobs = [Job.objects.get(pk=result.id) for result in results]
    assert [(job.unique_key, job.args) for job in jobs] == [
        (key, [i, 0]) for i, key in enumerate(DISTINCT_KEYS)
    ]
    again = [add.using(unique_key=key).enqueue(9, 9).id for key in DISTINCT_KEYS]
    assert again == [result.id for result in results], "each key is held by its own job"
    assert Job.objects.count() == 4


@pytest.mark.django_db(transaction=True)
def test_four_keys_that_differ_in_case_accents_or_a_space_give_four_results(runqueue):
    results = [add.using(unique_key=key).enqueue(i, 100) for i, key in enumerate(DISTINCT_KEYS)]
    assert runqueue("--burst", "--queue", "default").wait() == 0
    for result in results:
        result.refresh()
    assert [(r.status, r.return_value) for r in results] == [("SUCCESSFUL", i + 100) for i in range(4)]


def test_bad_keys_are_refused_with_a_clear_error():
    def f(x: int) -> None: ...

    with pytest.raises(InvalidTask, match="unique_key must be a non-empty string"):
        task(unique_key="")(f)
    with pytest.raises(InvalidTask, match="on_duplicate must be 'return' or 'raise'"):
        task(unique_key="k", on_duplicate="ignore")(f)


@pytest.mark.django_db
def test_a_key_function_that_returns_no_string_is_refused_at_enqueue():
    with pytest.raises(InvalidTask, match="The unique_key function returned None"):
        add.using(unique_key=lambda a, b: None).enqueue(1, 2)
    assert Job.objects.count() == 0


def enqueue_in_transaction(key: str) -> str:
    """As a caller's own retry logic would: InnoDB's duplicate-key checks take
    shared locks, so producers of one key inside transactions can deadlock,
    and a deadlock inside a transaction rolls it all back (docs/scheduling.md, "Unique jobs")."""
    for _ in range(20):
        try:
            with transaction.atomic():
                return record_once.enqueue(key).id
        except OperationalError as exc:
            if not is_conflict(exc):
                raise
    raise AssertionError("still deadlocking after 20 tries")


@needs_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "atomic"])
def test_concurrent_producers_of_one_key_create_one_job(in_transaction):
    producers, rounds = 8, 20
    seen: list[set[str]] = [set() for _ in range(rounds)]
    # The first round starts together; each later round waits for every producer.
    barriers = [threading.Barrier(producers, timeout=60) for _ in range(rounds - 1)]

    def produce(_: int) -> None:
        try:
            for round_ in range(rounds):
                if round_:
                    barriers[round_ - 1].wait()
                if in_transaction:
                    seen[round_].add(enqueue_in_transaction(f"r{round_}"))
                else:
                    seen[round_].add(record_once.enqueue(f"r{round_}").id)
        except BaseException:
            for barrier in barriers:  # the others stop at their next round instead of waiting
                barrier.abort()
            raise

    together(produce, producers)
    assert [len(ids) for ids in seen] == [1] * rounds, "every producer got the one job of its round"
    assert Job.objects.count() == rounds
