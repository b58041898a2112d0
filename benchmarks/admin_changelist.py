"""How fast the admin's job pages are on MariaDB with a million finished jobs
(on MySQL with DBQUEUE_DATABASE=mysql).

    DBQUEUE_DB_NAME=dbqueue_admin_bench .venv/bin/python benchmarks/admin_changelist.py [--rows N]

Fills database DBQUEUE_DB_NAME (created if missing; default dbqueue_admin_bench)
once with N finished jobs (1% failed, 1% cancelled) plus 1,000 ready ones, then
times each page through Django's test client, logged in as a superuser: the
median of 5 requests after a warm-up, with its query count and slowest query.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "testproject"), str(ROOT / "benchmarks")]
import common  # noqa: E402

os.environ["DBQUEUE_DATABASE"] = common.engine()
os.environ.setdefault("DBQUEUE_DB_NAME", "dbqueue_admin_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

import django  # noqa: E402

PAGES = [
    ("changelist, newest first", "/admin/django_dbqueue/job/"),
    ("changelist, page 3", "/admin/django_dbqueue/job/?p=3"),
    ("status = FAILED", "/admin/django_dbqueue/job/?status__exact=FAILED"),
    ("status = SUCCESSFUL", "/admin/django_dbqueue/job/?status__exact=SUCCESSFUL"),
    ("queue = email", "/admin/django_dbqueue/job/?queue_name=email"),
    ("task = demo.tasks.add", "/admin/django_dbqueue/job/?task_path=demo.tasks.add"),
    ("FAILED in email", "/admin/django_dbqueue/job/?status__exact=FAILED&queue_name=email"),
    ("search by id", "/admin/django_dbqueue/job/?q=123456"),
    ("job detail", "/admin/django_dbqueue/job/500000/change/"),
    ("dashboard", "/admin/django_dbqueue/job/dashboard/"),
]
TASKS = [
    "demo.tasks.add",
    "demo.tasks.send_welcome",
    "demo.tasks.record",
    "demo.tasks.noop",
    "demo.tasks.sleep",
]


def create_database(name: str) -> None:
    import MySQLdb

    server = MySQLdb.connect(host="127.0.0.1", port=common.server_port(), user="root", passwd="")
    server.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
    server.close()


def fill(rows: int) -> None:
    from django.db import connection

    from django_dbqueue.models import Job

    if Job.objects.filter(status__in=["SUCCESSFUL", "FAILED", "CANCELLED"]).count() >= rows:
        return
    print(f"filling {rows:,} finished jobs (once)...", flush=True)
    tasks = ", ".join(f"'{t}'" for t in TASKS)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE TABLE django_dbqueue_job")
        # MariaDB's sequence engine makes the rows in one statement.
        cursor.execute(
            f"""
            INSERT INTO django_dbqueue_job
              (task_path, queue_name, priority, args, kwargs, status, run_after, attempts,
               max_attempts, suspect, enqueued_at, started_at, last_attempted_at, finished_at,
               return_value, errors, worker_ids)
            SELECT ELT(1 + seq % 5, {tasks}), ELT(1 + seq % 3, 'default', 'email', 'slow'), 0,
                   CONCAT('[', seq, ']'), '{{}}',
                   CASE WHEN seq % 100 = 7 THEN 'FAILED' WHEN seq % 100 = 8 THEN 'CANCELLED'
                        ELSE 'SUCCESSFUL' END,
                   t, 1, 3, 0, t, t, t, t + INTERVAL 1 SECOND, 'null', '[]', '[]'
            FROM (SELECT seq, NOW(6) - INTERVAL (({rows} - seq) * 150000) MICROSECOND AS t
                  FROM seq_1_to_{rows}) AS s
            """
        )
        cursor.execute(
            "INSERT INTO django_dbqueue_job (task_path, queue_name, args) "
            "SELECT 'demo.tasks.add', 'email', '[1, 2]' FROM seq_1_to_1000"
        )
        cursor.execute("ANALYZE TABLE django_dbqueue_job")
        cursor.fetchall()


def measure(client, url: str, runs: int = 5) -> tuple[float, int, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(runs):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            client.get(url)
            times.append(time.perf_counter() - start)
    slowest = max(float(q["time"]) for q in queries.captured_queries)
    return statistics.median(times) * 1000, len(queries), slowest * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    create_database(os.environ["DBQUEUE_DB_NAME"])
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from django_dbqueue.models import Job

    call_command("migrate", verbosity=0)
    fill(args.rows)
    user = User.objects.filter(username="bench").first() or User.objects.create_superuser(
        "bench", password="x"
    )
    client = Client()
    client.force_login(user)
    print(f"{Job.objects.count():,} jobs in {os.environ['DBQUEUE_DB_NAME']} (MariaDB)")
    print(f"{'page':28} {'median ms':>10} {'queries':>8} {'slowest query ms':>17}")
    for label, url in PAGES:
        median, count, slowest = measure(client, url)
        print(f"{label:28} {median:10.1f} {count:8d} {slowest:17.1f}")


if __name__ == "__main__":
    main()
