"""Unique for a period: a task's key holds for the window its job is due
in, after the job finished too, until the job's row is pruned or deleted,
or it ends FAILED or CANCELLED (enqueue/windows.py). The windows are
reached by due times (run_after), never by waiting."""

import math
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.test import override_settings

from demo import retry_tasks, tasks
from django_dbqueue import task
from django_dbqueue.enqueue.windows import shown_window, window_of
from django_dbqueue.exceptions import JobAlreadyQueued
from django_dbqueue.models import Job, UniqueWindow
from django_dbqueue.tasks_api import InvalidTask, default_task_backend
from tests.conftest import drain_in_bursts as drain
from tests.conftest import needs_row_locks
from tests.threads import together

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_key_holds_for_its_window_after_the_job_finished():
    first = retry_tasks.send_statement.enqueue(1)
    assert retry_tasks.send_statement.enqueue(1).id == first.id
    drain()
    again = retry_tasks.send_statement.enqueue(1)
    assert again.id == first.id and again.status == "SUCCESSFUL", "the finished job holds the window"
    job = Job.objects.get(pk=first.id)
    assert job.unique_key is None, "the row holds no key: the next window's job may come while it runs"
    [window] = UniqueWindow.objects.all()
    assert window.job_id == job.pk and str(window).startswith("statement:1@")
    assert retry_tasks.send_statement.enqueue(2).id != first.id, "another key, another job"


def test_a_call_due_in_the_next_window_makes_a_new_job():
    first = retry_tasks.send_statement.enqueue(1).id
    later = default_task_backend.now() + timedelta(hours=23)
    second = retry_tasks.send_statement.using(run_after=later).enqueue(1).id
    assert second != first and Job.objects.count() == 2
    assert retry_tasks.send_statement.using(run_after=later).enqueue(1).id == second


@pytest.mark.parametrize("end", ["cancel", "prune", "delete"])
def test_a_window_is_given_up_when_its_job_is_cancelled_pruned_or_deleted(end):
    first = retry_tasks.send_statement.enqueue(3).id
    holder = Job.objects.filter(pk=first)
    if end == "cancel":
        assert holder.cancel() == 1
    elif end == "prune":
        drain()
        assert holder.prune(older_than=timedelta(0)) == 1
        assert not UniqueWindow.objects.exists(), "retention deleted the window's row with its job"
    else:
        holder.delete()
    second = retry_tasks.send_statement.enqueue(3).id
    assert second != first
    assert list(UniqueWindow.objects.values_list("job_id", flat=True)) == [int(second)]


def test_on_duplicate_raise_names_the_holder_and_its_window():
    racing = task(unique_key="nightly", unique_period=3600, on_duplicate="raise")(tasks.record.func)
    first = racing.enqueue("n")
    held = r"holds the unique key 'nightly' for the window 'nightly@"
    with pytest.raises(JobAlreadyQueued, match=held) as raised:
        racing.enqueue("n")
    assert raised.value.job_id == first.id and Job.objects.count() == 1


@needs_row_locks
def test_concurrent_producers_of_one_window_write_one_job():
    def produce(number: int) -> None:
        for _ in range(10):
            retry_tasks.send_statement.enqueue(9)

    together(produce, 6)  # a thread's exception fails the test
    assert Job.objects.count() == 1 and UniqueWindow.objects.count() == 1


def test_windows_are_counted_from_the_epoch_in_utc():
    noon = datetime(2026, 11, 28, 12, 30, tzinfo=dt_timezone.utc)
    assert shown_window("k", window_of(noon, 86400)) == "k@2026-11-28T00:00:00Z"
    assert shown_window("k", window_of(noon, timedelta(hours=1))) == "k@2026-11-28T12:00:00Z"
    assert window_of(noon, 7) != window_of(noon + timedelta(seconds=7), 7)


@override_settings(USE_TZ=False, TIME_ZONE="America/New_York")
def test_a_naive_local_due_time_is_in_the_window_of_its_utc_time():
    local = datetime(2026, 11, 27, 20, 30)  # 01:30 UTC on the 28th
    assert shown_window("k", window_of(local, 86400)) == "k@2026-11-28T00:00:00Z"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unique_key": "k", "unique_period": 0}, "unique_period must be a number of seconds"),
        ({"unique_key": "k", "unique_period": 0.5}, "unique_period must be a number of seconds"),
        ({"unique_key": "k", "unique_period": math.inf}, "unique_period must be a number of seconds"),
        ({"unique_key": "k", "unique_period": 400 * 86400}, "unique_period must be a number of seconds"),
        ({"unique_period": 60}, "unique_period needs a unique_key"),
        ({"unique_key": "k", "unique_period": 60, "debounce": 5}, "cannot go together"),
    ],
)
def test_a_period_that_cannot_work_is_refused_when_the_task_is_defined(options, message):
    with pytest.raises(InvalidTask, match=message):
        task(**options)(tasks.record.func)
