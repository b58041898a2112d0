"""Housekeeping: OPTIONS RETENTION, a little per beat.

The pruning itself (batched, SKIP LOCKED, each kind of finished job after
its own age) is operations/retention.py's, which ``prunejobs`` runs too;
this is its place among the heartbeat's chores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...operations.retention import Pruner

if TYPE_CHECKING:
    from ...backend import DatabaseBackend


class Pruning:
    def __init__(self, backend: DatabaseBackend) -> None:
        self.pruner = Pruner(backend)

    def run_once(self) -> int:
        return self.pruner.run()
