"""One-by-one ``Task.enqueue()`` beside a plain autocommitted MySQLdb INSERT
(``ceiling.single_insert``), interleaved in blocks in one process, over
several rounds: the ratio that issue 21's enqueue target is about, without
the rest of ``./dev bench``.

    DBQUEUE_BENCH_DB=mydb .venv/bin/python benchmarks/enqueue_ratio.py [--rounds 5] [--jobs 2000]

Each round alternates blocks of 100 (as ``./dev bench`` does), so a burst
of load from elsewhere hits both sides; the table is emptied between rounds.
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
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per side per round")
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args()
    common.configure()
    common.create_database()
    import ceiling
    import enqueue

    ratios = []
    try:
        enqueue.one_by_one(args.block)  # warm: the first enqueue reads the clock, caches statements
        for number in range(1, args.rounds + 1):
            common.reset_jobs()
            plain = ours = 0.0
            for _ in range(max(1, args.jobs // args.block)):
                plain += ceiling.single_insert(args.block)["seconds"]
                ours += enqueue.one_by_one(args.block, reset=False)["seconds"]
            done = max(1, args.jobs // args.block) * args.block
            ratios.append(plain / ours)
            print(
                f"round {number}: plain INSERT {done / plain:,.0f}/s ({plain / done * 1e6:.0f} µs), "
                f"enqueue {done / ours:,.0f}/s ({ours / done * 1e6:.0f} µs), ratio {plain / ours:.2f}",
                flush=True,
            )
    finally:
        common.drop_database()
    print(f"median ratio {common.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
