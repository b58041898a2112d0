"""The backend's ``OPTIONS``, parsed once into a typed, validated object."""

from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# The most jobs one claim takes (OPTIONS BATCH_SIZE and runqueue --batch).
MAX_BATCH_SIZE = 1000


@dataclass(frozen=True, kw_only=True)
class QueueOptions:
    DATABASE: str = "default"
    LEASE_SECONDS: float = 60.0
    BATCH_SIZE: int = 200
    # Once the job in hand has run this long, the unstarted rest of its batch
    # goes back to the queue for idle workers (worker/giveback.py).
    BATCH_HOLD_SECONDS: float = 0.1
    MAX_ATTEMPTS: int = 3
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
    # Longest wait between reconnection attempts while the database is away.
    RECONNECT_BACKOFF_MAX: float = 5.0
    # Modules (or packages) besides installed apps whose tasks workers may run.
    ALLOWED_TASK_MODULES: tuple[str, ...] = ()
    # Recurring jobs by name (schedules.py; docs/scheduling.md).
    SCHEDULES: tuple[Any, ...] = ()
    # Days to keep finished jobs, per outcome; the heartbeat deletes older
    # ones in small batches (retention.py). An outcome left out is kept.
    RETENTION: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "QueueOptions":
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ImproperlyConfigured(
                f"Unknown django_dbqueue OPTIONS {', '.join(unknown)}; "
                f"the known ones are {', '.join(sorted(known))}."
            )
        values = {name: _parse_one(name, known[name].type, value) for name, value in raw.items()}
        options = cls(**values)
        if options.BATCH_SIZE > MAX_BATCH_SIZE:
            raise ImproperlyConfigured(
                f"OPTIONS BATCH_SIZE must be at most {MAX_BATCH_SIZE}, not {options.BATCH_SIZE}."
            )
        if options.POLL_INTERVAL_MIN > options.POLL_INTERVAL_MAX:
            raise ImproperlyConfigured("OPTIONS POLL_INTERVAL_MIN must not exceed POLL_INTERVAL_MAX.")
        return options

    @property
    def heartbeat_interval(self) -> float:
        return self.LEASE_SECONDS / 4


def _parse_one(name: str, kind: Any, value: Any) -> Any:
    if name == "SCHEDULES":
        from .schedules import parse_schedules

        return parse_schedules(value)
    if name == "RETENTION":
        return _parse_retention(value)
    if kind == tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ImproperlyConfigured(f"OPTIONS {name} must be a list of module paths, not {value!r}.")
        for item in value:
            if not isinstance(item, str) or not item or not all(p.isidentifier() for p in item.split(".")):
                raise ImproperlyConfigured(f"OPTIONS {name} holds {item!r}, which is not a module path.")
        return tuple(value)
    if kind is str:
        if not isinstance(value, str):
            raise ImproperlyConfigured(f"OPTIONS {name} must be a string, not {value!r}.")
        return value
    if value is None and kind == float | None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ImproperlyConfigured(f"OPTIONS {name} must be a positive number, not {value!r}.")
    if kind is int:
        if int(value) != value:
            raise ImproperlyConfigured(f"OPTIONS {name} must be a whole number, not {value!r}.")
        return int(value)
    return float(value)


OUTCOMES = ("SUCCESSFUL", "FAILED", "CANCELLED")


def _parse_retention(value: Any) -> MappingProxyType:
    """``{"SUCCESSFUL": 7, "FAILED": 30}``: days (above zero) per outcome."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"OPTIONS RETENTION must be a dict of days per outcome, such as "
            f'{{"SUCCESSFUL": 7, "FAILED": 30}}, not {value!r}.'
        )
    days = {}
    for outcome, keep in value.items():
        if outcome not in OUTCOMES:
            raise ImproperlyConfigured(
                f"OPTIONS RETENTION names {outcome!r}; the outcomes are {', '.join(OUTCOMES)}."
            )
        if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 < keep < float("inf"):
            raise ImproperlyConfigured(
                f"OPTIONS RETENTION[{outcome!r}] must be a number of days above zero, not {keep!r}."
            )
        days[outcome] = float(keep)
    return MappingProxyType(days)
