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
# A progress message is cut to 255 characters (the column's size); UTF-8
# takes at most 4 bytes for each.
MESSAGE_CHARS = 255
MESSAGE_BYTES = 4 * MESSAGE_CHARS
NONE = float("nan")  # a fraction not reported


class SharedState:
    """What the supervisor, its heartbeat process and its workers share,
    one slot per worker process.

    - ``stop``: the supervisor's graceful-stop request to every worker;
      ``heartbeat_stop``: its request to the heartbeat process.
    - ``counts``: jobs processed and failed, per slot (the status line, and
      telling a worker that died after doing work from a crash loop).
    - ``deadlines``: the hard deadline of the job in hand, on the
      :func:`~django_dbqueue.clock.elapsed` clock (0: none); see process/timeouts.py.
    - ``names``: the owner name of the live worker in each slot ('' once it
      died): the heartbeat extends the leases of these names and no others.
    - ``held_until`` and ``chain_start``: what the heartbeat vouches for:
      the slot's leases are held until ``held_until`` (elapsed clock) by a
      chain of extensions, each sent less than a lease after the one before,
      that began at ``chain_start``. It proves the worker's jobs are still
      its own only if the chain began while the worker's own proof (its
      claim) still held; a chain that began later may have a gap in which
      another worker recovered them.
    - ``job_ids``: the job the slot's worker is running (0: none); writer:
      the worker.
    - ``cancels`` and ``cancel_since``: a cancel request the heartbeat found
      for a job of this slot's worker, and since when (elapsed clock);
      writer: the heartbeat.
    - ``progress_*``: the task's latest progress report, behind a sequence
      number (a seqlock); writer: the worker, reader: the heartbeat.
    - ``stop_deadlines``: when a stopping worker interrupts its job in hand
      (elapsed clock, 0: none); writer: the worker.
    - ``control_counts``: jobs cancelled, interrupted and expired, per slot.
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
        self.job_ids = ctx.RawArray("q", slots)
        self.cancels = ctx.RawArray("q", slots)
        self.cancel_since = ctx.RawArray("d", slots)
        self.progress_seq = ctx.RawArray("q", slots)
        self.progress_job = ctx.RawArray("q", slots)
        self.progress_fraction = ctx.RawArray("d", [NONE] * slots)
        self.progress_length = ctx.RawArray("i", slots)
        self.progress_message = ctx.RawArray("c", MESSAGE_BYTES * slots)
        self.stop_deadlines = ctx.RawArray("d", slots)
        self.control_counts = ctx.RawArray("q", 3 * slots)
        # Claim and run durations, for the metrics endpoint (timings.py).
        self.timings = SharedTimings(slots, ctx)

    def slot(self, index: int) -> Slot:
        return Slot(self, index)

    def live_names(self) -> dict[int, str]:
        return {i: name for i in range(self.slots) if (name := self.slot(i).name)}

    def totals(self) -> tuple[int, int]:
        counts = list(self.counts)
        return sum(counts[0::2]), sum(counts[1::2])

    def control_totals(self) -> tuple[int, int, int]:
        """Jobs cancelled and interrupted while running, and expired, over every slot."""
        counts = list(self.control_counts)
        return sum(counts[0::3]), sum(counts[1::3]), sum(counts[2::3])


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

    def count_control(
        self, cancelled: bool = False, interrupted: bool = False, expired: bool = False
    ) -> None:
        self.state.control_counts[3 * self.index] += cancelled
        self.state.control_counts[3 * self.index + 1] += interrupted
        self.state.control_counts[3 * self.index + 2] += expired

    @property
    def cancelled(self) -> int:
        return self.state.control_counts[3 * self.index]

    @property
    def interrupted(self) -> int:
        return self.state.control_counts[3 * self.index + 1]

    @property
    def expired(self) -> int:
        return self.state.control_counts[3 * self.index + 2]

    @property
    def job_id(self) -> int:
        return self.state.job_ids[self.index]

    @job_id.setter
    def job_id(self, value: int) -> None:
        self.state.job_ids[self.index] = value

    def post_cancel(self, job_id: int, since: float) -> None:
        """The heartbeat found a cancel request for ``job_id``, at ``since``."""
        # The id last: a reader that sees it sees its time too.
        self.state.cancel_since[self.index] = since
        self.state.cancels[self.index] = job_id

    def cancel_posted(self) -> tuple[int, float]:
        """``(job_id, since)`` of the last cancel posted (0: none)."""
        job_id = self.state.cancels[self.index]
        return job_id, self.state.cancel_since[self.index]

    def report_progress(self, job_id: int, fraction: float | None, message: str | None) -> None:
        """Publish the task's progress. No lock (a worker may die holding
        it): the sequence number is odd while the report is being written."""
        state, i = self.state, self.index
        state.progress_seq[i] += 1
        if state.progress_job[i] != job_id:  # a new job starts with nothing reported
            state.progress_job[i] = job_id
            state.progress_fraction[i] = NONE
            state.progress_length[i] = 0
        if fraction is not None:
            state.progress_fraction[i] = fraction
        if message is not None:
            raw = message[:MESSAGE_CHARS].encode()
            start = i * MESSAGE_BYTES
            state.progress_message[start : start + len(raw)] = raw
            state.progress_length[i] = len(raw)
        state.progress_seq[i] += 1

    def progress_report(self) -> tuple[int, int, float | None, str]:
        """``(seq, job_id, fraction, message)``: the latest whole report; seq
        changes with every report (0, job 0: none yet)."""
        state, i = self.state, self.index
        for _ in range(100):
            seq = state.progress_seq[i]
            if seq % 2:  # being written, or its writer died mid-way
                continue
            job_id, fraction = state.progress_job[i], state.progress_fraction[i]
            start = i * MESSAGE_BYTES
            raw = bytes(state.progress_message[start : start + state.progress_length[i]])
            if state.progress_seq[i] == seq:
                message = raw.decode(errors="replace")
                return seq, job_id, None if fraction != fraction else fraction, message
        return state.progress_seq[i], 0, None, ""

    @property
    def stop_deadline(self) -> float:
        return self.state.stop_deadlines[self.index]

    @stop_deadline.setter
    def stop_deadline(self, value: float) -> None:
        self.state.stop_deadlines[self.index] = value

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
        # Not the progress sequence: it only ever grows, so the heartbeat
        # never takes a new worker's first report for one it wrote already.
        self.deadline = self.stop_deadline = 0.0
        self.job_id = 0
        self.post_cancel(0, 0.0)
        self.state.progress_job[self.index] = 0
        # A worker killed mid-report left it odd: even again, or every later
        # report would read as being written.
        self.state.progress_seq[self.index] += self.state.progress_seq[self.index] % 2
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
