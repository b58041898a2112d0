"""The shared memory between a supervisor, its heartbeat and its workers:
the running-control fields (cancel posts, progress reports, stop deadlines,
counts). Plain memory, so these run on every database in no time."""

import multiprocessing

from django_dbqueue.worker.shared import MESSAGE_CHARS, SharedState


def state(slots: int = 2) -> SharedState:
    return SharedState(slots, multiprocessing.get_context("fork"))


def test_a_progress_report_keeps_what_a_later_report_leaves_out_for_the_same_job():
    slot = state().slot(1)
    assert slot.progress_report() == (0, 0, None, "")
    slot.report_progress(7, 0.25, "rows")
    first = slot.progress_report()
    assert first[1:] == (7, 0.25, "rows")
    slot.report_progress(7, None, "more rows")
    slot.report_progress(7, 0.5, None)
    second = slot.progress_report()
    assert second[1:] == (7, 0.5, "more rows")
    assert second[0] > first[0] and second[0] % 2 == 0
    # A new job starts from nothing, not from the last job's report.
    slot.report_progress(8, None, "é" * (MESSAGE_CHARS + 10))
    assert slot.progress_report()[1:] == (8, None, "é" * MESSAGE_CHARS)


def test_a_report_cut_short_by_a_killed_worker_is_never_read_and_the_next_worker_reports():
    shared = state()
    slot = shared.slot(0)
    slot.report_progress(3, 0.1, "a")
    shared.progress_seq[0] += 1  # the worker died in the middle of a report
    torn = slot.progress_report()
    assert torn[1:] == (0, None, ""), "a report being written is not read"
    slot.reset("next-worker")
    slot.report_progress(4, 0.9, "b")
    seq, job_id, fraction, message = slot.progress_report()
    assert (job_id, fraction, message) == (4, 0.9, "b")
    assert seq > torn[0], "the sequence never goes back, so the heartbeat writes the new report"


def test_cancels_stop_deadlines_and_control_counts_are_per_slot_and_reset_with_a_new_worker():
    shared = state(3)
    first, second = shared.slot(0), shared.slot(2)
    first.job_id = 11
    first.post_cancel(11, 12.5)
    first.stop_deadline = 40.0
    first.count_control(cancelled=True)
    second.count_control(interrupted=True)
    second.count_control(cancelled=True, interrupted=True)
    second.count_control(expired=True)
    assert (first.job_id, first.cancel_posted(), first.stop_deadline) == (11, (11, 12.5), 40.0)
    assert (shared.slot(1).job_id, shared.slot(1).cancel_posted()) == (0, (0, 0.0))
    assert (first.cancelled, first.interrupted, second.cancelled, second.interrupted) == (1, 0, 1, 2)
    assert (first.expired, second.expired) == (0, 1)
    assert shared.control_totals() == (2, 2, 1)
    assert shared.totals() == (0, 0), "cancelled and interrupted jobs are counted apart"
    first.reset("w")
    assert (first.job_id, first.cancel_posted(), first.stop_deadline) == (0, (0, 0.0), 0.0)
    assert first.cancelled == 1, "counts survive a restart (the status line sums them)"
