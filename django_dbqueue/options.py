"""The backend's ``OPTIONS``, parsed once into a typed, validated object."""

from dataclasses import dataclass, fields
from typing import Any

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True, kw_only=True)
class QueueOptions:
    DATABASE: str = "default"
    LEASE_SECONDS: float = 60.0
    BATCH_SIZE: int = 200
    # Once the job in hand has run this long, the unstarted rest of its batch
    # goes back to the queue for idle workers (holding.py).
    BATCH_HOLD_SECONDS: float = 0.1
    MAX_ATTEMPTS: int = 3
    RETRY_BACKOFF_BASE: float = 2.0
    RETRY_BACKOFF_MAX: float = 3600.0
    POLL_INTERVAL_MIN: float = 0.05
    POLL_INTERVAL_MAX: float = 2.0
    STATUS_INTERVAL: float = 5.0
    # Far below MariaDB's default max_allowed_packet (16 MiB) and MySQL's (64 MiB).
    MAX_ARGUMENTS_BYTES: int = 1_000_000
    # Seconds a job may run before it counts as a failed attempt; None: no limit.
    JOB_TIMEOUT: float | None = None
    # Longest wait between reconnection attempts while the database is away.
    RECONNECT_BACKOFF_MAX: float = 5.0
    # Modules (or packages) besides installed apps whose tasks workers may run.
    ALLOWED_TASK_MODULES: tuple[str, ...] = ()

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
        if options.POLL_INTERVAL_MIN > options.POLL_INTERVAL_MAX:
            raise ImproperlyConfigured("OPTIONS POLL_INTERVAL_MIN must not exceed POLL_INTERVAL_MAX.")
        return options

    @property
    def heartbeat_interval(self) -> float:
        return self.LEASE_SECONDS / 4


def _parse_one(name: str, kind: Any, value: Any) -> Any:
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
