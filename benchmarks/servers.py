"""The drain on one MariaDB server beside the same jobs split over two, in
the same run, so both see the same machine load:

    .venv/bin/python benchmarks/servers.py              # 4,000 jobs, 3 rounds, 2 workers
    .venv/bin/python benchmarks/servers.py --jobs 8000 --workers 4 --json

Two private ``mariadbd`` servers (tests/mariadb_sandbox.py), each the
database of one task backend (tests/several_servers_settings.py: ``default``
on the first, ``second`` on the second). Each round, alternately:

- one server: N no-op jobs on the first, ``runqueue --backend default
  --processes W``;
- two servers: N/2 on each, ``runqueue --backend default --backend second
  --processes W/2`` (the same W worker processes in all);
- two servers, twice the workers: N/2 on each, W per backend.

The rate is the jobs over the time from the first job's start to the last
job's finish on either server, read from the rows. Beside it: CPU seconds
per 1,000 jobs spent by each ``mariadbd`` (/proc) and by the runqueue
processes (their rusage), which is what docs/clusters.md's model of more
servers and more cores is built from.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import comparison_main  # noqa: E402

from tests.mariadb_sandbox import SandboxMariaDB, available  # noqa: E402

MANAGE = ROOT / "testproject" / "manage.py"
DATABASE = "dbqueue_servers_bench"
TICKS = os.sysconf("SC_CLK_TCK")


def env(first: SandboxMariaDB, second: SandboxMariaDB) -> dict[str, str]:
    values = os.environ.copy()
    values.update(
        DBQUEUE_DATABASE="mariadb",
        DBQUEUE_DB_HOST="127.0.0.1",
        DBQUEUE_DB_PORT=str(first.port),
        DBQUEUE_DB_NAME=DATABASE,
        DBQUEUE_SECOND_PORT=str(second.port),
        DBQUEUE_SECOND_NAME=DATABASE,
        DBQUEUE_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="tests.several_servers_settings",
    )
    return values


def server_cpu(server: SandboxMariaDB) -> float:
    """The CPU seconds ``server``'s mariadbd has used so far."""
    assert server.process is not None
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime and stime


def prepare(first: SandboxMariaDB, second: SandboxMariaDB) -> None:
    for server, alias in ((first, "default"), (second, "second")):
        server.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4")
        migrate = subprocess.run(
            [sys.executable, str(MANAGE), "migrate", "-v0", "--database", alias],
            env=env(first, second),
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if migrate.returncode:
            raise RuntimeError(f"migrate failed on {alias}:\n{migrate.stderr[-3000:]}")


def fill(server: SandboxMariaDB, jobs: int) -> None:
    conn = server.connect(DATABASE)
    try:
        with conn.cursor() as cursor:
            cursor.execute("TRUNCATE TABLE django_dbqueue_job")
            cursor.execute("TRUNCATE TABLE django_dbqueue_worker")
            for start in range(0, jobs, 1000):
                rows = [("demo.tasks.noop",)] * (min(jobs, start + 1000) - start)
                cursor.executemany("INSERT INTO django_dbqueue_job (task_path) VALUES (%s)", rows)
    finally:
        conn.close()


def span(servers: list[SandboxMariaDB]) -> tuple[datetime, datetime, int, int]:
    """The first start and last finish over ``servers``' jobs, the jobs done and the attempts."""
    found = [
        server.execute(
            "SELECT MIN(started_at), MAX(finished_at), SUM(status = 'SUCCESSFUL'), SUM(attempts) "
            "FROM django_dbqueue_job",
            database=DATABASE,
        )[0]
        for server in servers
    ]
    return (
        min(row[0] for row in found),
        max(row[1] for row in found),
        sum(int(row[2]) for row in found),
        sum(int(row[3]) for row in found),
    )


def burst(name: str, servers: list[SandboxMariaDB], both: tuple, processes: int) -> float:
    """Run ``runqueue --burst`` on ``servers``' backends; the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    aliases = ["default", "second"][: len(servers)]
    args = [a for alias in aliases for a in ("--backend", alias)]
    run = subprocess.run(
        [sys.executable, str(MANAGE), "runqueue", "--burst", "--processes", str(processes), *args],
        env=env(*both),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode:
        raise RuntimeError(f"runqueue failed ({name}):\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def drain(
    name: str, servers: list[SandboxMariaDB], both: tuple, jobs: int, processes: int, idle_cpu: float
) -> dict:
    """One drain of ``jobs`` waiting jobs, split evenly over ``servers``;
    ``idle_cpu``: what the same runqueue costs with nothing to do (its
    start, checks and exit), left out of its CPU per job."""
    for server in both:
        fill(server, 0)
    for index, server in enumerate(servers):
        fill(server, jobs // len(servers) + (index < jobs % len(servers)))
    cpu_before = [server_cpu(server) for server in both]
    workers_cpu = burst(name, servers, both, processes) - idle_cpu
    first_start, last_finish, done, attempts = span(servers)
    seconds = (last_finish - first_start).total_seconds()
    per_thousand = 1000 / jobs
    return {
        "way": name,
        "jobs": jobs,
        "processes": processes * len(servers),
        "jobs_per_s": jobs / seconds,
        "each_ran_once": done == jobs and attempts == jobs,
        "server_cpu_per_1000": [
            round((server_cpu(server) - before) * per_thousand, 3)
            for server, before in zip(both, cpu_before, strict=True)
        ],
        "runqueue_cpu_per_1000": round(workers_cpu * per_thousand, 3),
    }


def compare(first: SandboxMariaDB, second: SandboxMariaDB, jobs: int, rounds: int, workers: int) -> dict:
    both = (first, second)
    ways = [
        ("one server", [first], workers),
        ("two servers, same workers", [first, second], max(workers // 2, 1)),
        ("two servers, twice the workers", [first, second], workers),
    ]
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in ways}
    idle = {}
    for name, servers, processes in ways:
        for server in both:
            fill(server, 0)
        idle[name] = burst(name, servers, both, processes)
    for _ in range(rounds):
        for name, servers, processes in ways:
            runs[name].append(drain(name, servers, both, jobs, processes, idle[name]))
    rows = []
    for found in runs.values():
        row = {
            **found[-1],
            "jobs_per_s": statistics.median(run["jobs_per_s"] for run in found),
            "rounds": [round(run["jobs_per_s"]) for run in found],
            "each_ran_once": all(run["each_ran_once"] for run in found),
        }
        rows.append(row)
    for row in rows:
        row["ratio_to_one_server"] = row["jobs_per_s"] / rows[0]["jobs_per_s"]
    return {"jobs": jobs, "rounds": rounds, "workers": workers, "cores": os.cpu_count(), "rows": rows}


def run(jobs: int, rounds: int, workers: int) -> dict:
    if not available():
        raise RuntimeError("The servers benchmark needs mariadbd and mariadb-install-db.")
    servers = [SandboxMariaDB(), SandboxMariaDB()]
    try:
        for server in servers:
            server.install()
            server.start()
        prepare(*servers)
        began = time.monotonic()
        result = compare(*servers, jobs, rounds, workers)
        result["seconds"] = round(time.monotonic() - began, 1)
        return result
    finally:
        for server in servers:
            server.destroy()


def print_rows(result: dict) -> None:
    print(
        f"\ndrain of {result['jobs']} no-op jobs, median of {result['rounds']} rounds, "
        f"{result['cores']} cores, {result['seconds']} s in all"
    )
    for row in result["rows"]:
        print(
            f"  {row['way']:<32} {row['processes']} workers {row['jobs_per_s']:>7.0f} jobs/s "
            f"{row['ratio_to_one_server']:.2f}x  rounds {row['rounds']}  CPU s per 1,000 jobs: "
            f"servers {row['server_cpu_per_1000']}, runqueue {row['runqueue_cpu_per_1000']}  "
            f"each ran once: {'yes' if row['each_ran_once'] else 'NO'}"
        )


def main() -> int:
    return comparison_main(
        __doc__, run, print_rows, workers=2, workers_help="worker processes on one server (default 2)"
    )


if __name__ == "__main__":
    sys.exit(main())
