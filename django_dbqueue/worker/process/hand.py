"""The batch a worker holds: the jobs it claimed and has not started, the one
in hand, and its proof that it still holds them.

Two threads share it: the worker's main thread, which takes jobs one by one
and runs them, and the hold watch (giveback.py), which gives back the
unstarted rest while a slow job runs. Its lock makes "take the next job" and
"give back the rest" exclusive, so a job is either started or given back,
never both.

The proof: a claim holds its jobs for one lease from the moment it was sent,
and the heartbeat extends that in a chain of extensions that began while the
claim still held. Checking it costs no query; only when it cannot be shown
(the worker was paused, the heartbeat was cut off) does the worker ask the
database which jobs are still its own (``Worker._holds``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...models import Job


class BatchInHand:
    def __init__(self, lease: float) -> None:
        self.lease = lease
        self.lock = threading.Lock()
        self.pending: deque[Job] = deque()  # claimed, not started
        self.current: Job | None = None
        self.current_since: float | None = None  # monotonic, for the hold watch
        self.held_until = 0.0  # elapsed clock: the claim's own proof of its leases

    def add(self, jobs: Iterable[Job]) -> None:
        with self.lock:
            self.pending.extend(jobs)

    def claimed(self, sent_at: float) -> None:
        """A claim sent at ``sent_at`` (elapsed clock) holds for one lease."""
        self.held_until = sent_at + self.lease

    def next(self) -> Job | None:
        with self.lock:
            return self.pending.popleft() if self.pending else None

    def start(self, job: Job) -> float:
        """From here ``job`` has started: nothing gives it back unstarted."""
        with self.lock:
            began = time.monotonic()
            self.current, self.current_since = job, began
        return began

    def end(self) -> None:
        with self.lock:
            self.current = self.current_since = None

    def take_unstarted(self) -> list[Job]:
        with self.lock:
            rest = list(self.pending)
            self.pending.clear()
        return rest

    def put_back(self, jobs: list[Job]) -> None:
        """Jobs taken to be given back but not given back after all."""
        with self.lock:
            self.pending.extendleft(reversed(jobs))

    def behind_slow(self, hold: float) -> list[Job]:
        """The unstarted jobs, taken, once the job in hand has run ``hold``
        seconds; none before."""
        with self.lock:
            since = self.current_since
            if since is None or time.monotonic() - since < hold or not self.pending:
                return []
            rest = list(self.pending)
            self.pending.clear()
        return rest

    def shown(self, now: float, margin: float, vouched: tuple[float, float]) -> bool:
        """Whether the claim, or the heartbeat's chain of extensions that began
        while the claim held, shows the batch still held at ``now``."""
        vouched_until, chain_start = vouched
        own = self.held_until - margin
        return now < own or (chain_start < own and now < vouched_until - margin)

    def confirm(self, job: Job, now: float, still_held: Callable[[list[int]], set[int]]) -> list[int]:
        """Ask the database (``still_held``) which of ``job`` and the unstarted
        jobs are still held, keep only those, and return the ids lost."""
        with self.lock:
            ids = [job.pk, *(j.pk for j in self.pending)]
        held = still_held(ids)
        self.held_until = now + self.lease
        lost = [pk for pk in ids if pk not in held]
        if lost:
            with self.lock:
                self.pending = deque(j for j in self.pending if j.pk in held)
        return lost
