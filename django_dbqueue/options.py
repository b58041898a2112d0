"""The backend's ``OPTIONS``, parsed once into a typed, validated object."""

from dataclasses import dataclass, fields
from typing import Any

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True, kw_only=True)
class QueueOptions:
    DATABASE: str = "default"
    LEASE_SECONDS: float = 60.0
    BATCH_SIZE: int = 20
    MAX_ATTEMPTS: int = 3
    RETRY_BACKOFF_BASE: float = 2.0
    RETRY_BACKOFF_MAX: float = 3600.0
    POLL_INTERVAL_MIN: float = 0.05
    POLL_INTERVAL_MAX: float = 2.0
    STATUS_INTERVAL: float = 5.0
    MAX_ARGUMENTS_BYTES: int = 1_000_000

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "QueueOptions":
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ImproperlyConfigured(
                f"Unknown django_dbqueue OPTIONS {', '.join(unknown)}; "
                f"the known ones are {', '.join(sorted(known))}."
            )
        values = {}
        for name, value in raw.items():
            kind = int if known[name].type is int else float if known[name].type is float else str
            if kind is str and not isinstance(value, str):
                raise ImproperlyConfigured(f"OPTIONS {name} must be a string, not {value!r}.")
            if kind is not str:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                    raise ImproperlyConfigured(f"OPTIONS {name} must be a positive number, not {value!r}.")
                if kind is int and int(value) != value:
                    raise ImproperlyConfigured(f"OPTIONS {name} must be a whole number, not {value!r}.")
            values[name] = kind(value)
        options = cls(**values)
        if options.POLL_INTERVAL_MIN > options.POLL_INTERVAL_MAX:
            raise ImproperlyConfigured("OPTIONS POLL_INTERVAL_MIN must not exceed POLL_INTERVAL_MAX.")
        return options

    @property
    def heartbeat_interval(self) -> float:
        return self.LEASE_SECONDS / 4
