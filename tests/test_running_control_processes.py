"""Control over running jobs, on real `runqueue` processes: cancel a job
while it runs (a task that checks, one that never does, one stuck in C, an
async one, one whose worker is paused), see its progress from another
process, resume it from its checkpoint after its worker was SIGKILLed, and
stop for a deploy with a stop timeout.

The runqueues here use a lease of 4 s, so that their heartbeat and their
look for cancel requests run at the defaults' pace (every second: a
quarter lease, and CONTROL_INTERVAL) while a killed worker's job comes back
in seconds; and a CANCEL_GRACE_SECONDS of 1 s instead of 10, which only
shortens the wait for a task that never looks.
"""

import os
import re
import signal
import time

import pytest
from django.conf import settings
from django.db import connection

from demo import control_tasks, tasks
from demo.models import Execution
from django_dbqueue.models import Job
from django_dbqueue.worker.process.timeouts import HARD_GRACE
from tests.conftest import once_per_run, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    once_per_run("tests/test_running_control.py cancels, reports and resumes jobs in-process on it"),
]

ENV = {"DBQUEUE_LEASE": "4", "DBQUEUE_CANCEL_GRACE": "1"}
CONTROL = 1.0  # min(CONTROL_INTERVAL, LEASE_SECONDS / 4)
GRACE = 1.0
# What a cancel or a stop costs beyond its own waits: the look that finds it
# (CONTROL), a supervisor's tick, the writes, and a busy shared machine.
SLACK = CONTROL + 1.5
JOB_CANCELLED = "django_dbqueue.exceptions.JobCancelled"


def serve(runqueue, *args: str, **env: str):  # noqa: ANN001, ANN201
    return runqueue("--processes", "1", "--queue", "slow", *args, **{**ENV, **env})


def started(key: str) -> bool:
    return Execution.objects.filter(key=key).exists()


def job(pk: str) -> Job:
    return Job.objects.get(pk=pk)


def reaches(pk: str, status: str, timeout: float) -> float:
    """Wait for the job's ``status``; when it was seen (time.monotonic())."""
    wait_for(lambda: job(pk).status == status, timeout=timeout, interval=0.05)
    return time.monotonic()


def cancel(pk: str) -> float:
    """Ask for the cancel from code; when it was asked."""
    asked = time.monotonic()
    assert Job.objects.filter(pk=pk).cancel() == 1
    return asked


def assert_cancelled_while_running(pk: str) -> Job:
    cancelled = job(pk)
    assert cancelled.attempts == 1, "it ran: its attempt counts"
    assert [e["exception_class_path"] for e in cancelled.errors] == [JOB_CANCELLED]
    assert cancelled.cancel_requested_at is None and cancelled.owner is None
    return cancelled


def stop(workers) -> str:  # noqa: ANN001
    workers.signal(signal.SIGTERM)
    assert workers.wait(30) == 0
    return workers.output()


def test_a_task_that_checks_is_cancelled_at_its_next_check(runqueue):
    pk = control_tasks.checks_for_cancel.enqueue("checks").id
    workers = serve(runqueue)
    wait_for(lambda: started("checks"))
    pids = workers.children()

    asked = cancel(pk)
    took = reaches(pk, "CANCELLED", timeout=15) - asked

    assert took < SLACK, f"{took:.2f}s"
    assert_cancelled_while_running(pk)
    assert workers.children() == pids, "the task stopped itself: no worker was killed"
    log = stop(workers)
    assert re.search(r"Done: processed \d+ jobs? \(0 failed, 1 cancelled\)", log), log
    print(f"cancel, a task that checks: CANCELLED {took:.2f}s after the request")


def test_a_task_that_never_checks_is_stopped_by_its_worker_after_the_grace(runqueue):
    pk = control_tasks.never_checks.enqueue("deaf").id
    workers = serve(runqueue)
    wait_for(lambda: started("deaf"))
    pids = workers.children()
    # From SQL, as docs/cancel.md gives it.
    now = "UTC_TIMESTAMP(6)" if settings.USE_TZ else "NOW(6)"
    asked = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE django_dbqueue_job SET cancel_requested_at = {now} WHERE id = %s "
            "AND status IN ('READY', 'WAITING', 'RUNNING') AND cancel_requested_at IS NULL",
            [pk],
        )

    took = reaches(pk, "CANCELLED", timeout=20) - asked

    assert GRACE <= took < GRACE + SLACK, f"{took:.2f}s"
    assert_cancelled_while_running(pk)
    assert workers.children() == pids, "the worker stopped its sleeping task itself"
    assert "killing it" not in stop(workers)
    print(f"cancel, a task that never checks: CANCELLED {took:.2f}s after the request")


def test_a_task_stuck_in_c_is_killed_with_its_worker_and_recorded_cancelled(runqueue):
    pk = control_tasks.holds_the_gil.enqueue("stuck").id
    workers = serve(runqueue)
    wait_for(lambda: started("stuck"))
    [victim] = workers.children()

    asked = cancel(pk)
    took = reaches(pk, "CANCELLED", timeout=30) - asked

    assert GRACE + HARD_GRACE <= took < GRACE + HARD_GRACE + SLACK, f"{took:.2f}s"
    cancelled = assert_cancelled_while_running(pk)
    assert "its worker was killed" in cancelled.errors[-1]["traceback"]
    assert victim not in workers.children()
    assert f"Worker process {victim} is still running job {pk}" in workers.output()
    # Its replacement serves the queue.
    after = tasks.sleep.enqueue(0.01, key="after").id
    reaches(after, "SUCCESSFUL", timeout=30)
    assert re.search(r"Done: processed 2 jobs \(0 failed, 1 cancelled\)", stop(workers))
    print(f"cancel, a task holding the GIL in C: CANCELLED {took:.2f}s after the request")


def test_the_supervisor_lives_on_when_the_row_of_a_job_it_kills_for_a_cancel_was_deleted(runqueue):
    pk = control_tasks.holds_the_gil.enqueue("deleted").id
    workers = serve(runqueue)
    wait_for(lambda: started("deleted"))
    [victim] = workers.children()

    cancel(pk)
    # Once the heartbeat posted the cancel (within CONTROL), and well before
    # the supervisor kills the worker (GRACE + HARD_GRACE after that).
    time.sleep(CONTROL + 1.5)
    assert Job.objects.filter(pk=pk).delete()[0] >= 1
    wait_for(lambda: f"Worker process {victim} is still running job {pk}" in workers.output(), timeout=30)
    wait_for(lambda: len(workers.children()) == 1 and victim not in workers.children(), timeout=30)

    assert workers.proc.poll() is None, workers.output()[-3000:]
    assert f"Job {pk} of the killed worker" in workers.output()
    assert "nothing to record, since its row is no longer that worker's" in workers.output()
    # Its replacement serves the queue.
    after = tasks.sleep.enqueue(0.01, key="after deleted").id
    reaches(after, "SUCCESSFUL", timeout=30)
    stop(workers)


def test_an_async_task_is_cancelled_as_a_coroutine_without_waiting_for_the_grace(runqueue):
    pk = control_tasks.waits_async.enqueue("async").id
    workers = serve(runqueue, DBQUEUE_CANCEL_GRACE="60")
    wait_for(lambda: started("async"))
    pids = workers.children()

    asked = cancel(pk)
    took = reaches(pk, "CANCELLED", timeout=20) - asked

    assert took < SLACK, f"{took:.2f}s: cancelled at once, not after the 60 s grace"
    assert_cancelled_while_running(pk)
    assert workers.children() == pids
    stop(workers)
    print(f"cancel, an async task: CANCELLED {took:.2f}s after the request")


def test_a_job_whose_worker_is_paused_is_cancelled_by_the_supervisor(runqueue):
    pk = control_tasks.checks_for_cancel.enqueue("paused").id
    workers = serve(runqueue)
    wait_for(lambda: started("paused"))
    [victim] = workers.children()
    os.kill(victim, signal.SIGSTOP)
    try:
        asked = cancel(pk)
        took = reaches(pk, "CANCELLED", timeout=30) - asked
    finally:
        try:
            os.kill(victim, signal.SIGCONT)
        except ProcessLookupError:
            pass

    assert GRACE + HARD_GRACE <= took < GRACE + HARD_GRACE + SLACK, f"{took:.2f}s"
    assert_cancelled_while_running(pk)
    wait_for(lambda: len(workers.children()) == 1 and victim not in workers.children())
    stop(workers)
    print(f"cancel, a paused worker: CANCELLED {took:.2f}s after the request")


def test_progress_is_visible_from_another_process_while_the_job_runs(runqueue):
    steps, pause = 20, 0.25
    pk = control_tasks.reports_progress.enqueue("progress", steps, pause).id
    workers = serve(runqueue)
    wait_for(lambda: started("progress"))
    began = time.monotonic()
    seen: list[tuple[float, str]] = []
    first_seen = None
    while (row := job(pk)).status == "RUNNING":
        if row.progress is not None and (row.progress, row.progress_message) not in seen:
            seen.append((row.progress, row.progress_message))
            first_seen = first_seen or time.monotonic()
            result = control_tasks.reports_progress.get_result(pk)
            assert result.status == "RUNNING" and result.progress is not None
        time.sleep(0.1)

    assert row.status == "SUCCESSFUL"
    assert len(seen) >= 3, seen
    fractions = [fraction for fraction, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] < 1, fractions
    for fraction, message in seen:
        assert message == f"step {round(fraction * steps)} of {steps}"
    assert first_seen is not None
    lag = first_seen - began - pause  # the first report is made one pause in
    assert lag < CONTROL + 1.0, f"{lag:.2f}s"
    stop(workers)
    print(f"progress: {len(seen)} reports seen from another process, the first {lag:.2f}s after it was made")


def numbers_run(key: str, pid: int | None = None) -> dict[int, int]:
    """How many times each number of counts_with_checkpoints(key) ran (in
    the process ``pid``, if given)."""
    found: dict[int, int] = {}
    rows = Execution.objects.filter(key__startswith=f"{key}:")
    for name in (rows if pid is None else rows.filter(pid=pid)).values_list("key", flat=True):
        number = name.removeprefix(f"{key}:")
        if number.isdigit():
            found[int(number)] = found.get(int(number), 0) + 1
    return found


def starts(key: str) -> list[str]:
    return list(
        Execution.objects.filter(key__startswith=f"{key}:start:").order_by("id").values_list("key", flat=True)
    )


def test_a_job_whose_worker_was_killed_resumes_from_its_checkpoint(runqueue):
    total, pause = 60, 0.1
    pk = control_tasks.counts_with_checkpoints.enqueue("kill", total, pause).id
    workers = serve(runqueue)
    wait_for(lambda: len(numbers_run("kill")) >= 25)
    [victim] = workers.children()

    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    at_kill = job(pk).checkpoint["cursor"]
    resumed = reaches(pk, "SUCCESSFUL", timeout=60)

    # What the victim counted and saved, read once the job is done: a row or a
    # checkpoint it sent just before SIGKILL may land after the kill (seen on
    # MySQL: the number in hand, counted after a read made right after it).
    ran = len(numbers_run("kill", pid=victim))
    first, again = starts("kill")
    saved = int(again.rpartition(":")[2])  # the checkpoint the second run began from
    assert first == "kill:start:0" and at_kill <= saved
    # A checkpoint is written at most once per CONTROL_INTERVAL: a kill loses
    # at most the numbers counted in one interval (and the one in hand).
    assert ran - CONTROL / pause - 2 <= saved <= ran, (saved, ran)
    counts = numbers_run("kill")
    assert set(counts) == set(range(total)), "every number was counted"
    twice = {number for number, times in counts.items() if times > 1}
    assert twice == set(range(saved, ran)), "only the numbers after the checkpoint ran twice"
    finished = job(pk)
    # The run in a batch that died is not counted; the recovered job, suspect,
    # counts its attempt in its claim (docs/guarantees.md): one attempt.
    assert (finished.attempts, finished.return_value) == (1, total)
    stop(workers)
    print(
        f"SIGKILL mid-way: {ran} of {total} counted, checkpoint at {saved}; resumed from it and "
        f"finished {resumed - killed:.1f}s after the kill ({ran - saved} counted twice)"
    )


def test_a_deploy_with_a_stop_timeout_gives_the_long_job_back_and_a_new_runqueue_resumes_it(runqueue):
    total, pause, timeout = 100, 0.1, 5.0
    pk = control_tasks.counts_with_checkpoints.enqueue("deploy", total, pause).id
    old = serve(runqueue, "--stop-timeout", f"{timeout:g}")
    wait_for(lambda: started("deploy:start:0"))

    signalled = time.monotonic()
    old.signal_group(signal.SIGTERM)  # systemd's stop
    assert old.wait(timeout=timeout + 15) == 0, old.output()
    stopped_in = time.monotonic() - signalled

    # It checkpoints every 0.1 s: interrupted at its first checkpoint past the timeout.
    assert timeout <= stopped_in < timeout + SLACK, f"{stopped_in:.2f}s"
    given_back = job(pk)
    ran = len(numbers_run("deploy"))
    assert (given_back.status, given_back.owner, given_back.attempts) == ("READY", None, 0), "attempt unspent"
    assert given_back.interruptions == 1
    assert given_back.checkpoint["cursor"] == ran, "the last position is written with the interruption"
    assert 0 < ran < total
    # Given back, not processed: it runs in the next runqueue.
    assert "Done: processed 0 jobs (0 failed, 1 interrupted)" in old.output(), old.output()

    new = serve(runqueue)
    finished_at = reaches(pk, "SUCCESSFUL", timeout=30)
    finished = job(pk)
    assert starts("deploy") == ["deploy:start:0", f"deploy:start:{ran}"]
    assert numbers_run("deploy") == dict.fromkeys(range(total), 1), "every number counted once"
    assert (finished.attempts, finished.interruptions, finished.return_value) == (1, 1, total)
    stop(new)
    print(
        f"deploy, --stop-timeout {timeout:g}: runqueue exited 0 {stopped_in:.2f}s after SIGTERM, the job "
        f"back READY at {ran}/{total}, attempt unspent; the next runqueue finished it "
        f"{finished_at - signalled - stopped_in:.1f}s later"
    )


def test_a_deploy_kills_a_job_stuck_in_c_past_the_stop_timeout_and_gives_it_back(runqueue):
    pk = control_tasks.holds_the_gil.enqueue("stuck deploy").id
    workers = serve(runqueue, "--stop-timeout", "1")
    wait_for(lambda: started("stuck deploy"))
    [victim] = workers.children()

    signalled = time.monotonic()
    workers.signal_group(signal.SIGTERM)
    assert workers.wait(timeout=30) == 0, workers.output()
    stopped_in = time.monotonic() - signalled

    # The stop timeout, its grace to reach a checkpoint (min(grace, 5)), HARD_GRACE.
    assert 1 + GRACE + HARD_GRACE <= stopped_in < 1 + GRACE + HARD_GRACE + SLACK, f"{stopped_in:.2f}s"
    given_back = job(pk)
    assert (given_back.status, given_back.attempts, given_back.interruptions) == ("READY", 0, 1)
    assert f"Worker process {victim} is still running job {pk}" in workers.output()
    assert "Done: processed 0 jobs (0 failed, 1 interrupted)" in workers.output()
    Job.objects.filter(pk=pk).cancel()  # it would only get stuck again
    print(f"deploy, a job stuck in C: runqueue exited 0 {stopped_in:.2f}s after SIGTERM, the job back READY")
