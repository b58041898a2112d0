"""A schedule added in the admin while several runqueue processes run:
each second enqueued once; a change, a pause and a removal take effect
without a restart."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import Count

from django_dbqueue.models import Job, Schedule, ScheduledRun
from tests.conftest import needs_row_locks, once_per_run, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
LIST = "/admin/django_dbqueue/schedule/"


def runs() -> list:
    return sorted(ScheduledRun.objects.filter(schedule="tick").values_list("scheduled_at", flat=True))


def advance(by: int) -> list:
    """Wait until the schedule has ``by`` more runs than now; return them all."""
    target = len(runs()) + by
    wait_for(lambda: len(runs()) >= target, timeout=20, interval=0.2)
    return runs()


def stays_quiet(seconds: float) -> list:
    """No run enqueued for ``seconds`` after the one tick that may be in flight."""
    time.sleep(1.2)  # a tick that read the row before the change may still enqueue its second
    before = runs()
    time.sleep(seconds)  # the quiet itself, not a wait for a result
    assert runs() == before, "a run after the pause or removal"
    return before


def form(**fields: str) -> dict:
    return {
        "name": "tick",
        "task": "demo.tasks.record",
        "cron": "* * * * * *",
        "timezone": "UTC",
        "args": '["before"]',
        "kwargs": "{}",
        "catch_up": "latest",
        "backend": "default",
        "enabled": "on",
        **fields,
    }


@once_per_run("test_stored_schedules.py ticks database schedules on every database")
@needs_row_locks
def test_a_schedule_added_in_the_admin_runs_once_per_second_across_processes(runqueue, client):
    hosts = [runqueue("--processes", "1") for _ in range(3)]
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    assert client.post(LIST + "add/", form()).status_code == 302
    pk = Schedule.objects.get().pk
    first = advance(5)

    # A change of arguments: the next seconds' jobs carry the new ones.
    client.post(f"{LIST}{pk}/change/", form(args='["after"]'))
    wait_for(lambda: Job.objects.filter(args=["after"]).count() >= 3, timeout=20, interval=0.2)

    # Paused from the list: nothing more, and resuming does not catch up.
    client.post(LIST, {"action": "pause", "_selected_action": [pk]})
    paused = stays_quiet(2.5)
    client.post(LIST, {"action": "resume", "_selected_action": [pk]})
    resumed = advance(3)

    # Deleted: nothing more.
    client.post(f"{LIST}{pk}/delete/", {"post": "yes"})
    final = stays_quiet(2.5)
    assert all(host.proc.poll() is None for host in hosts), "every runqueue still running"

    gaps = [b - a for a, b in zip(final, final[1:], strict=False) if b - a != timedelta(seconds=1)]
    assert len(gaps) == 1 and gaps[0] > timedelta(seconds=3), f"one gap, the pause's, not caught up: {gaps}"
    assert resumed[len(paused)] - paused[-1] == gaps[0]
    assert final[: len(first)] == first
    per_second = Job.objects.filter(task_path="demo.tasks.record").values("run_after").annotate(n=Count("id"))
    assert {row["n"] for row in per_second} == {1}, "no second enqueued twice"
    assert len(per_second) == len(final) >= 5 + 3 + 3
    # Each run's job ran once, in some worker process.
    wait_for(lambda: not Job.objects.filter(status__in=["READY", "RUNNING"]).exists(), timeout=20)
    assert Job.objects.filter(status="SUCCESSFUL").count() == len(final)
