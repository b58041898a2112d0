"""Tasks for tests/test_metadata.py and tests/test_tracing.py: each says
what it saw of its job (metadata, the current span). Runnable when OPTIONS
ALLOWED_TASK_MODULES names this module (TRACING_TASKS below)."""

import copy

from django.conf import settings
from django.test import override_settings

from django_dbqueue import current_job, task

TRACING_TASKS = copy.deepcopy(settings.TASKS)
TRACING_TASKS["default"]["OPTIONS"]["ALLOWED_TASK_MODULES"] = ["tests.tracing_tasks"]
TRACING_TASKS["default"]["OPTIONS"]["RETRY_BACKOFF_BASE"] = 0.01


def span_seen() -> dict:
    """The trace and span ids of the span current in the task, if any, in
    hex as a traceparent writes them: a trace id is a 128-bit integer, which
    MySQL's JSON would round (so a task returning one fails there)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return {}
    from opentelemetry import baggage

    context = trace.get_current_span().get_span_context()
    seen = (
        {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
        if context.is_valid
        else {}
    )
    if baggage.get_all():
        seen["baggage"] = dict(baggage.get_all())
    return seen


# Defining a task validates it against the backend, whose allow-list must
# already name this module.
with override_settings(TASKS=TRACING_TASKS):

    @task
    def own_metadata(a: int = 0) -> dict:
        job = current_job()
        assert job is not None
        return {"metadata": job.metadata, "span": span_seen()}

    @task(metadata={"tenant": "acme", "source": "default"})
    def tenant_task() -> dict:
        job = current_job()
        assert job is not None
        return job.metadata

    @task(max_attempts=2)
    def fails(reason: str) -> None:
        raise ValueError(reason)

    @task
    async def async_span() -> dict:
        """An async task runs in an event loop on another thread: its span must be current there too."""
        return span_seen()
