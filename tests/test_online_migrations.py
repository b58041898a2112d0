"""The policy: every migration of the queue's tables runs online. On MySQL
and MariaDB (PostgreSQL's CREATE INDEX CONCURRENTLY is online by its
manual; SQLite has one writer anyway), each migration from 0019 on runs
forwards and back on a filled job table while a producer enqueues and a
worker claims every 5 ms (benchmarks/online_migration.py, which measured a
million rows for docs/databases.md); none of them may wait 2 s. A new
migration is covered by being in the app."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import DATABASE, MYSQL_FAMILY, ROOT

pytestmark = pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="online DDL of MySQL and MariaDB")
JOBS = 50_000


def test_every_migration_since_0019_runs_while_producers_and_workers_carry_on(tmp_path):
    out = tmp_path / "online.json"
    env = {**os.environ, "DBQUEUE_BENCH_DB": f"{os.environ.get('DBQUEUE_DB_NAME', 'dbqueue')}_online"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "online_migration.py"), str(JOBS), "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    steps = json.loads(out.read_text())["steps"]
    assert {step["direction"] for step in steps} == {"forwards", "backwards"}, proc.stdout
    for step in steps:
        assert not step["errors"], (step, proc.stdout)
        for kind in ("enqueue", "claim"):
            assert step[kind]["count"] > 0, (step, proc.stdout)
            assert step[kind]["max_ms"] < 2000, (step, proc.stdout)
