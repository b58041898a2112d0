"""Fair share against today's claim, in the same run, on MariaDB.

- claim cost: one worker claim of ``--limit`` jobs, median over ``--claims``
  (each claim's jobs given back untimed): the ordinary claim alone, the same
  through the fair claim with no key in the queue (what queues that do not
  use keys pay), and the fair claim of a big and a small key;
- drains with ``runqueue --burst``: ``--jobs`` no-op jobs without a key, and
  the same jobs spread over ``--keys`` fairness keys;
- a small tenant behind a big one: ``--jobs`` jobs of one tenant, then ten of
  another, drained by ``runqueue --burst``; the seconds from the first start
  until the ten are done, with fairness keys and without (plain FIFO).

    .venv/bin/python benchmarks/fair_share.py
    .venv/bin/python benchmarks/fair_share.py --jobs 50000 --processes 4

It uses its own MariaDB database (DBQUEUE_BENCH_DB, default dbqueue_bench),
created and dropped like the main benchmark's.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from drain import drain  # noqa: E402


def seed(groups: list[tuple[str | None, int]], task: str = "demo.tasks.noop") -> None:
    """READY, due jobs: ``n`` of each (fairness key, n), in that order."""
    from django.db import connection
    from django.utils import timezone

    common.reset_jobs()
    due = timezone.now().replace(microsecond=0) - timezone.timedelta(minutes=10)
    rows, i = [], 0
    for key, n in groups:
        for _ in range(n):
            rows.append((task, key, due + timezone.timedelta(milliseconds=i)))
            i += 1
    sql = f"INSERT INTO {common.JOB_TABLE} (task_path, fairness_key, run_after) VALUES (%s, %s, %s)"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 5000):
            cursor.executemany(sql, rows[start : start + 5000])
        cursor.execute(f"ANALYZE TABLE {common.JOB_TABLE}")


def claim_ms(claims: dict, rounds: int) -> dict[str, float]:
    """Median ms of each claim in ``claims``, taken in turns (so that the
    load of the machine falls alike on each); each claim's jobs are given
    back, untimed."""
    from django_dbqueue.models import Job

    times: dict[str, list[float]] = {name: [] for name in claims}
    for _ in range(rounds):
        for name, claim in claims.items():
            started = time.perf_counter()
            batch = claim()
            times[name].append((time.perf_counter() - started) * 1000)
            Job.objects.release("bench", [job.pk for job in batch])
    return {name: statistics.median(values) for name, values in times.items()}


def explain_ordinary(limit: int) -> str:
    """The EXPLAIN of the ordinary claim's candidate read (one queue)."""
    from django.db import connection

    from django_dbqueue.models import Job
    from django_dbqueue.transitions import CLAIM_ORDER

    read = Job.objects.due().unlimited().filter(queue_name="default").order_by(*CLAIM_ORDER)
    sql, params = read.values_list("pk", flat=True)[:limit].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN FORMAT=TRADITIONAL " + sql, params)  # MySQL 9's default is TREE
        row = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    return f"{row['type']} on {row['key']} ({row['ref']}), {row['Extra']}"


def claim_costs(limit: int, claims: int, backlog: int) -> dict[str, float]:
    from django_dbqueue.models import Job
    from django_dbqueue.transitions.fair import FairClaims
    from django_dbqueue.transitions.shapes import claim_from_queues

    jobs = Job.objects.all()

    def ordinary(n: int) -> list:
        return claim_from_queues(jobs, ["default"], "bench", n, 60.0)

    def through(fair: FairClaims):
        return lambda: fair.claim_fair_share(jobs, ["default"], "bench", limit, 60.0, ordinary)

    always = FairClaims()
    always.LOOK_EVERY = 0.0  # type: ignore[misc]
    seed([(None, backlog)])
    print(f"EXPLAIN of the ordinary claim's read: {explain_ordinary(limit)}\n")
    costs = claim_ms(
        {
            "ordinary claim, no keys": lambda: ordinary(limit),
            "fair claim, no keys (a look a second)": through(FairClaims()),
            "fair claim, no keys, a look every claim": through(always),
        },
        claims,
    )
    seed([("big", backlog), ("small", 10)])
    return costs | claim_ms({"fair claim, keys big + small": through(FairClaims())}, claims)


def small_behind_big(big: int, processes: int, fair: bool) -> dict:
    """Drain a big tenant's jobs and then a small one's ten; when were the ten done?"""
    from django.db.models import Max, Min

    from django_dbqueue.models import Job

    seed([("big" if fair else None, big), ("small" if fair else None, 10)])
    small_ids = list(Job.objects.order_by("-id").values_list("id", flat=True)[:10])
    result = drain(big + 10, processes, prefilled=True)
    first = Job.objects.aggregate(first=Min("started_at"))["first"]
    small_done = Job.objects.filter(pk__in=small_ids).aggregate(last=Max("finished_at"))["last"]
    return {
        "small_done_s": (small_done - first).total_seconds(),
        "drain_s": result["seconds"],
        "jobs_per_s": result["jobs_per_s"],
        "each_ran_once": result["each_ran_once"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per drain (the big tenant's)")
    parser.add_argument("--keys", type=int, default=10, help="fairness keys in the keyed drain")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--backlog", type=int, default=100_000, help="due jobs behind the timed claims")
    parser.add_argument("--limit", type=int, default=200, help="jobs per claim (the default BATCH_SIZE)")
    parser.add_argument("--claims", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="drains of each kind, alternating")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    common.configure()
    common.create_database()
    ok = True
    try:
        costs = claim_costs(args.limit, args.claims, args.backlog)
        print(f"claims of {args.limit} with {args.backlog:,} due jobs, median of {args.claims}, in turns")
        print("| claim | median ms |\n|---|---|")
        for name, ms in costs.items():
            print(f"| {name} | {ms:.2f} |", flush=True)

        print(
            f"\ndrains of {args.jobs:,} no-op jobs, runqueue --burst --processes {args.processes}, ", end=""
        )
        print(f"median of {args.rounds} rounds, alternating")
        print("| jobs | jobs/s | each ran once |\n|---|---|---|")
        per_key = args.jobs // args.keys
        kinds = {
            "without a key": [(None, per_key * args.keys)],
            f"over {args.keys} fairness keys": [(f"tenant{k}", per_key) for k in range(args.keys)],
        }
        rates: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(args.rounds):
            for name, groups in kinds.items():
                seed(groups)
                r = drain(per_key * args.keys, args.processes, prefilled=True)
                ok &= r["each_ran_once"]
                rates[name].append(r["jobs_per_s"])
        for name, values in rates.items():
            each = ", ".join(f"{v:.0f}" for v in values)
            print(f"| {name} | {statistics.median(values):.0f} ({each}) | {ok} |")

        print(f"\nten jobs of a small tenant behind {args.jobs:,} of a big one, median of {args.rounds}")
        print("| claim | ten done after (s) | whole drain (s) | jobs/s |\n|---|---|---|---|")
        runs: dict[bool, list[dict]] = {False: [], True: []}
        for _ in range(args.rounds):
            for fair in (False, True):
                r = small_behind_big(args.jobs, args.processes, fair)
                ok &= r["each_ran_once"]
                runs[fair].append(r)
        for fair, results in runs.items():
            name = "fair share (fairness keys)" if fair else "FIFO (no keys, today's claim)"
            done, span, rate = (
                statistics.median(r[f] for r in results) for f in ("small_done_s", "drain_s", "jobs_per_s")
            )
            print(f"| {name} | {done:.2f} | {span:.1f} | {rate:.0f} |", flush=True)
    finally:
        if not args.keep_db:
            common.drop_database()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
