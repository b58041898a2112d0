"""The database server's CPU per job, beside the worker's: one in-process
``Worker`` draining N no-op jobs, and the ceiling's plain-SQL drain of N
jobs (one process), each timed by the ``mariadbd`` process's own CPU
seconds from ``/proc``. The server must run on this host, and serve
nothing else meanwhile: its CPU counter counts every client's statements.

    DBQUEUE_BENCH_DB=mydb .venv/bin/python benchmarks/server_cpu.py [N] [ROUNDS] [--each-index]

Jobs per second move with the machine's load; CPU seconds per job much
less, so this is the figure that says what bounds the drain on a machine
where the workers and the server share the cores (docs/performance.md,
"What bounds the drain"). With ``--each-index``, each round also drains
once more for every secondary index a claim or an outcome rewrites, with
that one index dropped: what each costs the server (an experiment, not a
configuration: the admin, lease recovery and workflows read them).
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

# The Job indexes holding a column the claim or the outcome changes
# (status, finished_at), besides the claim's own. The lease has none since
# migration 0027.
HOT_INDEXES = (
    "dbqueue_job_keyed_status",
    "dbqueue_job_status_id",
    "dbqueue_job_finished",
    "dbqueue_job_batched_status",
)


def server_pid() -> int | None:
    """The server's process id, when it runs on this host and /proc shows it."""
    conn = common.raw_connect(None)
    cur = conn.cursor()
    cur.execute("SELECT @@pid_file")
    (pid_file,) = cur.fetchone()
    conn.close()
    try:
        pid = int(Path(pid_file).read_text().split()[0])
        cpu_seconds(pid)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of ``pid`` (fields 14 and 15 of /proc/PID/stat); NaN
    when the server's process is not to be seen from here."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain_dbqueue(n: int, pid: int | None) -> tuple[float, float, float]:
    """Jobs/s, the worker's and the server's CPU µs a job."""
    from django.db import connections

    from demo.tasks import noop
    from django_dbqueue import bulk_enqueue
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker import Worker

    common.reset_jobs()
    bulk_enqueue(noop, [((), {})] * n)
    connections.close_all()
    server, cpu, wall = cpu_seconds(pid), time.process_time(), time.perf_counter()
    Worker(task_backends["default"], ["default"], batch=200, burst=True).run()
    wall, cpu, server = time.perf_counter() - wall, time.process_time() - cpu, cpu_seconds(pid) - server
    from django_dbqueue.models import Job
    from django_dbqueue.status import Status

    done = Job.objects.filter(status=Status.SUCCESSFUL, attempts=1).count()
    assert done == n, f"{done} of {n} jobs ran once and succeeded"
    return n / wall, cpu / n * 1e6, server / n * 1e6


def without_index(name: str, n: int, pid: int | None) -> tuple[float, float, float]:
    from django.db import connection

    from django_dbqueue.models import Job

    index = next(index for index in Job._meta.indexes if index.name == name)
    with connection.schema_editor() as editor:
        editor.remove_index(Job, index)
    try:
        return drain_dbqueue(n, pid)
    finally:
        with connection.schema_editor() as editor:
            editor.add_index(Job, index)


def main() -> None:
    numbers = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    n = int(numbers[0]) if numbers else 20_000
    rounds = int(numbers[1]) if len(numbers) > 1 else 3
    common.configure()
    common.create_database()
    import ceiling

    pid = server_pid()
    if pid is None:
        print("The server's process is not on this host (or not readable): its CPU shows as nan.")
    try:
        for number in range(1, rounds + 1):
            ceiling.setup(n)
            before = cpu_seconds(pid)
            result = ceiling.drain(n, 1)
            server = (cpu_seconds(pid) - before) / n * 1e6
            print(f"round {number}: ceiling {result['jobs_per_s']:,.0f} jobs/s, server {server:.1f} µs a job")
            rate, worker, server = drain_dbqueue(n, pid)
            print(
                f"round {number}: django-dbqueue {rate:,.0f} jobs/s, worker {worker:.1f} µs, "
                f"server {server:.1f} µs a job",
                flush=True,
            )
            if "--each-index" in sys.argv:
                for name in HOT_INDEXES:
                    rate, worker, server = without_index(name, n, pid)
                    print(f"round {number}:   without {name}: server {server:.1f} µs a job", flush=True)
    finally:
        ceiling.cleanup()
        common.drop_database()


if __name__ == "__main__":
    main()
