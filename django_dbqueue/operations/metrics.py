"""Prometheus metrics, through the official ``prometheus_client`` (the
optional extra ``django-dbqueue[metrics]``).

Two collectors:

- :class:`QueueCollector`: what the database says, the same for whoever
  asks: jobs per queue and status, due jobs, lag, paused queues, pending
  cancel requests, live workers. Read at each scrape (a few grouped
  queries that indexes serve). Queues that no backend lists are summed
  under one label (``labelled``).
- :class:`ProcessCollector`: what one ``runqueue`` did: jobs processed,
  failed, cancelled while running and interrupted by a stop, run and claim
  durations, its live worker processes. Its workers
  are forked processes, so each counts into the shared memory its
  supervisor gave it (worker/shared.py, worker/timings.py) and the
  supervisor, which serves the endpoint, sums the slots at each scrape:
  no multiprocess directory, and a restarted worker keeps its slot's counts.

``runqueue --metrics-port N`` serves both; :func:`metrics_view` serves the
queue collector from a Django URL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.http import HttpRequest, HttpResponse

from ..db import DB_ERRORS, brief
from .stats import QueueFigures, snapshot

if TYPE_CHECKING:
    from ..backend import DatabaseBackend
    from ..worker.shared import SharedState

logger = logging.getLogger("django_dbqueue")

# The queue label of the jobs in queues no backend lists (docs/operations.md).
OTHER = "(other)"


def client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ImproperlyConfigured(
            "Metrics need the prometheus_client package: pip install 'django-dbqueue[metrics]'."
        ) from exc
    return prometheus_client


class QueueCollector:
    def __init__(self, backend: DatabaseBackend) -> None:
        self.backend = backend

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily("dbqueue_database_up", "1 if the queue's database answered this scrape.")
        known = known_queues(self.backend)
        try:
            snap = snapshot(
                self.backend.database,
                minutes=1,
                alive_within=self.backend.config.LEASE_SECONDS,
                configured=sorted(known),
            )
        except DB_ERRORS as exc:
            logger.warning("Metrics: the database did not answer (%s).", brief(exc))
            up.add_metric([], 0)
            yield up
            return
        finally:
            connections.close_all()  # this scrape's thread holds no connection between scrapes
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("dbqueue_jobs", "Jobs per queue and status.", labels=["queue", "status"])
        due = GaugeMetricFamily("dbqueue_jobs_due", "READY jobs due now, per queue.", labels=["queue"])
        lag = GaugeMetricFamily(
            "dbqueue_queue_lag_seconds",
            "Age of the oldest due job per queue, by the database's clock (0: none due).",
            labels=["queue"],
        )
        paused = GaugeMetricFamily("dbqueue_queue_paused", "1 if the queue is paused.", labels=["queue"])
        pending = GaugeMetricFamily(
            "dbqueue_cancel_requests_pending",
            "Jobs asked to stop (a cancel requested while running, or by SQL) that no worker has ended yet.",
            labels=["queue"],
        )
        # A queue a live worker serves is known too (QUEUES may be empty: any queue).
        known.update(name for worker in snap.workers for name in worker.queues if isinstance(name, str))
        for q in labelled(snap.queues, known):
            for status, n in q.counts.items():
                jobs.add_metric([q.name, status], n)
            due.add_metric([q.name], q.due)
            lag.add_metric([q.name], q.lag_seconds or 0.0)
            paused.add_metric([q.name], int(q.paused))
            pending.add_metric([q.name], q.cancel_pending)
        alive = GaugeMetricFamily(
            "dbqueue_workers_alive", "Worker processes on every host whose heartbeat is fresh."
        )
        alive.add_metric([], len(snap.workers))
        yield from (jobs, due, lag, paused, pending, alive)


def known_queues(backend: DatabaseBackend) -> set[str]:
    """The queues that get their own series: those in the QUEUES of every
    DatabaseBackend kept in this backend's database (a site may run one
    backend per queue group)."""
    from ..backend import DatabaseBackend
    from ..tasks_api import task_backends

    known = set(backend.queues)
    for other in task_backends.all():
        if isinstance(other, DatabaseBackend) and other.database == backend.database:
            known.update(other.queues)
    return known


def labelled(queues: list[QueueFigures], known: set[str]) -> list[QueueFigures]:
    """Every ``known`` queue and every paused one, then one :data:`OTHER`
    entry (always there, zero if empty) that sums all the other queues: a
    queue name is whatever a row says, and a series per typo or made-up
    name would grow without bound (3,000 names made 24,026 series)."""
    own = [q for q in queues if q.name in known or q.paused]
    names = {q.name for q in own}
    own += [QueueFigures(name) for name in sorted(known - names)]  # known, no jobs yet
    other = QueueFigures(OTHER)
    for q in queues:
        if q.name in names:
            continue
        for status, n in q.counts.items():
            other.counts[status] = other.counts.get(status, 0) + n
        other.due += q.due
        other.cancel_pending += q.cancel_pending
        if q.lag_seconds is not None:
            other.lag_seconds = max(other.lag_seconds or 0.0, q.lag_seconds)
    return [*own, other]


class ProcessCollector:
    def __init__(self, state: SharedState) -> None:
        self.state = state

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        processed, failed = self.state.totals()
        yield CounterMetricFamily(
            "dbqueue_jobs_processed", "Jobs this runqueue's workers ran (any outcome).", value=processed
        )
        yield CounterMetricFamily(
            "dbqueue_jobs_failed",
            "Jobs this runqueue's workers ran that ended FAILED (out of attempts).",
            value=failed,
        )
        cancelled, interrupted = self.state.control_totals()
        yield CounterMetricFamily(
            "dbqueue_jobs_cancelled",
            "Jobs this runqueue's workers stopped because a cancel was requested while they ran.",
            value=cancelled,
        )
        yield CounterMetricFamily(
            "dbqueue_jobs_interrupted",
            "Jobs this runqueue's workers gave back unfinished when they stopped (past STOP_TIMEOUT).",
            value=interrupted,
        )
        yield GaugeMetricFamily(
            "dbqueue_worker_processes",
            "This runqueue's live worker processes.",
            value=len(self.state.live_names()),
        )
        for name, doc, timings in (
            ("dbqueue_job_run_seconds", "How long jobs ran.", self.state.timings.runs),
            (
                "dbqueue_claim_seconds",
                "How long claims took, empty ones included.",
                self.state.timings.claims,
            ),
        ):
            buckets, total = timings.totals()
            yield HistogramMetricFamily(name, doc, buckets=buckets, sum_value=total)


def registry(backend: DatabaseBackend, state: SharedState | None = None) -> Any:
    prometheus = client()
    reg = prometheus.CollectorRegistry(auto_describe=False)
    reg.register(QueueCollector(backend))
    if state is not None:
        reg.register(ProcessCollector(state))
    return reg


def serve(port: int, addr: str, backend: DatabaseBackend, state: SharedState) -> Any:
    """Serve ``/metrics`` on ``addr:port`` from a thread of this process."""
    server, _thread = client().start_http_server(port, addr=addr, registry=registry(backend, state))
    return server


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The queue's metrics (not any runqueue's) in Prometheus's text format,
    for ``path("metrics/", metrics_view)``. Anyone who can reach the URL can
    read them: route it where only your Prometheus can."""
    from ..tasks_api import DEFAULT_TASK_BACKEND_ALIAS, task_backends

    prometheus = client()
    backend = cast("DatabaseBackend", task_backends[DEFAULT_TASK_BACKEND_ALIAS])
    body = prometheus.generate_latest(registry(backend))
    return HttpResponse(body, content_type=prometheus.CONTENT_TYPE_LATEST)
