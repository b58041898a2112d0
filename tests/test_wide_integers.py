"""Integers wider than 64 bits (issue 30): MySQL's JSON type stores them as
doubles, silently rounded, so there they are refused where they are
written (arguments, metadata, a result, a checkpoint), naming the value's
path; MariaDB (text), PostgreSQL (jsonb's exact numbers) and SQLite (text)
keep them, and there they round-trip exactly. Which one a database is,
the product says (payload.exact_integers); the test checks both sides."""

import pytest
from django.db import connection

from demo import tasks
from django_dbqueue.exceptions import InvalidTask, InvalidTaskArguments
from django_dbqueue.models import Job
from django_dbqueue.payload import exact_integers

pytestmark = pytest.mark.django_db(transaction=True)
# A 128-bit integer, such as an OpenTelemetry trace id: 39 digits.
WIDE = 10**38
BEYOND = "is the integer 100000000000000000000000000000000000000, beyond 64 bits, which MySQL's JSON"


def rounds() -> bool:
    """Whether this database's JSON would round WIDE."""
    integers = exact_integers(connection)
    return integers is not None and not integers[0] <= WIDE <= integers[1]


def test_the_databases_that_round_are_mysql_only():
    # MySQL's JSON keeps INT64 and UINT64: those limits round-trip everywhere.
    assert rounds() == (connection.vendor == "mysql" and not connection.mysql_is_mariadb)
    for edge in (2**64 - 1, -(2**63)):
        pk = tasks.add.enqueue(edge, 0).id
        assert Job.objects.get(pk=pk).args == [edge, 0]


def test_an_argument_is_refused_or_kept_exactly():
    if rounds():
        with pytest.raises(InvalidTaskArguments, match=f"^args\\[1\\]\\['n'\\] {BEYOND}"):
            tasks.record.enqueue("k", {"n": WIDE})
        with pytest.raises(InvalidTaskArguments, match=r"^kwargs\['b'\] is the integer -1844"):
            tasks.add.enqueue(a=1, b=-(2**64))
        assert not Job.objects.exists()
        return
    pk = tasks.add.enqueue(WIDE, 1).id
    assert Job.objects.get(pk=pk).args == [WIDE, 1]


def test_metadata_is_refused_or_kept_exactly():
    if rounds():
        with pytest.raises(InvalidTask, match=f"^metadata\\['n'\\] {BEYOND}"):
            tasks.add.using(metadata={"n": WIDE}).enqueue(1, 2)
        assert not Job.objects.exists()
        return
    pk = tasks.add.using(metadata={"n": WIDE}).enqueue(1, 2).id
    assert Job.objects.get(pk=pk).metadata == {"n": WIDE}


def test_a_result_is_refused_or_kept_exactly(run_due_jobs):
    pk = tasks.returns_long_int.enqueue("r", 39).id
    run_due_jobs()
    job = Job.objects.get(pk=pk)
    if rounds():
        assert (job.status, job.return_value) == ("FAILED", None)  # retrying would not help
        error = job.errors[-1]
        assert error["exception_class_path"] == "django_dbqueue.exceptions.ResultNotStorable"
        assert f"The return value {BEYOND}" in error["traceback"]
        return
    assert (job.status, job.return_value) == ("SUCCESSFUL", WIDE)


def test_a_checkpoint_is_refused_or_kept_exactly(run_due_jobs):
    pk = tasks.keeps_position.enqueue(39).id
    run_due_jobs()
    job = Job.objects.get(pk=pk)
    if rounds():
        assert (job.status, job.checkpoint) == ("FAILED", None)
        error = job.errors[-1]
        assert error["exception_class_path"] == "django_dbqueue.exceptions.CheckpointNotStorable"
        assert f"The checkpoint['cursor']['n'] {BEYOND}" in error["traceback"]
        return
    assert job.status == "SUCCESSFUL"
    assert job.checkpoint["cursor"] == {"n": WIDE}


def test_a_stored_schedules_arguments_are_refused_or_kept_exactly():
    from django.core.exceptions import ValidationError

    from django_dbqueue.models import Schedule

    schedule = Schedule(name="wide", task="demo.tasks.add", cron="0 * * * *", args=[WIDE, 1])
    if rounds():
        with pytest.raises(ValidationError) as refused:
            schedule.full_clean()
        assert f"'args'[0] {BEYOND}" in refused.value.message_dict["args"][0]
        return
    schedule.full_clean()
    schedule.save()
    assert Schedule.objects.get(name="wide").args == [WIDE, 1]


def test_a_bulk_enqueues_arguments_are_refused_or_kept_exactly():
    from django_dbqueue import bulk_enqueue

    calls = [((1, 2), {}), ((WIDE, 1), {})]
    if rounds():
        with pytest.raises(InvalidTaskArguments, match=f"^args\\[0\\] {BEYOND}"):
            bulk_enqueue(tasks.add, calls)
        assert not Job.objects.exists()
        return
    results = bulk_enqueue(tasks.add, calls)
    assert Job.objects.get(pk=results[1].id).args == [WIDE, 1]
