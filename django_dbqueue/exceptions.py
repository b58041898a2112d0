from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .tasks_api import InvalidTask, TaskResultDoesNotExist


class OptionsError(ImproperlyConfigured):
    """Every problem found in one backend's configuration, each a sentence."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(" ".join(problems))
        self.problems = problems


class InvalidTaskArguments(InvalidTask, TypeError):
    """Arguments that cannot be stored as a job (not JSON, or too large), or
    that do not fit the task function's parameters."""


class QueueNotMigrated(ImproperlyConfigured):
    """The queue's tables are missing or out of date on its database:
    ``manage.py migrate`` (with ``--database`` for a queue database of its
    own) was not run."""


class WorkerLost(Exception):
    """Recorded as a job's error when its worker died while running it."""


class JobNotRunnable(Exception):
    """A job row that cannot be run as it stands: its task path does not name
    a task, or its arguments no longer fit the function. Retrying cannot help."""


class TaskNotDeployed(JobNotRunnable):
    """A job's task path names a module that imports on this worker but
    does not define the task: its code is older than the producer's (a
    rolling deploy). The job goes back to the queue, its attempt unspent,
    and fails with this only when no worker has run it within OPTIONS
    UNDEPLOYED_TASK_GRACE_SECONDS, naming the workers that lacked it."""


class Snooze(Exception):
    """Raised by a task to give its job back for ``seconds`` (a number or a
    ``timedelta``) without spending an attempt: "the partner said 429, try
    in 30 s". The job is READY again, due then; its ``snoozes`` count grows,
    and past the task's ``max_snoozes`` (or the backend's ``MAX_SNOOZES``)
    the job ends FAILED saying so (docs/tasks.md, "Snoozing")."""

    def __init__(self, seconds: Any) -> None:
        super().__init__(f"snoozed for {seconds!r} s")
        self.seconds = seconds


class JobTimeout(Exception):
    """Raised in a job that ran past its ``timeout``; it counts as a failed attempt."""


class ResultNotStorable(TypeError):
    """A job's return value that cannot be stored (not JSON, nested too deep,
    or larger than MAX_RETURN_BYTES); the job ends FAILED, since running it
    again would return the same kind of value. A TypeError, as
    InvalidTaskArguments is and as Django's ImmediateBackend records a value
    that JSON cannot hold."""


class CheckpointNotStorable(TypeError):
    """A checkpoint that cannot be saved: not JSON the queue stores (as for
    arguments: no NaN, no lone surrogate, at most 31 levels), over
    MAX_CHECKPOINT_BYTES, or refused by the database. Raised by the call
    that would write it (``checkpoint()``, ``advance()``, ``flush()``, a
    step's end): an ordinary failure of the attempt, whose next attempt
    resumes from the last checkpoint saved."""


class TransactionUnusable(Exception):
    """An ``atomic=True`` task returned with its transaction unusable: marked
    for rollback (``transaction.set_rollback(True)``, or a database error
    caught inside it) or its connection closed (``close_old_connections()``).
    Its writes were rolled back and its attempt fails; the worker lives on."""


class TransactionCommitted(TransactionUnusable):
    """An ``atomic=True`` task committed the worker's transaction itself (a
    raw ``COMMIT``, or a statement that commits implicitly) and then raised:
    its attempt fails with this, the task's exception as its cause. What it
    wrote before that commit is kept, so it no longer runs exactly once."""


class JobCancelled(BaseException):
    """A cancel was asked for the running job: raised in the task by
    ``current_job().check()``, ``progress()`` and the checkpoint calls, or in
    its main thread once the grace period ran out (``CANCEL_GRACE_SECONDS``).
    The job then ends CANCELLED, whatever the task raises after the request
    (a task may also raise it itself to end its own job CANCELLED).

    A BaseException, like ``asyncio.CancelledError``, so that a task's
    ``except Exception:`` does not swallow it. It is also the error a
    cancelled job's result carries: Django's tasks API has no cancelled
    state, so ``get_result()`` reports a CANCELLED job as FAILED with this as
    its last error; the job's row keeps CANCELLED."""


class JobInterrupted(BaseException):
    """The worker running the job is stopping for a deploy and its
    ``STOP_TIMEOUT`` ran out, or it no longer holds the job: raised in the
    task where it checks (``check()``, ``progress()``, the checkpoint calls),
    or in its main thread shortly after. The job goes back READY with its
    attempt unspent and its checkpoint kept, so the next worker resumes it.
    A BaseException, so that ``except Exception:`` does not swallow it; a
    task that catches it should let it propagate after cleaning up."""


class JobExpired(JobCancelled):
    """Recorded as the error of a job that no run started before its
    deadline (``expires=``): it ended CANCELLED without running. A
    ``JobCancelled``, so code that looks for a cancelled job's error finds
    it; never raised into a task."""


class WorkerStopped(Exception):
    """Recorded as a job's error when its worker was stopped at once (a second
    signal, or SIGQUIT) while running it; the attempt counts."""


class TaskResultNotLoadable(TaskResultDoesNotExist):
    """``get_result()`` found the job, but its task path names no task that
    may be loaded (outside installed apps and ALLOWED_TASK_MODULES, not
    importable, or not a ``@task``), so there is no Task for its result."""


class JobAlreadyQueued(Exception):
    """Enqueueing a task whose unique key an unfinished job already holds,
    when the task chose ``on_duplicate="raise"``. ``job_id``: the holder."""

    def __init__(self, message: str, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id
