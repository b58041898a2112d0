"""The supervisor's log lines: a status line every STATUS_INTERVAL while
there is work, and a summary when it stops. A runqueue that serves several
backends (group.py) names each line's backend; with one backend the
lines are as they always were."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from django.db import connections
from django.template.defaultfilters import pluralize

if TYPE_CHECKING:
    from ...backend import DatabaseBackend
    from ..shared import SharedState

logger = logging.getLogger("django_dbqueue")


class Supervised(Protocol):
    """What the lines report on: the supervisor (supervisor.py), which
    imports this module."""

    backend: DatabaseBackend
    state: SharedState
    queues: list[str]
    started: float
    restarts: int


class StatusLine:
    def __init__(self, supervisor: Supervised) -> None:
        self.supervisor = supervisor
        self.interval = supervisor.backend.config.STATUS_INTERVAL
        self.last_time = time.monotonic()
        self.last_processed = 0
        # Empty unless name_backend() is called: one backend's lines stay as they were.
        self.status_prefix = self.summary_suffix = ""
        # Whether the last count failed: an outage is said once, not at every line.
        self.count_failing = False

    def name_backend(self) -> None:
        """Name the backend in every line, for a runqueue that serves several."""
        alias = self.supervisor.backend.alias
        self.status_prefix = f"backend={alias} "
        self.summary_suffix = f", for the backend {alias!r}"

    def maybe_log(self) -> None:
        now = time.monotonic()
        if now - self.last_time < self.interval:
            return
        processed, failed = self.supervisor.state.totals()
        backlog = self._backlog()
        if processed != self.last_processed or backlog:
            rate = (processed - self.last_processed) / (now - self.last_time)
            logger.info(
                "%sprocessed=%d failed=%d%s rate=%.1f jobs/s ready_backlog=%s",
                self.status_prefix,
                processed,
                failed,
                "".join(f" {name}={count}" for name, count in self._control_counts()),
                rate,
                "?" if backlog is None else backlog,
            )
        self.last_time, self.last_processed = now, processed

    def _backlog(self) -> int | None:
        from ...models import Job

        try:
            jobs = Job.objects.using(self.supervisor.backend.database).filter(
                queue_name__in=self.supervisor.queues
            )
            count = jobs.due().count()
        except Exception as exc:
            # The workers say the database is away, once each; this says
            # once that the lines will show the backlog as "?" meanwhile.
            log = logger.debug if self.count_failing else logger.warning
            log("Could not count the backlog (shown as ?): %s", exc)
            self.count_failing = True
            return None
        finally:
            connections.close_all()  # the next restart forks; hold nothing
        self.count_failing = False
        return count

    def _control_counts(self) -> list[tuple[str, int]]:
        """Jobs cancelled and interrupted while running, and expired, once
        there are any (the lines stay as they were for a runqueue that had none)."""
        cancelled, interrupted, expired = self.supervisor.state.control_totals()
        counts = (("cancelled", cancelled), ("interrupted", interrupted), ("expired", expired))
        return [(name, n) for name, n in counts if n]

    def summary(self) -> None:
        sup = self.supervisor
        processed, failed = sup.state.totals()
        elapsed = time.monotonic() - sup.started
        logger.info(
            "Done: processed %d job%s (%d failed%s) in %.1fs, %.1f jobs/s, %d worker restart%s%s.",
            processed,
            pluralize(processed),
            failed,
            "".join(f", {count} {name}" for name, count in self._control_counts()),
            elapsed,
            processed / elapsed if elapsed else 0.0,
            sup.restarts,
            pluralize(sup.restarts),
            self.summary_suffix,
        )
