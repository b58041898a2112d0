"""The worker side: the worker loop, its supervisor and heartbeat, giving
back a slow job's batch-mates, time limits, and the state they share.
Nothing outside this package imports it, but ``runqueue``."""

from .loop import Worker
from .supervisor import Supervisor

__all__ = ["Supervisor", "Worker"]
