"""Rows a producer writes by SQL, with the extremes each column takes
(issue 29): the columns of the SQL contract (docs/sql-contract.md), and a
few a producer should leave alone but an INSERT can write. Real `runqueue`
processes meet them all in one run: the worker exits 0 without a restart,
each row that cannot run ends FAILED alone with an error naming its column,
each value the contract tolerates runs, and a plain job beside them
succeeds. docs/security.md, "Values that cannot stop the queue", says what
each class comes to; test_fuzz_values.py fuzzes settings and calls."""

import copy
import signal
from datetime import timedelta

import pytest
from django.db import DatabaseError, IntegrityError, OperationalError, connection, transaction

from demo.models import Execution
from demo.tasks import add, sleep
from django_dbqueue.clock import as_stored, local_offset, read_database_now, read_utc
from django_dbqueue.models import Job
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NOT_RUNNABLE = "django_dbqueue.exceptions.JobNotRunnable"
# The largest max_attempts and attempts each database's column holds.
COLUMN_MAX = {"mysql": 4_294_967_295, "postgresql": 2_147_483_647, "sqlite": 2_147_483_647}


def insert(**columns: object) -> int:
    """A row as a plain SQL INSERT writes it; its id."""
    columns = {"task_path": "demo.tasks.add", "args": "[1, 2]", **columns}
    if connection.vendor == "sqlite" and local_offset() and "run_after" not in columns:
        # SQLite's default times are UTC: with USE_TZ = False in another time
        # zone, an SQL producer gives run_after itself (docs/databases.md).
        columns["run_after"] = read_database_now("default")
    names, values = list(columns), list(columns.values())
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO django_dbqueue_job ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})",
            values,
        )
        cursor.execute("SELECT MAX(id) FROM django_dbqueue_job")
        return cursor.fetchone()[0]


def fails(column: str) -> tuple[str, str]:
    return "FAILED", f"The job's {column}"


RUNS = ("SUCCESSFUL", None)
GIVEN_BACK = "given back, its attempt unspent"


def hostile_rows() -> dict[str, tuple[dict[str, object], tuple[str, str | None]]]:
    """name: (the columns written, (the status it ends in, what its error says))."""
    most = COLUMN_MAX[connection.vendor]
    rows = {
        "task-path-empty": ({"task_path": ""}, ("FAILED", "The task path '' ")),
        "task-path-longest": (
            {"task_path": "demo." + "x" * 241 + ".add"},
            ("FAILED", "The task path 'demo.xxx"),
        ),
        # Its module imports but lacks the name: a rolling deploy's job, given back (TaskNotDeployed).
        "task-path-undeployed": ({"task_path": "demo.tasks." + "x" * 240}, ("READY", GIVEN_BACK)),
        "task-path-os-system": ({"task_path": "os.system", "args": '["true"]'}, ("FAILED", "outside every")),
        "args-a-string": ({"args": '"1, 2"'}, fails("args must be a JSON list")),
        "kwargs-a-list": ({"kwargs": "[1]"}, fails("args must be a JSON list and its kwargs a JSON object")),
        "args-largest-double": ({"args": "[1.7976931348623157e308, 0]"}, RUNS),
        "queue-name-longest": ({"queue_name": "q" * 64}, ("READY", None)),  # no worker serves it
        "priority-max": ({"priority": 32767}, fails("priority is 32767, outside -100 to 100")),
        "priority-min": ({"priority": -32768}, fails("priority is -32768")),
        "priority-101": ({"priority": 101}, fails("priority is 101")),
        "max-attempts-0": ({"max_attempts": 0}, fails("max_attempts is 0")),
        "max-attempts-most": ({"max_attempts": most}, RUNS),
        "attempts-most": ({"attempts": most, "max_attempts": most}, fails(f"attempts is {most}")),
        # A period past 366 days counts as 366 days; a limit no worker reads as 1/s.
        "rate-past-9999": ({"rate_key": "fuzz:far", "rate_limit": "1/4000000d"}, RUNS),
        "rate-unreadable": ({"rate_key": "fuzz:junk", "rate_limit": "lots"}, RUNS),
        "rate-count-huge": ({"rate_key": "fuzz:huge", "rate_limit": "99999999999999/d"}, RUNS),
        "rate-no-limit": ({"rate_key": "fuzz:none"}, RUNS),
        "rate-key-empty": ({"rate_key": "", "rate_limit": "1/s"}, RUNS),
        "fairness-key-longest": ({"fairness_key": "f" * 191}, RUNS),
        "fairness-key-empty": ({"fairness_key": ""}, RUNS),
        "metadata-not-an-object": ({"metadata": "[1e308]"}, RUNS),
        "metadata-bad-trace": ({"metadata": '{"trace_context": -1e308}'}, RUNS),
        "run-after-year-1000": ({"run_after": "1000-01-01 00:00:00"}, RUNS),
        "enqueued-at-9999": ({"enqueued_at": "9999-12-31 23:59:59"}, RUNS),
        "cancel-at-year-1000": ({"cancel_requested_at": "1000-01-01 00:00:00"}, ("CANCELLED", None)),
    }
    if connection.vendor != "mysql" or connection.mysql_is_mariadb:
        # MySQL's JSON refuses it, as a double out of range.
        rows["args-huge-integer"] = ({"args": f"[{'9' * 4500}, 1]"}, fails("args hold an integer of 4,500"))
    if connection.vendor == "mysql" and connection.mysql_is_mariadb:
        # MariaDB's default sql_mode has no NO_ZERO_DATE (MySQL's has): its
        # driver reads these as None.
        rows["run-after-zero"] = ({"run_after": "0000-00-00 00:00:00"}, fails("run_after holds a time"))
        rows["run-after-zero-month"] = ({"run_after": "2020-00-00 00:00:00"}, fails("run_after holds a time"))
        rows["enqueued-at-zero"] = ({"enqueued_at": "0000-00-00 00:00:00"}, fails("enqueued_at holds a time"))
    if connection.vendor == "postgresql":
        rows["run-after-minus-infinity"] = ({"run_after": "-infinity"}, fails("run_after holds '-infinity'"))
        rows["run-after-bc"] = (
            {"run_after": "4713-01-01 00:00:00+00 BC"},
            fails("run_after holds '471"),
        )  # 4713 BC, as the session's zone writes it
        rows["enqueued-at-infinity"] = ({"enqueued_at": "infinity"}, fails("enqueued_at holds 'infinity'"))
        rows["cancel-at-minus-infinity"] = (
            {"cancel_requested_at": "-infinity"},
            fails("cancel_requested_at holds '-infinity'"),
        )
        # Never due, so never claimed; failed with the others once a claim
        # met an unreadable row (transitions/unreadable.py looks at every READY row).
        rows["run-after-infinity"] = ({"run_after": "infinity"}, fails("run_after holds 'infinity'"))
        rows["progress-nan"] = ({"progress": "NaN"}, RUNS)
    if connection.vendor == "sqlite":
        # Any text fits any column: a time is what Django's parser makes of it.
        rows["run-after-year-0"] = ({"run_after": "0000-01-01 00:00:00"}, fails("run_after holds '0000"))
        rows["run-after-text"] = ({"run_after": "0"}, fails("run_after holds '0'"))
        rows["run-after-month-13"] = ({"run_after": "2000-13-45 00:00:00"}, fails("run_after holds '2000-13"))
        rows["enqueued-at-text"] = ({"enqueued_at": "soon"}, fails("enqueued_at holds 'soon'"))
    return rows


@pytest.mark.parametrize(
    "columns",
    [{"max_attempts": -1}, {"priority": 32768}, {"attempts": -1}],
    ids=["max-attempts-negative", "priority-past-smallint", "attempts-negative"],
)
def test_values_past_a_columns_type_are_refused_by_the_database(columns):
    if connection.vendor == "sqlite" and "priority" in columns:
        pytest.skip("SQLite's integer columns hold any 64-bit integer")
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic():
        insert(**columns)
    assert not Job.objects.exists()


def test_a_worker_meets_every_hostile_row_fails_each_alone_and_runs_the_rest(runqueue):
    """One run for all of them (the suite's budget): before issue 29 the
    first of many of them killed the worker at each claim, for ever."""
    rows = hostile_rows()
    ids = {name: insert(**columns) for name, (columns, _) in rows.items()}
    plain = [add.enqueue(n, 1) for n in range(3)]
    # No give-back of a batch's unstarted jobs: a rate-limited one given back
    # has spent its slot, and "1/366d" would wait a year for the next.
    worker = runqueue("--burst", "--processes", "1", DBQUEUE_BATCH_HOLD="600")
    assert worker.wait(120) == 0, worker.output()[-3000:]
    log = worker.output()
    assert ", 0 worker restarts." in log, log[-3000:]
    outcomes = {}
    for name, (_, (status, says)) in rows.items():
        job = Job.objects.get(pk=ids[name])
        error = job.errors[-1] if job.errors else {}
        outcomes[name] = (job.status, error.get("exception_class_path"))
        assert job.status == status, (name, job.status, job.errors)
        if says is GIVEN_BACK:
            assert error["exception_class_path"] == "django_dbqueue.exceptions.TaskNotDeployed", (name, error)
            assert job.attempts == 0, (name, job.attempts)
        elif says is not None:
            assert error["exception_class_path"] == NOT_RUNNABLE, (name, error)
            assert says in error["traceback"], (name, error["traceback"])
    assert [Job.objects.get(pk=r.id).status for r in plain] == ["SUCCESSFUL"] * 3
    print(outcomes)


def zero_dates_refused() -> bool:
    """Whether this session refuses MySQL's zero date, as MySQL's default
    sql_mode does (strict, NO_ZERO_DATE; MariaDB's has no NO_ZERO_DATE):
    then no time Python cannot read gets into a row (1,000 to 9,999 it reads)."""
    if connection.vendor != "mysql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@SESSION.sql_mode")
        mode = cursor.fetchone()[0]
    return "NO_ZERO_DATE" in mode and "STRICT" in mode


def refused_zero_date(cursor, sql: str, params: list) -> None:  # noqa: ANN001
    with pytest.raises(OperationalError) as refused:
        cursor.execute(sql, params)
    assert refused.value.args[0] == 1292, refused.value  # Incorrect datetime value


def test_a_cancel_asked_with_a_time_python_cannot_read_is_honoured(runqueue):
    """A producer's UPDATE of cancel_requested_at on a running job, with a
    time the database keeps and Python does not read: the job is cancelled
    like any other, and neither its worker nor the supervisor dies. Where
    the database refuses the zero date (MySQL), the earliest time it keeps
    stands in."""
    unreadable = {"postgresql": "-infinity", "mysql": "0000-00-00 00:00:00", "sqlite": "soon"}[
        connection.vendor
    ]
    host = runqueue("--queue", "slow")
    job = Job.objects.get(pk=_enqueue_checks_for_cancel("asked"))
    wait_for(lambda: Execution.objects.filter(key="asked").exists())
    with connection.cursor() as cursor:
        sql = "UPDATE django_dbqueue_job SET cancel_requested_at = %s WHERE id = %s"
        if zero_dates_refused():
            refused_zero_date(cursor, sql, [unreadable, job.pk])
            unreadable = "1000-01-01 00:00:00"
        cursor.execute(sql, [unreadable, job.pk])
    wait_for(lambda: Job.objects.filter(pk=job.pk).values_list("status", flat=True).first() == "CANCELLED")
    after = sleep.enqueue(0.1)  # the worker goes on
    wait_for(lambda: Job.objects.get(pk=after.id).status == "SUCCESSFUL")
    host.signal(signal.SIGTERM)
    assert host.wait() == 0, host.output()[-3000:]
    assert ", 0 worker restarts." in host.output(), host.output()[-3000:]


def _enqueue_checks_for_cancel(key: str) -> int:
    from demo.control_tasks import checks_for_cancel

    return int(checks_for_cancel.enqueue(key).id)


def test_a_scheduler_skips_a_schedule_whose_times_python_cannot_follow_and_runs_the_others(settings):
    """Stored schedules written by SQL with a change time near the year
    9999 (cronsim's next time overflows) or one Python cannot read, and a
    settings schedule whose recorded run (written by SQL) is in the year
    9999: each is skipped alone and logged, and the tick goes on with the
    others. One such row failed every tick, so no schedule ran at all."""
    from django_dbqueue.models import Schedule, ScheduledRun
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker.housekeeping.scheduler import Scheduler

    every_second = {"task": "demo.tasks.noop", "cron": "* * * * * *"}
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"]["SCHEDULES"] = {"twin": every_second, "plain": every_second}
    settings.TASKS = tasks
    changed = as_stored(read_utc("default") - timedelta(seconds=3))  # SQLite's default is UTC, not local
    Schedule.objects.bulk_create(  # no validation, as from SQL
        [
            Schedule(name=name, task="demo.tasks.noop", cron="* * * * * *", updated_at=changed)
            for name in ("good", "far", "bad")
        ]
    )
    unreadable = {"postgresql": "-infinity", "mysql": "0000-00-00 00:00:00", "sqlite": "soon"}[
        connection.vendor
    ]
    refused = zero_dates_refused()  # then "bad" keeps its time, and runs
    with connection.cursor() as cursor:
        update = "UPDATE django_dbqueue_schedule SET updated_at = %s WHERE name = %s"
        cursor.execute(update, ["9999-12-31 23:59:59", "far"])
        if refused:
            refused_zero_date(cursor, update, [unreadable, "bad"])
        else:
            cursor.execute(update, [unreadable, "bad"])
        cursor.execute(
            "INSERT INTO django_dbqueue_scheduledrun (schedule, scheduled_at, manual) VALUES (%s, %s, %s)",
            ["twin", "9999-12-31 00:00:00", False],
        )
    scheduler = Scheduler(task_backends["default"])
    scheduler.since = read_utc("default") - timedelta(seconds=3)
    scheduler.tick()
    wait_for(
        lambda: ScheduledRun.objects.filter(schedule="good").exists() or scheduler.tick() < 0, timeout=10
    )
    ran = sorted(set(ScheduledRun.objects.values_list("schedule", flat=True)))
    assert ran == ["bad", "good", "plain", "twin"][0 if refused else 1 :], ran
    assert ScheduledRun.objects.filter(schedule="twin").count() == 1, "its year-9999 run only"
