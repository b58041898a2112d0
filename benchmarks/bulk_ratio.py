"""``bulk_enqueue()`` beside the same rows written by a plain MySQLdb
``executemany`` (``ceiling.multi_row_insert``), alternated in one process
over several rounds: the ratio issue 30's bulk target is about (at least
0.5 on MySQL), without the rest of ``./dev bench``.

    DBQUEUE_BENCH_DB=mydb .venv/bin/python benchmarks/bulk_ratio.py [--rounds 5] [--jobs 20000]
    DBQUEUE_DATABASE=mysql DBQUEUE_BENCH_DB=mydb .venv/bin/python benchmarks/bulk_ratio.py

Both sides write 1,000 rows a transaction; the table is emptied before
each side, and which side goes first alternates from round to round.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op calls per bulk")
    parser.add_argument("--batch", type=int, default=1000, help="rows per INSERT and transaction")
    args = parser.parse_args()
    common.configure()
    common.create_database()
    import ceiling
    import enqueue
    from django.db import connection

    server = connection.cursor().connection.get_server_info()
    print(f"{common.engine()} {server}: {args.jobs:,} no-op calls, {args.batch:,} rows a commit", flush=True)
    ratios = []
    try:
        enqueue.bulk(args.batch, args.batch)  # warm: the plan, the clock, the statement
        for number in range(1, args.rounds + 1):
            sides = {}
            for side in ("plain", "ours") if number % 2 else ("ours", "plain"):
                common.reset_jobs()
                if side == "plain":
                    sides[side] = ceiling.multi_row_insert(args.jobs, args.batch)["jobs_per_s"]
                else:
                    sides[side] = enqueue.bulk(args.jobs, args.batch)["jobs_per_s"]
            ratios.append(sides["ours"] / sides["plain"])
            print(
                f"round {number}: executemany {sides['plain']:,.0f} rows/s, "
                f"bulk_enqueue {sides['ours']:,.0f} jobs/s, ratio {ratios[-1]:.2f}",
                flush=True,
            )
    finally:
        common.drop_database()
    print(f"median ratio {common.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
