"""Chaos run: workers drain a queue while a driver SIGKILLs them and crashes
MariaDB under them; then count what was lost and what ran twice.

    .venv/bin/python benchmarks/chaos.py                  # 20,000 jobs, the full run
    .venv/bin/python benchmarks/chaos.py --jobs 2000 --json

It starts its own throwaway MariaDB (never the shared one on 3306), seeds
``demo.tasks.record`` jobs with plain SQL INSERTs, runs ``runqueue
--processes 4`` on it, and meanwhile SIGKILLs a worker process (one
holding a batch of jobs where there is one) about every second (the
supervisor starts a new one) and kills and restarts MariaDB once. Each
run of a job inserts ``(key, pid)`` into ``demo_execution``, so a
duplicate execution is visible as a second row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.mariadb_sandbox import SandboxMariaDB  # noqa: E402

MANAGE = ROOT / "testproject" / "manage.py"
DATABASE = "dbqueue_chaos"


@dataclass
class Figures:
    jobs: int
    workers: int
    kills: int = 0
    db_restarts: int = 0
    worker_restarts: int = 0
    seconds: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    executions: int = 0
    lost: int = 0  # jobs not SUCCESSFUL, or whose side effect is missing
    duplicates: int = 0  # executions beyond one per job
    duplicates_by_killed_workers: int = 0
    duplicates_by_other_workers: int = 0
    most_duplicates_of_one_killed_worker: int = 0
    claimed_at_kills: list[int] = field(default_factory=list)  # jobs the victim held RUNNING
    # Of those, the ones that had run (their side effect exists): the jobs in
    # flight at the kill, whose outcome the victim had not recorded yet.
    started_at_kills: list[int] = field(default_factory=list)
    killed_workers_over_their_bound: int = 0  # victims with more duplicates than jobs in flight
    db_down_seconds: float = 0.0
    recovery_seconds: float | None = None  # server accepting connections -> next job finished
    outage_messages: int = 0


def environment(server: SandboxMariaDB, lease: float) -> dict[str, str]:
    env = os.environ.copy()
    env.update(
        # A MySQL sandbox (tests/mysql_server.py) says so; MariaDB's and Galera's do not.
        DBQUEUE_DATABASE=getattr(server, "kind", "mariadb"),
        DBQUEUE_DB_HOST="127.0.0.1",
        DBQUEUE_DB_PORT=str(server.port),
        DBQUEUE_DB_NAME=DATABASE,
        DBQUEUE_DB_USER="root",
        DBQUEUE_DB_PASSWORD="",
        DBQUEUE_LEASE=str(lease),
        DBQUEUE_BACKOFF="0.05",
        DBQUEUE_STATUS_INTERVAL="2",
        PYTHONUNBUFFERED="1",
    )
    return env


TASKS = {"record": "demo.tasks.record", "atomic": "demo.tasks.record_atomic"}


def prepare(server: SandboxMariaDB, jobs: int, env: dict[str, str], task: str = "record") -> None:
    server.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    server.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4")
    subprocess.run(
        [sys.executable, str(MANAGE), "migrate", "-v0"], env=env, cwd=ROOT, check=True, capture_output=True
    )
    conn = server.connect(DATABASE)
    with conn.cursor() as cursor:
        for start in range(0, jobs, 1000):
            rows = [(TASKS[task], json.dumps([f"chaos-{i}"])) for i in range(start, min(jobs, start + 1000))]
            # A plain INSERT, as another language's producer would write it.
            cursor.executemany("INSERT INTO django_dbqueue_job (task_path, args) VALUES (%s, %s)", rows)
    conn.close()


class Driver:
    def __init__(self, server: SandboxMariaDB, figures: Figures, log: Path, env: dict[str, str]) -> None:
        self.server, self.figures, self.log, self.env = server, figures, log, env
        self.killed: list[int] = []
        self.conn = None

    def query(self, sql: str, args: object = None) -> list[tuple]:
        # The driver's own connection dies with the server; open a new one then.
        for _ in range(100):
            try:
                if self.conn is None:
                    self.conn = self.server.connect(DATABASE, connect_timeout=2)
                with self.conn.cursor() as cursor:
                    cursor.execute(sql, args)
                    return list(cursor.fetchall())
            except Exception:
                self.conn = None
                time.sleep(0.1)
        raise RuntimeError("the sandbox database stays unreachable")

    def finished(self) -> int:
        """Jobs that will not run again: a job that FAILED (its attempts
        spent by kills) ends the run too, for the caller's figures to show."""
        return self.query(
            "SELECT COUNT(*) FROM django_dbqueue_job WHERE status IN ('SUCCESSFUL', 'FAILED', 'CANCELLED')"
        )[0][0]

    def kill_a_worker(self, supervisor: int) -> None:
        path = Path(f"/proc/{supervisor}/task/{supervisor}/children")
        children = [int(pid) for pid in path.read_text().split()] if path.exists() else []
        # Worker processes only: the heartbeat process is named differently.
        children = [pid for pid in children if _comm(pid) in ("dbqueue-worker", "")]
        if not children:
            return
        # A worker holding a batch if there is one: a kill that catches work
        # in flight is the one that tests recovery (a quick drain leaves few
        # kills, and a random one often lands on a worker between batches
        # or still starting). Not one holding a single job: at the end of
        # the drain that is a recovered job, claimed alone by a worker just
        # started (importing the task), and aiming every kill at it would
        # spend its attempts until it FAILED, as a crash loop's job should.
        # None holds a batch: any worker, so the crash loop goes on while
        # dead workers' jobs wait for their leases.
        busy = [pid for pid in children if self.holding(pid) > 1]
        victim = random.choice(busy or children)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.killed.append(victim)
        self.figures.kills += 1
        self.figures.claimed_at_kills.append(self.holding(victim))
        # Keys first, then the index on demo_execution.key: a correlated
        # EXISTS on JSON_VALUE(args) cannot use it and scans per row.
        keys = [
            key
            for (key,) in self.query(
                "SELECT JSON_VALUE(args, '$[0]') FROM django_dbqueue_job "
                "WHERE status = 'RUNNING' AND owner LIKE %s",
                [f"%:{victim}:%"],
            )
        ]
        started = (
            self.query("SELECT COUNT(DISTINCT `key`) FROM demo_execution WHERE `key` IN %s", [keys])
            if keys
            else [(0,)]
        )
        self.figures.started_at_kills.append(started[0][0])

    def holding(self, pid: int) -> int:
        return self.query(
            "SELECT COUNT(*) FROM django_dbqueue_job WHERE status = 'RUNNING' AND owner LIKE %s",
            [f"%:{pid}:%"],
        )[0][0]

    def restart_database(self) -> None:
        began = time.monotonic()
        self.conn = None
        self.server.stop(kill=True)  # a crash, not a clean shutdown
        time.sleep(2.0)
        self.server.start()
        up = time.monotonic()
        self.figures.db_down_seconds = round(up - began, 2)
        self.figures.db_restarts += 1
        before = self.finished()
        while self.finished() == before:
            time.sleep(0.05)
        self.figures.recovery_seconds = round(time.monotonic() - up, 2)

    def run(self, kill_every: float, restart_at: float, limit: float) -> None:
        jobs = self.figures.jobs
        supervisor = subprocess.Popen(
            [sys.executable, str(MANAGE), "runqueue", "--processes", str(self.figures.workers)],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=ROOT,
            start_new_session=True,
        )
        began = time.monotonic()
        next_kill = began + kill_every
        try:
            while (done := self.finished()) < jobs:
                if time.monotonic() - began > limit:
                    raise RuntimeError(f"only {done} of {jobs} jobs finished in {limit}s")
                if not self.figures.db_restarts and done >= restart_at * jobs:
                    self.restart_database()
                if time.monotonic() >= next_kill:
                    self.kill_a_worker(supervisor.pid)
                    next_kill = time.monotonic() + kill_every * random.uniform(0.5, 1.5)
                time.sleep(0.05)
            self.figures.seconds = round(time.monotonic() - began, 1)
        finally:
            supervisor.send_signal(signal.SIGTERM)
            try:
                supervisor.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(supervisor.pid, signal.SIGKILL)
                supervisor.wait()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def count(driver: Driver) -> None:
    """The figures, from the database itself."""
    figures, query = driver.figures, driver.query
    figures.statuses = dict(query("SELECT status, COUNT(*) FROM django_dbqueue_job GROUP BY status"))
    figures.executions = query("SELECT COUNT(*) FROM demo_execution")[0][0]
    missing = query(
        "SELECT COUNT(*) FROM django_dbqueue_job j WHERE j.status <> 'SUCCESSFUL' OR NOT EXISTS "
        "(SELECT 1 FROM demo_execution e WHERE e.`key` = JSON_VALUE(j.args, '$[0]'))"
    )[0][0]
    figures.lost = missing
    figures.duplicates = figures.executions - query("SELECT COUNT(DISTINCT `key`) FROM demo_execution")[0][0]
    # Of each key's runs, all but the last were wasted: whose process ran them?
    wasted = query(
        "SELECT e.pid FROM demo_execution e WHERE e.id < "
        "(SELECT MAX(l.id) FROM demo_execution l WHERE l.`key` = e.`key`)"
    )
    killed = set(driver.killed)
    by_killed = [pid for (pid,) in wasted if pid in killed]
    figures.duplicates_by_killed_workers = len(by_killed)
    figures.duplicates_by_other_workers = len(wasted) - len(by_killed)
    figures.most_duplicates_of_one_killed_worker = max(
        (by_killed.count(pid) for pid in set(by_killed)), default=0
    )
    in_flight = dict(zip(driver.killed, figures.started_at_kills, strict=False))
    # In flight: what had visibly run, plus the job in hand, whose side effect
    # may commit just after the kill is counted.
    figures.killed_workers_over_their_bound = sum(
        by_killed.count(pid) > in_flight.get(pid, 0) + 1 for pid in set(by_killed)
    )
    output = driver.log.read_text(errors="replace")
    figures.worker_restarts = output.count("restarting it")
    figures.outage_messages = output.count("lost the database connection")


def chaos(
    server: SandboxMariaDB,
    log: Path,
    jobs: int = 20_000,
    workers: int = 4,
    kill_every: float = 1.0,
    restart_at: float = 0.5,
    lease: float = 60.0,
    limit: float = 900.0,
    task: str = "record",
) -> Figures:
    env = environment(server, lease)
    prepare(server, jobs, env, task)
    driver = Driver(server, Figures(jobs=jobs, workers=workers), log, env)
    driver.run(kill_every, restart_at, limit)
    count(driver)
    return driver.figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=1.0, help="mean seconds between SIGKILLs")
    parser.add_argument(
        "--lease", type=float, default=60.0, help="LEASE_SECONDS for the workers (default: the default)"
    )
    parser.add_argument(
        "--task", choices=sorted(TASKS), default="record", help="atomic: the same insert as an atomic task"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    server = SandboxMariaDB()
    try:
        server.install()
        server.start()
        log = server.root.parent / f"chaos-runqueue-{os.getpid()}.log"
        figures = chaos(
            server, log, args.jobs, args.workers, args.kill_every, lease=args.lease, task=args.task
        )
    finally:
        server.destroy()
    if args.json:
        print(json.dumps(asdict(figures), indent=2))
    else:
        for name, value in asdict(figures).items():
            print(f"{name:>38}: {value}")
        print(f"{'runqueue log':>38}: {log}")
    bound = sum(figures.started_at_kills) + figures.kills + figures.workers
    ok = figures.lost == 0 and figures.duplicates <= bound and not figures.killed_workers_over_their_bound
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
