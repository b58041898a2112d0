"""Every migration of the queue's tables runs online: producers and workers
carry on while it runs. This fills a job table migrated up to ``--from``
with N jobs (most finished, some with a concurrency key or in a batch, as
a table in use holds them), then, while a producer enqueues and a worker
claims and finishes a job every 5 ms through plain SQL, runs each later
migration of django_dbqueue one at a time (``manage.py migrate
django_dbqueue NAME``), then back again; it prints how long each took,
how many enqueues and claims ran meanwhile, and the slowest of each.

    DBQUEUE_BENCH_DB=online .venv/bin/python benchmarks/online_migration.py [N] [--from 0019] [--json FILE]

``DBQUEUE_DATABASE=mysql`` for the MySQL server of ``./dev mysql``.
tests/test_online_migrations.py runs it with a smaller N on both servers
and fails if any enqueue or claim waited 2 s or more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

TABLE = common.JOB_TABLE
APP_MIGRATIONS = common.ROOT / "django_dbqueue" / "migrations"
PAUSE = 0.005
COLUMNS = "task_path, status, finished_at, concurrency_key, concurrency_limit, batch_id"


def migrations_after(first: str) -> list[str]:
    names = sorted(path.stem for path in APP_MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))
    start = next(i for i, name in enumerate(names) if name.startswith(first))
    return names[start:]


def migrate(target: str) -> float:
    env = {**os.environ, "DBQUEUE_DATABASE": common.engine(), "DBQUEUE_DB_NAME": common.DB_NAME}
    began = time.monotonic()
    subprocess.run(
        [sys.executable, str(common.MANAGE), "migrate", "django_dbqueue", target, "-v0"],
        env=env,
        check=True,
        cwd=common.ROOT,
    )
    return time.monotonic() - began


def fill(n: int) -> None:
    """N jobs: one in ten with a concurrency key, one in ten in a batch, a
    thousand READY, the rest finished; doubled with INSERT ... SELECT."""
    conn = common.raw_connect()
    cur = conn.cursor()
    cur.execute(f"DELETE FROM {TABLE}")
    cur.execute(
        "INSERT INTO django_dbqueue_batch (description, metadata, status, sealed, callback_job_ids) "
        "VALUES ('online', '{}', 'OPEN', 0, '[]')"
    )
    batch = cur.lastrowid
    seed = [
        (
            "demo.tasks.noop",
            "SUCCESSFUL",
            f"key{i % 50}" if i % 10 == 0 else None,
            batch if i % 10 == 1 else None,
        )
        for i in range(1000)
    ]
    cur.executemany(
        f"INSERT INTO {TABLE} ({COLUMNS}) VALUES (%s, %s, NOW(6), %s, 1, %s)",
        seed,
    )
    conn.commit()
    rows = len(seed)
    while rows < n:
        cur.execute(f"INSERT INTO {TABLE} ({COLUMNS}) SELECT {COLUMNS} FROM {TABLE} LIMIT {n - rows}")
        conn.commit()
        rows += cur.rowcount
    cur.execute(f"UPDATE {TABLE} SET status = 'READY', finished_at = NULL ORDER BY id DESC LIMIT 1000")
    conn.commit()
    conn.close()


class Load:
    """A producer and a claimer in threads, each on its own connection,
    timing every statement they send."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.times: dict[str, list[float]] = {"enqueue": [], "claim": []}
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(kind,)) for kind in self.times]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _run(self, kind: str) -> None:
        conn = common.raw_connect()
        cur = conn.cursor()
        step = self._enqueue if kind == "enqueue" else self._claim
        try:
            while not self.stop.wait(PAUSE):
                began = time.monotonic()
                step(conn, cur)
                self.times[kind].append(time.monotonic() - began)
        except Exception as exc:  # reported, and the run fails
            self.errors.append(f"{kind}: {exc!r}")
        finally:
            conn.close()

    def _enqueue(self, conn, cur) -> None:  # noqa: ANN001
        cur.execute(f"INSERT INTO {TABLE} (task_path) VALUES ('demo.tasks.noop')")
        conn.commit()

    def _claim(self, conn, cur) -> None:  # noqa: ANN001
        cur.execute(
            f"SELECT id FROM {TABLE} WHERE status = 'READY' AND queue_name = 'default' "
            "AND concurrency_key IS NULL AND rate_key IS NULL AND fairness_key IS NULL "
            "AND run_after <= NOW(6) ORDER BY priority DESC, run_after, id LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        row = cur.fetchone()
        if row:
            cur.execute(
                f"UPDATE {TABLE} SET status = 'RUNNING', owner = 'online', claimed_at = NOW(6), "
                "lease_expires_at = NOW(6) + INTERVAL 60 SECOND WHERE id = %s",
                row,
            )
        conn.commit()
        if row:
            cur.execute(
                f"UPDATE {TABLE} SET status = 'SUCCESSFUL', owner = NULL, lease_expires_at = NULL, "
                "finished_at = NOW(6) WHERE id = %s",
                row,
            )
            conn.commit()


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0, "median_ms": 0.0, "max_ms": 0.0}
    return {
        "count": len(values),
        "median_ms": round(statistics.median(values) * 1000, 2),
        "max_ms": round(max(values) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--from", dest="first", default="0019", help="the migration the table starts at")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    steps = migrations_after(args.first)
    conn = common.raw_connect(None)
    conn.cursor().execute(f"DROP DATABASE IF EXISTS {common.DB_NAME}")
    conn.cursor().execute(f"CREATE DATABASE {common.DB_NAME}")
    conn.close()
    print(f"{common.engine()}: migrating an empty table up to {steps[0]}, then {args.n:,} jobs", flush=True)
    migrate(steps[0])
    began = time.monotonic()
    fill(args.n)
    print(f"  filled in {time.monotonic() - began:.1f}s", flush=True)
    results = []
    path = [(name, "forwards") for name in steps[1:]] + [(name, "backwards") for name in reversed(steps[:-1])]
    for target, direction in path:
        load = Load()
        load.start()
        time.sleep(1.0)  # the load's own pace first
        took = migrate(target)
        time.sleep(0.5)
        load.finish()
        result = {
            "migration": target,
            "direction": direction,
            "seconds": round(took, 2),
            "enqueue": summary(load.times["enqueue"]),
            "claim": summary(load.times["claim"]),
            "errors": load.errors,
        }
        results.append(result)
        told = [
            f"{kind}s {s['count']} (median {s['median_ms']} ms, slowest {s['max_ms']} ms)"
            for kind, s in (("enqueue", result["enqueue"]), ("claim", result["claim"]))
        ]
        errors = f"; errors: {'; '.join(load.errors)}" if load.errors else ""
        print(f"  {direction} to {target}: {took:.1f}s; {', '.join(told)}{errors}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"engine": common.engine(), "n": args.n, "steps": results}))


if __name__ == "__main__":
    main()
