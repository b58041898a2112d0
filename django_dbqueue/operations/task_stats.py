"""Figures per task over a recent window: how many runs ended each way, and
how long the last run of each took and waited (``queuestats --tasks``, the
admin dashboard's task table).

Everything is read through the ``finished_at`` index, one range: the
counts are one grouped query over the jobs that finished in the window; the
times come from the latest ``SAMPLE`` of them (a busy window holds far more
jobs than percentiles need), as the last run's ``finished_at -
last_attempted_at`` (run) and ``last_attempted_at - run_after`` (wait: from
when it was due, a retry's due time for a retried job, to its start).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Count

from ..clock import read_database_now
from ..status import FINISHED, Status

# The latest finished jobs the times are read from: by queuestats --tasks,
# and by what repeats every few seconds (a metrics scrape, the live dashboard).
SAMPLE = 10_000
REPEATED_SAMPLE = 2_000


@dataclass
class TaskFigures:
    task: str
    successful: int = 0
    failed: int = 0
    cancelled: int = 0
    run_p50: float | None = None  # seconds, over the sample
    run_p95: float | None = None
    wait_p50: float | None = None
    wait_p95: float | None = None
    sampled: int = 0  # jobs the times were read from

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def run_text(self) -> str:
        return f"{shown_seconds(self.run_p50)} / {shown_seconds(self.run_p95)}"

    @property
    def wait_text(self) -> str:
        return f"{shown_seconds(self.wait_p50)} / {shown_seconds(self.wait_p95)}"


def shown_seconds(value: float | None) -> str:
    """``850ms``, ``12.4s``, or ``-`` for none."""
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.1f}s"


def task_figures(
    using: str, minutes: float = 5.0, queues: list[str] | None = None, sample: int = SAMPLE
) -> list[TaskFigures]:
    """Each task with jobs that finished in the last ``minutes`` (of ``queues``),
    busiest first; the times from the latest ``sample`` of them."""
    from ..models import Job

    since = read_database_now(using) - timedelta(minutes=minutes)
    recent = Job.objects.using(using).filter(finished_at__gte=since, status__in=FINISHED)
    if queues is not None:
        recent = recent.filter(queue_name__in=queues)
    figures: dict[str, TaskFigures] = {}
    for task, status, n in recent.order_by().values_list("task_path", "status").annotate(Count("pk")):
        found = figures.setdefault(task, TaskFigures(task))
        setattr(found, status.lower(), n)
    runs: dict[str, list[float]] = defaultdict(list)
    waits: dict[str, list[float]] = defaultdict(list)
    latest = recent.filter(last_attempted_at__isnull=False).order_by("-finished_at")
    for task, started, finished, due in latest.values_list(
        "task_path", "last_attempted_at", "finished_at", "run_after"
    )[:sample]:
        runs[task].append(max((finished - started).total_seconds(), 0.0))
        if due is not None:
            waits[task].append(max((started - due).total_seconds(), 0.0))
    for task, found in figures.items():
        found.sampled = len(runs[task])
        found.run_p50, found.run_p95 = _percentiles(runs[task])
        found.wait_p50, found.wait_p95 = _percentiles(waits[task])
    total = {Status.SUCCESSFUL, Status.FAILED, Status.CANCELLED}
    return sorted(figures.values(), key=lambda f: (-sum(getattr(f, s.lower()) for s in total), f.task))


def _percentiles(values: list[float]) -> tuple[float | None, float | None]:
    """The median and the 95th percentile (None, None: no value; one value: itself twice)."""
    if not values:
        return None, None
    if len(values) == 1:
        return values[0], values[0]
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    return round(statistics.median(values), 6), round(cuts[18], 6)
