"""bulk_enqueue: same validation as enqueue, one INSERT per chunk, ids back."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from demo.tasks import add, noop, per_customer, per_tenant, rated, send_welcome
from django_dbqueue import bulk_enqueue
from django_dbqueue.exceptions import InvalidTaskArguments
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import InvalidTask, task_enqueued
from tests.conftest import DATABASE, MYSQL_FAMILY

pytestmark = pytest.mark.django_db


def test_bulk_enqueue_writes_every_call_and_returns_results_with_their_ids():
    results = bulk_enqueue(add, [((i, i), {}) for i in range(25)], batch_size=10)

    assert len(results) == 25
    stored = {job.pk: job for job in Job.objects.all()}
    assert sorted(stored) == sorted(int(r.id) for r in results)
    for i, result in enumerate(results):
        job = stored[int(result.id)]
        assert (job.args, job.kwargs, job.status, job.task_path) == ([i, i], {}, "READY", "demo.tasks.add")
        assert (result.args, result.status) == ([i, i], "READY")


def test_bulk_enqueue_keeps_the_tasks_queue_priority_and_max_attempts():
    [result] = bulk_enqueue(send_welcome, [((7,), {})])
    job = Job.objects.get(pk=result.id)
    assert (job.queue_name, job.priority, job.max_attempts) == ("email", 10, 3)


def test_one_insert_per_chunk():
    with CaptureQueriesContext(connection) as queries:
        bulk_enqueue(noop, [((), {})] * 25, batch_size=10)
    inserts = [q for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 3


def test_a_bad_call_raises_and_nothing_is_written():
    with pytest.raises(InvalidTaskArguments, match="args\\[0\\]"):
        bulk_enqueue(add, [((1, 2), {}), ((object(), 2), {})])
    assert Job.objects.count() == 0


def test_an_invalid_task_is_refused_like_enqueue_refuses_it():
    with pytest.raises(InvalidTask):
        bulk_enqueue(noop.using(priority=1000), [((), {})])
    assert Job.objects.count() == 0


def test_task_enqueued_is_sent_for_each_job():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        results = bulk_enqueue(noop, [((), {})] * 3)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [r.id for r in results]


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_jobs_roll_back_with_it():
    with pytest.raises(RuntimeError), transaction.atomic():
        bulk_enqueue(noop, [((), {})] * 5)
        assert Job.objects.count() == 5
        raise RuntimeError("the caller's own failure")
    assert Job.objects.count() == 0


def test_single_enqueue_still_returns_the_new_rows_id():
    result = add.enqueue(2, 3)
    job = Job.objects.get(pk=result.id)
    assert (job.args, job.status, job.attempts, job.worker_ids) == ([2, 3], "READY", 0, [])


def rows_of(results) -> list[dict]:
    """The stored rows of ``results``, in order, without what differs between
    two enqueues of one call (the id and the times)."""
    skip = {"id", "enqueued_at", "run_after", "bulk_token"}
    rows = {row["id"]: row for row in Job.objects.filter(pk__in=[r.id for r in results]).values()}
    return [{k: v for k, v in rows[int(r.id)].items() if k not in skip} for r in results]


@pytest.mark.parametrize(
    ("task_of", "calls"),
    [
        # Empty and given arguments in one bulk: every row one shape.
        (lambda: add, [((1, 2), {}), ((), {"a": 1, "b": 2}), ((1,), {"b": 2})]),
        (lambda: noop, [((), {}), ((), {})]),
        # Per-call keys, a key function returning None for some calls.
        (
            lambda: per_tenant.using(fairness_key=lambda tenant, index: None if tenant == "-" else tenant),
            [(("-", 1), {}), (("acme", 2), {}), (("o'brien %s", 3), {})],
        ),
        (lambda: rated, [(("c1", 1), {}), (("c2", 2), {})]),
        (lambda: per_customer, [(("x", 1, 0.0), {}), (("y", 2, 0.0), {})]),
        (lambda: send_welcome.using(priority=-3, queue_name="slow"), [((7,), {})]),
    ],
)
def test_bulk_rows_are_the_rows_enqueue_writes_one_by_one(task_of, calls):
    task = task_of()
    bulk = bulk_enqueue(task, calls, batch_size=2)
    one_by_one = [task.enqueue(*args, **kwargs) for args, kwargs in calls]
    assert rows_of(bulk) == rows_of(one_by_one)
    assert [(r.args, r.kwargs, r.status, r.task.queue_name) for r in bulk] == [
        (r.args, r.kwargs, r.status, r.task.queue_name) for r in one_by_one
    ]


def test_bulk_rows_in_a_batch_with_metadata_are_the_rows_enqueue_writes():
    from django_dbqueue import batch

    task = add.using(metadata={"source": "import", "quote": "it's 100%"})
    with batch() as group:
        bulk = bulk_enqueue(task, [((1, 2), {}), ((3, 4), {})])
        one_by_one = [task.enqueue(1, 2), task.enqueue(3, 4)]
    assert rows_of(bulk) == rows_of(one_by_one)
    assert {row["batch_id"] for row in rows_of(bulk)} == {group.id}
    assert rows_of(bulk)[0]["metadata"] == {"source": "import", "quote": "it's 100%"}


@pytest.mark.skipif(DATABASE in MYSQL_FAMILY, reason="MySQL and MariaDB read ids by a token")
def test_without_insert_returning_each_row_is_its_own_insert_in_one_transaction_a_chunk(monkeypatch):
    """The path of a database with neither INSERT ... RETURNING nor MySQL's
    last insert id (SQLite before 3.35), taken here by saying the database
    cannot return rows."""
    monkeypatch.setattr(type(connection.features), "can_return_rows_from_bulk_insert", False)
    calls = [((1, 2), {}), ((), {"a": 1, "b": 2}), ((5, 6), {})]
    with CaptureQueriesContext(connection) as queries:
        bulk = bulk_enqueue(add, calls, batch_size=2)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 3
    one_by_one = [add.enqueue(*args, **kwargs) for args, kwargs in calls]
    assert rows_of(bulk) == rows_of(one_by_one)
    assert len({int(r.id) for r in bulk}) == 3


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="MySQL's way: no INSERT ... RETURNING")
def test_without_insert_returning_each_chunk_reads_its_ids_back_by_a_token_of_its_own(monkeypatch):
    """MySQL's path; MariaDB, which returns the ids of a multi-row INSERT,
    takes it here by saying it cannot."""
    monkeypatch.setattr(type(connection.features), "can_return_rows_from_bulk_insert", False)
    calls = [((i, -i), {}) for i in range(5)]
    with CaptureQueriesContext(connection) as queries:
        bulk = bulk_enqueue(add, calls, batch_size=2)
    statements = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(("INSERT", "SELECT"))]
    assert [sql.split()[0] for sql in statements] == ["INSERT", "SELECT"] * 3, "two statements a chunk"
    assert "RETURNING" not in statements[0]
    rows = {job.pk: job for job in Job.objects.filter(pk__in=[r.id for r in bulk])}
    assert [rows[int(r.id)].args for r in bulk] == [[i, -i] for i in range(5)]
    tokens = [rows[int(r.id)].bulk_token for r in bulk]
    assert None not in tokens
    assert tokens[0] == tokens[1] != tokens[2] == tokens[3] != tokens[4], "one token a chunk"
    assert rows_of(bulk) == rows_of([add.enqueue(*args) for args, _ in calls])
    assert Job.objects.filter(pk=add.enqueue(1, 2).id, bulk_token=None).exists(), "enqueue() writes none"
