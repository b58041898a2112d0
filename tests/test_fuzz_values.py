"""No value a setting, a task option or a call can give stops the queue
(issue 29): every numeric and duration option, and every task option and
per-call value, with the extremes (0, negative, NaN, infinities, 1e308, a
time past the year 9999, an integer of 5,001 digits, wrong types). Each is
refused, by ``check`` (E003, a message naming the option and the value) or
at the write (``InvalidTask`` naming it), and nothing is written. What a
producer writes by SQL is fuzzed through real workers in
test_fuzz_rows.py. docs/security.md, "Values that cannot stop the queue",
says what was fuzzed."""

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.management import CommandError, call_command

from demo.tasks import add
from django_dbqueue import task
from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.exceptions import InvalidTaskArguments
from django_dbqueue.limits import MAX_SECONDS
from django_dbqueue.models import Job
from django_dbqueue.shown import shown
from django_dbqueue.tasks_api import InvalidTask

HUGE = 10**5000
# Each extreme with the pytest id it is known by.
EXTREMES = {
    "zero": 0,
    "negative": -1,
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "1e308": 1e308,
    "5001-digits": HUGE,
    "str": "1",
    "list": [1],
    "none": None,
    "bool": True,
}
SECONDS = [
    "LEASE_SECONDS",
    "BATCH_HOLD_SECONDS",
    "RETRY_BACKOFF_BASE",
    "RETRY_BACKOFF_MAX",
    "POLL_INTERVAL_MIN",
    "POLL_INTERVAL_MAX",
    "STATUS_INTERVAL",
    "JOB_TIMEOUT",
    "STOP_TIMEOUT",
    "CANCEL_GRACE_SECONDS",
    "CONTROL_INTERVAL",
    "RECONNECT_BACKOFF_MAX",
]
WHOLE = {
    "BATCH_SIZE": 1000,
    "MAX_ATTEMPTS": 2**31 - 1,
    "MAX_ARGUMENTS_BYTES": 2**30,
    "MAX_RETURN_BYTES": 2**30,
}
# The values an option takes although they are extremes: no limit, or at once.
TAKEN = {("JOB_TIMEOUT", "none"), ("STOP_TIMEOUT", "none"), ("STOP_TIMEOUT", "zero")}


def expected(name: str, value: object) -> str:
    """The E003 message for ``value`` of the numeric option ``name``."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 < value < math.inf:
        what = "zero or a positive number" if name == "STOP_TIMEOUT" else "a positive number"
        return f"OPTIONS {name} must be {what}, not {shown(value)}."
    if name in WHOLE:
        if value != int(value):
            return f"OPTIONS {name} must be a whole number, not {shown(value)}."
        return f"OPTIONS {name} must be at most {WHOLE[name]:,}, not {shown(value)}."
    least = "1" if name == "LEASE_SECONDS" else "0.001"
    return f"OPTIONS {name} must be from {least} to 31,622,400 seconds (366 days), not {shown(value)}."


def problems(options: dict) -> list[tuple[str, str]]:
    return [(e.id, e.msg) for e in DatabaseBackend("fuzz", {"OPTIONS": options}).check()]


@pytest.mark.parametrize("extreme", [*EXTREMES, "past-9999", "over-the-top"])
@pytest.mark.parametrize("name", [*SECONDS, *WHOLE])
def test_each_numeric_option_refuses_each_extreme_naming_it(name, extreme):
    if extreme == "past-9999":  # 8,000 years: now + that is no date
        value: object = 8000 * 366 * 86400
    elif extreme == "over-the-top":
        value = WHOLE.get(name, MAX_SECONDS) + 1
    else:
        value = EXTREMES[extreme]
    if (name, extreme) in TAKEN:
        assert problems({name: value}) == []
        return
    assert problems({name: value}) == [("django_dbqueue.E003", expected(name, value))]


def test_each_numeric_option_takes_its_bounds():
    bounds = {name: (0.001, MAX_SECONDS) for name in SECONDS} | {
        name: (1, most) for name, most in WHOLE.items()
    }
    bounds["LEASE_SECONDS"] = (1, MAX_SECONDS)
    for name, (least, most) in bounds.items():
        # POLL_INTERVAL_MIN may not exceed POLL_INTERVAL_MAX (2 s by default), nor the other way round.
        beside = {"POLL_INTERVAL_MIN": least, "POLL_INTERVAL_MAX": most} if name.startswith("POLL") else {}
        assert problems({name: least, **beside}) == problems({name: most, **beside}) == [], name
    assert problems({"LEASE_SECONDS": 0.5}) == [("django_dbqueue.E003", expected("LEASE_SECONDS", 0.5))]


@pytest.mark.parametrize("extreme", list(EXTREMES))
def test_retention_weights_and_rate_limits_refuse_each_extreme_naming_it(extreme):
    value = EXTREMES[extreme]
    checked = {
        "RETENTION": {"FAILED": value},
        "FAIRNESS_WEIGHTS": {"vip": value},
        "RATE_LIMITS": {"queue:email": value},
    }
    for name, entry in checked.items():
        [(code, message)] = problems({name: entry})
        assert code == "django_dbqueue.E003"
        assert message.startswith(f"OPTIONS {name}[") and f"not {shown(value)}" in message, message


def test_retention_of_more_than_a_century_is_refused():
    assert problems({"RETENTION": {"FAILED": 36_501}}) == [
        (
            "django_dbqueue.E003",
            "OPTIONS RETENTION['FAILED'] must be at most 36,500 days (a century), not 36501; leave the "
            "outcome out to keep its jobs for ever.",
        )
    ]


@pytest.mark.parametrize(
    "extreme", [e for e in EXTREMES if e not in ("zero", "negative", "str", "none", "bool")]
)
def test_schedule_arguments_the_database_cannot_keep_are_refused_by_check(extreme):
    """NaN and infinities passed the check and failed every run; an
    integer of 5,001 digits crashed it."""
    value = EXTREMES[extreme]
    schedules = {"s": {"task": "demo.tasks.add", "cron": "* * * * *", "args": [value, 1]}}
    found = problems({"SCHEDULES": schedules})
    if extreme in ("1e308", "list"):  # JSON the database keeps: the task decides what it takes
        assert found == []
        return
    [(code, message)] = found
    assert code == "django_dbqueue.E003"
    assert message.startswith("OPTIONS SCHEDULES['s']: 'args'"), message


@pytest.mark.parametrize("extreme", list(EXTREMES))
def test_a_schedules_cron_time_zone_and_policy_refuse_each_extreme(extreme):
    value = EXTREMES[extreme]
    for key in ("cron", "timezone", "catch_up"):
        spec = {"task": "demo.tasks.add", "cron": "* * * * *", key: value}
        [(code, message)] = problems({"SCHEDULES": {"s": spec}})
        assert code == "django_dbqueue.E003" and message.startswith("OPTIONS SCHEDULES['s']"), message


@pytest.mark.django_db
@pytest.mark.parametrize("extreme", [*EXTREMES, "over-the-top"])
@pytest.mark.parametrize("option", ["max_attempts", "timeout", "concurrency_limit", "priority", "rate_limit"])
def test_each_task_option_refuses_each_extreme_at_definition_and_for_one_call(option, extreme):
    value = 2**31 if extreme == "over-the-top" else EXTREMES[extreme]
    if option == "timeout" and extreme == "over-the-top":
        value = MAX_SECONDS + 1
    if value is None or (option == "priority" and extreme in ("zero", "negative")):
        return  # the default, or a priority in range
    extra = {"concurrency_key": "k"} if option == "concurrency_limit" else {}

    def f(a: int, b: int) -> int:
        return a + b

    f.__module__, f.__qualname__ = add.func.__module__, "fuzzed"
    with pytest.raises(InvalidTask) as defined:
        task(**{option: value}, **extra)(f)
    if option in ("priority", "concurrency_limit", "rate_limit"):
        with pytest.raises(InvalidTask) as per_call:
            add.using(**{option: value}, **extra).enqueue(1, 2)
        assert shown(value) in str(per_call.value) or option == "priority", str(per_call.value)
    assert option in str(defined.value)
    assert shown(value) in str(defined.value) or option == "priority", str(defined.value)
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("extreme", list(EXTREMES))
@pytest.mark.parametrize(
    "option", ["unique_key", "concurrency_key", "fairness_key", "rate_key", "queue_name"]
)
def test_each_key_refuses_each_extreme_at_enqueue(option, extreme):
    value = EXTREMES[extreme]
    if value is None or isinstance(value, str):
        return  # no key, or a key
    extra = {"concurrency_limit": 1} if option == "concurrency_key" else {}
    extra |= {"rate_limit": "1/s"} if option == "rate_key" else {}
    with pytest.raises(InvalidTask) as refused:
        add.using(**{option: value}, **extra).enqueue(1, 2)
    assert shown(value) in str(refused.value), str(refused.value)
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "moment",
    [
        datetime.max.replace(tzinfo=UTC),
        datetime.min.replace(tzinfo=UTC),
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1, 1, 1, 2, tzinfo=timezone(timedelta(hours=5))),
    ],
    ids=["max", "min", "past-9999-in-utc", "before-1-in-utc"],
)
def test_a_run_after_past_the_years_every_database_holds_is_refused_at_the_call(moment, settings):
    """It was stored (and read back by no worker of a time zone it did not
    fit), or failed in the driver's conversion with no word of which value."""
    with pytest.raises(InvalidTask) as refused:
        add.using(run_after=moment if settings.USE_TZ else moment.replace(tzinfo=None)).enqueue(1, 2)
    assert str(refused.value).startswith(
        "run_after must be between 0001-01-02 and 9999-12-30 (UTC), a day inside the years every "
        "database holds, not "
    )
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("extreme", ["nan", "inf", "-inf", "5001-digits"])
def test_arguments_python_cannot_read_back_are_refused_at_enqueue(extreme):
    with pytest.raises(InvalidTaskArguments):
        add.enqueue(EXTREMES[extreme], 1)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("command", "argv", "message"),
    [
        ("runqueue", ["--stop-timeout", "1e308"], "must be a number of seconds from 0 to 31,622,400"),
        ("prunejobs", ["--older-than", "1e308"], "'1e308' must be at most 36,500"),
        ("queuestats", ["--minutes", "1e308"], "'1e308' must be at most 527,040"),
        ("queuestats", ["--watch", "inf"], "'inf' must be a number above zero"),
        ("queuehealth", ["--max-lag", "1e308"], "'1e308' must be at most 31,622,400"),
    ],
)
def test_command_line_numbers_past_their_bounds_are_refused(command, argv, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace("+", r"\+")):
        call_command(command, *argv)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("end", ["least", "most"])
def test_a_worker_runs_with_every_option_at_its_bounds(runqueue, end):
    """What the check lets through cannot stop a worker either: every
    option the test project takes from the environment at its least, then
    at its most, in one `runqueue --burst` each."""
    from demo.tasks import always_fails, per_tenant

    most = end == "most"
    seconds = str(MAX_SECONDS) if most else "0.001"
    env = {
        "DBQUEUE_LEASE": str(MAX_SECONDS) if most else "1",
        "DBQUEUE_BACKOFF": seconds,
        "DBQUEUE_STATUS_INTERVAL": seconds,
        "DBQUEUE_BATCH_HOLD": seconds,
        "DBQUEUE_STOP_TIMEOUT": seconds,
        "DBQUEUE_CANCEL_GRACE": seconds,
        "DBQUEUE_CONTROL_INTERVAL": seconds,
        "DBQUEUE_RETENTION": '{"SUCCESSFUL": 36500, "FAILED": 36500}' if most else '{"CANCELLED": 0.000001}',
        "DBQUEUE_FAIRNESS_WEIGHTS": '{"tenant:vip": 1000000, "tenant:low": 0.000001}',
    }
    plain = [add.enqueue(n, 1) for n in range(3)]
    fair = [per_tenant.enqueue(tenant, n) for tenant in ("vip", "low") for n in range(2)]
    failing = always_fails.enqueue("bounds")
    worker = runqueue("--burst", "--processes", "1", **env)
    assert worker.wait(60) == 0, worker.output()[-3000:]
    assert ", 0 worker restarts." in worker.output()
    assert {Job.objects.get(pk=r.id).status for r in [*plain, *fair]} == {"SUCCESSFUL"}
    # Retried after a backoff of a millisecond at least, or of up to a year at most.
    assert Job.objects.get(pk=failing.id).status in ("READY", "FAILED")


@pytest.mark.parametrize(
    "option", ["unique_key", "concurrency_key", "fairness_key", "rate_limit", "metadata"]
)
def test_an_option_given_as_none_for_one_call_keeps_the_tasks_own(option):
    """As docs/tasks.md says; it raised Django's TypeError for an unknown argument."""
    assert getattr(add.using(**{option: None}), option) == getattr(add, option)
