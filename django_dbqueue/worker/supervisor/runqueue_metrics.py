"""The metrics of one ``runqueue``, which only its supervisor can see:
jobs processed, failed, cancelled while running, expired and interrupted by a stop,
run and claim durations, its live worker processes
(:class:`ProcessCollector`).

Its workers are forked processes, so each counts into the shared memory its
supervisor gave it (worker/shared.py, timings.py) and the supervisor, which serves
the endpoint (:func:`serve`), sums the slots at each scrape: no
multiprocess directory, and a restarted worker keeps its slot's counts. The
endpoint serves the queue's own metrics beside them (operations/metrics.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...operations.metrics import client, registry

if TYPE_CHECKING:
    from ...backend import DatabaseBackend
    from ..shared import SharedState


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
        cancelled, interrupted, expired = self.state.control_totals()
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
        yield CounterMetricFamily(
            "dbqueue_jobs_expired",
            "Jobs this runqueue's workers ended CANCELLED without running, claimed past their deadline.",
            value=expired,
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


def serve(port: int, addr: str, backend: DatabaseBackend, state: SharedState) -> Any:
    """Serve ``/metrics`` on ``addr:port`` from a thread of this process:
    the queue's metrics and this runqueue's."""
    reg = registry(backend)
    reg.register(ProcessCollector(state))
    server, _thread = client().start_http_server(port, addr=addr, registry=reg)
    return server
