"""The times the queue stamps, in the project's own terms: a job is due by
the application's ``timezone.now()`` as soon as ``enqueue()`` returns, and
every stamp is in Django's form under both ``USE_TZ`` settings."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from demo import tasks
from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def enqueue_and_count(jobs: int) -> int:
    """Enqueue ``jobs`` jobs in a tight loop from a new thread (which has its
    own backend and clock, as each thread of a web server has, and its own
    connection) and count how many the application sees due at once."""
    seen: list[int] = []

    def producer() -> None:
        try:
            ids = [tasks.add.enqueue(1, 1).id for _ in range(jobs)]
            seen.append(Job.objects.filter(pk__in=ids, status="READY", run_after__lte=timezone.now()).count())
        finally:
            connection.close()

    thread = threading.Thread(target=producer)
    thread.start()
    thread.join(60)
    return seen[0]


def test_a_job_is_due_by_the_applications_clock_as_soon_as_enqueue_returns():
    # A producer's first enqueue reads the database's clock, over a
    # connection it opens then; the next ones carry that time forward.
    counted = [enqueue_and_count(4) for _ in range(25)]
    assert counted == [4] * 25
