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
    # The tank waits for its runqueue's Worker rows, which the heartbeat
    # writes at its first beat after the workers are up: a quarter lease
    # later, 15 s with the default lease, twice. An 8 s lease (a beat every
    # 2 s) changes no job's fate here: nothing is killed or runs for long.
    env["DBQUEUE_LEASE"] = "8"
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


def test_the_many_queues_benchmark_runs_both_shapes():
    env = os.environ.copy()
    env["DBQUEUE_BENCH_DB"] = f"{os.environ.get('DBQUEUE_DB_NAME', 'dbqueue')}_bench_queues"
    args = ["--queues", "2,40", "--backlog", "400", "--claims", "1", "--limit", "20"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "many_queues.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [
        line.split("|")[1:3]
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and "default" in line
    ]
    assert [(queues.strip(), shape.strip()) for queues, shape in rows] == [
        ("2", "default"),
        ("40", "default"),
    ]


def test_the_prune_benchmark_runs_small():
    env = os.environ.copy()
    env["DBQUEUE_BENCH_DB"] = f"{os.environ.get('DBQUEUE_DB_NAME', 'dbqueue')}_bench_prune"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "prune.py"), "--rows-log2", "10", "--jobs", "400"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["old_rows"] == 1024
    assert (
        result["during_prune"]["prune_output"][0]
        == "SUCCESSFUL: deleted 1024 jobs finished more than 5 days ago."
    )
    assert result["baseline"]["claims"] > 0 and result["during_prune"]["claims"] > 0
