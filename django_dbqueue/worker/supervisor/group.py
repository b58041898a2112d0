"""Several supervisors in one process: ``runqueue --backend a --backend b``.

Each backend keeps its own Supervisor (its worker processes, heartbeat,
shared state and restarts), since each claims from its own database. The
group only owns what a process has once: the signal handlers, which pass
each signal to every supervisor as if it were its own, and the one loop
that looks after all of them.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from typing import Any

from .supervisor import TICK, Supervisor


class SupervisorGroup:
    def __init__(self, supervisors: Sequence[Supervisor]) -> None:
        self.supervisors = list(supervisors)

    def run(self) -> int:
        """Run every supervisor until all have stopped; 1 if any of them ended unclean."""
        previous = {
            signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
        }
        previous[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, self._on_force)
        try:
            for supervisor in self.supervisors:
                supervisor.start()
                if len(self.supervisors) > 1:
                    supervisor.status.name_backend()
            while not all(supervisor.all_exited() for supervisor in self.supervisors):
                time.sleep(TICK)
                for supervisor in self.supervisors:
                    if not supervisor.all_exited():
                        supervisor.tick()
            for supervisor in self.supervisors:
                supervisor.status.summary()
        finally:
            for supervisor in self.supervisors:
                supervisor.stop_heartbeat()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return max(supervisor.exit_code() for supervisor in self.supervisors)

    # Each supervisor counts the signals itself: the first asks its workers
    # to stop, a second forces them, as with one supervisor.
    def _on_signal(self, signum: int, frame: Any) -> None:
        for supervisor in self.supervisors:
            supervisor._on_signal(signum, frame)

    def _on_force(self, signum: int, frame: Any) -> None:
        for supervisor in self.supervisors:
            supervisor._on_force(signum, frame)
