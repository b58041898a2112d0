"""Expiry: a job that no run started by its deadline (``expires=``) ends
CANCELLED without running, its attempt unspent, told apart from a cancel on
its page, in its result, in the stats and the worker's counts; a deadline
it could never meet is refused at enqueue, and nothing is written. The
deadlines are put in the past by writing the row, as an SQL producer may,
so that no test waits for one (enqueue/expiry.py, worker/process/stops.py)."""

import math
import signal
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth.models import User
from django.db.models import F

from demo import retry_tasks, tasks
from demo.models import Execution
from django_dbqueue import bulk_enqueue, task
from django_dbqueue.models import Job
from django_dbqueue.operations.stats import snapshot
from django_dbqueue.tasks_api import InvalidTask, default_task_backend, task_backends
from django_dbqueue.worker import Worker
from tests.admin_helpers import CHANGELIST, staff
from tests.conftest import drain_in_bursts as drain
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("restore_signal_handlers")]


def expire(*pks: int) -> None:
    """Put the jobs' deadlines a second in the past, as time passing would."""
    Job.objects.filter(pk__in=pks).update(expires_at=F("enqueued_at") - timedelta(seconds=1))


def runs(key: str) -> int:
    return Execution.objects.filter(key=key).count()


def test_a_deadline_counts_from_each_enqueue_and_a_call_may_give_its_own():
    hour = Job.objects.get(pk=retry_tasks.reports_within_the_hour.enqueue("a").id)
    assert hour.expires_at - hour.enqueued_at == timedelta(hours=1)
    seconds = Job.objects.get(pk=tasks.record.using(expires=90).enqueue("b").id)
    assert seconds.expires_at - seconds.enqueued_at == timedelta(seconds=90)
    at = default_task_backend.now() + timedelta(days=2)
    instant = Job.objects.get(pk=tasks.record.using(expires=at).enqueue("c").id)
    assert instant.expires_at == at
    plain = Job.objects.get(pk=tasks.record.enqueue("d").id)
    assert plain.expires_at is None, "a task that asks for none writes none"
    bulk = bulk_enqueue(retry_tasks.reports_within_the_hour, [(["e"], {}), (["f"], {})])
    rows = Job.objects.filter(pk__in=[r.id for r in bulk])
    assert {job.expires_at - job.enqueued_at for job in rows} == {timedelta(hours=1)}


def test_a_job_past_its_deadline_ends_cancelled_without_running_and_the_others_run():
    late = retry_tasks.reports_within_the_hour.enqueue("late").id
    on_time = retry_tasks.reports_within_the_hour.enqueue("on-time").id
    expire(late)
    drain()
    job = Job.objects.get(pk=late)
    assert (job.status, job.attempts, runs("late")) == ("CANCELLED", 0, 0)
    [entry] = job.errors
    assert entry["exception_class_path"] == "django_dbqueue.exceptions.JobExpired"
    assert (entry["attempt"], entry["spent"]) == (1, False)
    assert "not started by its deadline" in entry["traceback"]
    assert job.finished_at >= job.expires_at and job.unique_key is None
    result = retry_tasks.reports_within_the_hour.get_result(str(late))
    assert result.status == "FAILED" and result.errors[-1].exception_class_path.endswith("JobExpired")
    assert Job.objects.get(pk=on_time).status == "SUCCESSFUL" and runs("on-time") == 1
    figures = snapshot("default").queue("default")
    assert (figures.expired_recently, figures.counts["CANCELLED"]) == (1, 1)


def test_a_retry_due_after_the_deadline_does_not_run():
    pk = tasks.flaky.using(expires=3600).enqueue("retried", 1).id  # fails its first run
    assert Worker(task_backends["default"], ["default"], burst=True).run() == 0
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts) == ("READY", 1)
    Job.objects.filter(pk=pk).update(run_after=F("enqueued_at"), expires_at=F("enqueued_at"))
    drain()
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, runs("retried")) == ("CANCELLED", 1, 1)
    assert [e["exception_class_path"].rsplit(".", 1)[1] for e in job.errors] == ["RuntimeError", "JobExpired"]
    assert [(e["attempt"], e["spent"]) for e in job.errors] == [(1, True), (2, False)]


def test_requeue_runs_an_expired_job_again_without_its_deadline():
    pk = retry_tasks.reports_within_the_hour.enqueue("again").id
    expire(pk)
    drain()
    assert Job.objects.filter(pk=pk).requeue() == 1
    job = Job.objects.get(pk=pk)
    assert job.expires_at is None and job.history[-1]["expires_at"] is not None
    drain()
    assert (Job.objects.get(pk=pk).status, runs("again")) == ("SUCCESSFUL", 1)


@pytest.mark.parametrize(
    ("expires", "message"),
    [
        (0, "more than 0 seconds"),
        (-5, "more than 0 seconds"),
        (timedelta(0), "more than 0 seconds"),
        (math.nan, "must be a number of seconds"),
        (math.inf, "must be a number of seconds"),
        (True, "must be a number of seconds"),
        ("1h", "must be a number of seconds"),
        (1e12, "past 9999-12-30"),
        (timedelta(days=3_000_000), "past 9999-12-30"),
    ],
)
def test_a_deadline_that_is_no_duration_is_refused_where_it_is_given(expires, message):
    with pytest.raises(InvalidTask, match=message):
        tasks.record.using(expires=expires).enqueue("refused")
    assert not Job.objects.exists(), "nothing was written"


def test_a_deadline_the_job_could_never_meet_is_refused_at_enqueue():
    now = default_task_backend.now()
    with pytest.raises(InvalidTask, match="already past at enqueue"):
        tasks.record.using(expires=now - timedelta(seconds=1)).enqueue("past")
    with pytest.raises(InvalidTask, match="not after the job's run_after"):
        tasks.record.using(run_after=now + timedelta(hours=2), expires=3600).enqueue("before-due")
    with pytest.raises(InvalidTask, match="past 9999-12-30"):
        far = datetime(9999, 12, 31, 23, tzinfo=dt_timezone(timedelta(hours=-5)))
        tasks.record.using(expires=far).enqueue("past-9999")
    with pytest.raises(InvalidTask, match="an instant is a time, not a default"):
        task(expires=now + timedelta(days=1))(tasks.record.func)
    assert not Job.objects.exists()


def test_a_runqueue_worker_counts_the_expired_apart_and_the_page_tells_it(runqueue, client):
    pk = retry_tasks.reports_within_the_hour.enqueue("paged").id
    expire(pk)
    workers = runqueue("--processes", "1", "--queue", "default")
    wait_for(lambda: Job.objects.get(pk=pk).status == "CANCELLED")
    workers.signal(signal.SIGTERM)
    assert workers.wait(30) == 0, workers.output()[-3000:]
    assert "expired before it started" in workers.output() and ", 1 expired" in workers.output()
    viewer = User.objects.filter(username="viewer").first() or staff("viewer", "view_job")
    client.force_login(viewer)
    html = client.get(f"{CHANGELIST}{pk}/change/").content.decode()
    assert "Expired before attempt 1 started: cancelled without running" in html
    assert "expires at" in html and runs("paged") == 0
