"""Recording successful outcomes in bulk: one UPDATE per batch, not per job.

A worker that runs a batch of quick jobs would otherwise spend most of its
time on one UPDATE (and one commit) per job. Successes are the common outcome
and carry little per-job data, so they wait here and are written together;
failures and retries stay on the one-UPDATE-per-job path in execution.py.

Why this keeps the delivery guarantee: an outcome is only ever added after
its job ran, so no job can be marked SUCCESSFUL without having run. If the
worker dies before a flush, those jobs are still RUNNING under its name; when
the lease runs out, recovery returns them as suspects and they run again
(at least once, as before).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import DateTimeField, Expression, F, JSONField
from django.tasks import Task
from django.tasks.signals import task_finished
from django.utils import timezone

from .dbfaults import persist
from .retry import retry_on_conflict

if TYPE_CHECKING:
    from .backend import DatabaseBackend
    from .models import Job

logger = logging.getLogger("django_dbqueue")


class ValueByPk(Expression):
    """``CASE pk WHEN 1 THEN v1 WHEN 2 THEN v2 ... END``: a different value
    for each row of one UPDATE. Plain SQL, so every backend accepts it."""

    def __init__(self, values: dict[int, Any], output_field: Any) -> None:
        super().__init__(output_field=output_field)
        self.values = values

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        field, params = self.output_field, []
        if isinstance(field, DateTimeField):
            # Aware datetimes straight to the backend's adapter: the field's
            # full preparation per value showed in the worker's profile.
            adapt = connection.ops.adapt_datetimefield_value
            for pk, value in self.values.items():
                params += [pk, adapt(value)]
        else:
            for pk, value in self.values.items():
                params += [pk, field.get_db_prep_save(value, connection)]
        pk_column = connection.ops.quote_name(compiler.query.model._meta.pk.column)
        whens = " ".join(["WHEN %s THEN %s"] * len(self.values))
        return f"CASE {pk_column} {whens} END", params


@dataclass
class _Success:
    job: Job
    task: Task
    started: datetime
    finished: datetime
    value: Any


class OutcomeBuffer:
    """Successes waiting to be written; ``flush()`` writes them with one
    UPDATE (one per distinct earlier ``worker_ids``: retried jobs), then sends each
    job's ``task_finished``, so a receiver sees the stored outcome."""

    def __init__(self, backend: DatabaseBackend, owner: str, max_jobs: int, max_age: float) -> None:
        self.backend = backend
        self.owner = owner
        self.max_jobs = max_jobs
        self.max_age = max_age
        self.pending: list[_Success] = []
        self.oldest = 0.0

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, job: Job, task: Task, started: datetime, value: Any) -> None:
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append(_Success(job, task, started, timezone.now(), value))

    def due(self) -> bool:
        """Whether enough has waited, by count or by age, to be worth a write."""
        return bool(self.pending) and (
            len(self.pending) >= self.max_jobs or time.monotonic() - self.oldest >= self.max_age
        )

    def flush(self) -> int:
        """Write every pending success; returns how many rows were updated."""
        if not self.pending:
            return 0
        # Cleared only once written: a flush that fails (say, the database is
        # away) leaves them for the next one; rewriting a group that did get
        # through matches no row, as those rows are no longer RUNNING.
        pending = self.pending
        groups: dict[str, list[_Success]] = {}
        for success in pending:
            # Almost always one group: jobs on their first run.
            groups.setdefault(json.dumps(success.job.worker_ids), []).append(success)
        updated = sum(self._write(group) for group in groups.values())
        self.pending = []
        if updated < len(pending):
            logger.warning(
                "%d of %d jobs finished after their lease was lost, so their outcome was not "
                "recorded; they will run again (delivery is at least once).",
                len(pending) - updated,
                len(pending),
            )
        self._announce(pending)
        return updated

    def _write(self, group: list[_Success]) -> int:
        from .models import Job

        first = group[0]
        started = {s.job.pk: s.job.started_at or s.started for s in group}
        changes: dict[str, Any] = {
            "status": "SUCCESSFUL",
            # Batches hold no suspects, so every one of these counts its attempt here.
            "attempts": F("attempts") + 1,
            "started_at": ValueByPk(started, DateTimeField()),
            "last_attempted_at": ValueByPk({s.job.pk: s.started for s in group}, DateTimeField()),
            "finished_at": ValueByPk({s.job.pk: s.finished for s in group}, DateTimeField()),
            "worker_ids": [*first.job.worker_ids, self.owner],
            "owner": None,
            "lease_expires_at": None,
            "suspect": False,
            "return_value": _return_values(group),
        }
        db = self.backend.database
        rows = Job.objects.using(db).filter(pk__in=list(started), owner=self.owner, status="RUNNING")
        # persist(): through a database outage, keep the outcomes and retry them.
        updated = persist(lambda: retry_on_conflict(lambda: rows.update(**changes), db), db)
        for s in group:
            job = s.job
            job.status, job.attempts = "SUCCESSFUL", job.attempts + 1
            job.started_at, job.last_attempted_at, job.finished_at = started[job.pk], s.started, s.finished
            job.worker_ids = changes["worker_ids"]
            job.owner = job.lease_expires_at = None
            job.return_value = s.value
        return updated

    def _announce(self, pending: list[_Success]) -> None:
        sender = type(self.backend)
        if not task_finished.has_listeners(sender):
            return  # nobody listens (Django's own log receivers were disconnected)
        for s in pending:
            task_finished.send(sender, task_result=self.backend.to_result(s.job, s.task))


def _return_values(group: list[_Success]) -> Any:
    if all(s.value is None for s in group):
        return None  # the common case, and PostgreSQL cannot type a CASE of bare NULLs
    return ValueByPk({s.job.pk: s.value for s in group}, JSONField())
