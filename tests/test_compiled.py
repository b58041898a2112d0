"""The worker's claim statements compiled once (django_dbqueue/transitions/compiled.py):
they read what the ORM reads, with another thread's connection too, look
past rows another transaction holds, and are compiled afresh wherever the
database's now is a bound value."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbqueue.models import Job
from django_dbqueue.transitions import compiled
from django_dbqueue.transitions.claim import _locked
from django_dbqueue.transitions.instances import loaded
from django_dbqueue.transitions.shapes import claim_from_queues
from tests.conftest import needs_row_locks
from tests.rows import inserted
from tests.threads import elsewhere

pytestmark = pytest.mark.django_db(transaction=True)


def jobs_in(queue: str, count: int, **fields) -> list[Job]:
    now = timezone.now()
    return inserted(
        Job(
            task_path="demo.tasks.noop",
            queue_name=queue,
            run_after=now - timedelta(minutes=count - i),
            **fields,
        )
        for i in range(count)
    )


def test_the_database_now_binds_a_value_exactly_where_the_docs_say():
    binds = connection.vendor == "sqlite" or (connection.vendor == "mysql" and not settings.USE_TZ)
    assert compiled.now_binds("default") is binds


def test_local_time_on_mysql_binds_even_where_its_offset_is_zero_now(settings):
    # A zone at UTC's offset in winter (London) is an hour ahead in summer:
    # a statement kept from winter would claim jobs an hour late.
    settings.USE_TZ, settings.TIME_ZONE = False, "UTC"
    assert compiled.now_binds("default") is (connection.vendor in ("mysql", "sqlite"))


def test_the_compiled_locking_read_gives_the_instances_the_orm_gives():
    rows = jobs_in("default", 3, args=[1, "two", {"3": None}], kwargs={"k": [True]}, priority=-4)
    Job.objects.filter(pk=rows[1].pk).update(suspect=True, worker_ids=["w0"], has_dependants=True)
    ids = [job.pk for job in rows]
    with transaction.atomic():
        mine = sorted(_locked(Job, "default", ids), key=lambda job: job.pk)
    expected = loaded(Job.objects.filter(pk__in=ids).order_by("pk"))
    assert len(mine) == 3
    for got, want in zip(mine, expected, strict=True):
        assert vars(got).keys() - {"_state"} == vars(want).keys() - {"_state"}
        for name in vars(want).keys() - {"_state"}:
            value = getattr(got, name)
            assert value == getattr(want, name), name
            assert type(value) is type(getattr(want, name)), name  # a bool, not MySQL's 0 or 1
    assert mine[1].suspect is True and mine[0].args == [1, "two", {"3": None}]
    assert timezone.is_aware(mine[0].run_after) is settings.USE_TZ


def test_a_worker_compiles_its_claim_statements_once_where_the_database_now_allows(monkeypatch):
    jobs_in("compiled", 4)
    jobs = Job.objects.using("default")
    made = []
    build = compiled.Compiled.__init__

    def counted(self, rows):
        made.append(rows)
        build(self, rows)

    monkeypatch.setattr(compiled.Compiled, "__init__", counted)
    monkeypatch.setattr(compiled, "_KEPT", {})
    per_claim = []
    for _ in range(3):
        before = len(made)
        with CaptureQueriesContext(connection) as queries:
            assert len(claim_from_queues(jobs, ["compiled"], "w1", 1, 60.0)) == 1
        per_claim.append(len(made) - before)
        reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
        assert len(reads) == 2  # the candidates, then the locking read by id
    # The candidates read and the locking read; then none, unless the now binds a value.
    assert per_claim == ([2, 2, 2] if compiled.now_binds("default") else [2, 0, 0])


@needs_row_locks
@pytest.mark.parametrize("queues", [["one"], ["one", "two"]], ids=["candidates", "per-queue"])
def test_the_worker_claim_looks_past_candidates_another_transaction_holds(queues):
    rows = jobs_in("one", 6)
    jobs = Job.objects.using("default")
    with transaction.atomic():
        held = list(Job.objects.select_for_update().filter(pk__in=[job.pk for job in rows[:3]]))
        assert len(held) == 3
        got = elsewhere(lambda: claim_from_queues(jobs, queues, "w1", 3, 60.0), timeout=10)
    assert sorted(job.pk for job in got) == [job.pk for job in rows[3:]]
    assert all(job.status == "RUNNING" and job.owner == "w1" for job in got)


def test_a_caller_filter_is_kept_not_served_from_a_statement_compiled_without_it():
    rows = jobs_in("filtered", 4)
    jobs = Job.objects.using("default")
    assert len(claim_from_queues(jobs, ["filtered"], "w1", 1, 60.0)) == 1  # compiled without a filter
    only = Job.objects.filter(pk=rows[3].pk)
    got = claim_from_queues(only, ["filtered"], "w2", 3, 60.0)
    assert [job.pk for job in got] == [rows[3].pk]


def test_every_converter_of_the_claimed_columns_leaves_null_as_none():
    from django_dbqueue.transitions.compiled import Compiled
    from django_dbqueue.transitions.instances import attnames

    with transaction.atomic():
        statement = Compiled(Job.objects.select_for_update().values_list(*attnames(Job)))
    assert statement.converters, "the job's columns have converters on every database"
    for _, (functions, expression) in statement.converters:
        for function in functions:
            assert function(None, expression, connection) is None, (expression, function)


def test_the_claims_time_decoder_reads_what_mysqldb_reads():
    times = pytest.importorskip("MySQLdb.times")
    texts = [
        "2026-11-29 02:53:24.000100",
        "2026-11-29 02:53:24.000000",
        "2026-11-29 02:53:24",
        "2026-11-29 02:53:24.500",
        "9999-12-31 23:59:59.999999",
        "0001-01-01 00:00:00",
        "0000-00-00 00:00:00",  # MySQL's zero date
        "2026-02-30 00:00:00",  # no such day
        "2026-11-29",
        "2026-11-29 24:00:00",
        "2026-11-29T02:53:24",
        "2026-11-29 02:53:24,000100",
        "2026-W48-1 02:53:24",
        "2026-11-29 02:53:24.1+0000",
        "2026-11-29 02:53:24+00:00",
    ]
    for text in texts:
        assert compiled.decoded_time(text) == times.DateTime_or_None(text), text


def test_a_claim_leaves_the_connections_time_decoder_as_it_found_it():
    jobs_in("decoder", 2)
    connection.ensure_connection()
    before = dict(getattr(connection.connection, "converter", {}))
    assert len(claim_from_queues(Job.objects.using("default"), ["decoder"], "w1", 2, 60.0)) == 2
    assert dict(getattr(connection.connection, "converter", {})) == before
    [moment] = Job.objects.filter(owner="w1").values_list("run_after", flat=True)[:1]
    assert timezone.is_aware(moment) is settings.USE_TZ


def test_a_read_the_database_refuses_leaves_the_time_decoder_as_it_found_it():
    from django.db import DatabaseError

    connection.ensure_connection()
    before = dict(getattr(connection.connection, "converter", {}))
    statement = compiled.Compiled(Job.objects.values_list("pk", "run_after"))
    statement.sql = statement.sql.replace("SELECT", "SELECT no_such_column,", 1)
    with pytest.raises(DatabaseError):
        statement.rows()
    assert dict(getattr(connection.connection, "converter", {})) == before
