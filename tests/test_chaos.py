"""The chaos run in CI: SIGKILLed workers and a crashed server lose no job,
and every duplicate run is explained by a kill or the crash. The driver is
`benchmarks/chaos.py`; DBQUEUE_CHAOS_JOBS scales it. It runs with the lease
users get by default (60 s): a shortened lease once hid that workers never
recovered a crash loop's jobs. So it lasts at least one lease, the crashed
server's grace, with the crash loop going on until every killed worker's jobs
are recovered. Then the kills stop: a kill of a worker running a recovered
job would only add another lease of waiting, and proves nothing a kill
before the recovery does not (the death of a worker running a suspect job:
tests/test_processes.py and tests/test_poison.py)."""

import os
import re
from collections import Counter
from dataclasses import asdict

from benchmarks.chaos import DATABASE, Driver, Figures, chaos, count, environment, prepare
from django_dbqueue.options import QueueOptions
from tests.conftest import needs_sandbox

JOBS = int(os.environ.get("DBQUEUE_CHAOS_JOBS", "4000"))
WORKERS = 4


@needs_sandbox
def test_chaos_run_loses_nothing_and_duplicates_only_what_kills_explain(sandbox_server, tmp_path):
    server = sandbox_server
    env = environment(server, lease=QueueOptions.LEASE_SECONDS)  # the default (see the docstring)
    prepare(server, JOBS, env)
    driver = KillsUntilRecovered(server, Figures(jobs=JOBS, workers=WORKERS), tmp_path / "runqueue.log", env)
    driver.run(kill_every=1.0, restart_at=0.5, limit=900.0)
    count(driver)
    figures = driver.figures
    print("chaos figures:", asdict(figures))

    def one(sql: str) -> int:
        return server.execute(sql, database=DATABASE)[0][0]

    # The chaos really happened, or nothing below would mean anything: the
    # crash loop killed workers holding jobs, and lasted until they were
    # recovered, so no worker lived a lease to recover them.
    assert figures.kills >= 3 and figures.db_restarts == 1
    assert sum(figures.claimed_at_kills) > 0
    assert "Recovered" in (tmp_path / "runqueue.log").read_text(errors="replace")
    assert figures.worker_restarts >= figures.kills - 1  # the last kill may land during the stop

    assert one("SELECT COUNT(*) FROM django_dbqueue_job") == JOBS
    assert one("SELECT COUNT(*) FROM django_dbqueue_job WHERE status <> 'SUCCESSFUL'") == 0
    keys = one("SELECT COUNT(DISTINCT `key`) FROM demo_execution")
    assert keys == JOBS, f"{JOBS - keys} jobs left no side effect"
    duplicates = one("SELECT COUNT(*) FROM demo_execution") - keys
    # A SIGKILLed worker reruns only the jobs in flight at the kill: those it
    # had run (their side effect exists) but whose outcome it had not yet
    # recorded, the job in hand and the successes waiting to be written in
    # one UPDATE (worker/process/outcomes.py). The database crash can cost at most one per
    # worker (a task whose INSERT committed as the server died, then failed
    # and was retried).
    assert duplicates == figures.duplicates
    in_flight = sum(figures.started_at_kills) + figures.kills  # + the job in hand at each kill
    assert duplicates <= in_flight + WORKERS
    assert figures.duplicates_by_killed_workers <= in_flight
    assert figures.killed_workers_over_their_bound == 0
    assert figures.duplicates_by_other_workers <= WORKERS
    # Workers rode the crash out instead of crashing: one message each at most
    # per outage, and the restarts are the kills, not a crash loop.
    messages = outage_messages_per_process((tmp_path / "runqueue.log").read_text())
    assert messages and max(messages.values()) == 1, messages
    assert figures.recovery_seconds is not None and figures.recovery_seconds < 15


class KillsUntilRecovered(Driver):
    """The chaos driver, whose kills stop once the database has restarted and
    the heartbeat has recovered dead workers' jobs (it logs "Recovered N
    jobs from dead workers"): recovery happened in the crash loop."""

    recovered: bool = False

    def kill_a_worker(self, supervisor: int) -> None:
        if not self.recovered and self.figures.db_restarts:
            self.recovered = "Recovered" in self.log.read_text(errors="replace")
        if not self.recovered:
            super().kill_a_worker(supervisor)


def outage_messages_per_process(log: str) -> Counter:
    return Counter(re.findall(r" (\d+) WARNING \S+ Worker \S+ lost the database connection", log))


ATOMIC_JOBS = int(os.environ.get("DBQUEUE_CHAOS_ATOMIC_JOBS", "1500"))


@needs_sandbox
def test_chaos_run_of_atomic_tasks_has_each_effect_exactly_once(sandbox_server, tmp_path):
    """The same chaos with atomic tasks: their insert commits with the job's
    success or not at all, so no kill and no crash leaves a duplicate. (A
    5 s lease: exactly once does not depend on its length, and the run with
    the default lease above already takes minutes.)"""
    server = sandbox_server
    log = tmp_path / "runqueue.log"
    # Kills twice a second, of a worker holding a batch where one does: a
    # quick drain (under 2 s between the restart and the kills) still has its
    # kills catch work in flight.
    figures = chaos(server, log, jobs=ATOMIC_JOBS, workers=WORKERS, kill_every=0.5, lease=5.0, task="atomic")
    print("atomic chaos figures:", asdict(figures))

    assert figures.kills >= 3 and figures.db_restarts == 1
    assert figures.statuses == {"SUCCESSFUL": ATOMIC_JOBS}
    assert figures.lost == 0
    assert figures.executions == ATOMIC_JOBS and figures.duplicates == 0
    # The kills did catch work in flight: without atomic, these would rerun.
    assert sum(figures.claimed_at_kills) > 0
