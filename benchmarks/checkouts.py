"""This checkout against an earlier commit, alternated in one run: what a
change costs a queue that uses none of its new features (issue 34 asks
each feature to keep the plain claim and enqueue at 0.95x or better).

    ./dev bench --against REV [--rounds 5] [--jobs 20000] [--enqueue 2000]
    .venv/bin/python benchmarks/checkouts.py REV [...]

REV's tree is checked out beside this one (``git worktree``, removed at
the end). Each round runs, for each side in turn (the order swapped every
round, so a burst of load from elsewhere hits both), one process with that
side's code on its path and its own database (``DBQUEUE_BENCH_DB`` plus
``_a`` or ``_b``, each migrated by its own migrations):

- enqueue: ``--enqueue`` one-by-one ``Task.enqueue()`` calls of a no-op task;
- drain: ``--jobs`` no-op jobs written by ``bulk_enqueue()``, then claimed and
  run by one in-process ``Worker`` in burst mode (batches of 200).

Each is timed by the process's CPU seconds (steady on a shared machine), by
the server process's CPU seconds (``/proc``, as server_cpu.py; nan when the
server is not on this host) and by the wall clock. The table gives each
round's figures and the median of this checkout's ratio to REV's (above 1
is faster here, for CPU per job below 1 is cheaper here).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def measure(root: Path, jobs: int, enqueues: int) -> dict[str, float]:
    """In the child: ``root``'s code on the path, its own database."""
    sys.path[:0] = [str(root), str(root / "testproject"), str(root / "benchmarks")]
    import common
    from server_cpu import cpu_seconds, server_pid

    common.configure()
    common.create_database()
    from django.db import connections

    import django_dbqueue
    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker import Worker

    if not Path(django_dbqueue.__file__).resolve().is_relative_to(root):
        raise SystemExit(f"django_dbqueue came from {django_dbqueue.__file__}, not from {root}")
    try:
        for _ in range(100):  # warm: the first enqueue reads the clock and makes the plan
            noop.enqueue()
        common.reset_jobs()
        pid = server_pid()
        cpu, wall, server = time.process_time(), time.perf_counter(), cpu_seconds(pid)
        for _ in range(enqueues):
            noop.enqueue()
        enqueue_cpu, enqueue_wall = time.process_time() - cpu, time.perf_counter() - wall
        enqueue_server = cpu_seconds(pid) - server
        common.reset_jobs()
        bulk_enqueue(noop, [((), {})] * jobs)
        connections.close_all()
        cpu, wall, server = time.process_time(), time.perf_counter(), cpu_seconds(pid)
        Worker(task_backends["default"], ["default"], batch=200, burst=True).run()
        drain_cpu, drain_wall = time.process_time() - cpu, time.perf_counter() - wall
        drain_server = cpu_seconds(pid) - server
    finally:
        common.drop_database()
    return {
        "enqueue_us_cpu": enqueue_cpu / enqueues * 1e6,
        "enqueue_per_s": enqueues / enqueue_wall,
        "enqueue_us_server": enqueue_server / enqueues * 1e6,
        "drain_us_cpu": drain_cpu / jobs * 1e6,
        "drain_us_server": drain_server / jobs * 1e6,
        "drain_per_s": jobs / drain_wall,
    }


def run_side(root: Path, database: str, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "DBQUEUE_BENCH_DB": database, "PYTHONPATH": ""}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure", str(root)]
    command += ["--jobs", str(args.jobs), "--enqueue", str(args.enqueue)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"The run on {root} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


FIGURES = (
    ("enqueue_per_s", "enqueue, jobs/s"),
    ("enqueue_us_cpu", "enqueue, µs CPU each"),
    ("enqueue_us_server", "enqueue, server µs CPU each"),
    ("drain_per_s", "claim and run, jobs/s"),
    ("drain_us_cpu", "claim and run, µs CPU per job"),
    ("drain_us_server", "claim and run, server µs per job"),
)


def compare(args: argparse.Namespace) -> None:
    base = os.environ.get("DBQUEUE_BENCH_DB", "dbqueue_bench")
    revision = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", args.revision],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="dbqueue-ab-") as scratch:
        tree = Path(scratch) / revision
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(tree), revision], check=True
        )
        try:
            sides = {"here": (HERE, f"{base}_a"), revision: (tree, f"{base}_b")}
            rounds: list[dict[str, dict[str, float]]] = []
            for number in range(args.rounds):
                order = list(sides) if number % 2 == 0 else list(reversed(sides))
                figures = {name: run_side(*sides[name], args) for name in order}
                rounds.append(figures)
                print(
                    f"round {number + 1}: "
                    + "; ".join(
                        f"{key} here {figures['here'][key]:,.1f}, {revision} {figures[revision][key]:,.1f}"
                        for key, _ in FIGURES
                    ),
                    flush=True,
                )
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(tree)], check=False)
    print(
        f"\n{args.rounds} rounds, {args.jobs:,} jobs drained and {args.enqueue:,} enqueued per side and round"
    )
    print(f"{'figure':<32}{'here':>12}{revision:>12}{'ratio':>8}")
    for key, label in FIGURES:
        here = statistics.median(r["here"][key] for r in rounds)
        there = statistics.median(r[revision][key] for r in rounds)
        # The server's CPU counts in clock ticks (10 ms): a short run may count none.
        ratio = statistics.median(
            r["here"][key] / r[revision][key] if r[revision][key] else float("nan") for r in rounds
        )
        print(f"{label:<32}{here:>12,.1f}{there:>12,.1f}{ratio:>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revision", nargs="?", help="the commit to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs drained per side and round")
    parser.add_argument("--enqueue", type=int, default=2_000, help="one-by-one enqueues per side and round")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child's checkout
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure.resolve(), args.jobs, args.enqueue)))
        return
    if not args.revision:
        parser.error("give the commit to compare with, such as HEAD~3 or a tag")
    compare(args)


if __name__ == "__main__":
    main()
