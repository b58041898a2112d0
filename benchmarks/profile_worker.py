"""Profile one worker draining N no-op jobs in this process (cProfile), or
one-by-one enqueue: ``python benchmarks/profile_worker.py [drain|enqueue] [N]``."""

import cProfile
import pstats
import sys

import common


def main() -> None:
    part = sys.argv[1] if len(sys.argv) > 1 else "drain"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    common.configure()
    common.create_database()
    from demo.tasks import noop
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker import Worker

    profiler = cProfile.Profile()
    if part == "drain":
        import drain

        drain.fill(n)
        worker = Worker(
            task_backends["default"],
            ["default"],
            burst=True,
            batch=int(sys.argv[3]) if len(sys.argv) > 3 else None,
        )
        profiler.runcall(worker.run)
    else:
        common.reset_jobs()
        profiler.runcall(lambda: [noop.enqueue() for _ in range(n)])
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    common.drop_database()


if __name__ == "__main__":
    main()
