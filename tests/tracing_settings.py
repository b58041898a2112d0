"""The test project's settings plus OpenTelemetry's SDK, configured as
docs/tracing.md says (before runqueue forks its workers), with a batch
processor whose spans go, one JSON line each, to DBQUEUE_SPANS_FILE: for
the runqueue processes of tests/test_tracing.py."""

import copy
import json
import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from testproject.settings import *  # noqa: F403
from testproject.settings import TASKS as PROJECT_TASKS

# As tests/tracing_tasks.py's TRACING_TASKS: its tasks may be run.
TASKS = copy.deepcopy(PROJECT_TASKS)
TASKS["default"]["OPTIONS"]["ALLOWED_TASK_MODULES"] = ["tests.tracing_tasks"]


def as_line(span) -> str:
    links = [f"{link.context.trace_id:032x}" for link in span.links]
    return json.dumps({"job": span.attributes["dbqueue.job.id"], "pid": os.getpid(), "links": links}) + "\n"


provider = TracerProvider()
# Far longer than the run: only a flush at the workers' exit exports the spans.
spans_file = open(os.environ["DBQUEUE_SPANS_FILE"], "a")  # kept open for the process's life
provider.add_span_processor(
    BatchSpanProcessor(ConsoleSpanExporter(out=spans_file, formatter=as_line), schedule_delay_millis=600_000)
)
trace.set_tracer_provider(provider)
