"""A per-second schedule ticked by several runqueue processes that are
killed and restarted: every second is enqueued, none twice."""

import json
import os
import signal
import time
from datetime import timedelta

import pytest
from django.db.models import Count

from django_dbqueue.models import Job, ScheduledRun
from tests.conftest import needs_row_locks, once_per_run, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_SECOND = json.dumps({"tick": {"task": "demo.tasks.noop", "cron": "* * * * * *"}})


def runs() -> int:
    return ScheduledRun.objects.filter(schedule="tick").count()


def advance(by: int) -> None:
    """Wait until the schedule has ``by`` more runs than now."""
    target = runs() + by
    wait_for(lambda: runs() >= target, timeout=30, interval=0.2)


@once_per_run("test_schedules.py runs the scheduler's tick and its race for one run")
@needs_row_locks
def test_every_scheduled_second_is_enqueued_once_while_processes_die_and_restart(runqueue):
    start = lambda: runqueue("--processes", "1", DBQUEUE_SCHEDULES=EVERY_SECOND)  # noqa: E731
    hosts = [start() for _ in range(3)]
    advance(3)

    # One process after another is killed outright and replaced.
    for round_ in range(6):
        hosts[round_ % 3].signal_group(signal.SIGKILL)
        hosts[round_ % 3] = start()
        advance(3)

    # A heartbeat process killed on its own: its supervisor restarts it.
    heartbeat = wait_for(lambda: hosts[0].children("dbqueue-heartbt"))[0]
    os.kill(heartbeat, signal.SIGKILL)
    advance(3)

    # Every process down for a few seconds (a full deploy): the runs of
    # that gap are on time when the new processes come up, so none is lost.
    for host in hosts:
        host.signal_group(signal.SIGKILL)
    time.sleep(4)  # the outage itself, not a wait for a result
    hosts = [start() for _ in range(3)]
    advance(4)
    for host in hosts:  # whatever is in hand when they stop is rolled back whole
        host.signal_group(signal.SIGKILL)

    times = sorted(ScheduledRun.objects.filter(schedule="tick").values_list("scheduled_at", flat=True))
    gaps = [b for a, b in zip(times, times[1:], strict=False) if b - a != timedelta(seconds=1)]
    assert gaps == [], f"runs skipped before {gaps}"
    assert len(times) >= 28  # what the waits above asked for
    per_time = Job.objects.filter(task_path="demo.tasks.noop").values("run_after").annotate(n=Count("id"))
    assert {row["n"] for row in per_time} == {1}, "no run enqueued twice"
    assert len(per_time) == len(times)
