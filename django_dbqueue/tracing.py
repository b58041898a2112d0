"""OpenTelemetry traces, when its API is installed (the ``otel`` extra):
an enqueue records the current trace context in the job's metadata, and a
worker runs the task in a span linked to it (docs/tracing.md).

Whether the API is installed is decided once per process, at the first
enqueue or the first worker; without it nothing here imports it, and an
enqueue or a job costs one cached call or one attribute test. With the API
but no SDK configured (no tracer provider set), an enqueue asks for the
current span, and a job reads the clock: no span is started, and the API
is asked again for a provider at most once a second.

The task's span is a new trace with a link to the enqueuing context, not
its child: a job may run minutes or days after the request that enqueued
it, once per attempt, and a request may enqueue thousands. As children they
would keep the request's trace open and growing long after its response;
as linked traces each run stands on its own and still leads back to the
request (OpenTelemetry's messaging conventions allow both, a link always
and the parent when one message is processed at a time).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from .enqueue.metadata import TRACE_KEY

if TYPE_CHECKING:
    from .models import Job

logger = logging.getLogger("django_dbqueue")

# What a job runs in when no span is started: entered and left for nothing.
NO_SPAN: AbstractContextManager[None] = nullcontext()
# The longest trace header kept from a row: W3C's traceparent is 55
# characters and a tracestate at most 32 members of about 256.
MAX_HEADER = 8192
TRACER_NAME = "django_dbqueue"
# How long an exiting worker waits for its last spans' export.
FLUSH_MILLIS = 5000
# The span's messaging.system: no value of OpenTelemetry's list fits.
SYSTEM = "django_dbqueue"


@functools.cache
def otel() -> Any:
    """The OpenTelemetry API's modules, or None if it is not installed."""
    try:
        from opentelemetry import context, propagate, trace
    except ImportError:
        return None
    return SimpleNamespace(context=context, propagate=propagate, trace=trace)


def trace_context() -> dict[str, str] | None:
    """The current trace context as the configured propagator writes it
    (W3C ``traceparent`` and ``tracestate`` by default), for a new job's
    metadata; None outside a trace, or without OpenTelemetry."""
    api = otel()
    if api is None or not api.trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    try:
        api.propagate.inject(carrier)
    except Exception:  # a propagator of the application's that fails: no trace, but the job
        logger.warning("The trace context could not be recorded on a job.", exc_info=True)
        return None
    return carrier or None


def flush() -> None:
    """Export the spans the SDK still holds. A worker process forked by
    ``runqueue`` ends without running ``atexit`` handlers, where the SDK
    would export them: a batch processor's last spans would be lost."""
    api = otel()
    if api is None:
        return
    force_flush = getattr(api.trace.get_tracer_provider(), "force_flush", None)
    if force_flush is not None:
        try:
            force_flush(FLUSH_MILLIS)
        except Exception:  # an exporter that fails: its spans, not the worker's exit
            logger.warning("The spans of this worker could not be exported.", exc_info=True)


def job_spans() -> Callable[[Job], AbstractContextManager[Any]] | None:
    """What a worker runs each task in, decided once per worker: None
    without OpenTelemetry."""
    api = otel()
    return None if api is None else JobSpans(api)


class JobSpans:
    """Makes each job's span (kind CONSUMER) with its attributes and its
    link to the enqueuing context."""

    __slots__ = ("api", "look_again", "tracer")

    def __init__(self, api: Any) -> None:
        self.api = api
        self.tracer: Any = None
        self.look_again = 0.0

    def __call__(self, job: Job) -> AbstractContextManager[Any]:
        tracer = self.tracer
        if tracer is None:
            # No SDK configured (yet): nothing would record a span. Looked
            # for again at most once a second: asking the API costs an
            # os.environ lookup, more than the rest of this per job.
            now = time.monotonic()
            if now < self.look_again or (tracer := self.configured(now)) is None:
                return NO_SPAN
        trace = self.api.trace
        try:
            enqueued = self.enqueued(job.metadata)
            linked = trace.get_current_span(enqueued).get_span_context()
            # A trace of its own (no parent span), with the enqueue's baggage.
            base = trace.set_span_in_context(trace.INVALID_SPAN, enqueued)
            span = tracer.start_span(
                f"run {job.task_path}",
                context=base,
                kind=trace.SpanKind.CONSUMER,
                attributes=attributes(job),
                links=[trace.Link(linked)] if linked.is_valid else [],
            )
        except Exception:  # the application's SDK or sampler failing costs the trace, not the job
            logger.warning("Job %s: its span could not be started.", job.pk, exc_info=True)
            return NO_SPAN
        return JobSpan(self.api, span, base)

    def configured(self, now: float) -> Any:
        """The tracer of the configured provider; None while there is none.
        Kept once found: the API sets a process's provider once, and
        refuses another."""
        trace = self.api.trace
        self.look_again = now + 1.0
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            return None
        from .version import __version__

        try:
            self.tracer = provider.get_tracer(TRACER_NAME, __version__)
        except Exception:
            logger.warning("The tracer provider gave no tracer; jobs run without spans.", exc_info=True)
        return self.tracer

    def enqueued(self, metadata: Any) -> Any:
        """The context a row's metadata names (its span and baggage), as the
        propagator reads it; an empty one for anything else: a row may hold
        anything there."""
        carrier = metadata.get(TRACE_KEY) if isinstance(metadata, dict) else None
        if not isinstance(carrier, dict):
            return self.api.context.Context()
        headers = {
            name: value
            for name, value in carrier.items()
            if isinstance(value, str) and len(value) <= MAX_HEADER and len(name) <= MAX_HEADER
        }
        try:
            return self.api.propagate.extract(headers, context=self.api.context.Context())
        except Exception:
            return self.api.context.Context()


def attributes(job: Job) -> dict[str, Any]:
    """The span's attributes: OpenTelemetry's messaging names where they
    fit, and the queue's own ``dbqueue.*``."""
    attempt = job.attempts if job.suspect else job.attempts + 1  # a suspect's was counted in its claim
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "run",
        "messaging.destination.name": job.queue_name,
        "messaging.message.id": str(job.pk),
        "dbqueue.job.id": job.pk,
        "dbqueue.task": job.task_path,
        "dbqueue.queue": job.queue_name,
        "dbqueue.attempt": attempt,
        "dbqueue.max_attempts": job.max_attempts,
    }


class JobSpan:
    """The span of one run of a task: current while the task runs (the
    task's own spans are its children, and the enqueue's baggage is its
    baggage), ended with the run's outcome (an exception event and error
    status when the task raised)."""

    __slots__ = ("api", "base", "span", "token")

    def __init__(self, api: Any, span: Any, base: Any) -> None:
        self.api, self.span, self.base = api, span, base

    def __enter__(self) -> Any:
        self.token = self.api.context.attach(self.api.trace.set_span_in_context(self.span, self.base))
        return self.span

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        span = self.span
        try:
            if exc is not None and kind is not None:
                span.record_exception(exc)
                status = self.api.trace.Status(self.api.trace.StatusCode.ERROR, _brief(kind, exc))
                span.set_status(status)
        except Exception:  # an exception whose own __str__ raises, say
            logger.debug("Recording a task's exception on its span failed.", exc_info=True)
        finally:
            self.api.context.detach(self.token)
            span.end()


def _brief(kind: type[BaseException], exc: BaseException) -> str:
    text = f"{kind.__name__}: {exc}"
    return text if len(text) <= 500 else f"{text[:500]}…"
