"""The one piece of state a supervisor shares with its worker processes.

Plain shared memory with no locks: a worker can be SIGKILLed at any
instant, and a lock it held would hang everyone else (a multiprocessing
Event did exactly that once). Each field has one writer per slot, except
``names``, which the supervisor clears when a worker dies.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from .timings import SharedTimings

NAME_BYTES = 128


class SharedState:
    """What the supervisor, its heartbeat process and its workers share,
    one slot per worker process.

    - ``stop``: the supervisor's graceful-stop request to every worker;
      ``heartbeat_stop``: its request to the heartbeat process.
    - ``counts``: jobs processed and failed, per slot (the status line, and
      telling a worker that died after doing work from a crash loop).
    - ``deadlines``: the hard deadline of the job in hand, on the
      :func:`~django_dbqueue.clock.elapsed` clock (0: none); see timeouts.py.
    - ``names``: the owner name of the live worker in each slot ('' once it
      died): the heartbeat extends the leases of these names and no others.
    - ``held_until`` and ``chain_start``: what the heartbeat vouches for:
      the slot's leases are held until ``held_until`` (elapsed clock) by a
      chain of extensions, each sent less than a lease after the one before,
      that began at ``chain_start``. It proves the worker's jobs are still
      its own only if the chain began while the worker's own proof (its
      claim) still held; a chain that began later may have a gap in which
      another worker recovered them.
    """

    def __init__(self, slots: int, context: Any = None) -> None:
        ctx = context or multiprocessing.get_context("fork")
        self.slots = slots
        self.stop = ctx.RawValue("b", 0)
        self.heartbeat_stop = ctx.RawValue("b", 0)
        self.counts = ctx.RawArray("q", 2 * slots)
        self.deadlines = ctx.RawArray("d", slots)
        self.names = ctx.RawArray("c", NAME_BYTES * slots)
        self.held_until = ctx.RawArray("d", slots)
        self.chain_start = ctx.RawArray("d", slots)
        # Claim and run durations, for the metrics endpoint (timings.py).
        self.timings = SharedTimings(slots, ctx)

    def slot(self, index: int) -> Slot:
        return Slot(self, index)

    def live_names(self) -> dict[int, str]:
        return {i: name for i in range(self.slots) if (name := self.slot(i).name)}

    def totals(self) -> tuple[int, int]:
        counts = list(self.counts)
        return sum(counts[0::2]), sum(counts[1::2])


class Slot:
    """One worker's view of its slot."""

    def __init__(self, state: SharedState, index: int) -> None:
        self.state, self.index = state, index

    @property
    def name(self) -> str:
        start = self.index * NAME_BYTES
        return bytes(self.state.names[start : start + NAME_BYTES]).rstrip(b"\0").decode()

    @name.setter
    def name(self, value: str) -> None:
        raw = value.encode()[:NAME_BYTES].ljust(NAME_BYTES, b"\0")
        start = self.index * NAME_BYTES
        self.state.names[start : start + NAME_BYTES] = raw

    def count(self, failed: bool) -> None:
        self.state.counts[2 * self.index] += 1
        self.state.counts[2 * self.index + 1] += failed

    @property
    def processed(self) -> int:
        return self.state.counts[2 * self.index]

    @property
    def failed(self) -> int:
        return self.state.counts[2 * self.index + 1]

    @property
    def deadline(self) -> float:
        return self.state.deadlines[self.index]

    @deadline.setter
    def deadline(self, value: float) -> None:
        self.state.deadlines[self.index] = value

    @property
    def held_until(self) -> float:
        return self.state.held_until[self.index]

    def vouched_until(self) -> tuple[float, float]:
        """``(held_until, chain_start)`` as the heartbeat last wrote them."""
        # held_until first: the heartbeat writes chain_start before it (and
        # x86 keeps stores in order), so a fresh held_until is never read
        # with a stale, earlier chain_start.
        held_until = self.state.held_until[self.index]
        return held_until, self.state.chain_start[self.index]

    def vouched(self, sent_at: float, lease: float, previous: float | None) -> None:
        """The heartbeat extended this slot's leases with a statement sent at
        ``sent_at``; ``previous``: when its last extension for the same
        worker was sent (None: the first). A gap of a lease or more breaks
        the chain: the leases may have run out in between."""
        if previous is None or sent_at - previous >= lease - safety_margin(lease):
            self.state.chain_start[self.index] = sent_at
        self.state.held_until[self.index] = sent_at + lease

    def reset(self, name: str) -> None:
        self.deadline = 0.0
        self.state.held_until[self.index] = 0.0
        self.state.chain_start[self.index] = 0.0
        self.name = name


def safety_margin(lease: float) -> float:
    """Time kept in hand when deciding whether a lease still holds: for the
    round trips between the database's clock and ours."""
    return min(2.0, lease / 10)


def name_process(name: str) -> None:
    """Name this process as ``ps -o comm`` and /proc/PID/comm show it (Linux;
    elsewhere nothing happens), so that operators and tests can tell the
    heartbeat from the workers."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass
