"""The worst cases of the queue's promises, with real `runqueue` processes
and real signals: outcomes too big to store, tasks that raise what is not
an Exception, values the database would refuse, a worker paused past its
lease, a task holding the GIL, a graceful stop during a database call."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from demo import tasks
from demo.models import Execution
from django_dbqueue.clock import DbNow, read_database_now
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.worker import Worker
from tests.conftest import ROOT, needs_row_locks, once_per_run, subprocess_env, wait_for
from tests.threads import holding

pytestmark = [needs_row_locks, pytest.mark.django_db(transaction=True)]

MB = 1_000_000


def settled() -> bool:
    return not Job.objects.filter(status__in=["READY", "RUNNING"]).exists()


def runs(key: str) -> int:
    return Execution.objects.filter(key=key).count()


def last_error(result) -> dict:
    return Job.objects.get(pk=result.id).errors[-1]


def over_the_packet() -> int:
    """A size of text the server refuses in one statement: 1 MiB more than
    its max_allowed_packet (MariaDB's default is 16 MiB, MySQL's 64 MiB)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        return int(cursor.fetchone()[0]) + 2**20


def stop(worker, signum: int = signal.SIGTERM) -> int:
    worker.signal_group(signum)
    return worker.wait(timeout=30)


def test_outcomes_too_big_to_store_fail_their_job_and_never_wedge_the_worker(runqueue):
    big_return = tasks.returns_big.enqueue("big-return", 17 * MB)
    big_error = tasks.raises_big.enqueue("big-error", 9 * MB)
    # 200 jobs of one batch, 100 kB each: 20 MB of successes to write at once.
    batch = [tasks.returns_big.enqueue(f"b{i}", 100_000) for i in range(200)]

    worker = runqueue("--batch", "200")
    wait_for(settled, timeout=120, interval=0.5)

    job = Job.objects.get(pk=big_return.id)
    assert (job.status, job.attempts, job.return_value) == ("FAILED", 1, None)
    assert "more than the limit of 1000000 (OPTIONS MAX_RETURN_BYTES)" in job.errors[-1]["traceback"]
    job = Job.objects.get(pk=big_error.id)
    assert (job.status, job.attempts, len(job.errors)) == ("FAILED", 2, 2)
    traceback = job.errors[-1]["traceback"]
    assert len(traceback) < 20_000 and "characters cut" in traceback and traceback.rstrip().endswith("yyyy")
    ok = Job.objects.filter(pk__in=[r.id for r in batch], status="SUCCESSFUL")
    assert ok.count() == 200
    assert {len(v) for v in ok.values_list("return_value", flat=True)} == {100_000}
    assert Execution.objects.filter(key__regex=r"^b[0-9]+$").count() == 200, "no batch-mate ran twice"
    assert stop(worker) == 0


def test_a_statement_the_server_refuses_is_not_an_outage():
    from django.db import OperationalError

    from django_dbqueue.db import Outage, is_outage, persist

    if connection.vendor != "mysql":
        pytest.skip("max_allowed_packet is MySQL's and MariaDB's")

    size = over_the_packet()

    def too_big() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s", ["z" * size])

    started = time.monotonic()
    with pytest.raises(OperationalError) as refused:
        persist(too_big, "default", Outage("test", 1.0))
    assert time.monotonic() - started < 10, "the refused write was retried as if the server were away"
    assert not is_outage(refused.value, "default")
    connection.close()


POISON = [
    ("exit", tasks.exits, (), 2, "builtins.SystemExit"),
    ("interrupt", tasks.interrupts, (), 2, "builtins.KeyboardInterrupt"),
    ("cancel", tasks.cancelled, (), 2, "asyncio.exceptions.CancelledError"),
    ("deep", tasks.returns_nested, (1000,), 1, "django_dbqueue.exceptions.ResultNotStorable"),
    ("nested", tasks.returns_nested, (33,), 1, "django_dbqueue.exceptions.ResultNotStorable"),
    ("long-int", tasks.returns_long_int, (5000,), 1, "django_dbqueue.exceptions.ResultNotStorable"),
]


def test_anything_a_task_raises_or_returns_ends_as_a_recorded_attempt(runqueue):
    before = [tasks.record.enqueue(f"before-{i}") for i in range(5)]
    poison = {key: task.enqueue(key, *args) for key, task, args, _, _ in POISON}
    after = [tasks.record.enqueue(f"after-{i}") for i in range(5)]

    worker = runqueue("--batch", "50")
    wait_for(settled, timeout=60, interval=0.3)

    for key, _, _, attempts, error in POISON:
        job = Job.objects.get(pk=poison[key].id)
        assert (job.status, job.attempts) == ("FAILED", attempts), key
        assert [e["exception_class_path"] for e in job.errors] == [error] * attempts, key
        assert runs(key) == attempts, f"{key} ran without its attempt being counted"
    mates = Job.objects.filter(pk__in=[r.id for r in before + after])
    assert set(mates.values_list("status", "attempts")) == {("SUCCESSFUL", 1)}
    assert Execution.objects.filter(key__regex=r"^(before|after)-").count() == 10, "a batch-mate ran twice"
    assert worker.proc.poll() is None
    assert stop(worker) == 0


@once_per_run("test_claim.py runs still_held, what a worker that cannot show its lease asks")
def test_a_worker_paused_past_its_lease_does_not_run_its_stale_batch(runqueue):
    jobs = [tasks.sleep.enqueue(0.05, key=f"p{i}") for i in range(60)]
    # The batch stays with the worker (no give-back of a slow job's batch-mates).
    paused = runqueue("--batch", "60", "--queue", "slow", DBQUEUE_LEASE="2", DBQUEUE_BATCH_HOLD="600")
    wait_for(lambda: Execution.objects.count() >= 3)
    [paused_pid] = paused.children()
    paused.signal_group(signal.SIGSTOP)  # a VM freeze: supervisor, heartbeat and worker
    try:
        other = runqueue("--queue", "slow", DBQUEUE_LEASE="2")
        wait_for(settled, timeout=60)
    finally:
        resumed = timezone.now()
        paused.signal_group(signal.SIGCONT)
    wait_for(lambda: "claimed jobs to recovery" in paused.output(), timeout=20)

    assert {runs(f"p{i}") >= 1 for i in range(len(jobs))} == {True}
    # Before: the paused worker ran all 60 again. Now it starts nothing it
    # cannot show it holds; what ran twice is what it had in hand or had
    # run without recording yet when it froze.
    assert not Execution.objects.filter(pid=paused_pid, at__gt=resumed).exists()
    assert stop(paused) == 0 and stop(other) == 0
    assert set(Job.objects.values_list("status", flat=True)) == {"SUCCESSFUL"}


@once_per_run("every process test runs the heartbeat's lease extension")
def test_a_task_holding_the_gil_keeps_its_lease(runqueue):
    # One C call longer than a lease (2s): the worker's own threads cannot
    # run, but the supervisor's heartbeat process vouches for it.
    # 10**9 loops took 2.8 s on a quiet machine: twice that, and the call's
    # length measured on the row, not assumed, below.
    loops = 2 * 10**9
    result = tasks.holds_gil.enqueue("gil", loops)
    busy = runqueue("--queue", "slow", DBQUEUE_LEASE="2")
    wait_for(lambda: runs("gil") == 1)
    other = runqueue("--queue", "slow", DBQUEUE_LEASE="2")
    wait_for(lambda: Job.objects.get(pk=result.id).status == "SUCCESSFUL", timeout=90)

    job = Job.objects.get(pk=result.id)
    held_for = (job.finished_at - job.started_at).total_seconds()
    assert held_for > 3, f"the C call took {held_for:.1f}s, not longer than the lease: make loops larger"
    assert (runs("gil"), job.attempts, job.errors) == (1, 1, [])
    assert stop(busy) == 0 and stop(other) == 0


def test_sigterm_during_a_database_call_is_one_graceful_stop(runqueue):
    result = tasks.sleeps_in_database.enqueue("in-db", 3)
    rest = [tasks.sleep.enqueue(0, key=f"r{i}") for i in range(5)]
    worker = runqueue("--queue", "slow", "--batch", "10")
    wait_for(lambda: runs("in-db") == 1)
    wait_for(in_sleep_query)

    assert stop(worker) == 0
    log = worker.output()
    assert "stopped at once" not in log and "out of sync" not in log
    assert Job.objects.get(pk=result.id).status == "SUCCESSFUL"
    assert not Job.objects.filter(status="RUNNING").exists()
    assert set(Job.objects.filter(pk__in=[r.id for r in rest]).values_list("status", flat=True)) <= {
        "READY",
        "SUCCESSFUL",
    }


def in_sleep_query() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP%%'"
            )
        else:
            cursor.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%%'")
        return cursor.fetchone()[0] > 0


@once_per_run("test_processes.py runs a stop at once (a second signal): the job in hand abandoned")
def test_sigquit_to_the_supervisor_stops_everything_at_once_with_exit_1(runqueue):
    tasks.sleep.enqueue(30, key="long")
    worker = runqueue("--queue", "slow", "--processes", "2")
    wait_for(lambda: runs("long") == 1 and len(worker.children()) == 2)
    children = worker.children() + worker.children("dbqueue-heartbt")

    worker.signal(signal.SIGQUIT)  # the supervisor alone

    assert worker.wait(timeout=20) == 1
    assert "Done: processed" in worker.output()
    for pid in children:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
    job = Job.objects.get()
    assert job.status == "READY" and job.attempts == 1, "the abandoned run counts, and is retried"
    assert job.errors[-1]["exception_class_path"] == "django_dbqueue.exceptions.WorkerStopped"


def test_async_task_is_cancelled_at_its_timeout(runqueue):
    result = tasks.slow_async.enqueue("coro")
    worker = runqueue("--queue", "default")
    wait_for(lambda: Job.objects.get(pk=result.id).status == "FAILED", timeout=30)
    wait_for(lambda: runs("coro-cancelled") == 1, timeout=10)

    job = Job.objects.get(pk=result.id)
    assert job.errors[-1]["exception_class_path"] == "django_dbqueue.exceptions.JobTimeout"
    assert runs("coro-finished") == 0
    assert stop(worker) == 0


def test_a_worker_whose_clock_runs_ahead_does_not_take_a_live_workers_job(runqueue):
    long = tasks.sleep.enqueue(6, key="live")
    live = runqueue("--queue", "slow", DBQUEUE_LEASE="3")
    wait_for(lambda: runs("live") == 1)
    skewed = runqueue("--queue", "slow", "--queue", "default", DBQUEUE_LEASE="3", DBQUEUE_CLOCK_SKEW="30")
    quick = tasks.sleep.enqueue(0, key="quick")
    retried = tasks.flaky.enqueue("retried", 1)  # fails once: its retry's due time is set by the skewed host

    wait_for(lambda: Job.objects.get(pk=long.id).status == "SUCCESSFUL", timeout=30)
    wait_for(lambda: Job.objects.get(pk=quick.id).status == "SUCCESSFUL", timeout=30)
    wait_for(lambda: Job.objects.get(pk=retried.id).status == "SUCCESSFUL", timeout=20)

    job = Job.objects.get(pk=long.id)
    assert (runs("live"), job.attempts, job.errors) == (1, 1, []), "the skewed host recovered a live lease"
    # What the workers record is the database's time, whoever ran the job.
    database_now = read_database_now("default")
    for result in (long, quick, retried):
        started = Job.objects.get(pk=result.id).started_at
        assert abs((database_now - started).total_seconds()) < 15, started
    retry = Job.objects.get(pk=retried.id)
    assert retry.attempts == 2 and abs((database_now - retry.run_after).total_seconds()) < 15
    assert stop(live) == 0 and stop(skewed) == 0


def test_a_producer_whose_clock_runs_ahead_does_not_delay_its_jobs(runqueue):
    # The producer's host runs five minutes fast; the job is due now by the
    # database's clock, which is the one the workers claim by.
    enqueue = "from demo.tasks import add; print(add.enqueue(2, 3).id)"
    produce = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", enqueue],
        cwd=ROOT / "testproject",
        env=subprocess_env(DBQUEUE_CLOCK_SKEW="300"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert produce.returncode == 0, produce.stderr
    job_id = int(produce.stdout.split()[-1])
    job = Job.objects.get(pk=job_id)
    database_now = read_database_now("default")
    assert abs((database_now - job.enqueued_at).total_seconds()) < 15, job.enqueued_at
    assert job.run_after == job.enqueued_at

    worker = runqueue("--burst")
    assert worker.wait(60) == 0
    assert Job.objects.get(pk=job_id).status == "SUCCESSFUL"


def test_burst_recovers_a_lease_that_ran_out_and_runs_the_job(runqueue):
    result = tasks.record.enqueue("orphan")
    Job.objects.filter(pk=result.id).update(
        status="RUNNING", owner="gone:1:abcdef", lease_expires_at=DbNow() - timedelta(hours=1)
    )

    worker = runqueue("--burst")

    assert worker.wait(timeout=60) == 0
    job = Job.objects.get(pk=result.id)
    assert (job.status, runs("orphan")) == ("SUCCESSFUL", 1), worker.output()[-2000:]


def test_burst_backs_off_while_another_connection_holds_the_due_job():
    tasks.record.enqueue("held")
    with holding(lambda: list(Job.objects.select_for_update())):
        worker = Worker(task_backends["default"], ["default"], burst=True)
        idle = worker._step(0.05)
    assert idle is not None and idle >= 0.1, "burst must wait like an idle worker, not spin"


def test_requeue_starts_a_clean_run_and_keeps_the_earlier_ones_in_history(runqueue):
    result = tasks.always_fails.enqueue("again")  # max_attempts=2

    def run_until_failed() -> None:
        while Job.objects.get(pk=result.id).status != "FAILED":
            assert runqueue("--burst").wait(timeout=60) == 0

    run_until_failed()
    for _ in range(2):
        assert Job.objects.filter(pk=result.id).requeue() == 1
        job = Job.objects.get(pk=result.id)
        assert (job.status, job.attempts, job.errors, job.worker_ids) == ("READY", 0, [], [])
        assert (job.started_at, job.finished_at, job.last_attempted_at) == (None, None, None)
        run_until_failed()

    job = Job.objects.get(pk=result.id)
    assert (job.attempts, len(job.errors), len(job.worker_ids)) == (2, 2, 2), "only this run's history"
    assert [(h["status"], h["attempts"]) for h in job.history] == [("FAILED", 2), ("FAILED", 2)]
    assert job.history[0]["last_error"]["exception_class_path"] == "builtins.ValueError"
    assert job.started_at > timezone.datetime.fromisoformat(job.history[-1]["started_at"])


def test_a_refused_batch_write_is_split_and_only_the_refused_job_fails():
    """With MAX_RETURN_BYTES set above the server's max_allowed_packet, the
    batched success write is refused (MariaDB: 1153, and it drops the
    connection). That is no outage: the statement is split, the batch-mates
    are recorded, and the one job whose outcome the server refuses fails."""
    from django.test import override_settings

    if connection.vendor != "mysql":
        pytest.skip("max_allowed_packet is MySQL's and MariaDB's")
    mates = [tasks.returns_big.enqueue(f"mate-{i}", 10) for i in range(5)]
    size = over_the_packet()
    huge = tasks.returns_big.enqueue("huge", size)
    backend = task_backends["default"]
    options = {"MAX_RETURN_BYTES": 2 * size, "BATCH_HOLD_SECONDS": 60}
    backends = {"default": {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "OPTIONS": options}}
    backends["default"]["QUEUES"] = sorted(backend.queues)
    with override_settings(TASKS=backends):
        started = time.monotonic()
        assert Worker(task_backends["default"], ["default"], batch=10, burst=True).run() == 0
    assert time.monotonic() - started < 60, "the refused write was retried as if the server were away"

    job = Job.objects.get(pk=huge.id)
    assert (job.status, job.return_value) == ("FAILED", None)
    assert job.errors[-1]["exception_class_path"] == "django_dbqueue.exceptions.ResultNotStorable"
    assert "The database refused to store this job's outcome" in job.errors[-1]["traceback"]
    done = Job.objects.filter(pk__in=[m.id for m in mates])
    assert set(done.values_list("status", "return_value")) == {("SUCCESSFUL", "x" * 10)}
    assert Execution.objects.filter(key__startswith="mate-").count() == 5
