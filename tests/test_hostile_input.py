"""Hostile and malformed input: each is refused with a message that names
the problem, at enqueue, at run time, or on the command line."""

import datetime
import json
import os
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, IntegrityError, OperationalError, connection, transaction
from django.test import override_settings

from demo import tasks
from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.clock import local_offset, read_database_now
from django_dbqueue.db import Outage
from django_dbqueue.enqueue.loading import load_task
from django_dbqueue.exceptions import InvalidTaskArguments
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import InvalidTask, task_backends
from django_dbqueue.transitions.outcomes import retry_delay
from django_dbqueue.worker.process.execution import JobRunner

pytestmark = pytest.mark.django_db

BAD_ARGUMENTS = [
    ((object(),), {}, r"args\[0\] is a builtins.object, which cannot be stored as JSON"),
    ((), {"when": datetime.date(2026, 1, 1)}, r"kwargs\['when'\] is a datetime.date"),
    (([b"bytes"],), {}, r"args\[0\]\[0\] is a builtins.bytes"),
    (({1: "int key"},), {}, r"args\[0\] has the key 1 of type int; JSON object keys must be strings"),
    ((float("nan"),), {}, r"args\[0\] is the float nan"),
    (({"a", "set"},), {}, r"args\[0\] is a builtins.set"),
]


@pytest.mark.parametrize(("args", "kwargs", "message"), BAD_ARGUMENTS)
def test_arguments_that_are_not_json_are_refused_by_name(args, kwargs, message):
    with pytest.raises(InvalidTaskArguments, match=message):
        tasks.add.enqueue(*args, **kwargs)
    assert not Job.objects.exists()


def test_arguments_over_the_limit_are_refused_with_their_size():
    backend = task_backends["default"]
    limit = backend.config.MAX_ARGUMENTS_BYTES
    size = len(json.dumps(["x" * limit])) + len("{}")
    with pytest.raises(
        InvalidTaskArguments, match=rf"take {size} bytes as compact JSON, more than the limit of {limit}"
    ):
        tasks.record.enqueue("x" * limit)
    assert not Job.objects.exists()


def test_the_default_argument_limit_stays_well_under_max_allowed_packet():
    if connection.vendor != "mysql":
        pytest.skip("max_allowed_packet is a MySQL/MariaDB setting")
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        (packet,) = cursor.fetchone()
    assert task_backends["default"].config.MAX_ARGUMENTS_BYTES * 4 <= packet


def test_a_lower_configured_limit_applies():
    backend = DatabaseBackend("small", {"QUEUES": ["default"], "OPTIONS": {"MAX_ARGUMENTS_BYTES": 50}})
    with pytest.raises(InvalidTaskArguments, match="more than the limit of 50"):
        backend.enqueue(tasks.record, ["y" * 60], {})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"queue_name": "nope"},
            r"The queue 'nope' is not one of this backend's QUEUES \(default, email, slow\)",
        ),
        ({"queue_name": ""}, r"The queue name '' is not valid"),
        ({"queue_name": "q" * 65}, "at most 64 characters"),
        ({"priority": 101}, "priority must be a whole number between -100 and 100"),
        ({"priority": -101}, "priority must be a whole number between -100 and 100"),
        ({"priority": "5"}, r"priority must be a whole number between -100 and 100, not '5'"),
        ({"priority": 1.5}, r"not 1.5"),
        ({"run_after": "tomorrow"}, "run_after must be a datetime, not 'tomorrow'"),
    ],
)
def test_invalid_queue_priority_and_run_after_are_refused(changes, message):
    with pytest.raises(InvalidTask, match=message):
        tasks.add.using(**changes).enqueue(1, 2)
    assert not Job.objects.exists()


def test_a_naive_run_after_is_refused_only_where_times_are_aware(settings):
    """Django's rule: with USE_TZ = True a naive run_after is refused; with
    USE_TZ = False (the naive-time run) naive is the project's own form."""
    naive = datetime.datetime(2030, 1, 1)
    if settings.USE_TZ:
        with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
            tasks.add.using(run_after=naive).enqueue(1, 2)
        assert not Job.objects.exists()
    else:
        result = tasks.add.using(run_after=naive).enqueue(1, 2)
        assert Job.objects.get(pk=result.id).run_after == naive


SECONDS = "a number of seconds from 0.001 to 31,622,400 (366 days)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be a whole number from 1 to 2,147,483,647, not 0"),
        ({"max_attempts": True}, "max_attempts must be a whole number from 1 to 2,147,483,647, not True"),
        ({"timeout": 0}, f"timeout must be {SECONDS}, or None, not 0"),
        ({"timeout": "30"}, f"timeout must be {SECONDS}, or None, not '30'"),
    ],
)
def test_invalid_task_options_are_refused_when_the_task_is_defined(options, message):
    from django_dbqueue.tasks_api import task

    with pytest.raises(InvalidTask, match=re.escape(message)):
        task(**options)(tasks.add.func)


def test_a_task_outside_installed_apps_is_refused_at_enqueue():
    from django_dbqueue.tasks_api import task

    def outsider() -> None:
        return None

    outsider.__module__ = "tests.outsiders"
    outsider.__qualname__ = "outsider"
    with pytest.raises(
        InvalidTask, match="defined in tests.outsiders, which is not the module of an installed app"
    ):
        task(outsider)


def hand_written(task_path: str, **columns) -> Job:
    """A row as a plain SQL INSERT from another program would write it."""
    names = ["task_path", *columns]
    values = [task_path, *(v if name == "suspect" else json.dumps(v) for name, v in columns.items())]
    if connection.vendor == "sqlite" and local_offset():
        # SQLite's default times are UTC: with USE_TZ = False in another time
        # zone, an SQL producer gives run_after itself (docs/databases.md).
        names.append("run_after")
        values.append(read_database_now("default"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO django_dbqueue_job ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})",
            values,
        )
    return Job.objects.get(task_path=task_path)


def run_claimed(job: Job) -> Job:
    claimed = Job.objects.filter(pk=job.pk).claim("w1")
    assert [j.pk for j in claimed] == [job.pk]
    job = claimed[0]
    JobRunner(task_backends["default"], "w1").run(job, batched=False)
    job.refresh_from_db()
    return job


@pytest.mark.parametrize(
    ("task_path", "columns", "message"),
    [
        ("demo.nothing_here.task", {}, "The task path 'demo.nothing_here.task' does not import"),
        ("demo.tasks.not_a_task", {}, "names a function, not a task"),
        ("os.system", {"args": ["touch /tmp/dbqueue-pwned"]}, "outside every installed app"),
        ("subprocess.run", {"args": [["id"]]}, "outside every installed app"),
        (
            "demo.tasks.add",
            {"args": {"a": 1}},
            "args must be a JSON list and its kwargs a JSON object, not dict",
        ),
        ("demo.tasks.add", {"kwargs": [1, 2]}, "not list and list"),
        ("demo.tasks.add", {"args": [1, 2, 3]}, r"do not fit demo.tasks.add\(a: int, b: int\)"),
        ("demo.tasks.add", {"args": [1, 2], "errors": 5, "worker_ids": "x"}, None),
    ],
)
def test_a_row_written_by_hand_fails_clearly_or_runs(task_path, columns, message):
    job = run_claimed(hand_written(task_path, **columns))
    if message is None:  # junk in bookkeeping columns must not stop a valid call
        assert (job.status, job.return_value) == ("SUCCESSFUL", 3)
        return
    assert (job.status, job.attempts) == ("FAILED", 1)
    assert job.errors[-1]["exception_class_path"] == "django_dbqueue.exceptions.JobNotRunnable"
    assert message in job.errors[-1]["traceback"] or __import__("re").search(
        message, job.errors[-1]["traceback"]
    )
    assert not os.path.exists("/tmp/dbqueue-pwned")


NOT_DEPLOYED = "django_dbqueue.exceptions.TaskNotDeployed"


@pytest.mark.parametrize("suspect", [False, True])
def test_a_row_naming_a_task_its_module_lacks_goes_back_unspent_then_fails_naming_the_workers(suspect):
    """The module imports but does not define the name: a task not deployed
    on this worker yet (a rolling deploy), not a bad row. Given back READY,
    a little later, its attempt unspent; one entry of its errors counts the
    give-backs; it fails once the grace has passed since the first."""
    job = hand_written("demo.tasks.not_yet_here", suspect=suspect, attempts=1 if suspect else 0)
    before = read_database_now("default")

    job = run_claimed(job)

    assert (job.status, job.attempts, job.suspect) == ("READY", 1 if suspect else 0, suspect)
    # A suspect's claim records its start (its worker too), as for every suspect given back unrun.
    assert job.owner is None and job.finished_at is None and job.worker_ids == (["w1"] if suspect else [])
    assert 0.9 < (job.run_after - before).total_seconds() < 10, "due again a little later, not at once"
    [note] = job.errors
    assert (note["exception_class_path"], note["given_back"], note["workers"]) == (NOT_DEPLOYED, 1, ["w1"])
    said = "does not define the task 'demo.tasks.not_yet_here': its module demo.tasks imports, but has no"
    assert said in note["traceback"]

    Job.objects.filter(pk=job.pk).update(run_after=before)
    job = run_claimed(job)
    [note] = job.errors  # the same entry, counted on
    assert (job.status, job.attempts) == ("READY", 1 if suspect else 0)
    assert (note["given_back"], note["workers"]) == (2, ["w1"])

    # Past the grace (15 minutes by default) since the first give-back.
    note["since"] = (before - datetime.timedelta(minutes=16)).isoformat()
    note["workers"] = ["old-1:7:a", "old-2:8:b"]
    Job.objects.filter(pk=job.pk).update(run_after=before, errors=[note])
    job = run_claimed(job)
    assert (job.status, job.attempts) == ("FAILED", 1 if suspect else 0), "it never ran"
    [error] = job.errors
    assert error["exception_class_path"] == NOT_DEPLOYED
    assert "the workers that lacked it: old-1:7:a, old-2:8:b, w1." in error["traceback"]
    assert "UNDEPLOYED_TASK_GRACE_SECONDS (900s) ran out" in error["traceback"]


@pytest.mark.parametrize(
    ("args", "kwargs", "outcome"),
    [
        ([1, 2], {}, 3),
        ([1], {}, "missing a required argument: 'b'"),
        ([1], {"b": 2}, 3),
        ([1, 2], {"b": 2}, "multiple values for argument 'b'"),
        ([], {"a": 1, "c": 2}, "missing a required argument: 'b'"),
        ([], {"b": 1, "a": 2}, 3),
    ],
)
def test_each_shape_of_call_is_checked_against_the_signature(args, kwargs, outcome):
    # The worker checks a call's fit once per task and shape (how many
    # positional arguments, which keyword names): every shape gets its own answer.
    job = run_claimed(hand_written("demo.tasks.add", args=args, kwargs=kwargs))
    if isinstance(outcome, int):
        assert (job.status, job.return_value) == ("SUCCESSFUL", outcome)
        return
    assert job.status == "FAILED"
    assert job.errors[-1]["exception_class_path"] == "django_dbqueue.exceptions.JobNotRunnable"
    assert f"do not fit demo.tasks.add(a: int, b: int) -> int: {outcome}." in job.errors[-1]["traceback"]


def test_a_row_with_thousands_of_attempts_retries_after_at_most_the_longest_backoff():
    # 2 ** 5000 seconds would overflow a float: the backoff is capped first.
    job = hand_written("demo.tasks.always_fails", args=["again"], attempts=5000, max_attempts=10_000)
    job = run_claimed(job)
    assert (job.status, job.attempts) == ("READY", 5001)
    longest = datetime.timedelta(seconds=task_backends["default"].config.RETRY_BACKOFF_MAX)
    assert longest / 2 <= job.run_after - read_database_now("default") <= longest


def test_backoff_after_thousands_of_failures_stays_within_its_cap():
    """An outage of hours counts thousands of failed attempts to reconnect
    (the heartbeat's every few seconds): each still waits a bounded time."""
    outage = Outage("The test", 5.0)
    outage.failures = 5000
    assert 2.5 <= outage.lost(OperationalError(2003, "Can't connect")) <= 5.0
    assert retry_delay(5000, 2.0, 3600.0) <= datetime.timedelta(seconds=3600)


def test_a_suspect_row_with_junk_bookkeeping_is_still_claimed():
    job = hand_written("demo.tasks.add", args=[2, 2], worker_ids=None, errors={"x": 1}, suspect=True)
    job = run_claimed(job)
    assert (job.status, job.return_value, job.attempts) == ("SUCCESSFUL", 4, 1)


@pytest.mark.django_db(transaction=True)
def test_broken_json_in_a_row_is_refused_by_the_database():
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_dbqueue_job (task_path, args) VALUES (%s, %s)", ["demo.tasks.add", "[1, 2"]
        )
    assert not Job.objects.exists()


def test_load_task_refuses_modules_outside_apps_before_importing_them():
    with pytest.raises(LookupError, match="outside every installed app"):
        load_task("antigravity.fly")
    import sys

    assert "antigravity" not in sys.modules


def test_the_allow_list_admits_a_module_outside_installed_apps():
    assert load_task("tests.allowed_tasks.double", allowed=("tests.allowed_tasks",)).call(4) == 8
    with pytest.raises(LookupError, match="outside every installed app"):
        load_task("tests.allowed_tasks.double", allowed=())


@override_settings(
    TASKS={
        "default": {
            "BACKEND": "django_dbqueue.backend.DatabaseBackend",
            "OPTIONS": {"ALLOWED_TASK_MODULES": ["tests.allowed_tasks"]},
        }
    }
)
def test_allowed_task_modules_come_from_the_backend_options():
    assert load_task("tests.allowed_tasks.double").call(5) == 10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--processes", "0"], "--processes must be between 1 and 256, not 0"),
        (["--processes", "257"], "--processes must be between 1 and 256, not 257"),
        (["--processes", "many"], "argument --processes: invalid int value: 'many'"),
        (["--batch", "0"], "--batch must be between 1 and 1000, not 0"),
        (["--batch", "1001"], "--batch must be between 1 and 1000, not 1001"),
        (
            ["--stop-timeout", "-1"],
            "argument --stop-timeout: must be a number of seconds from 0 to 31,622,400 (366 days) or "
            "'none', not '-1'",
        ),
        (["--stop-timeout", "nan"], "argument --stop-timeout: must be a number of seconds"),
        (
            ["--queue", "nope"],
            "Unknown queue 'nope' for backend 'default'; its QUEUES are default, email, slow",
        ),
        (["--backend", "nope"], "No task backend 'nope' in settings.TASKS"),
    ],
)
def test_runqueue_refuses_options_out_of_range(argv, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("runqueue", *argv)


GRACE = "OPTIONS UNDEPLOYED_TASK_GRACE_SECONDS"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"BATCH_SIZE": 0}, "OPTIONS BATCH_SIZE must be a positive number, not 0"),
        # runqueue's own limit on a claim; above it, runqueue would refuse to start.
        ({"BATCH_SIZE": 1001}, "OPTIONS BATCH_SIZE must be at most 1,000, not 1001"),
        ({"JOB_TIMEOUT": -1}, "OPTIONS JOB_TIMEOUT must be a positive number, not -1"),
        ({"ALLOWED_TASK_MODULES": "demo"}, "OPTIONS ALLOWED_TASK_MODULES must be a list of module paths"),
        ({"ALLOWED_TASK_MODULES": ["os; rm"]}, "holds 'os; rm', which is not a module path"),
        ({"LEASE_SECONDS": float("inf")}, "OPTIONS LEASE_SECONDS must be a positive number, not inf"),
        ({"NO_SUCH": 1}, "Unknown django_dbqueue OPTIONS NO_SUCH"),
        ({"STOP_TIMEOUT": -1}, "OPTIONS STOP_TIMEOUT must be zero or a positive number, not -1"),
        ({"STOP_TIMEOUT": False}, "OPTIONS STOP_TIMEOUT must be zero or a positive number, not False"),
        ({"CANCEL_GRACE_SECONDS": 0}, "OPTIONS CANCEL_GRACE_SECONDS must be a positive number, not 0"),
        ({"CONTROL_INTERVAL": "1"}, "OPTIONS CONTROL_INTERVAL must be a positive number, not '1'"),
        *(
            ({"UNDEPLOYED_TASK_GRACE_SECONDS": bad}, f"{GRACE} must be zero or a positive number, not {said}")
            for bad, said in ((-1, "-1"), ("15m", "'15m'"), (float("nan"), "nan"), (float("inf"), "inf"))
        ),
        ({"UNDEPLOYED_TASK_GRACE_SECONDS": True}, f"{GRACE} must be zero or a positive number, not True"),
        ({"UNDEPLOYED_TASK_GRACE_SECONDS": None}, f"{GRACE} must be zero or a positive number, not None"),
    ],
)
def test_bad_options_are_reported_by_the_system_check(options, message):
    backend = DatabaseBackend("bad", {"OPTIONS": options})
    errors = backend.check()
    assert [e.id for e in errors] == ["django_dbqueue.E003"]
    assert message in errors[0].msg


def test_a_stop_timeout_of_zero_means_interrupt_at_once_and_none_means_never():
    assert DatabaseBackend("zero", {"OPTIONS": {"STOP_TIMEOUT": 0}}).config.STOP_TIMEOUT == 0.0
    assert DatabaseBackend("none", {"OPTIONS": {"STOP_TIMEOUT": None}}).config.STOP_TIMEOUT is None
    # A task missing on a worker fails at once with 0, after 15 minutes by default.
    grace = {"UNDEPLOYED_TASK_GRACE_SECONDS": 0}
    assert DatabaseBackend("zero", {"OPTIONS": grace}).config.UNDEPLOYED_TASK_GRACE_SECONDS == 0.0
    assert DatabaseBackend("defaults", {}).config.UNDEPLOYED_TASK_GRACE_SECONDS == 900.0
    defaults = DatabaseBackend("defaults", {}).config
    assert defaults.STOP_TIMEOUT is None
    assert (defaults.CANCEL_GRACE_SECONDS, defaults.CONTROL_INTERVAL) == (10.0, 1.0)
    # A lease so short that the heartbeat beats more often than that sets the pace.
    assert DatabaseBackend("short", {"OPTIONS": {"LEASE_SECONDS": 2}}).config.control_interval == 0.5
