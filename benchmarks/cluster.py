"""The drain on a three-node Galera cluster beside one MariaDB server, in
the same run, so both see the same machine load:

    .venv/bin/python benchmarks/cluster.py            # 4,000 jobs, 3 rounds, 3 workers
    .venv/bin/python benchmarks/cluster.py --jobs 1000 --rounds 1 --json
    ./dev bench --only cluster                        # the same, as a part of the benchmark

Three ways, alternately, each round: one server (a private ``mariadbd``
with the nodes' settings and no wsrep); the cluster through HAProxy (one
writer, as docs/clusters.md advises); and the cluster with a worker process
straight on each node (multi-writer). Each drains N waiting no-op jobs with
``runqueue --burst`` and W worker processes in all; the rate is the jobs
over the time from the first job's start to the last job's finish, read
from the rows. It starts the cluster (tests/galera.py) unless it is running,
and stops it again if it started it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import comparison_main  # noqa: E402

from tests.galera import GaleraCluster, available  # noqa: E402
from tests.mariadb_sandbox import SandboxMariaDB  # noqa: E402

MANAGE = ROOT / "testproject" / "manage.py"
DATABASE = "dbqueue_cluster_bench"
CONFLICTS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")


@dataclass
class Target:
    """Where the jobs live (``port``) and where each worker process connects."""

    name: str
    port: int
    worker_ports: list[int]

    def env(self, port: int) -> dict[str, str]:
        env = os.environ.copy()
        env.update(
            DBQUEUE_DATABASE="mariadb",
            DBQUEUE_DB_HOST="127.0.0.1",
            DBQUEUE_DB_PORT=str(port),
            DBQUEUE_DB_NAME=DATABASE,
            DBQUEUE_DB_USER="root",
            DBQUEUE_DB_PASSWORD="",
            DBQUEUE_LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
            DJANGO_SETTINGS_MODULE="testproject.settings",  # not the benchmark's, under benchmarks/run.py
        )
        return env

    def execute(
        self, sql: str, args: object = None, database: str | None = DATABASE, many: bool = False
    ) -> list:
        import MySQLdb

        params: dict = {"host": "127.0.0.1", "port": self.port, "user": "root", "passwd": ""}
        if database:
            params["db"] = database
        conn = MySQLdb.connect(autocommit=True, charset="utf8mb4", **params)
        try:
            with conn.cursor() as cursor:
                (cursor.executemany if many else cursor.execute)(sql, args)
                return list(cursor.fetchall())
        finally:
            conn.close()

    def prepare(self) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {DATABASE}", database=None)
        self.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4", database=None)
        migrate = subprocess.run(
            [sys.executable, str(MANAGE), "migrate", "-v0"],
            env=self.env(self.port),
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if migrate.returncode:
            raise RuntimeError(f"migrate failed on {self.name}:\n{migrate.stderr[-3000:]}")

    def fill(self, jobs: int) -> None:
        self.execute("TRUNCATE TABLE django_dbqueue_job")
        self.execute("TRUNCATE TABLE django_dbqueue_worker")
        for start in range(0, jobs, 1000):
            rows = [("demo.tasks.noop",)] * (min(jobs, start + 1000) - start)
            self.execute("INSERT INTO django_dbqueue_job (task_path) VALUES (%s)", rows, many=True)


def drain(target: Target, jobs: int, cluster: GaleraCluster | None) -> dict:
    """One drain of ``jobs`` waiting jobs by ``runqueue --burst`` processes."""
    target.fill(jobs)
    before = {name: cluster.counter(name) for name in CONFLICTS} if cluster else {}
    per_port: dict[int, int] = {}
    for port in target.worker_ports:
        per_port[port] = per_port.get(port, 0) + 1
    began = time.monotonic()
    runs = [
        subprocess.Popen(
            [sys.executable, str(MANAGE), "runqueue", "--burst", "--processes", str(count)],
            env=target.env(port),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for port, count in per_port.items()
    ]
    outputs = [run.communicate(timeout=900)[0].decode(errors="replace") for run in runs]
    wall = time.monotonic() - began
    failed = [out for run, out in zip(runs, outputs, strict=True) if run.returncode]
    if failed:
        raise RuntimeError(f"runqueue failed on {target.name}:\n{failed[0][-3000:]}")
    span, done, attempts = target.execute(
        "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) / 1e6, "
        "SUM(status = 'SUCCESSFUL'), SUM(attempts) FROM django_dbqueue_job"
    )[0]
    row = {
        "target": target.name,
        "jobs": jobs,
        "processes": len(target.worker_ports),
        "jobs_per_s": jobs / float(span),
        "seconds": float(span),
        "wall_seconds": wall,
        "each_ran_once": int(done) == jobs and int(attempts) == jobs,
    }
    if cluster:
        row["conflicts"] = sum(cluster.counter(name) - before[name] for name in CONFLICTS)
    return row


def compare(cluster: GaleraCluster, server: SandboxMariaDB, jobs: int, rounds: int, workers: int) -> dict:
    """Each way ``rounds`` times, alternately; the median rate of each."""
    nodes = [node.port for node in cluster.nodes]
    targets = [
        (Target("one server", server.port, [server.port] * workers), None),
        (Target("cluster, one writer (HAProxy)", cluster.port, [cluster.port] * workers), cluster),
        (
            Target("cluster, multi-writer", cluster.port, [nodes[i % len(nodes)] for i in range(workers)]),
            cluster,
        ),
    ]
    for target, _ in targets[:2]:
        target.prepare()  # the multi-writer way uses the cluster's database as well
    by_target: dict[str, list[dict]] = {target.name: [] for target, _ in targets}
    for _ in range(rounds):
        for target, on_cluster in targets:
            by_target[target.name].append(drain(target, jobs, on_cluster))
    rows = []
    for runs in by_target.values():
        rows.append(
            {
                **runs[-1],
                "jobs_per_s": statistics.median(run["jobs_per_s"] for run in runs),
                "rounds": [round(run["jobs_per_s"]) for run in runs],
                "each_ran_once": all(run["each_ran_once"] for run in runs),
                **({"conflicts": sum(run["conflicts"] for run in runs)} if "conflicts" in runs[0] else {}),
            }
        )
    single = rows[0]["jobs_per_s"]
    for row in rows:
        row["ratio_to_one_server"] = row["jobs_per_s"] / single
    return {"jobs": jobs, "rounds": rounds, "workers": workers, "rows": rows}


def run(jobs: int, rounds: int, workers: int) -> dict:
    """Start what is not running (one server always, the cluster unless it
    runs), compare, and stop what this started."""
    if not available():
        raise RuntimeError(
            "The cluster benchmark needs mariadbd, galera-4, haproxy and rsync (./dev cluster start)."
        )
    cluster = GaleraCluster()
    started = not cluster.running()
    server = SandboxMariaDB()
    try:
        if started:
            cluster.start()
        server.install()
        server.start()
        return compare(cluster, server, jobs, rounds, workers)
    finally:
        server.destroy()
        if started:
            cluster.stop()


def print_rows(result: dict) -> None:
    jobs, workers, rounds = result["jobs"], result["workers"], result["rounds"]
    print(f"\ndrain of {jobs} jobs, {workers} worker processes, median of {rounds}")
    for row in result["rows"]:
        extra = f", {row['conflicts']} conflicts retried" if "conflicts" in row else ""
        print(
            f"  {row['target']:<32} {row['jobs_per_s']:>7.0f} jobs/s  {row['ratio_to_one_server']:.2f}x "
            f"rounds {row['rounds']}, each ran once: {'yes' if row['each_ran_once'] else 'NO'}{extra}"
        )


def main() -> int:
    return comparison_main(
        __doc__, run, print_rows, workers=3, workers_help="worker processes in all (default 3)"
    )


if __name__ == "__main__":
    sys.exit(main())
