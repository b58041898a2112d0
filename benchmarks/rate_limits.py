"""Rate limits: the rate workers hold against the limit, and what a backlog
of rate-limited jobs costs the claims of unlimited ones.

- observed rate: one key's jobs (``demo.tasks.rated``, an instant task
  that leaves a start mark) under a limit of ``--limit``, drained by
  ``--workers`` runqueue processes for ``--seconds``; the starts counted
  in the period after the first one, the most in any sliding window of the
  period after the first (starts follow their claims by a few ms, a
  worker's first job by more); the claims, logged by a trigger on the slot
  table, and the most in any window of the period; and the gap from each
  period's first start to the next's;
- drain: ``--jobs`` no-op jobs drained by ``--workers`` processes, alone,
  then beside a backlog of ``--backlog`` due jobs over 100 rate keys that
  are all over their rate (``1/h``), in the same run; jobs per second from
  the first start to the last finish, as recorded in the rows;
- the EXPLAIN of the ordinary claim's read, whose plan must not change.

    .venv/bin/python benchmarks/rate_limits.py
    .venv/bin/python benchmarks/rate_limits.py --limit 100/s --workers 4 --seconds 5

It uses its own MariaDB database (DBQUEUE_BENCH_DB, default dbqueue_bench),
created and dropped like the main benchmark's.
"""

import argparse
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def start_workers(workers: int, batch: int | None = None) -> subprocess.Popen:
    from django.db import connections

    connections.close_all()
    args = [sys.executable, str(common.MANAGE), "runqueue", "--processes", str(workers), "--queue", "default"]
    args += ["--batch", str(batch)] if batch else []
    return subprocess.Popen(
        args, env=common.child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def observed_rate(limit: str, workers: int, seconds: float, batch: int | None) -> dict:
    from demo.models import Execution
    from demo.tasks import rated
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.rates import parse_rate

    number, period = parse_rate(limit)
    common.reset_jobs()
    Execution.objects.all().delete()
    periods = max(int(seconds // period), 1)
    bulk_enqueue(rated.using(rate_limit=limit), [(("bench", i), {}) for i in range(number * (periods + 2))])
    log_claims()
    proc = start_workers(workers, batch)
    deadline = time.monotonic() + seconds + 30
    while Execution.objects.count() <= number * periods and time.monotonic() < deadline:
        time.sleep(0.2)
    stop(proc)
    times = sorted(Execution.objects.values_list("at", flat=True))
    first = times[0]
    offsets = [(at - first).total_seconds() for at in times]
    # After the first period: a worker's first job starts late (imports), which
    # shifts the first window of starts against its claims.
    steady = [at for at in offsets if at >= period]
    most, low = 0, 0
    for high, at in enumerate(steady):
        while at - steady[low] >= period:
            low += 1
        most = max(most, high - low + 1)
    claims = claim_times(period)
    most_claims, low = 0, 0
    for high, at in enumerate(claims):
        while (at - claims[low]).total_seconds() >= period:
            low += 1
        most_claims = max(most_claims, high - low + 1)
    gaps = [offsets[number * k] - offsets[number * (k - 1)] for k in range(1, periods + 1)]
    return {
        "limit": limit,
        "workers": workers,
        "batch": batch,
        "first_period": sum(1 for at in offsets if at < period),
        "most_in_any_later_window": most,
        "claims": len(claims),
        "most_claims_in_any_window": most_claims,
        "period_gaps_s": gaps,
        "rate_per_s": number * periods / offsets[number * periods],
        "limit_per_s": number / period,
    }


def log_claims() -> None:
    """A trigger that logs each use of a slot (its new free_at, one period
    after the claim), so claims can be counted apart from the code."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_rate_claims")
        cursor.execute("CREATE TABLE bench_rate_claims (free_at DATETIME(6) NOT NULL)")
        cursor.execute("DROP TRIGGER IF EXISTS bench_rate_claim")
        cursor.execute(
            "CREATE TRIGGER bench_rate_claim AFTER UPDATE ON django_dbqueue_rateslot FOR EACH ROW "
            "INSERT INTO bench_rate_claims VALUES (NEW.free_at)"
        )


def claim_times(period: int) -> list:
    from datetime import timedelta

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT free_at FROM bench_rate_claims ORDER BY free_at")
        return [row[0] - timedelta(seconds=period) for row in cursor.fetchall()]


def drain_unlimited(jobs: int, workers: int) -> float:
    """Jobs per second of a drain of ``jobs`` no-op jobs without a limit."""
    from django.db.models import Max, Min

    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.models import Job

    plain = Job.objects.filter(task_path="demo.tasks.noop", rate_key=None)
    plain.delete()
    bulk_enqueue(noop, [((), {})] * jobs)
    proc = start_workers(workers)
    while plain.filter(status="SUCCESSFUL").count() < jobs:
        time.sleep(0.2)
    stop(proc)
    span = plain.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return jobs / (span["last"] - span["first"]).total_seconds()


def backlog_of_limited(backlog: int, keys: int = 100) -> None:
    """Jobs of ``keys`` rate keys at 1/h, not due until made due (``due_backlog``)."""
    from datetime import timedelta

    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.clock import as_stored

    later = noop.using(run_after=as_stored(datetime.now(UTC)) + timedelta(days=1))
    for key in range(keys):
        task = later.using(rate_limit="1/h", rate_key=f"customer:{key}")
        bulk_enqueue(task, [((), {})] * (backlog // keys))


def due_backlog(due: bool) -> None:
    """The same rows each round: due now, or not due for a day."""
    from datetime import timedelta

    from django_dbqueue.clock import as_stored
    from django_dbqueue.models import Job

    when = as_stored(datetime.now(UTC)) + (timedelta(0) if due else timedelta(days=1))
    Job.objects.filter(rate_key__isnull=False, status="READY").update(run_after=when)
    time.sleep(1)


def explain_claim() -> list[tuple]:
    from django.db import connection

    from django_dbqueue.models import Job

    due = Job.objects.due().unlimited().filter(queue_name="default")
    query = due.order_by("-priority", "run_after", "id").values_list("pk", flat=True)[:200]
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN FORMAT=TRADITIONAL " + sql, params)  # MySQL 9's default is TREE
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", default="50/s")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--backlog", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None, help="runqueue --batch for the rate run")
    args = parser.parse_args()
    common.configure()
    common.create_database()
    try:
        rate = observed_rate(args.limit, args.workers, args.seconds, args.batch)
        print(
            f"limit {rate['limit']} ({rate['limit_per_s']:g}/s), {rate['workers']} workers, "
            f"batch {rate['batch'] or 'default'}: "
            f"{rate['rate_per_s']:.2f}/s observed; {rate['first_period']} started in the first period, "
            f"at most {rate['most_in_any_later_window']} in any later window of the period; "
            f"{rate['claims']} claims, at most {rate['most_claims_in_any_window']} in any window of the "
            "period (counted by a trigger on the slots); gaps between "
            "periods " + ", ".join(f"{gap:.3f}s" for gap in rate["period_gaps_s"])
        )
        common.reset_jobs()
        backlog_of_limited(args.backlog)
        alone, beside = [], []
        for _ in range(args.rounds):  # alternated: the machine's noise falls on both
            due_backlog(False)
            alone.append(drain_unlimited(args.jobs, args.workers))
            due_backlog(True)
            beside.append(drain_unlimited(args.jobs, args.workers))
        rounds, backlog = args.rounds, f"{args.backlog:,}"
        print(f"| {args.jobs:,} unlimited no-op jobs, {args.workers} workers | jobs/s, median of {rounds} |")
        print("|---|---|")
        print(f"| beside {backlog} rate-limited jobs not yet due | {statistics.median(alone):.0f} |")
        print(f"| beside them due, all over their rate (100 keys, 1/h) | {statistics.median(beside):.0f} |")
        plan = explain_claim()
        print("EXPLAIN of the ordinary claim's read:")
        for row in plan:
            print(f"  key={row['key']} type={row['type']} ref={row['ref']} Extra={row['Extra']}")
    finally:
        common.drop_database()


if __name__ == "__main__":
    main()
