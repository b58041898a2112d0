"""Prometheus metrics of the queue, through the official
``prometheus_client`` (the optional extra ``django-dbqueue[metrics]``).

:class:`QueueCollector` reads only the database, so it says the same to
whoever asks: jobs per queue and status, due jobs, lag, paused queues,
pending cancel requests, live workers, and per task the last minute's
outcomes and run and wait times. Read at each scrape (a few grouped
queries that indexes serve, and the latest 2,000 finished jobs' times).
Queues that no backend lists are summed under one label (``labelled``),
and the tasks past the 50 busiest (``task_metrics``).

:func:`metrics_view` serves it from a Django URL; ``runqueue
--metrics-port N`` serves it beside what that runqueue's own processes did
(worker/supervisor/runqueue_metrics.py).
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
from .task_stats import REPEATED_SAMPLE, TaskFigures, task_figures

if TYPE_CHECKING:
    from ..backend import DatabaseBackend

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
            by_task = task_figures(self.backend.database, minutes=1, sample=REPEATED_SAMPLE)
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
        yield from task_metrics(by_task)


# Tasks that get a label of their own in the per-task metrics: the busiest
# of the last minute; the rest are summed under OTHER, so a project with
# thousands of tasks (or rows naming made-up ones) does not grow the series.
MOST_TASKS = 50


def task_metrics(figures: list[TaskFigures]) -> Iterator[Any]:
    """Jobs finished in the last minute per task and outcome, and the
    median and 95th percentile of the latest runs' run and wait times
    (operations/task_stats.py), for the MOST_TASKS busiest tasks."""
    from prometheus_client.core import GaugeMetricFamily

    finished = GaugeMetricFamily(
        "dbqueue_task_jobs_finished",
        "Jobs that finished in the last minute, per task and outcome.",
        labels=["task", "status"],
    )
    run = GaugeMetricFamily(
        "dbqueue_task_run_seconds",
        "The latest runs' run time per task, by quantile.",
        labels=["task", "quantile"],
    )
    wait = GaugeMetricFamily(
        "dbqueue_task_wait_seconds",
        "The latest runs' wait from due to start per task, by quantile.",
        labels=["task", "quantile"],
    )
    other = TaskFigures(OTHER)
    for rank, task in enumerate(figures):
        if rank >= MOST_TASKS:
            for outcome in ("successful", "failed", "cancelled"):
                setattr(other, outcome, getattr(other, outcome) + getattr(task, outcome))
            continue
        for outcome in ("successful", "failed", "cancelled"):
            finished.add_metric([task.task, outcome.upper()], getattr(task, outcome))
        for quantile, run_value, wait_value in (
            ("0.5", task.run_p50, task.wait_p50),
            ("0.95", task.run_p95, task.wait_p95),
        ):
            if run_value is not None:
                run.add_metric([task.task, quantile], run_value)
            if wait_value is not None:
                wait.add_metric([task.task, quantile], wait_value)
    if len(figures) > MOST_TASKS:
        for outcome in ("successful", "failed", "cancelled"):
            finished.add_metric([OTHER, outcome.upper()], getattr(other, outcome))
    yield from (finished, run, wait)


def known_queues(backend: DatabaseBackend) -> set[str]:
    """The queues that get their own series: those in the QUEUES of every
    DatabaseBackend kept in this backend's database (a site may run one
    backend per queue group)."""
    from ..routing import is_queue_backend
    from ..tasks_api import task_backends

    known = set(backend.queues)
    for other in task_backends.all():
        if is_queue_backend(other) and other.database == backend.database:
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


def registry(backend: DatabaseBackend) -> Any:
    """A registry of the queue's collector; runqueue's endpoint adds its
    own (worker/supervisor/runqueue_metrics.py)."""
    reg = client().CollectorRegistry(auto_describe=False)
    reg.register(QueueCollector(backend))
    return reg


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The queue's metrics (not any runqueue's) in Prometheus's text format,
    for ``path("metrics/", metrics_view)``. Anyone who can reach the URL can
    read them: route it where only your Prometheus can."""
    from ..tasks_api import DEFAULT_TASK_BACKEND_ALIAS, task_backends

    prometheus = client()
    backend = cast("DatabaseBackend", task_backends[DEFAULT_TASK_BACKEND_ALIAS])
    body = prometheus.generate_latest(registry(backend))
    return HttpResponse(body, content_type=prometheus.CONTENT_TYPE_LATEST)
