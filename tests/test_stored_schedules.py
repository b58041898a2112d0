"""Schedules in the database: validation, pause and resume, and the
scheduler's tick picking up additions, changes, pauses and removals."""

import copy
import logging
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from django_dbqueue.clock import as_aware, as_stored, read_utc
from django_dbqueue.models import Job, Schedule, ScheduledRun
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.worker.housekeeping.scheduler import Scheduler
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db


def errors_of(**fields) -> dict[str, list[str]]:
    fields = {"name": "s", "task": "demo.tasks.add", "cron": "* * * * *", "args": [1, 2], **fields}
    with pytest.raises(ValidationError) as raised:
        Schedule.objects.create(**fields)
    assert Schedule.objects.count() == 0
    return raised.value.message_dict


def test_create_validates_every_field_with_a_clear_message(settings):
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"]["SCHEDULES"] = {"Nightly": {"task": "demo.tasks.noop", "cron": "0 3 * * *"}}
    settings.TASKS = tasks
    assert "does not import" in errors_of(task="demo.tasks.nope")["task"][0]
    assert "not a task" in errors_of(task="demo.tasks.not_a_task")["task"][0]
    assert "outside every installed app" in errors_of(task="os.system")["task"][0]
    assert "not a cron expression" in errors_of(cron="61 * * * *")["cron"][0]
    assert "not a time zone" in errors_of(timezone="Mars/Olympus")["timezone"][0]
    assert "do not fit the task demo.tasks.add(a: int, b: int)" in errors_of(args=[1])["args"][0]
    assert "do not fit" in errors_of(args=[], kwargs={"c": 1})["args"][0]
    assert "must be a list" in errors_of(args={"a": 1})["args"][0]
    assert "'/'" in errors_of(name="a/b")["name"][0]
    assert errors_of(name="Nightly")["name"] == [
        "The settings schedule 'Nightly' has this name; choose another."
    ]
    assert "not a django_dbqueue task backend" in errors_of(backend="nope")["backend"][0]


def test_a_valid_schedule_is_saved_with_the_database_time_and_paused_and_resumed():
    before = read_utc("default")
    schedule = Schedule.objects.create(name="s", task="demo.tasks.add", cron="*/5 * * * *", args=[1, 2])
    assert as_aware(schedule.updated_at) >= before - timedelta(seconds=1)
    assert (schedule.enabled, schedule.catch_up, schedule.backend) == (True, "latest", "default")
    assert schedule.pause() is True and schedule.pause() is False
    assert Schedule.objects.get().enabled is False
    assert schedule.resume() is True and Schedule.objects.get().enabled is True
    schedule.args = ["x"]
    schedule.cron = "nonsense"
    with pytest.raises(ValidationError):
        schedule.save()
    assert Schedule.objects.get().cron == "*/5 * * * *"


def backdate(name: str, seconds: int) -> None:
    """As if the schedule had last changed ``seconds`` ago (update() skips save()'s stamp)."""
    then = as_stored(read_utc("default") - timedelta(seconds=seconds))
    Schedule.objects.filter(name=name).update(updated_at=then)


def scheduled(name: str) -> list:
    return sorted(ScheduledRun.objects.filter(schedule=name).values_list("scheduled_at", flat=True))


def test_the_scheduler_picks_up_additions_changes_pauses_and_removals_at_its_next_tick():
    scheduler = Scheduler(task_backends["default"])
    assert scheduler.tick() > 0
    row = Schedule.objects.create(name="s", task="demo.tasks.add", cron="* * * * * *", args=[1, 2])
    backdate("s", 3)  # a change three seconds ago: its seconds since then are due
    assert scheduler.tick() <= 1.0
    runs = scheduled("s")
    assert 2 <= len(runs) <= 4 and Job.objects.filter(task_path="demo.tasks.add").count() == len(runs)
    assert all(b - a == timedelta(seconds=1) for a, b in zip(runs, runs[1:], strict=False))

    # A pause: nothing more, even for times the tick would otherwise owe.
    row.pause()
    backdate("s", 3)
    Schedule.objects.filter(name="s").update(enabled=False)
    scheduler.tick()
    assert scheduled("s") == runs

    # A resume does not run the paused times: it starts from its own moment.
    # Two whole seconds paused, which a resume must not run.
    wait_for(lambda: read_utc("default") > as_aware(runs[-1]) + timedelta(seconds=2.5), interval=0.05)
    row.resume()
    scheduler.tick()
    resumed = as_aware(row.updated_at)
    # Only a second boundary crossed between the resume and the tick may run.
    assert all(as_aware(run) > resumed for run in scheduled("s") if run not in runs)
    assert len(scheduled("s")) <= len(runs) + 1
    runs = scheduled("s")

    # A change of arguments applies to the runs after it.
    row.args = [10, 20]
    row.save()
    # Times count from the change (updated_at), which may be seconds after the
    # last run when the ticks above were slow: wait for a whole second past it.
    changed = as_aware(row.updated_at).replace(microsecond=0)
    wait_for(lambda: read_utc("default") > changed + timedelta(seconds=1), interval=0.05)
    scheduler.tick()
    new = [run for run in scheduled("s") if run not in runs]
    assert new and {tuple(j.args) for j in Job.objects.filter(run_after__in=new)} == {(10, 20)}

    # A removal: the next tick no longer sees it.
    count = len(scheduled("s"))
    row.delete()
    Schedule.objects.create(name="other", task="demo.tasks.noop", cron="0 0 1 1 *")
    scheduler.tick()
    assert len(scheduled("s")) == count


def test_a_row_written_by_sql_that_cannot_run_is_logged_once_and_skipped(caplog):
    good = Schedule.objects.create(name="good", task="demo.tasks.noop", cron="* * * * * *")
    Schedule.objects.bulk_create(  # bulk_create skips save()'s validation, as SQL would
        [
            Schedule(name="gone", task="demo.tasks.removed", cron="* * * * * *"),
            Schedule(name="garbled", task="demo.tasks.noop", cron="every second"),
            Schedule(name="wrong-args", task="demo.tasks.add", cron="* * * * * *", args=[1]),
        ]
    )
    for name in ("good", "gone", "garbled", "wrong-args"):
        backdate(name, 2)
    scheduler = Scheduler(task_backends["default"])
    with caplog.at_level(logging.ERROR, logger="django_dbqueue"):
        scheduler.tick()
        scheduler.tick()
    logged = sorted(r.getMessage().split("'")[1] for r in caplog.records)
    assert logged == ["garbled", "gone", "wrong-args"], "each once, however many ticks"
    assert set(ScheduledRun.objects.values_list("schedule", flat=True)) == {good.name}
    assert "does not import" in Schedule.objects.get(name="gone").problem()
    assert Schedule.objects.get(name="good").problem() is None


def test_names_that_differ_only_by_accents_or_case_are_schedules_of_their_own(settings):
    """A settings schedule "report" and stored ones "rèport" and "Report":
    on MySQL/MariaDB the runs' key compared by the table's collation (the
    test database's is utf8mb4_unicode_ci, which ignores both), so only one
    of them ran each second, and nothing said so. Names compare byte for
    byte: each runs every second, with runs of its own."""
    tasks = copy.deepcopy(settings.TASKS)
    every_second = {"task": "demo.tasks.add", "cron": "* * * * * *", "args": [1, 1]}
    tasks["default"]["OPTIONS"]["SCHEDULES"] = {"report": every_second}
    settings.TASKS = tasks
    backend = task_backends["default"]
    assert not [m for m in backend.check() if m.id.startswith("django_dbqueue.E")]
    for name, first in (("rèport", 2), ("Report", 3)):
        Schedule.objects.create(name=name, task="demo.tasks.add", cron="* * * * * *", args=[1, first])
        backdate(name, 3)
    scheduler = Scheduler(backend)
    scheduler.since = read_utc("default") - timedelta(seconds=3)
    scheduler.tick()
    wait_for(lambda: read_utc("default") > scheduler.since + timedelta(seconds=5), interval=0.05)
    scheduler.tick()
    runs = {name: scheduled(name) for name in ("report", "rèport", "Report")}
    assert all(len(times) >= 2 for times in runs.values()), runs
    assert runs["report"] == runs["rèport"] == runs["Report"], "the same seconds, each its own run"
    made = Job.objects.filter(task_path="demo.tasks.add")
    assert sorted({tuple(args) for args in made.values_list("args", flat=True)}) == [(1, 1), (1, 2), (1, 3)]
    assert made.count() == 3 * len(runs["report"])
