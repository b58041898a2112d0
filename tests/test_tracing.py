"""Traces (issue 23): with OpenTelemetry, a view's trace id reaches the span
a worker runs its task in, as a link; the span carries the job's
attributes and the task's failure. Without a configured SDK no span is
started, and without OpenTelemetry nothing of it is imported.

The SDK's global tracer provider can be set once per process: the
``spans`` fixture sets it for one test and puts the API's globals back
afterwards, so that other tests run as without an SDK."""

import json
import subprocess
import sys
import time

import pytest
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.test import override_settings
from django.urls import path
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from django_dbqueue.enqueue.metadata import TRACE_KEY
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.testing import run_due_jobs
from django_dbqueue.worker import Worker
from tests import tracing_tasks as tt
from tests.conftest import ROOT, once_per_run, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("tracing_tasks")]
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def enqueue_view(request: HttpRequest) -> JsonResponse:
    """A view in a server span, as OpenTelemetry's Django instrumentation
    would run it, that enqueues a task."""
    with trace.get_tracer("tests").start_as_current_span("GET /enqueue/", kind=SpanKind.SERVER) as span:
        result = tt.own_metadata.enqueue(7)
        context = span.get_span_context()
        return JsonResponse({"id": result.id, "trace_id": context.trace_id, "span_id": context.span_id})


urlpatterns = [path("enqueue/", enqueue_view)]


@pytest.fixture
def tracing_tasks():
    with override_settings(TASKS=tt.TRACING_TASKS):
        yield


def reset_tracer_provider() -> None:
    """Back to the API's state before any SDK was set (as the SDK's own tests do)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def spans():
    """The spans finished while the test runs, through the SDK's in-memory exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reset_tracer_provider()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    reset_tracer_provider()


def job_spans(exporter: InMemorySpanExporter) -> list:
    return [span for span in exporter.get_finished_spans() if span.kind == SpanKind.CONSUMER]


def insert(task_path: str, metadata: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_dbqueue_job (task_path, metadata) VALUES (%s, %s)", [task_path, metadata]
        )
        cursor.execute("SELECT MAX(id) FROM django_dbqueue_job")
        pk = cursor.fetchone()[0]
    # Due now on the queue's clock: with USE_TZ = False a plain INSERT's
    # default is UTC, hours ahead of local time west of it (docs/sql-contract.md).
    Job.objects.filter(pk=pk).update(run_after=task_backends["default"].now())
    return pk


def test_a_trace_id_crosses_from_a_view_to_the_task_span_as_a_link(client, spans):
    with override_settings(ROOT_URLCONF=__name__):
        view = client.get("/enqueue/").json()
    stored = Job.objects.get(pk=view["id"]).metadata[TRACE_KEY]
    assert stored["traceparent"].split("-")[1:3] == [f"{view['trace_id']:032x}", f"{view['span_id']:016x}"]
    assert Worker(task_backends["default"], ["default"], burst=True).run() == 0

    [span] = job_spans(spans)
    assert span.name == "run tests.tracing_tasks.own_metadata"
    assert span.parent is None  # a trace of its own, linked to the request's
    [link] = span.links
    assert (link.context.trace_id, link.context.span_id) == (view["trace_id"], view["span_id"])
    assert span.context.trace_id != view["trace_id"]
    job = Job.objects.get(pk=view["id"])
    assert dict(span.attributes) == {
        "messaging.system": "django_dbqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "messaging.destination.name": job.queue_name,
        "messaging.message.id": str(job.pk),
        "dbqueue.job.id": job.pk,
        "dbqueue.task": job.task_path,
        "dbqueue.queue": job.queue_name,
        "dbqueue.attempt": job.attempts,
        "dbqueue.max_attempts": job.max_attempts,
    }
    assert span.status.status_code == StatusCode.UNSET and not span.events
    # The task ran with its span current: its own spans are the span's children.
    seen = job.return_value["span"]
    assert (seen["trace_id"], seen["span_id"]) == (
        f"{span.context.trace_id:032x}",
        f"{span.context.span_id:016x}",
    )


def test_a_failing_task_span_has_error_status_and_the_exception_per_attempt(spans):
    with trace.get_tracer("tests").start_as_current_span("enqueuer"):
        result = tt.fails.enqueue("boom")
    run_due_jobs()
    time.sleep(0.05)  # the retry's backoff (RETRY_BACKOFF_BASE 0.01)
    run_due_jobs()
    assert Job.objects.get(pk=result.id).status == "FAILED"

    attempts = job_spans(spans)
    assert [span.attributes["dbqueue.attempt"] for span in attempts] == [1, 2]
    for span in attempts:
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == "ValueError: boom"
        [event] = span.events
        assert (event.name, event.attributes["exception.type"]) == ("exception", "ValueError")
        assert event.attributes["exception.message"] == "boom"
        assert len(span.links) == 1


def test_an_async_task_runs_with_its_span_current(spans):
    tt.async_span.enqueue()
    [run] = run_due_jobs()
    [span] = job_spans(spans)
    assert run.return_value == {
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
    }


def test_the_enqueues_baggage_is_the_tasks_baggage(spans):
    from opentelemetry import baggage, context

    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with trace.get_tracer("tests").start_as_current_span("enqueuer"):
            result = tt.own_metadata.enqueue()
    finally:
        context.detach(token)
    assert Job.objects.get(pk=result.id).metadata[TRACE_KEY]["baggage"] == "tenant=acme"
    [run] = run_due_jobs()
    assert run.return_value["span"]["baggage"] == {"tenant": "acme"}


def test_an_enqueue_outside_a_trace_records_none_and_its_span_has_no_link(spans):
    result = tt.own_metadata.using(metadata={"tenant": "acme"}).enqueue()
    assert Job.objects.get(pk=result.id).metadata == {"tenant": "acme"}
    run_due_jobs()
    [span] = job_spans(spans)
    assert not span.links


def test_trace_contexts_written_by_sql_are_linked_if_valid_and_never_stop_a_worker(spans):
    """A producer in another language may write the key; a row may hold junk there."""
    path = "tests.tracing_tasks.own_metadata"
    linked = insert(path, json.dumps({TRACE_KEY: {"traceparent": TRACEPARENT}}))
    junk = [
        insert(path, json.dumps(value))
        for value in (
            {TRACE_KEY: {"traceparent": "00-garbage"}},
            {TRACE_KEY: {"traceparent": 5, "tracestate": ["x"]}},
            {TRACE_KEY: {"traceparent": "0" * 20_000}},
            {TRACE_KEY: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
            [TRACE_KEY],
        )
    ]
    assert Worker(task_backends["default"], ["default"], burst=True).run() == 0
    assert {job.status for job in Job.objects.all()} == {"SUCCESSFUL"}
    links = {span.attributes["dbqueue.job.id"]: span.links for span in job_spans(spans)}
    assert set(links) == {linked, *junk}
    [link] = links[linked]
    assert f"{link.context.trace_id:032x}" == TRACEPARENT.split("-")[1]
    assert all(not links[pk] for pk in junk)


def test_with_the_api_but_no_sdk_configured_no_span_is_started_and_nothing_recorded():
    reset_tracer_provider()
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with trace.get_tracer("tests").start_as_current_span("enqueuer"):
        result = tt.own_metadata.enqueue()
    [run] = run_due_jobs()
    assert run.return_value == {"metadata": {}, "span": {}}
    assert Job.objects.get(pk=result.id).metadata == {}


@once_per_run("the tests above run the same spans in-process on every database")
def test_runqueue_workers_export_their_last_spans_before_they_exit(spans, runqueue, tmp_path):
    """A forked worker skips atexit, where the SDK would export what its
    batch processor holds: the worker flushes it itself."""
    with trace.get_tracer("tests").start_as_current_span("enqueuer") as enqueuer:
        ids = sorted(int(tt.own_metadata.enqueue(i).id) for i in range(20))
    exported = tmp_path / "spans.jsonl"
    run = runqueue(
        "--processes", "2", "--burst",
        DJANGO_SETTINGS_MODULE="tests.tracing_settings",
        PYTHONPATH=str(ROOT),
        DBQUEUE_SPANS_FILE=str(exported),
    )  # fmt: skip
    assert run.wait(60) == 0, run.output()[-3000:]
    assert set(Job.objects.values_list("status", flat=True)) == {"SUCCESSFUL"}
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sorted(line["job"] for line in lines) == ids
    assert {tuple(line["links"]) for line in lines} == {(f"{enqueuer.get_span_context().trace_id:032x}",)}


# Run with the import of opentelemetry refused, as where it is not installed.
WITHOUT_OTEL = """
import importlib.abc, json, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, Refuse())
sys.path[:0] = ["testproject", "."]
import django
django.setup()
from demo.tasks import add
from django_dbqueue import tracing
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.worker import Worker

result = add.using(metadata={"tenant": "acme"}).enqueue(2, 3)
Worker(task_backends["default"], ["default"], burst=True).run()
job = Job.objects.get(pk=result.id)
print(json.dumps({
    "status": job.status, "value": job.return_value, "metadata": job.metadata,
    "decided": repr(tracing.otel()),
    "loaded": sorted(name for name in sys.modules if name.partition(".")[0] == "opentelemetry"),
}))
"""


@once_per_run("the same code runs on every database (test_metadata.py enqueues there)")
def test_without_opentelemetry_nothing_changes_and_nothing_is_imported():
    env = subprocess_env(DJANGO_SETTINGS_MODULE="testproject.settings")
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {
        "status": "SUCCESSFUL",
        "value": 5,
        "metadata": {"tenant": "acme"},
        "decided": "None",
        "loaded": [],
    }
