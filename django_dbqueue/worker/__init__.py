"""The worker side, in three rooms over a few shared modules; imports run
down this list, never up (tests/test_worker_structure.py):

  supervisor/     runqueue's parent process: starts, restarts and stops the
                  worker processes, kills a stuck one, logs the status line,
                  serves runqueue's metrics
  process/        one worker process: the loop, its claims policy, the batch
                  in hand, running a job and recording its outcome, stops
  housekeeping/   the heartbeat and the chores it starts (leases, worker
                  rows, recovery, the cancel relay, pruning, the scheduler),
                  in the supervisor's heartbeat process or a lone Worker's
                  thread
  shared.py       the memory a supervisor shares with its workers (and
                  timings.py, the run and claim durations counted there)
  threads.py      what every thread of the worker side does first

Nothing outside this package imports it, but ``runqueue`` (and
``testing.run_due_jobs``, which runs jobs as a worker does)."""

from .process.loop import Worker
from .supervisor.supervisor import Supervisor

__all__ = ["Supervisor", "Worker"]
