"""A task that raises Snooze gives its job back for a while without
spending an attempt; past its bound, or with a time that is no delay, the
job ends FAILED saying why (worker/process/snoozing.py). Real workers on
the test database: the Worker in burst mode, and a runqueue."""

import signal
import time

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured

from demo import retry_tasks, tasks
from django_dbqueue import task
from django_dbqueue.models import Job
from django_dbqueue.options import QueueOptions
from django_dbqueue.tasks_api import InvalidTask
from tests.admin_helpers import CHANGELIST, staff
from tests.conftest import drain_in_bursts as drain
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("restore_signal_handlers")]


def test_a_snooze_gives_the_job_back_later_without_spending_an_attempt():
    pk = retry_tasks.snoozes_until.enqueue("twice", 2).id
    before = time.monotonic()
    drain()
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, job.snoozes) == ("SUCCESSFUL", 1, 2)
    assert job.return_value == "ran after 2 snoozes, attempt 1"
    assert time.monotonic() - before >= 0.2, "each snooze waited its 0.1 s"
    snoozed = [entry for entry in job.errors if entry.get("snoozed") is not None]
    assert [(e["snoozed"], e["attempt"], e["spent"], e["retry_in"]) for e in snoozed] == [
        (0.1, 1, False, 0.1)
    ] * 2


def test_past_its_bound_a_job_ends_failed_saying_so():
    pk = retry_tasks.snoozes_until.enqueue("forever", 99).id
    drain()
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, job.snoozes) == ("FAILED", 1, 2)
    assert job.errors[-1]["not_retried"] == "it snoozed 2 times, the most it may (max_snoozes 2)"


@pytest.mark.parametrize("seconds", ["nan", -1, "soon", 400 * 86400, None])
def test_a_snooze_that_is_no_delay_fails_its_job_alone(seconds):
    pk = retry_tasks.snoozes_until.enqueue(f"bad-{seconds}", 1, seconds).id
    ok = tasks.add.enqueue(1, 2).id
    drain()
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, job.snoozes) == ("FAILED", 1, 0)
    assert job.errors[-1]["not_retried"].startswith("Snooze(")
    assert "is not a delay" in job.errors[-1]["not_retried"]
    assert Job.objects.get(pk=ok).status == "SUCCESSFUL"


def test_a_runqueue_worker_snoozes_a_job_and_its_page_tells_it(runqueue, client):
    pk = retry_tasks.snoozes_until.using(queue_name="default").enqueue("paged", 1, "timedelta:0.3").id
    workers = runqueue("--processes", "1", "--queue", "default")
    wait_for(lambda: Job.objects.get(pk=pk).status == "SUCCESSFUL")
    workers.signal(signal.SIGTERM)
    assert workers.wait(30) == 0, workers.output()[-3000:]
    assert "snoozed for 0.3s (1 of at most 2 snoozes)" in workers.output()
    viewer = User.objects.filter(username="viewer").first() or staff("viewer", "view_job")
    client.force_login(viewer)
    html = client.get(f"{CHANGELIST}{pk}/change/").content.decode()
    assert "1 / 3, snoozed 1 time" in html
    assert "Attempt 1 snoozed for 0.3 s: back to the queue, not counted" in html


def test_requeue_starts_a_clean_count_and_keeps_the_old_one_in_history():
    pk = retry_tasks.snoozes_until.enqueue("requeued", 1).id
    drain()
    assert Job.objects.filter(pk=pk).requeue() == 1
    job = Job.objects.get(pk=pk)
    assert job.snoozes == 0 and job.history[-1]["snoozes"] == 1


def test_bad_bounds_are_refused_where_they_are_given():
    with pytest.raises(InvalidTask, match="max_snoozes must be a whole number from 0 to 2,147,483,647"):
        task(max_snoozes=-1)(tasks.add.func)
    with pytest.raises(ImproperlyConfigured, match="MAX_SNOOZES must be"):
        QueueOptions.parse({"MAX_SNOOZES": 1.5})
    assert QueueOptions.parse({"MAX_SNOOZES": 0}).MAX_SNOOZES == 0
