"""Rows whose JSON the database accepts but Python cannot read (issue 17,
items 1 and 6): an integer of more digits than Python converts, a number
beyond a double, nesting deeper than the queue stores. Each is its own
job's failed attempt; the worker, its batch-mates, the admin page and
get_result() go on. dbqueue_enqueue() refuses such numbers.

MySQL's JSON type refuses those numbers itself (3140, "Number too big to
be stored in double"), so there the test asserts that refusal, and a row
nested deeper than the queue stores (MySQL keeps up to 100 levels) is the
undecodable one."""

import json

import pytest
from django.db import connection

from django_dbqueue.jsonfield import Undecodable
from django_dbqueue.models import Job
from django_dbqueue.payload import exact_integers
from django_dbqueue.tasks_api import task_backends
from tests.conftest import DATABASE, MYSQL_FAMILY, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
NOT_RUNNABLE = "django_dbqueue.exceptions.JobNotRunnable"
LONG = "9" * 4500


def mysql_json() -> bool:
    """Whether this database parses JSON into a type of its own (MySQL's, not
    MariaDB's text): it keeps 64-bit integers (payload.exact_integers) and
    refuses numbers beyond a double."""
    return exact_integers(connection) is not None


def undecodable() -> str:
    """A value this database stores and Python cannot decode: on MySQL, nesting."""
    return "[" * 60 + "]" * 60 if mysql_json() else LONG


def insert(task_path: str, args: str, kwargs: str = "{}", queue: str = "default") -> int:
    """A row as a plain SQL INSERT from any language writes it; its id."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_dbqueue_job (task_path, args, kwargs, queue_name) VALUES (%s, %s, %s, %s)",
            [task_path, args, kwargs, queue],
        )
        cursor.execute("SELECT MAX(id) FROM django_dbqueue_job")
        return cursor.fetchone()[0]


def nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def hostile_rows() -> dict[str, tuple[str, str, str]]:
    """name: (args, kwargs, the reason the job's error must give), for the
    rows this database stores. MariaDB's JSON check refuses nesting over
    32; PostgreSQL's jsonb keeps 1e400 as a 401-digit integer (which Python
    reads), so there 1e5000 stands in: 5,001 digits. MySQL refuses the
    numbers (refused_rows()) and keeps 100 levels."""
    deep = ("args are nested more than 31 lists or objects deep", "kwargs are nested more than 31")
    if mysql_json():
        return {
            "deep": (f"[{nested_text(98)}]", "{}", deep[0]),
            "deep_kwarg": ("[1]", f'{{"b": {nested_text(60)}}}', deep[1]),
        }
    rows = {
        "long_int": (
            f"[{LONG}, 1]",
            "{}",
            "args hold an integer of 4,500 digits, more than Python's limit of 4,300",
        ),
        "long_kwarg": ("[1]", f'{{"b": -{LONG}}}', "kwargs hold an integer of 4,500 digits"),
    }
    if connection.vendor == "postgresql":
        rows["huge"] = ("[1e5000, 1]", "{}", "args hold an integer of 5,001 digits")
    else:
        rows["huge"] = ("[1e400, 1]", "{}", "args hold the number 1e400, beyond a float's range")
    if connection.vendor != "mysql":
        rows["deep"] = (f"[{nested_text(998)}]", "{}", deep[0])
    return rows


def refused_rows() -> dict[str, tuple[str, str]]:
    """name: (args, kwargs) of the rows MySQL's JSON type refuses itself."""
    if not mysql_json():
        return {}
    return {
        "long_int": (f"[{LONG}, 1]", "{}"),
        "long_kwarg": ("[1]", f'{{"b": -{LONG}}}'),
        "huge": ("[1e400, 1]", "{}"),
        "huge_kwarg": ("[]", '{"a": [true, null, {"b": -1e999}]}'),
    }


def insert_hostile_rows() -> dict[str, int]:
    """The hostile rows this database stores, inserted; those it refuses, refused."""
    from django.db import OperationalError

    for name, (args, kwargs) in refused_rows().items():
        with pytest.raises(OperationalError) as refused:
            insert("demo.tasks.add", args, kwargs)
        assert refused.value.args[0] == 3140, name
        assert "Number too big to be stored in double" in refused.value.args[1], name
    return {
        name: insert("demo.tasks.add", args, kwargs) for name, (args, kwargs, _) in hostile_rows().items()
    }


def test_a_row_python_cannot_decode_loads_with_the_reason_and_its_text():
    ids = insert_hostile_rows()
    for name, (_, _, reason) in hostile_rows().items():
        job = Job.objects.get(pk=ids[name])
        column = "args" if isinstance(job.args, Undecodable) else "kwargs"
        stored = getattr(job, column)
        assert isinstance(stored, Undecodable), name
        assert reason in stored.reason
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {column} FROM django_dbqueue_job WHERE id = %s", [job.pk])
            assert stored.raw == cursor.fetchone()[0]


def test_get_result_reads_such_a_row():
    ids = insert_hostile_rows()
    backend = task_backends["default"]
    for pk in ids.values():
        result = backend.get_result(str(pk))
        assert (result.id, result.status) == (str(pk), "READY")
        # What cannot be decoded reads as empty: the admin page shows the text.
        assert result.args in ([], [1]) and result.kwargs == {}


def test_saving_such_a_row_writes_its_text_back_unchanged():
    text = undecodable()
    pk = insert("demo.tasks.add", f"[{text}, 1]")
    job = Job.objects.get(pk=pk)
    assert isinstance(job.args, Undecodable)
    job.priority = 7
    job.save()
    again = Job.objects.get(pk=pk)
    assert (again.priority, again.args.raw.replace(" ", "")) == (7, f"[{text},1]")


def test_the_admin_page_of_such_a_row_shows_its_text_and_why(admin_client):
    ids = insert_hostile_rows()
    for name, (_, _, reason) in hostile_rows().items():
        page = admin_client.get(f"/admin/django_dbqueue/job/{ids[name]}/change/")
        assert page.status_code == 200, name
        text = page.content.decode()
        assert "Python cannot decode this text as stored" in text
        assert reason.replace("'", "&#x27;") in text
    first, (args, _, _) = next(iter(hostile_rows().items()))
    page = admin_client.get(f"/admin/django_dbqueue/job/{ids[first]}/change/").content.decode()
    assert args.replace(" ", "") in page.replace(" ", "")


def test_runqueue_fails_each_such_row_alone_and_runs_its_batch_mates_and_other_queues(runqueue):
    before = [insert("demo.tasks.add", f"[{i}, 1]") for i in range(3)]
    hostile = insert_hostile_rows()
    after = [insert("demo.tasks.add", f"[{i}, 2]") for i in range(3)]
    control = [insert("demo.tasks.add", f"[{i}, 3]", queue="email") for i in range(3)]
    worker = runqueue("--burst", "--processes", "1", "--queue", "default", "--queue", "email")
    assert worker.wait(90) == 0, worker.output()[-3000:]
    log = worker.output()

    jobs = {job.pk: job for job in Job.objects.all()}
    assert [(jobs[pk].status, jobs[pk].return_value) for pk in before] == [
        ("SUCCESSFUL", i + 1) for i in range(3)
    ]
    assert [(jobs[pk].status, jobs[pk].return_value) for pk in after] == [
        ("SUCCESSFUL", i + 2) for i in range(3)
    ]
    assert [jobs[pk].status for pk in control] == ["SUCCESSFUL"] * 3
    for name, (_, _, reason) in hostile_rows().items():
        job = jobs[hostile[name]]
        assert (job.status, job.attempts) == ("FAILED", 1), name
        error = job.errors[-1]
        assert error["exception_class_path"] == NOT_RUNNABLE
        assert reason in error["traceback"]
        assert f"Job {job.pk} (demo.tasks.add) FAILED on attempt 1 of 3." in log
        result = task_backends["default"].get_result(str(job.pk))
        assert result.status == "FAILED" and reason in result.errors[-1].traceback
    # One worker process did all of it: none died and was restarted.
    assert ", 0 worker restarts." in log


@pytest.mark.skipif(
    DATABASE in MYSQL_FAMILY,
    reason="MariaDB's JSON check refuses it, and MySQL's JSON type (at most 100 levels, error 3157)",
)
def test_nesting_the_database_accepts_but_python_cannot_rebuild_fails_alone(runqueue):
    """SQLite's json_valid accepts up to 1,000 levels (PostgreSQL more): at 990,
    building the task's result recursed past Python's limit, outside every
    handler, and the worker died on every attempt."""
    deep = [insert("demo.tasks.record", nested_text(depth)) for depth in (32, 500, 990, 999)]
    fine = insert("demo.tasks.record", '["kept"]')
    worker = runqueue("--burst", "--processes", "1")
    assert worker.wait(90) == 0, worker.output()[-3000:]
    for pk in deep:
        job = Job.objects.get(pk=pk)
        assert (job.status, job.attempts) == ("FAILED", 1)
        assert job.errors[-1]["exception_class_path"] == NOT_RUNNABLE
        assert "args are nested more than 31 lists or objects deep" in job.errors[-1]["traceback"]
    assert Job.objects.get(pk=fine).status == "SUCCESSFUL"


def test_a_batch_claim_holding_such_rows_returns_them_all():
    hostile = insert_hostile_rows()
    good = insert("demo.tasks.add", "[1, 2]")
    claimed = Job.objects.claim("w1", limit=100)
    assert sorted(job.pk for job in claimed) == sorted([*hostile.values(), good])


def test_the_size_limit_counts_utf8_bytes_of_compact_json():
    from django_dbqueue.payload import encode_arguments

    args, kwargs = encode_arguments(["é" * 10], {"k": "✓"}, limit=10_000)
    size = len(json.dumps(args, ensure_ascii=False, separators=(",", ":")).encode())
    size += len(json.dumps(kwargs, ensure_ascii=False, separators=(",", ":")).encode())
    assert size == 24 + 11  # é takes 2 bytes, ✓ 3; stored escaped, 6 each
    encode_arguments(["é" * 10], {"k": "✓"}, limit=size)
    with pytest.raises(
        Exception, match=f"take {size} bytes as compact JSON, more than the limit of {size - 1}"
    ):
        encode_arguments(["é" * 10], {"k": "✓"}, limit=size - 1)


needs_procedure = pytest.mark.skipif(
    DATABASE not in MYSQL_FAMILY, reason="dbqueue_enqueue() is on MySQL and MariaDB"
)
LONG_INTEGER = "args and kwargs hold an integer of more than 4,300 digits, more than Python converts"
NOT_FINITE = "args and kwargs hold a number at or beyond the largest double (1.7976931348623157e308)"


def call_enqueue(args: str, kwargs: str = "{}") -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "CALL dbqueue_enqueue('demo.tasks.record', %s, %s, NULL, NULL, NULL, NULL, @id)", [args, kwargs]
        )
        cursor.execute("SELECT @id")
        return cursor.fetchone()[0]


@needs_procedure
@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (f"[{'9' * 4301}]", "{}", LONG_INTEGER),
        (f'["a", -{"1" * 5000}]', "{}", LONG_INTEGER),
        ("[]", f'{{"key": {"2" * 4301}}}', LONG_INTEGER),
        ("[1e400]", "{}", NOT_FINITE),
        ('["1e400", -1E+400]', "{}", NOT_FINITE),
        ("[1.8e308]", "{}", NOT_FINITE),
        (f"[1{'0' * 309}.5]", "{}", NOT_FINITE),
        ("[0.1e310]", "{}", NOT_FINITE),
        ("[]", '{"a": [true, null, {"b": 1e999}]}', NOT_FINITE),
    ],
)
def test_the_procedure_refuses_numbers_python_cannot_read_back(args, kwargs, message):
    from django.db import OperationalError

    if mysql_json():  # MySQL's parser refuses those integers as beyond a double
        message = NOT_FINITE
    with pytest.raises(OperationalError) as refused:
        call_enqueue(args, kwargs)
    assert refused.value.args[0] == 1644
    assert f"dbqueue_enqueue: {message}" in refused.value.args[1]
    assert not Job.objects.exists()


@needs_procedure
@pytest.mark.parametrize(
    "args",
    [
        f"[{2**64}]",
        f'[1, {{"a": ["x\\"", {-(2**63) - 1}]}}]',
        f'[{10**38}, "{10**38}"]',
        f'["{10**38}", {10**38}]',
        # MySQL reads the text in windows of 16 KiB: one across a window's
        # end, and one in a later window.
        f'["{"x" * 16380}", {10**38}]',
        f"[{', '.join(['1e100'] * 5000)}, {2**64}]",
    ],
)
def test_the_procedure_refuses_integers_mysql_would_round_and_others_keep(args):
    from django.db import OperationalError

    if not mysql_json():
        assert Job.objects.get(pk=call_enqueue(args)).args == json.loads(args)
        return
    with pytest.raises(OperationalError) as refused:
        call_enqueue(args)
    assert refused.value.args[0] == 1644
    assert "dbqueue_enqueue: args and kwargs hold an integer beyond 64 bits" in refused.value.args[1]
    assert not Job.objects.exists()


@needs_procedure
def test_the_procedure_accepts_digits_in_strings_and_every_number_python_reads():
    digits = "7" * 5000
    accepted = {
        # 1e20: a float as large as such integers, so that MySQL's procedure reads the text.
        "64-bit edges, and wider ones in strings": (
            f'[1e20, {2**64 - 1}, {-(2**63)}, "{10**38}", "\\\\{10**38}", "\\"{10**38}"]',
            f'{{"{10**38}": 1}}',
        ),
        "wider ones in strings across MySQL's windows": (
            f'[1e20, "{"y" * 16380}{10**38}", "{"z" * 16370}\\"{10**38}", {2**64 - 1}]',
            "{}",
        ),
        "digits in strings": (f'["{digits}", "1e400", "x\\"{digits}", "\\\\"]', f'{{"{digits}": "1e999"}}'),
        "large but finite": ("[1e308, -1.7976931348623157e307, 1e-400, 0.1e309]", "{}"),
        "many fractional digits": (f"[0.{digits}, 1.{digits}e10]", "{}"),
        "the rest": ('[true, false, null, {"a": [1, -2.5E+3]}]', "{}"),
    }
    if not mysql_json():  # MySQL's parser refuses it as beyond a double
        accepted["4,300 digits"] = (f"[{'9' * 4300}]", "{}")
    for name, (args, kwargs) in accepted.items():
        job = Job.objects.get(pk=call_enqueue(args, kwargs))
        assert not isinstance(job.args, Undecodable), name
        assert job.args == json.loads(args) and job.kwargs == json.loads(kwargs), name


@needs_procedure
def test_the_procedure_and_enqueue_measure_arguments_alike():
    """UTF-8 bytes of compact JSON: "é" is 2 bytes to both, not the 6 of
    the "\\u00e9" that Django's JSONField stores."""
    from django.db import OperationalError

    from demo import tasks
    from django_dbqueue.exceptions import InvalidTaskArguments

    limit = task_backends["default"].config.MAX_ARGUMENTS_BYTES
    fits = (limit - len('[""]{}')) // 2
    tasks.record.enqueue("é" * fits)
    call_enqueue(json.dumps(["é" * fits], ensure_ascii=False))
    size = len('[""]{}') + 2 * (fits + 1)  # one more é: over the limit
    with pytest.raises(InvalidTaskArguments, match=f"take {size} bytes as compact JSON"):
        tasks.record.enqueue("é" * (fits + 1))
    with pytest.raises(OperationalError, match=f"take {size} bytes as compact JSON"):
        call_enqueue(json.dumps(["é" * (fits + 1)], ensure_ascii=False))
    assert Job.objects.count() == 2


def test_bookkeeping_columns_python_cannot_decode_stop_nothing(runqueue, admin_client):
    """errors, worker_ids, history and return_value are the workers' own,
    but a plain INSERT or UPDATE can write anything there: a valid call
    still runs, a dead worker's such job is still recovered, and either can
    be requeued."""
    text = undecodable()
    junk = {
        "errors": f"[{text}]",
        "worker_ids": f'["w", {text}]',
        "history": f"[{text}]",
        "return_value": text,
    }
    ready = insert("demo.tasks.add", "[2, 3]")
    lost = insert("demo.tasks.add", "[4, 5]")
    with connection.cursor() as cursor:
        for pk in (ready, lost):
            columns = ", ".join(f"{name} = %s" for name in junk)
            cursor.execute(f"UPDATE django_dbqueue_job SET {columns} WHERE id = %s", [*junk.values(), pk])
    # Claimed by a worker that died at once: its lease ran out long ago.
    Job.objects.filter(pk=lost).update(
        status="RUNNING", owner="dead:1:x", lease_expires_at="2020-01-01T00:00Z"
    )
    job = Job.objects.get(pk=ready)
    assert all(isinstance(getattr(job, name), Undecodable) for name in junk)
    assert admin_client.get(f"/admin/django_dbqueue/job/{ready}/change/").status_code == 200

    worker = runqueue("--processes", "1")

    def finished() -> list:
        rows = list(Job.objects.filter(pk__in=[ready, lost]).order_by("pk"))
        return rows if all(row.status == "SUCCESSFUL" for row in rows) else []

    done = wait_for(finished, timeout=60)
    assert [(row.return_value, row.attempts) for row in done] == [(5, 1), (9, 1)]
    assert Job.objects.filter(pk__in=[ready, lost]).requeue() == 2
    assert [len(row.history) for row in Job.objects.filter(pk__in=[ready, lost])] == [1, 1]
    worker.signal(15)
    assert worker.wait(30) == 0
