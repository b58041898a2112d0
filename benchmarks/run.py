"""django-dbqueue's benchmark: one run on the local MariaDB measures the
plain-SQL ceiling and django-dbqueue side by side, prints a table with every
figure's ratio to the ceiling, and writes benchmarks/results/latest.json.

    ./dev bench                    everything (a few minutes)
    ./dev bench --quick            a smoke run of every part (seconds)
    ./dev bench --only drain,history
    ./dev bench --only cluster     the drain on a Galera cluster beside one server (not in the default run)

It creates and drops its own database (DBQUEUE_BENCH_DB, default
dbqueue_bench) on the server the test settings point at.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+

PARTS = ("drain", "enqueue", "tank", "history", "shapes", "batch", "limits", "batch_drain")
# Not in the default run: it starts three Galera nodes and HAProxy (benchmarks/cluster.py).
OPTIONAL_PARTS = ("cluster",)
FULL = {
    "drain_jobs": 20_000,
    "drain_rounds": 3,
    "workers": [1, 2, 4],
    "enqueue_jobs": 4_000,
    "bulk_jobs": 50_000,
    "tank_seconds": 10.0,
    "sweep_seconds": 6.0,
    "history": [0, 100_000, 1_000_000],
    "history_samples": 200,
    "shape_jobs": 20_000,
    "shape_rounds": 3,
    "limit_jobs": 2_000,
    "chain_steps": 1_000,
}
QUICK = {
    "drain_jobs": 2_000,
    "drain_rounds": 1,
    "workers": [1, 2],
    "enqueue_jobs": 300,
    "bulk_jobs": 3_000,
    "tank_seconds": 2.0,
    "sweep_seconds": 1.5,
    "history": [0, 10_000],
    "history_samples": 20,
    "shape_jobs": 2_000,
    "shape_rounds": 1,
    "limit_jobs": 200,
    "chain_steps": 100,
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: checks that every part runs")
    parser.add_argument(
        "--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}"
    )
    parser.add_argument("--json", default=str(common.ROOT / "benchmarks" / "results" / "latest.json"))
    parser.add_argument("--keep-db", action="store_true", help="leave the benchmark database behind")
    args = parser.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS) - set(OPTIONAL_PARTS)
    if unknown:
        known = ", ".join(PARTS + OPTIONAL_PARTS)
        parser.error(f"unknown parts {', '.join(sorted(unknown))}; the parts are {known}")
    sizes = QUICK if args.quick else FULL

    common.configure()
    common.create_database()
    import parts as run_parts
    from report import print_table

    results = {"machine": machine(), "quick": args.quick, "sizes": sizes, "ceiling": {}}
    started = time.time()
    try:
        for part in parts:
            print(f"== {part}", file=sys.stderr, flush=True)
            getattr(run_parts, part)(results, sizes)
    finally:
        if not args.keep_db:
            common.drop_database()
    results["seconds"] = time.time() - started
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print_table(results)
    print(f"\nJSON: {path}")
    return 0 if results.get("each_ran_once", True) else 1


def machine() -> dict:
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return "?"

    conn = common.raw_connect(None)
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    version = cur.fetchone()[0]
    conn.close()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "memory": run("free", "-h").splitlines()[1:2],
        "load_before": os.getloadavg(),
        "python": platform.python_version(),
        "server": f"{'MySQL' if common.engine() == 'mysql' else 'MariaDB'} {version}",
        "platform": platform.platform(),
    }


if __name__ == "__main__":
    sys.exit(main())
