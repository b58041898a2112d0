"""The demo: a fresh SQLite database, a few hundred jobs, a multi-process
`runqueue --burst`, and a report of what happened."""

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections
from django.db.models import Count
from django.utils import timezone

from demo import tasks
from django_dbqueue.models import Job

MANAGE = Path(__file__).resolve().parents[3] / "manage.py"


class Command(BaseCommand):
    help = "Migrate a fresh SQLite database, enqueue jobs, run workers, report."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=300, help="How many jobs to enqueue (default 300).")
        parser.add_argument("--processes", type=int, default=3, help="Worker processes (default 3).")

    def handle(self, *args: Any, jobs: int, processes: int, **options: Any) -> None:
        if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
            self.stderr.write("The demo uses SQLite; unset DBQUEUE_DATABASE to run it.")
            sys.exit(2)
        self._fresh_database()
        self._enqueue(jobs)
        rounds = self._run_workers(processes)
        self._report(rounds)

    def _fresh_database(self) -> None:
        path = Path(settings.DATABASES["default"]["NAME"])
        connections.close_all()  # nothing may hold the file we delete
        for leftover in path.parent.glob(path.name + "*"):
            leftover.unlink()
        self.stdout.write(f"1. Migrating a fresh SQLite database at {path} ...")
        call_command("migrate", verbosity=0)

    def _enqueue(self, count: int) -> None:
        started = time.monotonic()
        for i in range(count):
            match i % 10:
                case 0:
                    tasks.send_welcome.enqueue(user_id=i)  # queue "email", priority 10
                case 1:
                    tasks.flaky.enqueue(f"flaky-{i}", failures=1)  # fails once, then succeeds
                case 2:
                    tasks.async_add.enqueue(i, 1)
                case _:
                    tasks.add.using(priority=i % 3).enqueue(i, i)
        tasks.always_fails.enqueue("a bug this demo left in on purpose")
        later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
        self.stdout.write(
            f"2. Enqueued {count + 2} jobs in {time.monotonic() - started:.2f}s: additions, welcome "
            f"mails (priority 10), async tasks, jobs that fail once and retry, one that always "
            f"fails, and job #{later.id} scheduled an hour from now."
        )

    def _run_workers(self, processes: int) -> int:
        """`runqueue --burst` exits once nothing is due; failed jobs wait out
        their backoff, so run it again until only the future job is left."""
        env = {**os.environ, "DBQUEUE_BACKOFF": "0.2", "DBQUEUE_STATUS_INTERVAL": "1"}
        horizon = timezone.now() + timedelta(minutes=1)
        rounds = 0
        while Job.objects.ready().filter(run_after__lt=horizon).exists():
            wait = Job.objects.ready().order_by("run_after").first().run_after - timezone.now()
            time.sleep(max(wait.total_seconds(), 0))
            rounds += 1
            self.stdout.write(f"3.{rounds} runqueue --burst --processes {processes}:")
            command = [sys.executable, str(MANAGE), "runqueue", "--burst", "--processes", str(processes)]
            subprocess.run(command, env=env, check=True)
        return rounds

    def _report(self, rounds: int) -> None:
        self.stdout.write(f"\n4. What happened (after {rounds} burst runs):\n")
        by_status = dict(Job.objects.values_list("status").annotate(n=Count("id")))
        for status in ("SUCCESSFUL", "FAILED", "READY", "RUNNING", "CANCELLED"):
            self.stdout.write(f"   {status:<11} {by_status.get(status, 0):>5}")
        retried = Job.objects.filter(status="SUCCESSFUL", attempts__gt=1).count()
        self.stdout.write(f"\n   {retried} jobs failed at first and succeeded on a retry.")
        sample = Job.objects.filter(task_path="demo.tasks.add", status="SUCCESSFUL").first()
        if sample:
            self.stdout.write(f"   Job #{sample.pk}: add{tuple(sample.args)} returned {sample.return_value}.")
        failed = Job.objects.filter(status="FAILED").first()
        if failed:
            last = failed.errors[-1]["traceback"].strip().splitlines()[-1]
            self.stdout.write(f"   Job #{failed.pk} FAILED after {failed.attempts} attempts: {last}")
        busiest = Job.objects.filter(status="SUCCESSFUL").values_list("worker_ids", flat=True)
        workers = {worker for ids in busiest for worker in ids}
        self.stdout.write(f"   {len(workers)} worker processes (over all runs) shared the work.")
        self.stdout.write(admin_hint(sys.executable, Path.cwd()))


def admin_hint(python: str, cwd: Path) -> str:
    """The closing hint, with the interpreter that runs the demo (the
    project's .venv under ./dev demo, not whatever `python` is on PATH)."""

    def shown(path: Path) -> str:
        path = Path(path).absolute()
        return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)

    manage = f"{shown(Path(python))} {shown(MANAGE)}"
    return (
        f"\nInspect every job in the admin: `{manage} createsuperuser`, then `{manage} runserver` "
        "and open http://127.0.0.1:8000/admin/django_dbqueue/job/ (the dashboard is at "
        "http://127.0.0.1:8000/admin/django_dbqueue/dashboard/)."
    )
