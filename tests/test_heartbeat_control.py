"""What the heartbeat does for running jobs every CONTROL_INTERVAL
(worker/housekeeping/cancel_relay.py), against the real database: its cost in queries, which
cancel requests it posts into which slot, and which progress it writes."""

import multiprocessing

import pytest

from demo import tasks
from django_dbqueue.models import Job
from django_dbqueue.worker.housekeeping.cancel_relay import CancelRelay
from django_dbqueue.worker.shared import SharedState

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def state() -> SharedState:
    return SharedState(3, multiprocessing.get_context("fork"))


def claimed(owner: str, count: int) -> list[int]:
    for i in range(count):
        tasks.add.enqueue(i, i)
    return sorted(job.pk for job in Job.objects.claim(owner, limit=count))


def test_it_costs_nothing_while_no_worker_runs_a_job_and_one_read_while_they_do(
    state, django_assert_num_queries
):
    control = CancelRelay("default", state)
    state.slot(0).name, state.slot(1).name = "w0", "w1"
    live = state.live_names()
    with django_assert_num_queries(0):
        control.run_once(live)
    state.slot(0).job_id = claimed("w0", 1)[0]
    with django_assert_num_queries(1):  # the look for cancel requests; no report to write
        control.run_once(live)


def test_a_cancel_request_is_posted_to_the_worker_running_the_job_and_to_no_other(state):
    control = CancelRelay("default", state)
    first, mate = claimed("w0", 2)  # a batch: one started, one waiting behind it
    other = claimed("w1", 1)[0]
    w0, w1 = state.slot(0), state.slot(2)
    w0.name, w0.job_id, w1.name, w1.job_id = "w0", first, "w1", other
    Job.objects.filter(pk__in=[mate, other]).cancel()
    control.run_once(state.live_names())
    assert w0.cancel_posted()[0] == 0, "a batch-mate's request waits until it starts"
    assert w1.cancel_posted()[0] == other
    since = w1.cancel_posted()[1]

    Job.objects.filter(pk=first).cancel()
    control.run_once(state.live_names())
    assert w0.cancel_posted()[0] == first
    assert w1.cancel_posted() == (other, since), "posted once: the grace counts from the first post"

    w0.job_id = mate  # the worker moved on to the batch-mate
    control.run_once(state.live_names())
    assert w0.cancel_posted()[0] == mate


def test_the_latest_progress_is_written_once_and_only_under_the_workers_lease(
    state, django_assert_num_queries
):
    control = CancelRelay("default", state)
    mine, theirs = claimed("w0", 1)[0], claimed("w1", 1)[0]
    slot = state.slot(0)
    slot.name, slot.job_id = "w0", mine
    slot.report_progress(mine, 0.25, "a quarter")
    slot.report_progress(mine, 0.5, None)
    control.run_once(state.live_names())
    row = Job.objects.get(pk=mine)
    assert (row.progress, row.progress_message) == (0.5, "a quarter")
    assert row.progress_at is not None

    with django_assert_num_queries(1):  # the cancel look only: nothing new to write
        control.run_once(state.live_names())

    slot.job_id = theirs  # a report for a job this worker does not hold
    slot.report_progress(theirs, 0.9, "not mine")
    control.run_once(state.live_names())
    assert Job.objects.get(pk=theirs).progress is None, "conditional on the lease"
