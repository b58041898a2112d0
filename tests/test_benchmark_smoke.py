"""CI runs the benchmark's quick mode: it must complete and run every job
exactly once. How fast is the benchmark's business, not the tests'."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    os.environ.get("DBQUEUE_DATABASE") != "mariadb", reason="the benchmark runs on MariaDB only"
)


def test_quick_benchmark_completes_and_runs_every_job_once(tmp_path):
    out = tmp_path / "bench.json"
    env = os.environ.copy()
    # Its own database, so parallel runs of the suite do not collide.
    env["DBQUEUE_BENCH_DB"] = f"{os.environ.get('DBQUEUE_DB_NAME', 'dbqueue')}_bench_smoke"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--json",
            str(out),
            "--only",
            "drain,enqueue,tank,history,shapes",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["each_ran_once"] is True
    assert all(row["each_ran_once"] for row in results["drain"] + results["tank"])
    assert results["enqueue"]["bulk"]["jobs"] == results["sizes"]["bulk_jobs"]
    assert "| drain W=2" in proc.stdout
