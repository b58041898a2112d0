"""A running job's saved cursor: the steps it completed, the step it is in
and that step's position, as one JSON document in ``Job.checkpoint``.

    {"steps_done": ["export"], "step": "notify", "cursor": 1234}

``step`` is None for a cursor saved outside any step (the job's own). A
cursor belongs to the step that saved it: a step that finds another step's
cursor starts from None."""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections

from ..db import brief, drop_connection, is_outage
from ..exceptions import CheckpointNotStorable, InvalidTaskArguments
from ..jsonfield import Undecodable
from ..payload import Integers, encoded_size, exact_integers, plain

if TYPE_CHECKING:
    from .control import JobControl
    from .job import RunningJob

KEYS = frozenset({"steps_done", "step", "cursor"})
# A checkpoint is a position (an id, an offset, a page number), not data:
# UTF-8 bytes of compact JSON, as MAX_RETURN_BYTES counts a return value.
MAX_CHECKPOINT_BYTES = 1_000_000


def unstorable(doc: dict[str, Any], integers: Integers = None) -> str | None:
    """Why the checkpoint document ``doc`` cannot be stored, or None:
    whatever the queue refuses in any JSON it writes (payload.py: NaN, lone
    surrogates, deep nesting, objects), or over MAX_CHECKPOINT_BYTES.
    Checked where a checkpoint is written, not at each ``checkpoint()``
    call, which a loop may make for every row it handles."""
    try:
        size = encoded_size(plain(doc, "The checkpoint", integers), "The checkpoint")
    except InvalidTaskArguments as exc:
        return str(exc)
    if size > MAX_CHECKPOINT_BYTES:
        return (
            f"The checkpoint takes {size} bytes as compact JSON, more than the limit of "
            f"{MAX_CHECKPOINT_BYTES}: save a position (an id, an offset), not the data."
        )
    return None


class Saved:
    """The checkpoint document, as the task changes it."""

    __slots__ = ("cursor", "done", "step")

    def __init__(self, done: list[str], step: str | None, cursor: Any) -> None:
        self.done, self.step, self.cursor = done, step, cursor

    @classmethod
    def read(cls, value: Any, job_id: int) -> Saved:
        """The document stored in the row; ValueError, saying what to do,
        for one this version did not write (the TolerantJSONField rules:
        an Undecodable, or any other shape, written by SQL or by hand)."""
        if value is None:
            return cls([], None, None)
        if isinstance(value, Undecodable):
            problem = f"its text cannot be read ({value.reason})"
        elif not isinstance(value, dict) or not set(value) <= KEYS:
            problem = (
                f'it is not a {{"steps_done": [...], "step": ..., "cursor": ...}} object: {value!r:.200}'
            )
        else:
            done, step = value.get("steps_done", []), value.get("step")
            if (
                isinstance(done, list)
                and all(isinstance(n, str) for n in done)
                and isinstance(step, str | None)
            ):
                return cls(list(done), step, value.get("cursor"))
            problem = f"its steps_done is not a list of step names or its step not a name: {value!r:.200}"
        raise ValueError(
            f"The saved checkpoint of job {job_id} cannot be resumed from: {problem}. Requeue the "
            "job to run it from the beginning, or set its checkpoint column to NULL."
        )

    def as_json(self) -> dict[str, Any]:
        return {"steps_done": list(self.done), "step": self.step, "cursor": self.cursor}


class Step:
    """One step of a task, as ``RunningJob.step()`` hands it to the step's
    function: its ``name``, its ``cursor`` (where an earlier attempt of the
    job left it: None the first time), and ``advance()`` to save a new one."""

    __slots__ = ("_job", "name")

    def __init__(self, job: RunningJob, name: str) -> None:
        self._job, self.name = job, name

    def __repr__(self) -> str:
        return f"<Step {self.name!r} of job {self._job.id}, cursor {self.cursor!r}>"

    @property
    def cursor(self) -> Any:
        return self._job.cursor

    def advance(self, cursor: Any, *, save: bool = False) -> None:
        """Record the step's new position (any JSON value): the job's
        ``checkpoint(cursor, save=save)``, which also raises JobCancelled or
        JobInterrupted when the job must stop."""
        self._job.checkpoint(cursor, save=save)

    async def aadvance(self, cursor: Any, *, save: bool = False) -> None:
        """``advance()`` for an ``async def`` step."""
        await self._job.acheckpoint(cursor, save=save)


class Checkpoints:
    """A running job's cursor as its task moves it, and when it is written.

    Written at most once per ``interval`` (``save``: now), on the worker's
    lease. A position taken inside a transaction (the task's own, or an
    ``atomic=True`` task's) is not written while it lasts: the UPDATE would
    lock the job's row, and the heartbeat with it, until the commit, and
    the worker cannot know whether the work that position describes will
    commit at all. So such a position waits in memory, and what the outcome
    of a failed or interrupted attempt writes is the last position taken
    outside any transaction (``unsaved()``)."""

    def __init__(self, job_id: int, stored: Any, control: JobControl) -> None:
        self.job_id, self.control, self._stored = job_id, control, stored
        self._doc: Saved | None = None
        self.dirty = False  # moved since the last write
        self.tainted = False  # moved inside a transaction since the last move outside one
        self.held_back: dict[str, Any] | None = None  # the last position outside one, not written
        self.written_at = -math.inf  # time.monotonic() of the last write
        self.dropped: str | None = None  # why the last unsaved position cannot be stored
        self._thread = 0
        self._connection: Any = None

    @property
    def doc(self) -> Saved:
        if self._doc is None:
            self._doc = Saved.read(self._stored, self.job_id)
        return self._doc

    def move(self, step: str | None, cursor: Any, in_transaction: bool) -> None:
        self._taint(in_transaction)
        doc = self.doc
        doc.step, doc.cursor = step, cursor

    def complete(self, name: str, in_transaction: bool) -> None:
        self._taint(in_transaction)
        doc = self.doc
        doc.done.append(name)
        doc.step = doc.cursor = None

    def _taint(self, in_transaction: bool) -> None:
        if in_transaction:
            if self.dirty and not self.tainted:
                self.held_back = self.doc.as_json()
            self.tainted = True
        else:
            self.tainted, self.held_back = False, None
        self.dirty = True

    def due(self, save: bool) -> bool:
        """Whether the position is to be written now."""
        return not self.tainted and (save or time.monotonic() - self.written_at >= self.control.interval)

    def write(self) -> bool:
        """Write the position; False if the worker no longer holds the job.
        CheckpointNotStorable if it cannot be stored, or the database
        refuses it: the row keeps the last position saved."""
        from ..models import Job

        doc = self.doc.as_json()
        why = unstorable(doc, self.integers())
        if why is not None:
            raise CheckpointNotStorable(f"{why} Job {self.job_id} keeps the last checkpoint it saved.")
        self.written_at = time.monotonic()
        database = self.control.database
        rows = Job.objects.using(database)
        try:
            held = rows.save_checkpoint(self.control.owner, self.job_id, doc)
        except DatabaseError as exc:
            if is_outage(exc, database) or connections[database].in_atomic_block:
                raise
            drop_connection(database)  # MySQL drops it after refusing a packet too big
            raise CheckpointNotStorable(
                f"The database refused the checkpoint of job {self.job_id} ({brief(exc)}); the job "
                "keeps the last checkpoint it saved."
            ) from exc
        self.dirty = False
        return held

    def unsaved(self) -> dict[str, Any] | None:
        """The last position taken outside a transaction and not written
        yet, for the attempt's outcome to write (None: nothing). One that
        cannot be stored is dropped, and ``dropped`` says why: the outcome
        must be written all the same."""
        doc = self.held_back if self.tainted else self.doc.as_json() if self.dirty else None
        if doc is None:
            return None
        self.dropped = unstorable(doc, self.integers())
        return doc if self.dropped is None else None

    def integers(self) -> Integers:
        return exact_integers(connections[self.control.database])

    def in_transaction(self) -> bool:
        """Whether this thread's connection to the queue's database is in a
        transaction the task opened (the lookup is cached per thread: it
        costs 0.4 µs)."""
        thread = threading.get_ident()
        if thread != self._thread:
            self._thread, self._connection = thread, connections[self.control.database]
        return len(self._connection.atomic_blocks) > self.control.base_depth
