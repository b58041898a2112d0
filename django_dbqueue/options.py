"""The backend's ``TASKS`` entry and its ``OPTIONS``, parsed once into a
typed, validated object. Every mistake is collected, not only the first, so
that one ``manage.py check`` names them all."""

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .exceptions import OptionsError
from .limits import COLUMN_MAX, MAX_SECONDS, MIN_SECONDS
from .rates import parse_rate_limits
from .schedules.spec import parse_schedules
from .shown import shown
from .status import FINISHED

# The most jobs one claim takes (OPTIONS BATCH_SIZE and runqueue --batch).
MAX_BATCH_SIZE = 1000
# Options in seconds are from MIN_SECONDS to MAX_SECONDS (limits.py); a lease
# of less than a second would run out between a claim and its job's start.
MIN_LEASE_SECONDS = 1.0
# Whole-number options and the largest value of each: MAX_ATTEMPTS is
# stored in each job's max_attempts column; a payload over 1 GiB is past
# any server's max_allowed_packet.
MAX_WHOLE = {
    "BATCH_SIZE": MAX_BATCH_SIZE,
    "MAX_ATTEMPTS": COLUMN_MAX,
    "MAX_SNOOZES": COLUMN_MAX,
    "MAX_ARGUMENTS_BYTES": 2**30,
    "MAX_RETURN_BYTES": 2**30,
}
# Days of RETENTION: a century at most (the database's now minus that must
# still be a time it holds).
MAX_RETENTION_DAYS = 36_500
# A fairness key's weight: from a millionth to a million times the default's.
MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
# The keys of a TASKS entry that Django reads; anything else there is ignored by it.
ENTRY_KEYS = ("BACKEND", "QUEUES", "OPTIONS")


@dataclass(frozen=True, kw_only=True)
class QueueOptions:
    # The server the backend's jobs live on: claims, outcomes, unique keys,
    # concurrency limits, pauses, schedules and retention all hold within
    # this one database, so two backends on two servers each have their own
    # (queues on several servers: routing.py, docs/clusters.md).
    DATABASE: str = "default"
    # The database alias (a replica) the admin's lists, its dashboard and
    # queuestats read from; None: DATABASE. Nothing that claims, changes a
    # job or decides what runs reads it (django_dbqueue/replica.py).
    READ_DATABASE: str | None = None
    LEASE_SECONDS: float = 60.0
    BATCH_SIZE: int = 200
    # Once the job in hand has run this long, the unstarted rest of its batch
    # goes back to the queue for idle workers (worker/process/giveback.py).
    BATCH_HOLD_SECONDS: float = 0.1
    MAX_ATTEMPTS: int = 3
    # Times a job may snooze (raise Snooze) before it ends FAILED; a task's
    # max_snoozes wins.
    MAX_SNOOZES: int = 100
    RETRY_BACKOFF_BASE: float = 2.0
    RETRY_BACKOFF_MAX: float = 3600.0
    POLL_INTERVAL_MIN: float = 0.05
    POLL_INTERVAL_MAX: float = 2.0
    STATUS_INTERVAL: float = 5.0
    # Far below MariaDB's default max_allowed_packet (16 MiB) and MySQL's (64 MiB).
    MAX_ARGUMENTS_BYTES: int = 1_000_000
    # The largest return value stored; a larger one fails its job (payload.py).
    MAX_RETURN_BYTES: int = 1_000_000
    # Seconds a job may run before it counts as a failed attempt; None: no limit.
    JOB_TIMEOUT: float | None = None
    # On a stop signal, how long the job in hand may still run before it is
    # interrupted at its next checkpoint and given back (docs/deploys.md);
    # None: it finishes, however long it takes.
    STOP_TIMEOUT: float | None = None
    # How long a running job may ignore its cancel request (or a stop past
    # STOP_TIMEOUT, for at most 5 s) before its worker stops it (docs/cancel.md).
    CANCEL_GRACE_SECONDS: float = 10.0
    # How often the heartbeat looks for cancel requests and writes progress.
    CONTROL_INTERVAL: float = 1.0
    # How long a job whose task the workers' code lacks (its module imports
    # without it: a rolling deploy) keeps going back to the queue, from its
    # first give-back, before it fails (worker/process/undeployed.py); 0: at once.
    UNDEPLOYED_TASK_GRACE_SECONDS: float = 900.0
    # Longest wait between reconnection attempts while the database is away.
    RECONNECT_BACKOFF_MAX: float = 5.0
    # Modules (or packages) besides installed apps whose tasks workers may run.
    ALLOWED_TASK_MODULES: tuple[str, ...] = ()
    # Recurring jobs by name (schedules/spec.py; docs/scheduling.md).
    SCHEDULES: tuple[Any, ...] = ()
    # Days to keep finished jobs, per outcome; the heartbeat deletes older
    # ones in small batches (operations/retention.py). An outcome left out is kept.
    RETENTION: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    # Retention copies each job it deletes into the archive table first
    # (ArchivedJob; transitions/pruning.py, docs/operations.md "Archive").
    ARCHIVE: bool = False
    # Fair share: each fairness key's weight (above zero); a key left out
    # weighs 1 (django_dbqueue/transitions/fair.py; docs/fairness.md).
    FAIRNESS_WEIGHTS: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    # Rate limits by rate key ("queue:email": a whole queue), winning over the
    # limit jobs of that key carry (rates.py; docs/scheduling.md, "Rate limits").
    RATE_LIMITS: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    # Big operations (operations/big.py): one that changes at most
    # OPERATION_INLINE_ROWS rows does so at once; a bigger one runs as a job
    # on OPERATIONS_QUEUE ("": "default", or the first of QUEUES), changing
    # OPERATION_CHUNK_ROWS rows per transaction.
    OPERATION_INLINE_ROWS: int = 500
    OPERATION_CHUNK_ROWS: int = 1000
    OPERATIONS_QUEUE: str = ""

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "QueueOptions":
        """The options of ``raw``, or :class:`OptionsError` naming every problem."""
        if not isinstance(raw, dict):
            raise OptionsError([f"OPTIONS must be a dict of django_dbqueue's options, not {shown(raw)}."])
        known = {f.name: f for f in fields(cls)}
        problems = [_unknown_option(name, known) for name in raw if name not in known]
        values = {}
        for name, value in raw.items():
            if name in known:
                try:
                    values[name] = _parse_one(name, known[name].type, value)
                except OptionsError as exc:
                    problems.extend(exc.problems)
                except ImproperlyConfigured as exc:
                    problems.append(str(exc))
        if problems:
            raise OptionsError(problems)
        options = cls(**values)
        if options.POLL_INTERVAL_MIN > options.POLL_INTERVAL_MAX:
            problems.append("OPTIONS POLL_INTERVAL_MIN must not exceed POLL_INTERVAL_MAX.")
        if problems:
            raise OptionsError(problems)
        return options

    @property
    def heartbeat_interval(self) -> float:
        return self.LEASE_SECONDS / 4

    @property
    def control_interval(self) -> float:
        """How often cancel requests are looked for and progress is written:
        CONTROL_INTERVAL, or the heartbeat's own interval when a short lease
        makes that shorter (not an error: tests and demos run short leases)."""
        return min(self.CONTROL_INTERVAL, self.heartbeat_interval)


def _parse_one(name: str, kind: Any, value: Any) -> Any:
    if name == "SCHEDULES":
        return parse_schedules(value)
    if name == "RETENTION":
        return _parse_retention(value)
    if name == "FAIRNESS_WEIGHTS":
        return _parse_weights(value)
    if name == "RATE_LIMITS":
        try:
            return MappingProxyType(parse_rate_limits(value))
        except ValueError as exc:
            raise ImproperlyConfigured(str(exc)) from None
    if kind is bool:
        if not isinstance(value, bool):
            raise ImproperlyConfigured(f"OPTIONS {name} must be True or False, not {shown(value)}.")
        return value
    if kind == tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ImproperlyConfigured(f"OPTIONS {name} must be a list of module paths, not {shown(value)}.")
        for item in value:
            if not isinstance(item, str) or not item or not all(p.isidentifier() for p in item.split(".")):
                raise ImproperlyConfigured(f"OPTIONS {name} holds {shown(item)}, which is not a module path.")
        return tuple(value)
    if kind == str | None:
        if value is not None and (not isinstance(value, str) or not value):
            raise ImproperlyConfigured(
                f"OPTIONS {name} must be a database alias (a string) or None, not {shown(value)}."
            )
        return value
    if kind is str:
        if not isinstance(value, str):
            raise ImproperlyConfigured(f"OPTIONS {name} must be a string, not {shown(value)}.")
        return value
    if value is None and kind == float | None:
        return None
    if name in ZERO_ALLOWED and not isinstance(value, bool) and value == 0:
        return 0 if kind is int else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        what = "zero or a positive number" if name in ZERO_ALLOWED else "a positive number"
        raise ImproperlyConfigured(f"OPTIONS {name} must be {what}, not {shown(value)}.")
    if kind is int:
        if value != int(value):
            raise ImproperlyConfigured(f"OPTIONS {name} must be a whole number, not {shown(value)}.")
        most = MAX_WHOLE.get(name)
        if most is not None and value > most:
            raise ImproperlyConfigured(f"OPTIONS {name} must be at most {most:,}, not {shown(value)}.")
        return int(value)
    return _seconds(name, value)


def _seconds(name: str, value: int | float) -> float:
    """An option in seconds, between its least and MAX_SECONDS."""
    least = MIN_LEASE_SECONDS if name == "LEASE_SECONDS" else MIN_SECONDS
    if not least <= value <= MAX_SECONDS:
        raise ImproperlyConfigured(
            f"OPTIONS {name} must be from {least:g} to {MAX_SECONDS:,} seconds (366 days), "
            f"not {shown(value)}."
        )
    return float(value)


# The finished states RETENTION keeps per outcome, as plain strings (argparse
# choices, and the keys of RETENTION).
OUTCOMES = tuple(status.value for status in FINISHED)
# Options for which zero means something: a STOP_TIMEOUT of 0 interrupts the
# job in hand at its next checkpoint, at once; a MAX_SNOOZES of 0 fails a job
# that snoozes.
ZERO_ALLOWED = frozenset({"STOP_TIMEOUT", "UNDEPLOYED_TASK_GRACE_SECONDS", "MAX_SNOOZES"})


def _parse_retention(value: Any) -> MappingProxyType:
    """``{"SUCCESSFUL": 7, "FAILED": 30}``: days (above zero) per outcome."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"OPTIONS RETENTION must be a dict of days per outcome, such as "
            f'{{"SUCCESSFUL": 7, "FAILED": 30}}, not {shown(value)}.'
        )
    problems = []
    days = {}
    for outcome, keep in value.items():
        if outcome not in OUTCOMES:
            problems.append(
                f"OPTIONS RETENTION names {shown(outcome)}; the outcomes are {', '.join(OUTCOMES)}."
            )
        elif isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 < keep < float("inf"):
            problems.append(
                f"OPTIONS RETENTION[{shown(outcome)}] must be a number of days above zero, not {shown(keep)}."
            )
        elif keep > MAX_RETENTION_DAYS:
            problems.append(
                f"OPTIONS RETENTION[{shown(outcome)}] must be at most {MAX_RETENTION_DAYS:,} days (a "
                f"century), not {shown(keep)}; leave the outcome out to keep its jobs for ever."
            )
        else:
            days[outcome] = float(keep)
    if problems:
        raise OptionsError(problems)
    return MappingProxyType(days)


def _parse_weights(value: Any) -> MappingProxyType:
    """``{"tenant-vip": 3}``: a weight (a number above zero) per fairness key."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            "OPTIONS FAIRNESS_WEIGHTS must be a dict of weights per fairness key, such as "
            f'{{"tenant-vip": 3}}, not {shown(value)}.'
        )
    problems = []
    for key, weight in value.items():
        if not isinstance(key, str) or not key:
            problems.append(
                f"OPTIONS FAIRNESS_WEIGHTS names {shown(key)}; a fairness key is a non-empty string."
            )
        elif (
            isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < float("inf")
        ):
            problems.append(
                f"OPTIONS FAIRNESS_WEIGHTS[{shown(key)}] must be a number above zero, not {shown(weight)}."
            )
        elif not MIN_WEIGHT <= weight <= MAX_WEIGHT:
            problems.append(
                f"OPTIONS FAIRNESS_WEIGHTS[{shown(key)}] must be from {MIN_WEIGHT:.6f} to {MAX_WEIGHT:,.0f} "
                f"(the default weight is 1), not {shown(weight)}."
            )
    if problems:
        raise OptionsError(problems)
    return MappingProxyType({key: float(weight) for key, weight in value.items()})


def _close(key: Any, candidates: Iterable[str]) -> str | None:
    """The candidate ``key`` was most likely meant as, if one is close."""
    if not isinstance(key, str):
        return None
    found = difflib.get_close_matches(key.upper(), list(candidates), n=1, cutoff=0.7)
    return found[0] if found else None


def _unknown_option(name: Any, known: Iterable[str]) -> str:
    if name in ENTRY_KEYS:
        return (
            f"Unknown django_dbqueue OPTIONS {name}: {name} belongs beside BACKEND, not under "
            "OPTIONS; move it out of OPTIONS."
        )
    meant = _close(name, known)
    if meant is not None:
        return f"Unknown django_dbqueue OPTIONS {name}; did you mean {meant}?"
    return f"Unknown django_dbqueue OPTIONS {name}; the known ones are {', '.join(sorted(known))}."


def entry_problems(alias: str, params: dict[str, Any]) -> list[str]:
    """A sentence for each key of the TASKS entry Django does not read: an
    option put beside BACKEND instead of under OPTIONS, a misspelt key."""
    options = [f.name for f in fields(QueueOptions)]
    problems = []
    for key in params:
        if key in ENTRY_KEYS:
            continue
        where = f"TASKS[{alias!r}] has the key {shown(key)}"
        if key in options:
            problems.append(f"{where}, which is one of django_dbqueue's OPTIONS: put it under 'OPTIONS'.")
        elif (meant := _close(key, ENTRY_KEYS)) is not None:
            problems.append(f"{where}, which Django does not read; did you mean {meant!r}?")
        elif (meant := _close(key, options)) is not None:
            problems.append(
                f"{where}, which Django does not read; did you mean the option {meant!r}, under 'OPTIONS'?"
            )
        else:
            problems.append(
                f"{where}, which Django does not read; the keys of a TASKS entry are BACKEND, QUEUES "
                "and OPTIONS."
            )
    return problems


def database_problem(alias: str, database: Any) -> str | None:
    """The sentence for an OPTIONS DATABASE that names no alias in DATABASES, or None."""
    return _unknown_alias(alias, database, "keeps its jobs in", "DATABASE")


def read_database_problem(alias: str, read_database: Any) -> str | None:
    """The sentence for an OPTIONS READ_DATABASE that names no alias in DATABASES, or None."""
    return _unknown_alias(alias, read_database, "reads its admin lists and statistics from", "READ_DATABASE")


def _unknown_alias(alias: str, database: Any, does: str, option: str) -> str | None:
    from django.conf import settings

    if not isinstance(database, str) or database in settings.DATABASES:
        return None
    return (
        f"The task backend {alias!r} {does} the database {shown(database)} (OPTIONS {option}), "
        f"which is not in DATABASES; its aliases are {', '.join(settings.DATABASES)}."
    )
