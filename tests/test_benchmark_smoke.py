"""CI runs the benchmark's quick mode: it must complete and run every job
exactly once. How fast is the benchmark's business, not the tests'."""

import ast
import json
import os
import subprocess
import sys

import pytest

from django_dbqueue.models import Job
from tests.conftest import DATABASE, MYSQL_FAMILY, ROOT, once_per_run

pytestmark = pytest.mark.skipif(
    DATABASE not in MYSQL_FAMILY, reason="the benchmark runs on MySQL and MariaDB only"
)


@once_per_run("the benchmarks' parts below run on both MySQL and MariaDB")
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
    # A loose guard on the ratio to the ceiling (issue 21), far below today's
    # (about 0.3 in quick mode): it fails on a regression of the kind the
    # first version had (a commit per job: 0.04x), not on a noisy machine.
    two = next(row for row in results["drain"] if row["processes"] == 2 and row["queues"] == ["default"])
    assert two["ratio"] >= 0.06, f"drain W=2 at {two['ratio']:.2f}x the ceiling"


def run_script(script: str, *args: str, database: str) -> subprocess.CompletedProcess:
    """Run ``benchmarks/<script>`` with ``args`` on its own database (so
    parallel runs of the suite do not collide); it must exit 0."""
    env = {**os.environ, "DBQUEUE_BENCH_DB": f"{os.environ.get('DBQUEUE_DB_NAME', 'dbqueue')}_{database}"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_the_many_queues_benchmark_runs_both_shapes():
    args = ["--queues", "2,40", "--backlog", "400", "--claims", "1", "--limit", "20"]
    proc = run_script("many_queues.py", *args, database="bench_queues")
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
    proc = run_script("prune.py", "--rows-log2", "10", "--jobs", "400", database="bench_prune")
    result = json.loads(proc.stdout)
    assert result["old_rows"] == 1024
    assert (
        result["during_prune"]["prune_output"][0]
        == "SUCCESSFUL: deleted 1024 jobs finished more than 5 days ago."
    )
    assert result["baseline"]["claims"] > 0 and result["during_prune"]["claims"] > 0


def test_the_fair_share_benchmark_runs_and_reports_both_claims():
    args = [
        "--jobs",
        "600",
        "--keys",
        "3",
        "--backlog",
        "300",
        "--claims",
        "2",
        "--rounds",
        "1",
        "--limit",
        "50",
    ]
    proc = run_script("fair_share.py", *args, database="bench_fair")
    # "| FIFO (no keys, today's claim) | 0.31 | 0.3 | 1936 |": seconds until the ten were done
    done = {
        line.split(" | ")[0].lstrip("| "): float(line.split(" | ")[1])
        for line in proc.stdout.splitlines()
        if line.startswith(("| FIFO", "| fair share"))
    }
    # Both measured; which is faster at this size is left to the full run (docs/performance.md):
    # with 600 jobs FIFO takes a few tenths of a second, which a loaded machine can swamp.
    # tests/test_fairness.py's process test shows the small tenant's jobs done first.
    assert set(done) == {"fair share (fairness keys)", "FIFO (no keys, today's claim)"}, proc.stdout
    assert all(seconds >= 0 for seconds in done.values()), proc.stdout


def test_the_server_cpu_benchmark_drains_with_and_without_each_hot_index():
    proc = run_script("server_cpu.py", "300", "1", "--each-index", database="bench_server_cpu")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("round")]
    assert [line.split(":")[1].split()[0] for line in lines[:2]] == ["ceiling", "django-dbqueue"]
    # One drain without each index that holds a column a claim, an outcome
    # or a heartbeat changes, besides the claim's own: as the model has them.
    changed = {"status", "finished_at", "lease_expires_at"}
    hot = [
        index.name
        for index in Job._meta.indexes
        if changed & {field.lstrip("-") for field in index.fields} and index.name != "dbqueue_job_claim_keys"
    ]
    dropped = [line.split("without ", 1)[1].split(":")[0] for line in lines[2:]]
    assert hot and sorted(dropped) == sorted(hot), (dropped, hot)
    # Every drain ran each job once and succeeded: the script asserts it.
    assert "server" in lines[1] and "worker" in lines[1]


def test_the_table_designs_benchmark_drains_every_design_on_todays_table():
    """narrow_row.py builds its designs from the migrated job table: a
    migration that renames or drops an index it changes breaks it (0027 did)."""
    proc = run_script("narrow_row.py", "300", "1", database="bench_designs")
    ran = [line.split(":")[1].split()[0] for line in proc.stdout.splitlines() if line.startswith("round")]
    script = ast.parse((ROOT / "benchmarks" / "narrow_row.py").read_text())
    [designs] = [
        node.value
        for node in script.body
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["DESIGNS"]
    ]
    # Every drain finished each of its jobs once: the script asserts it.
    assert designs.keys and ran == ["ceiling", *(key.value for key in designs.keys)], proc.stdout


def test_the_table_designs_drain_with_two_clients_and_give_each_designs_ratio():
    proc = run_script(
        "narrow_row.py", "400", "1", "--only=nolease,once", "--workers=2", database="bench_designs"
    )
    rounds = [line for line in proc.stdout.splitlines() if line.startswith("round")]
    assert [line.split(":")[1].split()[0] for line in rounds] == ["ceiling", "nolease", "once"], proc.stdout
    # Both clients' jobs add up to every job, once (the script asserts it); each design gives its ratio.
    ratios = [float(line.split("(")[1].split("x")[0]) for line in rounds[1:]]
    assert all(ratio > 0 for ratio in ratios), proc.stdout


@once_per_run("the comparison runs the same code on either server; its parts are the drain and enqueue above")
def test_the_comparison_of_two_checkouts_runs_both_and_removes_its_worktree():
    if not (ROOT / ".git").exists():
        pytest.skip("the comparison checks a commit out of the project's git history, which this copy lacks")
    proc = run_script(
        "checkouts.py", "HEAD", "--rounds", "1", "--jobs", "300", "--enqueue", "50", database="ab"
    )
    assert "claim and run, jobs/s" in proc.stdout and "round 1:" in proc.stdout
    worktrees = subprocess.run(
        ["git", "worktree", "list"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "dbqueue-ab-" not in worktrees.stdout, "the checkout of REV is removed"
