"""Housekeeping: keep the leases of living workers alive.

Every beat extends, in one UPDATE, the lease of every job the live workers
hold, and then vouches for each of them in its shared-memory slot: a worker
checks that vouch before it starts a job (process/hand.py), so it never
starts one whose lease may have run out. The time of each worker's last
vouch is kept to chain the vouches of one worker, not of the next process
that takes its slot.
"""

from __future__ import annotations

from collections.abc import Callable

from ...clock import elapsed
from ..shared import SharedState


class LeaseKeeper:
    def __init__(self, database: str, lease: float, state: SharedState) -> None:
        self.database = database
        self.lease = lease
        self.state = state
        self.sent: dict[int, tuple[str, float]] = {}  # slot: (name, when its last extension was sent)

    def run_once(
        self, live: dict[int, str], then: Callable[[int, str], object] = lambda index, name: None
    ) -> None:
        """Extend the leases of the ``live`` workers (owner name by slot)
        and vouch for each, calling ``then(slot, name)`` after each vouch:
        the roster stamps that worker's row there, so that one worker's
        vouch and row go together, as they always have."""
        from ...models import Job

        sent_at = elapsed()
        Job.objects.using(self.database).extend_leases(live.values(), self.lease)
        for index, name in live.items():
            slot, last = self.state.slot(index), self.sent.get(index)
            previous = last[1] if last and last[0] == name else None
            slot.vouched(sent_at, self.lease, previous)
            self.sent[index] = (name, sent_at)
            then(index, name)
        for index in [i for i in self.sent if i not in live]:
            del self.sent[index]
