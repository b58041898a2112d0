"""The django.tasks backend: enqueue, validation, results, transactions."""

import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from demo import tasks
from django_dbqueue import task
from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.clock import local_offset
from django_dbqueue.exceptions import InvalidTaskArguments
from django_dbqueue.models import Job
from django_dbqueue.payload import exact_integers
from django_dbqueue.tasks_api import (
    InvalidTask,
    TaskResultDoesNotExist,
    default_task_backend,
    task_backends,
)

pytestmark = pytest.mark.django_db


def tasks_setting(**options) -> dict:
    return {
        "default": {
            "BACKEND": "django_dbqueue.backend.DatabaseBackend",
            "QUEUES": ["default", "email", "slow"],
            "OPTIONS": options,
        }
    }


def test_enqueue_writes_a_ready_job_and_returns_its_result():
    result = tasks.send_welcome.enqueue(user_id=42)

    job = Job.objects.get(pk=int(result.id))
    assert (job.task_path, job.queue_name, job.priority) == ("demo.tasks.send_welcome", "email", 10)
    assert (job.args, job.kwargs, job.status, job.attempts) == ([], {"user_id": 42}, "READY", 0)
    assert job.max_attempts == 3, "the backend's default MAX_ATTEMPTS"
    assert result.status == "READY" and result.kwargs == {"user_id": 42}
    assert abs(job.run_after - job.enqueued_at) < timedelta(seconds=1)


def test_task_max_attempts_and_using_are_stored():
    when = timezone.now() + timedelta(hours=2)
    result = tasks.flaky.using(priority=-5, run_after=when, queue_name="slow").enqueue("k", 1)

    job = Job.objects.get(pk=int(result.id))
    assert (job.max_attempts, job.priority, job.queue_name, job.run_after) == (4, -5, "slow", when)


@override_settings(TASKS=tasks_setting(MAX_ATTEMPTS=7))
def test_max_attempts_default_comes_from_options():
    result = tasks.add.enqueue(1, 2)
    assert Job.objects.get(pk=int(result.id)).max_attempts == 7


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_invalid_max_attempts_is_refused_when_the_task_is_defined(bad):
    with pytest.raises(InvalidTask, match="max_attempts must be a whole number from 1 to 2,147,483,647"):
        task(max_attempts=bad)(tasks.add.func)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((object(),), {}, r"args\[0\] is a builtins.object, which cannot be stored as JSON"),
        ((), {"when": timezone.now()}, r"kwargs\['when'\] is a datetime.datetime"),
        (([1, {2, 3}],), {}, r"args\[0\]\[1\] is a builtins.set"),
        ((float("nan"),), {}, r"args\[0\] is the float nan"),
        (({1: "a"},), {}, r"args\[0\] has the key 1 of type int; JSON object keys must be strings"),
        ((b"\xff",), {}, r"args\[0\] is a builtins.bytes"),
    ],
)
def test_arguments_that_are_not_json_are_refused_and_nothing_is_written(args, kwargs, message):
    with pytest.raises(InvalidTaskArguments, match=message):
        tasks.add.enqueue(*args, **kwargs)
    assert not Job.objects.exists()


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # The args list itself is one level: 31 in all is MariaDB's JSON limit.
        ((nested(31),), r"args\[0\]\[0\]\[0\].* is nested more than 31 lists or dicts deep"),
        ((nested(5000),), r"is nested more than 31 lists or dicts deep"),  # no RecursionError
        (("ok\ud800",), r"args\[0\] holds '\\ud800' at position 2, a lone surrogate"),
        (({"\udfff": 1},), r"a key of args\[0\] holds '\\udfff'"),
        ((10**5000,), r"The task's arguments cannot be stored as JSON: Exceeds the limit"),
    ],
)
def test_arguments_the_database_would_refuse_are_refused_before_the_write(args, message):
    if args == (10**5000,) and exact_integers(connection) is not None:  # MySQL: 64 bits at most
        message = r"args\[0\] is an integer of 5,001 digits, beyond 64 bits, which MySQL's JSON cannot"
    with pytest.raises(InvalidTaskArguments, match=message):
        tasks.add.enqueue(*args, 1)
    assert not Job.objects.exists()


def test_the_deepest_arguments_every_database_stores_are_accepted():
    result = tasks.add.enqueue(nested(30), 1)  # 30 in the argument, 31 with the args list
    assert Job.objects.get(pk=int(result.id)).args[0] == nested(30)


@override_settings(TASKS=tasks_setting(MAX_ARGUMENTS_BYTES=100))
def test_arguments_over_the_size_limit_are_refused():
    tasks.add.enqueue("x" * 50, "y")  # under the limit
    size = len('["' + "x" * 200 + '","y"]') + len("{}")  # args and kwargs, as dbqueue_enqueue() counts
    with pytest.raises(
        InvalidTaskArguments, match=rf"take {size} bytes as compact JSON, more than the limit of 100"
    ):
        tasks.add.enqueue("x" * 200, "y")
    assert Job.objects.count() == 1


def test_tuples_are_stored_as_lists():
    result = tasks.add.enqueue((1, 2), [3])
    assert Job.objects.get(pk=int(result.id)).args == [[1, 2], [3]]


def test_unknown_queue_and_out_of_range_priority_are_refused():
    unknown = r"The queue 'nope' is not one of this backend's QUEUES \(default, email, slow\)\."
    with pytest.raises(InvalidTask, match=unknown):
        tasks.add.using(queue_name="nope").enqueue(1, 2)
    with pytest.raises(InvalidTask, match="priority must be a whole number between -100 and 100"):
        tasks.add.using(priority=101).enqueue(1, 2)
    assert not Job.objects.exists()


@override_settings(USE_TZ=True)
def test_naive_run_after_is_refused():
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.add.using(run_after=timezone.now().replace(tzinfo=None)).enqueue(1, 2)


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_transaction_commits_or_rolls_back_with_it():
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            tasks.add.enqueue(1, 1)
            raise RuntimeError("the caller's work failed")
    assert not Job.objects.exists()

    with transaction.atomic():
        result = tasks.add.enqueue(2, 2)
    assert Job.objects.filter(pk=int(result.id)).exists()


def test_async_tasks_and_aenqueue_are_supported():
    result = async_to_sync(tasks.async_add.aenqueue)(2, 3)
    assert Job.objects.get(pk=int(result.id)).task_path == "demo.tasks.async_add"


def test_get_result_reads_the_row_and_refresh_follows_it():
    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(pk=int(result.id)).update(
        status="SUCCESSFUL", return_value=3, finished_at=timezone.now()
    )

    result.refresh()

    assert (result.status, result.return_value, result.is_finished) == ("SUCCESSFUL", 3, True)
    assert tasks.add.get_result(result.id).return_value == 3
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("999999999")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("not-a-number")


def test_backend_features():
    backend = task_backends["default"]
    assert isinstance(backend, DatabaseBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


@override_settings(TASKS=tasks_setting(LEASE_SECONDS=-1, BOGUS=1))
def test_bad_options_are_a_check_error_and_block_enqueue():
    messages = task_backends["default"].check()
    # Every problem at once, each its own message.
    assert [m.id for m in messages] == ["django_dbqueue.E003", "django_dbqueue.E003"]
    assert messages[0].msg.startswith("Unknown django_dbqueue OPTIONS BOGUS; the known ones are")
    assert messages[1].msg == "OPTIONS LEASE_SECONDS must be a positive number, not -1."
    with pytest.raises(ImproperlyConfigured, match="Unknown django_dbqueue OPTIONS BOGUS"):
        tasks.add.enqueue(1, 2)


@override_settings(TASKS=tasks_setting(LEASE_SECONDS="soon"))
def test_option_types_are_checked():
    assert (
        task_backends["default"].check()[0].msg
        == "OPTIONS LEASE_SECONDS must be a positive number, not 'soon'."
    )


def test_a_row_inserted_by_plain_sql_is_a_valid_job():
    if connection.vendor == "sqlite" and local_offset():
        pytest.skip(
            "SQLite's default times are UTC: with USE_TZ = False in another time zone, SQL "
            "producers give run_after themselves (docs/databases.md)"
        )
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (task_path) VALUES (%s)", ["demo.tasks.noop"])

    job = Job.objects.get()
    assert (job.status, job.queue_name, job.priority, job.attempts, job.max_attempts) == (
        "READY",
        "default",
        0,
        0,
        3,
    )
    assert (job.args, job.kwargs, job.errors, job.suspect) == ([], {}, [], False)
    assert abs(job.run_after - timezone.now()) < timedelta(minutes=1)
    assert [j.pk for j in Job.objects.claim("w")] == [job.pk]


def test_the_stored_json_is_plain_json():
    result = tasks.add.enqueue(1, b=[1, "two", None, True, 2.5])
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT kwargs FROM {table} WHERE id = %s", [int(result.id)])
        (raw,) = cursor.fetchone()
    stored = raw if isinstance(raw, dict) else json.loads(raw)
    assert stored == {"b": [1, "two", None, True, 2.5]}
