"""What an atomic task costs: N jobs that each insert one row, drained by
``runqueue --burst --processes W``, as a plain task (``demo.tasks.record``)
and as an atomic one (``demo.tasks.record_atomic``), interleaved.

    .venv/bin/python benchmarks/atomic.py [N] [ROUNDS] [W]
"""

import subprocess
import sys
import time

import common


def drain(task, n: int, processes: int) -> float:
    from django.db import connections

    from demo.models import Execution
    from django_dbqueue import bulk_enqueue

    common.reset_jobs()
    Execution.objects.all().delete()
    bulk_enqueue(task, [((f"k{i}",), {}) for i in range(n)])
    connections.close_all()
    args = [sys.executable, str(common.MANAGE), "runqueue", "--burst", "--processes", str(processes)]
    proc = subprocess.run(args, env=common.child_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"runqueue failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    summary = common.job_summary()
    assert summary["by_status"] == {"SUCCESSFUL": n}, summary["by_status"]
    assert Execution.objects.count() == n
    return n / (summary["last_finish"] - summary["first_start"]).total_seconds()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    processes = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    common.create_database()
    from demo.tasks import record, record_atomic

    try:
        for round_ in range(1, rounds + 1):
            plain, atomic = drain(record, n, processes), drain(record_atomic, n, processes)
            print(
                f"round {round_}: plain {plain:,.0f} jobs/s, atomic {atomic:,.0f} jobs/s, "
                f"atomic/plain {atomic / plain:.2f}",
                flush=True,
            )
            time.sleep(0.1)
    finally:
        common.drop_database()


if __name__ == "__main__":
    common.configure()
    main()
