"""`queuestats` and `queuehealth` against real worker processes."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from demo import tasks
from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job, Worker
from tests.conftest import MANAGE, ROOT, subprocess_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=subprocess_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def health(*args: str) -> tuple[int, str, str]:
    """queuehealth in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("queuehealth", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def busy(runqueue):
    """A worker on `default` that has run 5 jobs and failed 1; `email`, not
    served, holds a job due for 100 s (on the database's clock)."""
    worker = runqueue("--queue", "default")
    results = [tasks.add.enqueue(i, i) for i in range(5)] + [tasks.always_fails.enqueue("on purpose")]
    wait_for(lambda: Job.objects.filter(status__in=["SUCCESSFUL", "FAILED"]).count() == 6)
    due = read_database_now("default") - timedelta(seconds=100)
    Job.objects.create(task_path="demo.tasks.send_welcome", queue_name="email", run_after=due)
    wait_for(lambda: Worker.objects.exists())
    yield worker, results
    worker.signal(signal.SIGTERM)


def test_queuestats_and_queuehealth_on_a_live_worker(busy):
    """One worker for every check, as starting one costs seconds."""
    worker, _ = busy
    out = io.StringIO()
    call_command("queuestats", "--json", "--minutes", "2", stdout=out)
    data = json.loads(out.getvalue())
    default, email = (next(q for q in data["queues"] if q["name"] == n) for n in ("default", "email"))
    assert default["counts"]["SUCCESSFUL"] == 5 and default["counts"]["FAILED"] == 1
    assert (default["succeeded_recently"], default["failed_recently"], default["per_minute"]) == (5, 1, 3.0)
    assert default["lag_seconds"] is None and default["due"] == 0
    assert email["due"] == 1 and 100 <= email["lag_seconds"] < 160
    # The keys other django.tasks backends' stats share, per queue and in total.
    assert (email["pending_count"], email["delayed_count"], email["ready_count"]) == (1, 0, 1)
    assert email["oldest_pending_age_seconds"] == email["lag_seconds"]
    assert (data["totals"]["successful_count"], data["totals"]["failed_count"]) == (5, 1)
    assert data["totals"]["oldest_pending_age_seconds"] == email["lag_seconds"]
    assert [w["host"] for w in data["workers"]] == [socket.gethostname()[:80]]
    assert data["workers"][0]["queues"] == ["default"]
    call_command("queuestats", stdout=(out := io.StringIO()))
    text = out.getvalue()
    assert "Live workers: 1" in text and "email" in text and "done/min (5 min)" in text

    watch = subprocess.Popen(
        [sys.executable, str(MANAGE), "queuestats", "--json", "--watch", "0.2"],
        env=subprocess_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first, second = (json.loads(watch.stdout.readline()) for _ in range(2))
    finally:
        watch.kill()
        watch.wait()
    assert second["at"] > first["at"], "--watch prints again"

    code, out, _ = health("--queue", "default", "--max-lag", "60", "--max-failures", "1")
    assert code == 0 and out.startswith("OK: 1 live worker on ")
    code, _, err = health("--max-lag", "50")
    assert code == 1 and "queue email lags 1" in err
    code, _, err = health("--max-failures", "0", "--minutes", "2")
    assert code == 1 and "1 job failed in the last 2 minutes, over 0" in err
    code, _, err = health("--host", "some-other-host")
    assert code == 1 and "0 live workers on some-other-host, fewer than 1" in err

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    stopped = manage("queuehealth")  # the real exit status, as a probe sees it
    assert stopped.returncode == 1 and "0 live workers on" in stopped.stderr


def test_a_new_worker_is_visible_with_its_start_time_as_soon_as_it_starts(runqueue):
    """Under the default lease (60 s) the heartbeat beats every 15 s; a probe
    must not call a worker that just started dead until then."""
    before = read_database_now("default")
    worker = runqueue("--processes", "2", DBQUEUE_LEASE="60")
    wait_for(lambda: len(worker.children()) == 2)
    # Well under the 15 s a first beat would take: the time to start a process on a busy machine.
    wait_for(lambda: health("--min-workers", "2")[0] == 0, timeout=8)
    rows = list(Worker.objects.all())
    assert len(rows) == 2
    assert all(timedelta(0) <= row.started_at - before < timedelta(seconds=8) for row in rows), [
        (row.started_at, before) for row in rows
    ]
    # A worker killed outside: its row goes, its replacement's comes, both long before the next beat.
    victim = rows[0].pid
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: set(Worker.objects.values_list("pid", flat=True)) == set(worker.children()) - {victim},
        timeout=8,
    )
    wait_for(lambda: Worker.objects.count() == 2, timeout=8)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert not Worker.objects.exists(), "a stopped worker's row is gone"


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("queuehealth", ["--max-lag", "-5"], "'-5' must be a number above zero"),
        ("queuehealth", ["--max-lag", "soon"], "'soon' is not a number"),
        ("queuehealth", ["--max-failures", "-1"], "--max-failures must be 0 or more, not -1."),
        ("queuehealth", ["--min-workers", "-1"], "--min-workers must be 0 or more, not -1."),
        ("queuehealth", ["--queue", "nope"], "Unknown queue 'nope'"),
        ("queuestats", ["--queue", "nope"], "Unknown queue 'nope'"),
        ("queuestats", ["--watch", "0"], "'0' must be a number above zero"),
    ],
)
def test_bad_thresholds_and_queues_get_a_clear_error(command, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command(command, *args)


def test_queuehealth_exits_2_on_bad_input_not_1_as_when_unhealthy():
    run = manage("queuehealth", "--max-failures", "-1")
    assert run.returncode == 2 and "--max-failures must be 0 or more" in run.stderr


def test_the_shared_keys_count_delayed_jobs_apart_from_due_ones():
    now = read_database_now("default")
    for run_after in (now - timedelta(seconds=30), now, now + timedelta(hours=1), now + timedelta(days=1)):
        Job.objects.create(task_path="demo.tasks.add", queue_name="email", run_after=run_after)
    Job.objects.create(task_path="demo.tasks.add", queue_name="email", status="RUNNING", owner="w")
    out = io.StringIO()
    call_command("queuestats", "--json", "--queue", "email", stdout=out)
    [email] = json.loads(out.getvalue())["queues"]
    assert (email["pending_count"], email["delayed_count"], email["running_count"]) == (4, 2, 1)
    assert 30 <= email["oldest_pending_age_seconds"] < 90
