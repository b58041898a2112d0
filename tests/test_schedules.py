"""Recurring jobs: parsing, the catch-up policies, DST, exactly-once enqueue."""

import copy
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.clock import as_stored
from django_dbqueue.models import Job, ScheduledRun
from django_dbqueue.schedules.runs import enqueue_run
from django_dbqueue.schedules.spec import Schedule, parse_schedules
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.worker.housekeeping.scheduler import Scheduler
from tests.conftest import needs_row_locks
from tests.threads import together

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+


def schedule(cron: str = "*/10 * * * *", catch_up: str = "latest", tz: str = "UTC", **spec) -> Schedule:
    return parse_schedules(
        {"s": {"task": "demo.tasks.noop", "cron": cron, "timezone": tz, "catch_up": catch_up, **spec}}
    )[0]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def stored(text: str) -> datetime:
    """``at(text)`` as a row holds it (naive local time with USE_TZ = False)."""
    return as_stored(at(text))


def test_on_time_runs_are_enqueued_whatever_the_policy():
    for policy in ("latest", "all", "skip"):
        due = schedule(catch_up=policy).runs_due(at("2026-01-01 10:00"), at("2026-01-01 10:20:30"))
        # 10:10 is 10.5 minutes late: missed. 10:20 is on time.
        assert due[-1] == at("2026-01-01 10:20"), policy


def test_catch_up_policies_after_downtime():
    after, now = at("2026-01-01 10:00"), at("2026-01-01 10:45:30")
    assert schedule(catch_up="all").runs_due(after, now) == [
        at(f"2026-01-01 10:{m}") for m in (10, 20, 30, 40)
    ]
    assert schedule(catch_up="latest").runs_due(after, now) == [at("2026-01-01 10:40")]
    assert schedule(catch_up="skip").runs_due(after, now) == []
    # An on-time run stands for the missed ones under "latest".
    assert schedule(catch_up="latest").runs_due(after, at("2026-01-01 10:40:30")) == [at("2026-01-01 10:40")]


def test_a_clock_that_went_back_repeats_no_run():
    # The last run is later than the database's now: nothing is due until then.
    assert schedule(cron="* * * * * *").runs_due(at("2026-01-01 10:00:05"), at("2026-01-01 10:00:01")) == []


@pytest.mark.parametrize(
    ("day", "expected_utc"),
    [
        # Riga springs forward at 03:00 EET to 04:00 EEST: 03:30 does not exist
        # that night, and the run happens at once when the clock jumps (04:00 local).
        ("2026-03-29", "2026-03-29 01:00"),
        # It falls back at 04:00 EEST to 03:00 EET: 03:30 happens twice, the run once.
        ("2026-10-25", "2026-10-25 00:30"),
    ],
    ids=["spring-forward", "fall-back"],
)
def test_a_daily_run_in_a_dst_night_happens_exactly_once(day, expected_utc):
    daily = schedule(cron="30 3 * * *", tz="Europe/Riga", catch_up="all")
    start = datetime.fromisoformat(f"{day} 00:00").replace(tzinfo=daily.tz)
    runs = daily.runs_due(
        start.astimezone(UTC), (start + timedelta(days=1)).astimezone(UTC) + timedelta(minutes=2)
    )
    assert runs == [at(expected_utc)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"cron": "61 * * * *"}, r"'61 \* \* \* \*' is not a cron expression cronsim accepts"),
        ({"cron": "* * *"}, "is not a cron expression"),
        ({"timezone": "Mars/Olympus"}, "'Mars/Olympus' is not a time zone this system knows"),
        ({"catch_up": "some"}, r"\['catch_up'\] must be one of latest, all, skip"),
        ({"args": "x"}, "'args' must be a list"),
        ({"every": 5}, "unknown keys every"),
        ({"task": ""}, r"\['task'\] must be a non-empty string"),
    ],
)
def test_bad_schedules_are_refused_with_a_clear_error(spec, message):
    raw = {"s": {"task": "demo.tasks.noop", "cron": "* * * * *", **spec}}
    with pytest.raises(ImproperlyConfigured, match=message):
        parse_schedules(raw)


def test_check_reports_a_bad_schedule_as_E003_and_a_task_that_does_not_load_as_E005():
    bad = DatabaseBackend(
        "x", {"QUEUES": ["default"], "OPTIONS": {"SCHEDULES": {"s": {"task": "t", "cron": "nope"}}}}
    )
    [error] = [m for m in bad.check() if m.id.startswith("django_dbqueue")]
    assert error.id == "django_dbqueue.E003" and "'nope' is not a cron expression" in error.msg
    missing = DatabaseBackend(
        "x",
        {
            "QUEUES": ["default"],
            "OPTIONS": {"SCHEDULES": {"s": {"task": "demo.tasks.nothing", "cron": "* * * * *"}}},
        },
    )
    [error] = [m for m in missing.check() if m.id.startswith("django_dbqueue")]
    assert error.id == "django_dbqueue.E005"
    assert error.msg.startswith(
        "The schedule 's' cannot enqueue its task: The task path 'demo.tasks.nothing'"
    )
    wrong_args = DatabaseBackend(
        "x",
        {
            "QUEUES": ["default"],
            "OPTIONS": {"SCHEDULES": {"s": {"task": "demo.tasks.add", "cron": "* * * * *"}}},
        },
    )
    [error] = [m for m in wrong_args.check() if m.id.startswith("django_dbqueue")]
    assert error.id == "django_dbqueue.E005" and "The arguments do not fit" in error.msg


@pytest.mark.django_db
def test_a_run_is_enqueued_once_due_at_its_time():
    backend = task_backends["default"]
    every = schedule(args=[], kwargs={})
    run = at("2026-01-01 10:10")
    job = enqueue_run(backend, every, run)
    assert enqueue_run(backend, every, run) is None
    assert (job.run_after, job.task_path, job.status) == (as_stored(run), "demo.tasks.noop", "READY")
    assert list(ScheduledRun.objects.values_list("schedule", "scheduled_at", "job_id")) == [
        ("s", as_stored(run), job.pk)
    ]
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_the_scheduler_starts_a_new_schedule_from_its_first_tick_and_follows_its_last_run(settings):
    backend = DatabaseBackend(
        "default",
        {
            "QUEUES": ["default"],
            "OPTIONS": {"SCHEDULES": {"s": {"task": "demo.tasks.noop", "cron": "* * * * * *"}}},
        },
    )
    scheduler = Scheduler(backend)
    assert scheduler.tick() <= 1.0
    assert Job.objects.count() == 0, "a new schedule's earlier seconds were not missed"
    last = stored("2020-01-01 00:00")
    ScheduledRun.objects.create(schedule="s", scheduled_at=last)
    scheduler.tick()
    # Years behind under "latest": the missed seconds collapse into the
    # on-time ones, the last minute's, each once.
    runs = sorted(ScheduledRun.objects.exclude(scheduled_at=last).values_list("scheduled_at", flat=True))
    assert 59 <= len(runs) <= 61 and Job.objects.count() == len(runs)
    assert all(b - a == timedelta(seconds=1) for a, b in zip(runs, runs[1:], strict=False)), (
        "no second skipped"
    )


@needs_row_locks
@pytest.mark.django_db(transaction=True)
def test_processes_racing_for_one_run_enqueue_it_once():
    backend, every, threads = task_backends["default"], schedule(), 8
    runs = [at("2026-01-01 10:00") + timedelta(minutes=10 * i) for i in range(20)]

    def tick(_: int) -> list[datetime]:
        return [run for run in runs if enqueue_run(backend, every, run) is not None]

    won = [run for runs_won in together(tick, threads, timeout=60) for run in runs_won]
    assert sorted(won) == runs
    assert sorted(Job.objects.values_list("run_after", flat=True)) == [as_stored(run) for run in runs]


@pytest.mark.django_db
def test_a_run_of_a_task_whose_unique_key_is_held_waits_for_the_key():
    backend = task_backends["default"]
    single = parse_schedules({"one": {"task": "demo.tasks.singleton", "cron": "* * * * *"}})[0]
    first = enqueue_run(backend, single, at("2026-01-01 10:00"))
    assert enqueue_run(backend, single, at("2026-01-01 10:01")) is None
    assert not ScheduledRun.objects.filter(scheduled_at=stored("2026-01-01 10:01")).exists(), "still due"
    Job.objects.filter(pk=first.pk).cancel()
    assert enqueue_run(backend, single, at("2026-01-01 10:01")) is not None


@pytest.mark.django_db
def test_last_runs_are_each_schedules_latest_scheduled_run():
    from django_dbqueue.schedules.runs import last_runs

    for name, minute in (("a", 1), ("a", 3), ("b", 2)):
        ScheduledRun.objects.create(schedule=name, scheduled_at=stored(f"2026-01-01 10:0{minute}"))
    ScheduledRun.objects.create(schedule="a", scheduled_at=stored("2026-01-01 10:09"), manual=True)
    assert last_runs("default", ["a", "b", "c"]) == {"a": at("2026-01-01 10:03"), "b": at("2026-01-01 10:02")}


# -- the admin's "Run now" on a schedule the checks would refuse ----------------

SCHEDULES_PAGE = "/admin/django_dbqueue/scheduledrun/"


@pytest.fixture
def runner(client):
    from tests.admin_helpers import staff

    client.force_login(staff("runner", "view_job", "run_schedule_now"))
    return client


def with_schedules(settings, schedules: dict) -> None:
    # The web process may run without the checks (E003, E005) that refuse these.
    default = settings.TASKS["default"]
    settings.TASKS = {"default": {**default, "OPTIONS": {**default["OPTIONS"], "SCHEDULES": schedules}}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (
            {"task": "tests.allowed_tasks.double", "args": [2]},
            "The task path 'tests.allowed_tasks.double' is outside every installed app and OPTIONS "
            "ALLOWED_TASK_MODULES, so it is not imported or run.",
        ),
        (
            {"task": "demo.tasks.add", "args": [1]},
            "The arguments do not fit the task demo.tasks.add(a: int, b: int): missing a required "
            "argument: 'b'.",
        ),
    ],
)
def test_run_now_of_a_schedule_that_cannot_enqueue_says_why(runner, settings, spec, reason):
    with_schedules(settings, {"odd": {"cron": "0 4 * * *", **spec}})

    page = runner.post(SCHEDULES_PAGE + "run/default/odd/", follow=True)

    assert page.status_code == 200
    assert [str(m) for m in page.context["messages"]] == [
        f"Schedule 'odd' was not run: {reason} Fix it in TASKS['default']['OPTIONS']['SCHEDULES']; "
        "manage.py check reports it too."
    ]
    assert Job.objects.count() == 0 and ScheduledRun.objects.count() == 0


@pytest.mark.django_db
def test_a_schedule_name_with_a_slash_does_not_break_the_schedules_page(runner, settings):
    with_schedules(settings, {"reports/daily": {"task": "demo.tasks.noop", "cron": "0 4 * * *"}})

    page = runner.get(SCHEDULES_PAGE)

    assert page.status_code == 200
    [error] = task_backends["default"].check()
    assert error.id == "django_dbqueue.E003" and error.msg.startswith("OPTIONS SCHEDULES['reports/daily']: ")


def schedule_errors(settings, backends: dict) -> dict[str, list[str]]:
    """The E005 messages of each backend in ``backends`` (its OPTIONS), all
    configured at once beside the test project's own."""
    tasks = {"default": copy.deepcopy(settings.TASKS["default"])}
    for alias, options in backends.items():
        tasks[alias] = {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "OPTIONS": options}
    settings.TASKS = tasks
    return {
        alias: [m.msg for m in task_backends[alias].check() if m.id == "django_dbqueue.E005"]
        for alias in backends
    }


def test_two_backends_on_one_database_may_not_share_a_schedule_name(settings):
    nightly = {"task": "demo.tasks.noop", "cron": "0 3 * * *"}
    errors = schedule_errors(
        settings, {"a": {"SCHEDULES": {"Nightly": nightly}}, "b": {"SCHEDULES": {"Nightly": nightly}}}
    )
    assert errors == {
        "a": [
            "The schedule 'Nightly' has the name of another schedule of the backend 'b', on the same "
            "database. Runs are recorded by schedule name, so the two would share them, and each "
            "time only one of them would enqueue."
        ],
        "b": [errors["a"][0].replace("'b'", "'a'")],
    }
    # Names compare byte for byte, as the runs' key does: other capitals or
    # accents are other schedules, in one backend or two.
    other = {
        "a": {"SCHEDULES": {"Nightly": nightly, "NIGHTLY": nightly}},
        "b": {"SCHEDULES": {"nîghtly": nightly}},
    }
    assert schedule_errors(settings, other) == {"a": [], "b": []}


def test_backends_on_different_databases_may_share_a_schedule_name(settings):
    nightly = {"task": "demo.tasks.noop", "cron": "0 3 * * *"}
    elsewhere = {"DATABASE": "elsewhere", "SCHEDULES": {"Nightly": nightly}}
    errors = schedule_errors(settings, {"a": {"SCHEDULES": {"Nightly": nightly}}, "b": elsewhere})
    assert errors == {"a": [], "b": []}


@pytest.mark.django_db
def test_a_run_on_time_is_logged_at_debug_and_a_catch_up_at_info(caplog):
    backend = DatabaseBackend(
        "default",
        {
            "QUEUES": ["default"],
            "OPTIONS": {"SCHEDULES": {"s": {"task": "demo.tasks.noop", "cron": "*/15 * * * * *"}}},
        },
    )
    scheduler = Scheduler(backend)
    caplog.set_level("DEBUG", logger="django_dbqueue")
    now = datetime.now(UTC)
    latest = now.replace(second=now.second // 15 * 15, microsecond=0)  # the run due now, and only it
    ScheduledRun.objects.create(schedule="s", scheduled_at=as_stored(latest - timedelta(seconds=15)))
    scheduler.tick()
    [run] = ScheduledRun.objects.filter(job_id__isnull=False)
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    # The time as the scheduler holds it (UTC), whatever USE_TZ reads back.
    assert [level for level, _ in said] == ["DEBUG"], said
    assert said[0][1].startswith("Schedule 's': enqueued its run at ")
    assert said[0][1].endswith(f" as job {run.job_id}."), said

    caplog.clear()
    ScheduledRun.objects.all().delete()
    ScheduledRun.objects.create(schedule="s", scheduled_at=stored("2020-01-01 00:00"))
    scheduler.tick()  # years behind, under "latest": the last minute's runs at once
    infos = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert len(infos) == 1 and infos[0].startswith("Schedule 's': enqueued "), infos
