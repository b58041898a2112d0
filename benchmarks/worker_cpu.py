"""The worker's own cost per job, in CPU time: N no-op jobs drained by one
in-process ``Worker`` in burst mode, measuring this process's CPU seconds
(``time.process_time``), which the database's work and other processes on a
shared machine do not inflate the way they inflate jobs per second.

    .venv/bin/python benchmarks/worker_cpu.py [N] [ROUNDS] [--tracing]

Run it against two checkouts, interleaved, to compare them (docs/performance.md,
"What the guarantees cost"). With ``--tracing`` (OpenTelemetry's API and SDK
installed), each round drains N jobs three times, in turn: as without
OpenTelemetry (the worker's spans off, as tracing.py decides when the API is
not installed), with the API but no SDK configured, and with the SDK
recording every span into its in-memory exporter (docs/tracing.md).
"""

import sys
import time

import common

VARIANTS = ("without OpenTelemetry", "API, no SDK", "SDK, every span recorded")


def main() -> None:
    numbers = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    n = int(numbers[0]) if numbers else 20_000
    rounds = int(numbers[1]) if len(numbers) > 1 else 3
    variants = VARIANTS if "--tracing" in sys.argv else (None,)
    common.create_database()
    from django.db import connections

    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker import Worker

    try:
        for _ in range(rounds):
            for variant in variants:
                common.reset_jobs()
                bulk_enqueue(noop, [((), {})] * n)
                connections.close_all()
                with tracing(variant):
                    cpu, wall = time.process_time(), time.perf_counter()
                    Worker(task_backends["default"], ["default"], batch=200, burst=True).run()
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                label = f" ({variant})" if variant else ""
                print(
                    f"{n} jobs{label}: {cpu / n * 1e6:.1f} µs CPU per job, {n / wall:,.0f} jobs/s wall",
                    flush=True,
                )
    finally:
        common.drop_database()


class tracing:  # noqa: N801 (used as a function: with tracing(variant): ...)
    """The worker's tracing as ``variant`` says, for the block."""

    def __init__(self, variant: str | None) -> None:
        self.variant = variant

    def __enter__(self) -> None:
        from django_dbqueue.worker.process import execution

        self.job_spans = execution.job_spans
        if self.variant == VARIANTS[0]:
            execution.job_spans = lambda: None
        elif self.variant == VARIANTS[2]:
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

            self.exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(self.exporter))
            trace.set_tracer_provider(provider)

    def __exit__(self, *exc: object) -> None:
        from django_dbqueue.worker.process import execution

        execution.job_spans = self.job_spans
        if self.variant == VARIANTS[2]:
            from opentelemetry import trace
            from opentelemetry.util._once import Once

            assert len(self.exporter.get_finished_spans()) > 0
            # Back to no SDK configured (as the SDK's own tests do).
            trace._TRACER_PROVIDER_SET_ONCE = Once()
            trace._TRACER_PROVIDER = None


if __name__ == "__main__":
    common.configure()
    main()
