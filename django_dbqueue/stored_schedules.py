"""The stored schedules' model lives in schedules/table.py; migration 0011 imports this path."""

from .schedules.table import Schedule, default_timezone

__all__ = ["Schedule", "default_timezone"]
