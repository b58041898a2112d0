"""Real `runqueue` processes: throughput, exactly-once, signals, crashes."""

import signal
import subprocess
import sys
import time

import pytest
from django.db.models import Count

from demo import tasks
from demo.models import Execution
from django_dbqueue.models import Job, Worker
from tests.conftest import MANAGE, ROOT, needs_row_locks, once_per_run, subprocess_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def executions_per_key() -> dict[str, int]:
    return dict(Execution.objects.values_list("key").annotate(n=Count("id")))


def started(key: str) -> bool:
    return Execution.objects.filter(key=key).exists()


@needs_row_locks
def test_two_producers_and_three_workers_run_every_job_exactly_once(runqueue):
    per_producer = 2500
    workers = runqueue("--processes", "3", "--batch", "50")
    producers = [
        subprocess.Popen(
            [sys.executable, str(MANAGE), "produce", prefix, str(per_producer)],
            env=subprocess_env(),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for prefix in ("p1", "p2")
    ]
    for producer in producers:
        out, _ = producer.communicate(timeout=300)
        assert producer.returncode == 0, out.decode()

    total = 2 * per_producer
    wait_for(lambda: Job.objects.filter(status="SUCCESSFUL").count() == total, timeout=240, interval=0.5)
    workers.signal(signal.SIGTERM)
    assert workers.wait() == 0

    counts = executions_per_key()
    assert len(counts) == total, "every job ran"
    assert set(counts.values()) == {1}, "no job ran twice"
    assert Job.objects.exclude(status="SUCCESSFUL").count() == 0
    assert Job.objects.aggregate(n=Count("worker_ids"))["n"] == total
    pids = set(Execution.objects.values_list("pid", flat=True))
    assert len(pids) == 3, "all three worker processes took part"
    log = workers.output()
    assert "processed=" in log and "jobs/s ready_backlog=" in log, "progress lines while busy"
    assert f"Done: processed {total} jobs (0 failed)" in log


def sleepers(count: int, seconds: float, prefix: str = "s") -> list[str]:
    results = [tasks.sleep.enqueue(seconds, key=f"{prefix}{i}") for i in range(count)]
    return [r.id for r in results]


@pytest.mark.parametrize("to_group", [True, False], ids=["ctrl-c-to-group", "sigterm-to-supervisor"])
def test_sigterm_finishes_the_job_in_hand_and_gives_back_the_rest(runqueue, to_group):
    ids = sleepers(6, 1.5)
    # No hold watch here: the stop itself must give the batch back.
    workers = runqueue("--processes", "1", "--batch", "6", "--queue", "slow", DBQUEUE_BATCH_HOLD="3600")
    wait_for(lambda: started("s0"))

    if to_group:  # a terminal's Ctrl-C reaches every process of the group
        workers.signal_group(signal.SIGINT)
    else:  # a service manager that signals only the main process
        workers.signal(signal.SIGTERM)

    assert workers.wait(timeout=20) == 0
    jobs = {str(job.pk): job for job in Job.objects.all()}
    assert jobs[ids[0]].status == "SUCCESSFUL", "the job in hand finished"
    for pk in ids[1:]:
        assert (jobs[pk].status, jobs[pk].attempts, jobs[pk].owner) == ("READY", 0, None), pk
    assert Execution.objects.count() == 1
    assert "gave back 5 unstarted jobs" in workers.output()


def test_a_second_signal_stops_at_once(runqueue):
    ids = sleepers(3, 30)
    workers = runqueue("--processes", "1", "--batch", "3", "--queue", "slow")
    wait_for(lambda: started("s0"))
    begun = time.monotonic()

    workers.signal_group(signal.SIGTERM)
    time.sleep(0.5)
    workers.signal_group(signal.SIGTERM)

    assert workers.wait(timeout=15) == 1
    assert time.monotonic() - begun < 15, "did not wait for the 30 s job"
    assert "stopped at once" in workers.output()
    assert not Job.objects.running().exists(), "claims were handed back"
    assert set(Job.objects.values_list("status", flat=True)) == {"READY"}
    assert {str(pk) for pk in Job.objects.values_list("pk", flat=True)} == set(ids)


def test_a_live_workers_row_deleted_under_it_is_written_again_at_its_next_heartbeat(runqueue):
    workers = runqueue("--processes", "1", "--queue", "slow")
    wait_for(lambda: workers.children() and Worker.objects.filter(pid__in=workers.children()).exists())
    [pid] = workers.children()

    Worker.objects.filter(pid=pid).delete()  # as the admin does to a row that looks stale

    wait_for(lambda: Worker.objects.filter(pid=pid).exists(), timeout=10)
    workers.signal(signal.SIGTERM)
    assert workers.wait() == 0


@once_per_run("test_claim.py runs recovery and a suspect's claim alone")
def test_a_killed_worker_is_restarted_and_its_jobs_come_back_after_the_lease(runqueue):
    sleepers(8, 0.3, prefix="k")
    workers = runqueue("--processes", "2", "--batch", "4", "--queue", "slow", DBQUEUE_LEASE="2")
    wait_for(lambda: len(workers.children()) == 2 and Execution.objects.count() >= 2)
    victim = workers.children()[0]

    subprocess.run(["kill", "-KILL", str(victim)], check=True)

    wait_for(lambda: Job.objects.filter(status="SUCCESSFUL").count() == 8, timeout=60)
    counts = executions_per_key()
    assert set(counts) == {f"k{i}" for i in range(8)}, "no job was lost"
    assert sum(counts.values()) - 8 <= 1, "at most the job in hand ran twice"
    assert "restarting it" in workers.output()
    assert victim not in workers.children()
    # The heartbeat drops the dead worker's row and keeps its successor's.
    wait_for(lambda: not Worker.objects.filter(pid=victim).exists())
    assert Worker.objects.filter(pid__in=workers.children()).count() == 2
    workers.signal(signal.SIGTERM)
    assert workers.wait() == 0


@once_per_run("test_claim.py runs recovery and a suspect's claim alone")
def test_a_job_that_kills_its_worker_ends_failed_and_its_batch_mates_finish(runqueue):
    mates_before = [tasks.record.enqueue(f"m{i}").id for i in range(3)]
    poison = tasks.kill_worker.enqueue("poison").id
    mates_after = [tasks.record.enqueue(f"n{i}").id for i in range(3)]
    workers = runqueue("--processes", "1", "--batch", "10", "--queue", "default", DBQUEUE_LEASE="1")

    wait_for(lambda: Job.objects.get(pk=poison).status == "FAILED", timeout=90, interval=0.5)

    job = Job.objects.get(pk=poison)
    assert job.attempts == job.max_attempts == 3
    # The batch's run, not counted (no start was recorded), then three counted runs alone.
    lost = [(e["exception_class_path"], e["attempt"], e["spent"]) for e in job.errors]
    worker_lost = "django_dbqueue.exceptions.WorkerLost"
    assert lost == [
        (worker_lost, 1, False),
        (worker_lost, 1, True),
        (worker_lost, 2, True),
        (worker_lost, 3, True),
    ]
    wait_for(lambda: Job.objects.filter(status="SUCCESSFUL").count() == 6, timeout=30)
    for pk in mates_before + mates_after:
        mate = Job.objects.get(pk=pk)
        assert mate.attempts == 1, "a batch-mate that never started lost no attempt"
    # The batch's first run, then three counted runs alone.
    assert Execution.objects.filter(key="poison").count() == 4
    workers.signal(signal.SIGTERM)
    assert workers.wait() == 0


def test_burst_exits_zero_when_the_queue_is_empty(runqueue):
    for i in range(30):
        tasks.record.enqueue(f"b{i}")
    workers = runqueue("--burst", "--processes", "2", "--batch", "4")
    assert workers.wait(timeout=60) == 0
    assert len(executions_per_key()) == 30
    assert "Done: processed 30 jobs (0 failed)" in workers.output()
