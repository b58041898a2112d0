"""Metadata on a job (issue 23): a small JSON object set at enqueue, read
by the task, by get_result() and on the admin's job page; refused with a
clear message when it cannot be stored. A row's metadata written by SQL may
be anything: the job runs or fails on its own, and the worker goes on."""

import json

import pytest
from django.db import connection
from django.test import override_settings

from django_dbqueue import bulk_enqueue
from django_dbqueue.enqueue.metadata import MAX_METADATA_BYTES
from django_dbqueue.jsonfield import Undecodable
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import InvalidTask, task_backends
from django_dbqueue.testing import run_due_jobs
from tests import tracing_tasks as tt
from tests.json_texts import NESTED, parses_json, stored_instead

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tracing_tasks")]


@pytest.fixture
def tracing_tasks():
    with override_settings(TASKS=tt.TRACING_TASKS):
        yield


def insert(task_path: str, metadata: str | None = None) -> int:
    """A row as a plain SQL INSERT from another program writes it; its id."""
    names, values = ["task_path"], [task_path]
    if metadata is not None:
        names.append("metadata")
        values.append(metadata)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO django_dbqueue_job ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})",
            values,
        )
        cursor.execute("SELECT MAX(id) FROM django_dbqueue_job")
        pk = cursor.fetchone()[0]
    # Due now on the queue's clock: with USE_TZ = False a plain INSERT's
    # default is UTC, hours ahead of local time west of it (docs/sql-contract.md).
    Job.objects.filter(pk=pk).update(run_after=task_backends["default"].now())
    return pk


def test_metadata_given_at_enqueue_reaches_the_row_the_task_and_get_result():
    metadata = {"tenant": "acme", "request": {"id": "r-1", "path": "/é"}, "n": 3}
    result = tt.own_metadata.using(metadata=metadata).enqueue(1)
    assert Job.objects.get(pk=result.id).metadata == metadata
    assert result.metadata == metadata
    [ran] = run_due_jobs()
    assert ran.return_value["metadata"] == metadata
    assert task_backends["default"].get_result(result.id).metadata == metadata


def test_a_task_default_applies_and_using_replaces_it():
    default = tt.tenant_task.enqueue()
    replaced = tt.tenant_task.using(metadata={"tenant": "other"}).enqueue()
    runs = {run.id: run.return_value for run in run_due_jobs()}
    assert runs == {
        default.id: {"tenant": "acme", "source": "default"},
        replaced.id: {"tenant": "other"},
    }


def test_without_metadata_the_row_holds_an_empty_object_and_the_insert_leaves_it_to_its_default():
    backend = task_backends["default"]
    plan = backend.plan(tt.own_metadata)
    job = plan.job([], {}, backend.now())
    sql = plan.statement(job)[0]
    assert "metadata" not in sql[sql.index("(") + 1 : sql.index(")")], "the columns written"
    result = tt.own_metadata.enqueue()
    assert (Job.objects.get(pk=result.id).metadata, result.metadata) == ({}, {})
    assert Job.objects.get(pk=insert("tests.tracing_tasks.own_metadata")).metadata == {}


def test_bulk_enqueue_gives_every_job_the_metadata():
    results = bulk_enqueue(tt.own_metadata.using(metadata={"batch": "b1"}), [((i,), {}) for i in range(3)])
    assert [job.metadata for job in Job.objects.filter(pk__in=[r.id for r in results])] == [
        {"batch": "b1"}
    ] * 3


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (["a", "list"], r"metadata must be a dict \(a JSON object\), not list"),
        ("text", "metadata must be a dict"),
        ({"when": __import__("datetime").date(2026, 1, 1)}, r"metadata\['when'\] is a datetime.date"),
        ({1: "int key"}, "metadata has the key 1 of type int"),
        ({"x": float("inf")}, r"metadata\['x'\] is the float inf"),
        ({"big": "x" * MAX_METADATA_BYTES}, f"more than the limit of {MAX_METADATA_BYTES}"),
    ],
)
def test_metadata_that_cannot_be_stored_is_refused_by_name_and_nothing_is_written(metadata, message):
    with pytest.raises(InvalidTask, match=message):
        tt.own_metadata.using(metadata=metadata).enqueue()
    assert not Job.objects.exists()


def test_the_limit_is_counted_as_compact_utf8_json():
    key = "k"
    fill = MAX_METADATA_BYTES - len(json.dumps({key: ""}, separators=(",", ":")))
    tt.own_metadata.using(metadata={key: "x" * fill}).enqueue()  # exactly the limit
    with pytest.raises(InvalidTask, match=f"takes {MAX_METADATA_BYTES + 1} bytes"):
        tt.own_metadata.using(metadata={key: "é" + "x" * (fill - 1)}).enqueue()


def test_a_bad_task_default_is_refused_when_the_task_is_defined():
    from django_dbqueue import task

    with pytest.raises(InvalidTask, match="metadata must be a dict"):
        task(metadata=[1])(tt.span_seen)


def hostile_metadata() -> dict[str, str]:
    """Rows' metadata as another program may write it: the job runs, its
    task reads {}. (MySQL refuses the number itself: tests/json_texts.py.)"""
    rows = {"array": "[1, 2]", "string": '"text"', "number": "7", "junk_trace": '{"trace_context": [1]}'}
    rows["huge"] = json.dumps({"blob": "x" * 500_000})  # far over what enqueue() accepts
    # Text the database's JSON check accepts and Python cannot decode.
    rows["undecodable"] = '{"a": 1e5000}' if connection.vendor == "postgresql" else '{"a": 1e400}'
    if connection.vendor == "postgresql":
        rows["undecodable"] = '{"a": ' + "9" * 4500 + "}"
    if parses_json():
        rows["undecodable"] = '{"a": ' + NESTED + "}"
    return rows


def test_mysql_refuses_metadata_python_could_not_decode():
    def write(number: str) -> None:
        insert("tests.tracing_tasks.own_metadata", '{"a": ' + number + "}")

    for number in ("1e400", "9" * 4500):
        assert stored_instead(number, write) == (NESTED if parses_json() else number)


def test_a_row_whose_metadata_is_not_an_object_still_runs_and_reads_as_empty():
    ids = {
        name: insert("tests.tracing_tasks.own_metadata", text) for name, text in hostile_metadata().items()
    }
    good = tt.own_metadata.using(metadata={"ok": True}).enqueue()
    runs = {run.id: run for run in run_due_jobs()}
    for name, pk in ids.items():
        run = runs[str(pk)]
        assert run.status == "SUCCESSFUL", (name, run)
        expected = {"trace_context": [1]} if name == "junk_trace" else {}
        if name == "huge":
            expected = json.loads(hostile_metadata()["huge"])
        assert run.return_value["metadata"] == expected, name
        assert task_backends["default"].get_result(str(pk)).metadata == expected
    assert runs[good.id].return_value["metadata"] == {"ok": True}
    assert isinstance(Job.objects.get(pk=ids["undecodable"]).metadata, Undecodable)


def test_the_job_page_shows_the_metadata_escaped_and_read_only(admin_client):
    result = tt.own_metadata.using(metadata={"note": "<script>alert(1)</script>", "n": 1}).enqueue()
    page = admin_client.get(f"/admin/django_dbqueue/job/{result.id}/change/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert "&quot;n&quot;: 1" in page  # pretty-printed
    assert 'name="metadata"' not in page  # shown, not a form field
    undecodable = insert("tests.tracing_tasks.own_metadata", hostile_metadata()["undecodable"])
    page = admin_client.get(f"/admin/django_dbqueue/job/{undecodable}/change/")
    assert page.status_code == 200
    assert "Python cannot decode this text as stored" in page.content.decode()


def test_the_job_list_search_finds_metadata(admin_client):
    found = tt.own_metadata.using(metadata={"tenant": "zebra-corp"}).enqueue()
    tt.own_metadata.using(metadata={"tenant": "other"}).enqueue()
    page = admin_client.get("/admin/django_dbqueue/job/", {"q": "zebra-corp"}).content.decode()
    linked = {int(pk) for pk in __import__("re").findall(r"/admin/django_dbqueue/job/(\d+)/change/", page)}
    assert linked == {int(found.id)}
