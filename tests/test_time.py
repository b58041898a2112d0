"""The times the queue stamps, in the project's own terms: a job is due by
the application's ``timezone.now()`` as soon as ``enqueue()`` returns, and
every stamp is in Django's form under both ``USE_TZ`` settings."""

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from demo import tasks
from django_dbqueue.models import Job, Worker
from tests.conftest import wait_for
from tests.threads import elsewhere

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+

pytestmark = pytest.mark.django_db(transaction=True)


def enqueue_and_count(jobs: int) -> int:
    """Enqueue ``jobs`` jobs in a tight loop from a new thread (which has its
    own backend and clock, as each thread of a web server has, and its own
    connection) and count how many the application sees due at once."""

    def producer() -> int:
        ids = [tasks.add.enqueue(1, 1).id for _ in range(jobs)]
        return Job.objects.filter(pk__in=ids, status="READY", run_after__lte=timezone.now()).count()

    return elsewhere(producer, timeout=60)


def test_a_job_is_due_by_the_applications_clock_as_soon_as_enqueue_returns():
    # A producer's first enqueue reads the database's clock, over a
    # connection it opens then; the next ones carry that time forward.
    counted = [enqueue_and_count(4) for _ in range(25)]
    assert counted == [4] * 25


def within(stamp: datetime | None, before: datetime, after: datetime) -> bool:
    """On the database's clock, which the tests share with the application's
    host; the estimate may trail it by a few milliseconds, never lead it."""
    return stamp is not None and before - timedelta(seconds=1) <= stamp <= after


def test_every_time_a_worker_records_agrees_with_the_projects_clock(runqueue):
    # With USE_TZ = False and a TIME_ZONE away from UTC (the CI run that sets
    # DBQUEUE_USE_TZ=0), a time stamped in UTC is hours off.
    before = timezone.now()
    done, failed = tasks.add.enqueue(1, 2), tasks.always_fails.enqueue("on purpose")
    worker = runqueue("--queue", "default")
    wait_for(lambda: Job.objects.filter(status__in=["SUCCESSFUL", "FAILED"]).count() == 2)
    wait_for(Worker.objects.exists)
    after = timezone.now()
    for result in (done, failed):
        job = Job.objects.get(pk=result.id)
        for name in ("enqueued_at", "run_after", "started_at", "finished_at"):
            assert within(getattr(job, name), before, after), (name, getattr(job, name), before, after)
        assert all(isinstance(stamp, datetime) for stamp in (job.enqueued_at, job.finished_at))
    seen = Worker.objects.get()
    assert within(seen.started_at, before, after) and within(seen.last_seen_at, before, after)
    worker.stop()


def test_a_run_after_in_the_projects_own_terms_is_kept():
    soon = timezone.now() + timedelta(hours=1)
    due = timezone.now() - timedelta(seconds=1)
    later, now = tasks.add.using(run_after=soon).enqueue(1, 1), tasks.add.using(run_after=due).enqueue(2, 2)
    assert Job.objects.get(pk=later.id).run_after == soon
    # The claim compares with the database's clock, in the same terms.
    assert [job.pk for job in Job.objects.claim("w")] == [int(now.id)]
    job = Job.objects.get(pk=now.id)
    left = job.lease_expires_at - timezone.now()
    lease = settings.TASKS["default"]["OPTIONS"]["LEASE_SECONDS"]
    assert timedelta(seconds=lease - 5) < left <= timedelta(seconds=lease), left


def test_an_aware_run_after_is_the_moment_it_names_under_either_setting():
    # With USE_TZ = False, Django refuses an aware time in a query; the
    # backend stores the local time it names instead.
    moment = datetime.now(UTC) + timedelta(hours=1)
    job = Job.objects.get(pk=tasks.add.using(run_after=moment).enqueue(1, 1).id)
    stored = job.run_after if timezone.is_aware(job.run_after) else timezone.make_aware(job.run_after)
    assert stored == moment
    assert Job.objects.claim("w") == []


def test_queuestats_names_the_time_zone_of_the_time_it_prints():
    out = StringIO()
    call_command("queuestats", stdout=out)
    first = out.getvalue().splitlines()[0]  # "Queues at 2026-01-01 10:00:00 UTC (database clock)"
    zone = "UTC" if settings.USE_TZ else settings.TIME_ZONE
    printed = datetime.strptime(first.split(" at ")[1].split(f" {zone} ")[0], "%Y-%m-%d %H:%M:%S")
    now = timezone.localtime(timezone.now(), UTC) if settings.USE_TZ else timezone.now()
    assert abs(printed - now.replace(tzinfo=None)) < timedelta(seconds=5), (first, now)
