"""What the scheduler's tick costs with schedules in the database: the
median ms of one tick (the database's clock, the read of the enabled rows,
the last runs) when none is due, for 0 to 1,000 database schedules, first
with each row met for the first time (parsed and its task checked), then
with the rows as the previous tick left them (the usual case).

    DBQUEUE_BENCH_DB=dbq_sched_bench python benchmarks/stored_schedules.py
"""

import time

from common import configure, create_database, median


def tick_ms(count: int, rounds: int) -> tuple[float, float]:
    from django_dbqueue.models import Schedule, ScheduledRun
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker.housekeeping.scheduler import Scheduler

    Schedule.objects.all().delete()
    ScheduledRun.objects.all().delete()
    # Yearly: never due while measured, so only the reading is timed.
    Schedule.objects.bulk_create(
        Schedule(name=f"s{i}", task="demo.tasks.noop", cron="0 0 1 1 *", timezone="UTC") for i in range(count)
    )
    first, again = [], []
    for _ in range(rounds):
        scheduler = Scheduler(task_backends["default"])
        started = time.perf_counter()
        scheduler.tick()
        first.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        scheduler.tick()
        again.append((time.perf_counter() - started) * 1000)
    return median(first), median(again)


def main() -> None:
    configure()
    create_database()
    print("database schedules | first tick, ms | later ticks, ms (medians)")
    for count in (0, 10, 100, 1000):
        first, again = tick_ms(count, 7)
        print(f"{count:>18} | {first:>14.1f} | {again:>15.1f}")


if __name__ == "__main__":
    main()
