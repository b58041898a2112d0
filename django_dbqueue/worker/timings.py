"""How long claims and jobs take, counted in shared memory by each worker
process so that the supervisor's metrics endpoint
(supervisor/runqueue_metrics.py) can sum them into histograms across
processes. One writer per slot, no locks (as in
shared.py): a worker killed mid-write costs at most one observation."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

CLAIM_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
RUN_BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class Timings:
    """Per-slot bucket counts (the last bucket is +Inf) and sums of one kind of duration."""

    def __init__(self, slots: int, bounds: tuple[float, ...], ctx: Any) -> None:
        self.slots, self.bounds = slots, bounds
        self.width = len(bounds) + 1
        self.buckets = ctx.RawArray("q", slots * self.width)
        self.sums = ctx.RawArray("d", slots)

    def observe(self, slot: int, seconds: float) -> None:
        self.buckets[slot * self.width + bisect_left(self.bounds, seconds)] += 1
        self.sums[slot] += seconds

    def totals(self) -> tuple[list[tuple[str, int]], float]:
        """Cumulative ``(le, count)`` buckets over every slot, and the sum."""
        counts = [sum(self.buckets[s * self.width + i] for s in range(self.slots)) for i in range(self.width)]
        cumulative, running = [], 0
        for bound, n in zip([*map(str, self.bounds), "+Inf"], counts, strict=True):
            running += n
            cumulative.append((bound, running))
        return cumulative, sum(self.sums)


class SharedTimings:
    def __init__(self, slots: int, ctx: Any) -> None:
        self.claims = Timings(slots, CLAIM_BOUNDS, ctx)
        self.runs = Timings(slots, RUN_BOUNDS, ctx)
