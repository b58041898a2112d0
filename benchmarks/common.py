"""Shared by every benchmark part: the benchmark database, raw connections,
job-table resets and small statistics helpers."""

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"
DB_NAME = os.environ.get("DBQUEUE_BENCH_DB", "dbqueue_bench")
JOB_TABLE = "django_dbqueue_job"


def engine() -> str:
    """The server benchmarked: MySQL with DBQUEUE_DATABASE=mysql (tests/mysql_server.py's,
    on DBQUEUE_MYSQL_PORT), else MariaDB (the test settings' choices)."""
    return "mysql" if os.environ.get("DBQUEUE_DATABASE") == "mysql" else "mariadb"


def server_port() -> int:
    """The port the test settings use for ``engine()``."""
    default = os.environ.get("DBQUEUE_MYSQL_PORT", "3307") if engine() == "mysql" else "3306"
    return int(os.environ.get("DBQUEUE_DB_PORT") or default)


def configure() -> None:
    """Point the test project at the benchmark database, then set Django up."""
    os.environ["DBQUEUE_DATABASE"] = engine()
    os.environ["DBQUEUE_DB_NAME"] = DB_NAME
    os.environ.setdefault("DBQUEUE_LOG_LEVEL", "WARNING")
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench_settings"
    for path in (str(ROOT), str(ROOT / "testproject"), str(ROOT / "benchmarks")):
        if path not in sys.path:
            sys.path.insert(0, path)
    import django

    django.setup()


def raw_connect(database: str | None = DB_NAME):
    """A plain MySQLdb connection, as the plain-SQL ceiling uses."""
    import MySQLdb

    params = {
        "host": os.environ.get("DBQUEUE_DB_HOST", "127.0.0.1"),
        "port": server_port(),
        "user": os.environ.get("DBQUEUE_DB_USER", "root"),
        "passwd": os.environ.get("DBQUEUE_DB_PASSWORD", ""),
        "charset": "utf8mb4",
    }
    if database:
        params["db"] = database
    conn = MySQLdb.connect(**params)
    # The same isolation Django's MySQL backend uses, so both sides lock alike.
    conn.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    return conn


def create_database() -> None:
    from django.core.management import call_command
    from django.db import connections

    conn = raw_connect(None)
    cur = conn.cursor()
    cur.execute(f"DROP DATABASE IF EXISTS `{DB_NAME}`")
    # Each server's collation as the test settings give it (MySQL's own default there).
    collation = "utf8mb4_0900_ai_ci" if engine() == "mysql" else "utf8mb4_unicode_ci"
    cur.execute(f"CREATE DATABASE `{DB_NAME}` CHARACTER SET utf8mb4 COLLATE {collation}")
    conn.close()
    connections.close_all()
    call_command("migrate", verbosity=0)


def drop_database() -> None:
    from django.db import connections

    connections.close_all()
    conn = raw_connect(None)
    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{DB_NAME}`")
    conn.close()


def reset_jobs() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE TABLE {JOB_TABLE}")
        cursor.execute("TRUNCATE TABLE django_dbqueue_worker")


def child_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def job_summary() -> dict:
    """Counts by status and whether every finished job ran exactly once."""
    from django.db.models import Count, Max, Min, Sum

    from django_dbqueue.models import Job

    by_status = dict(Job.objects.values_list("status").annotate(n=Count("id")).order_by())
    totals = Job.objects.aggregate(
        attempts_total=Sum("attempts"),
        first_start=Min("started_at"),
        last_finish=Max("finished_at"),
        most_attempts=Max("attempts"),
    )
    return {"by_status": by_status, **totals}


def comparison_main(doc: str, run, print_rows, *, workers: int, workers_help: str) -> int:
    """The command line of the benchmarks that compare ways to run one drain
    (cluster.py, servers.py): --jobs, --rounds, --workers, --json; exit 1
    unless every job ran once in every row."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=workers, help=workers_help)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = run(args.jobs, args.rounds, args.workers)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_rows(result)
    return 0 if all(row["each_ran_once"] for row in result["rows"]) else 1
