"""A task's retry policy (``retry_on``, ``fail_on``, ``backoff``;
django_dbqueue/retries.py): which failures retry, which end the job at
once, how long a retry waits; a broken backoff fails its job alone. Real
workers on the test database: the Worker in burst mode, and a runqueue."""

import math
import signal
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from demo import retry_tasks, tasks
from demo.models import Execution
from django_dbqueue import task
from django_dbqueue.models import Job
from django_dbqueue.retries import Exponential, after_failure, described
from django_dbqueue.tasks_api import InvalidTask
from tests.admin_helpers import CHANGELIST, staff
from tests.conftest import drain_in_bursts as drain
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("restore_signal_handlers")]


def runs(key: str) -> int:
    return Execution.objects.filter(key=key).count()


def test_an_exception_outside_retry_on_fails_the_job_at_once_saying_why():
    pk = retry_tasks.calls_a_partner.enqueue("value", "value").id
    drain()
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, runs("value")) == ("FAILED", 1, 1)
    [entry] = job.errors
    assert entry["not_retried"] == "ValueError is not in the task's retry_on"
    assert "retry_in" not in entry


def test_fail_on_wins_over_retry_on_and_over_retrying_everything():
    partner = retry_tasks.calls_a_partner.enqueue("denied", "permission").id  # PermissionError is an OSError,
    grows = retry_tasks.grows_its_wait.enqueue("denied-too", "permission").id  # as ConnectionError is
    drain()
    for pk in (partner, grows):
        job = Job.objects.get(pk=pk)
        assert (job.status, job.attempts) == ("FAILED", 1)
        assert job.errors[0]["not_retried"] == "PermissionError is in the task's fail_on"


def test_a_listed_exception_retries_with_the_tasks_fixed_wait_until_attempts_run_out():
    pk = retry_tasks.calls_a_partner.enqueue("flaky", "connection").id
    drain()
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, runs("flaky")) == ("FAILED", 3, 3)
    assert [entry.get("retry_in") for entry in job.errors] == [0.2, 0.2, None]
    assert not any("not_retried" in entry for entry in job.errors), "the last ran out of attempts, as always"


def test_a_callable_backoff_is_given_the_failed_attempts_number():
    pk = retry_tasks.grows_its_wait.enqueue("grows", "value").id
    drain()
    waits = [entry.get("retry_in") for entry in Job.objects.get(pk=pk).errors]
    assert waits == [0.1, 0.2, None]
    doubling = retry_tasks.doubles_its_wait.enqueue("doubles").id
    drain()
    assert [entry.get("retry_in") for entry in Job.objects.get(pk=doubling).errors] == [0.05, 0.1, None]


@pytest.mark.parametrize(
    ("task_name", "told"),
    [
        ("has_a_broken_backoff", "the task's backoff gave nan for attempt 1, not a delay"),
        ("has_a_raising_backoff", "the task's backoff raised RuntimeError('no wait for you') for attempt 1"),
    ],
)
def test_a_broken_backoff_fails_its_job_alone_and_the_worker_goes_on(runqueue, task_name, told):
    broken = getattr(retry_tasks, task_name).enqueue(task_name).id
    workers = runqueue("--processes", "1", "--queue", "default")
    wait_for(lambda: Job.objects.get(pk=broken).status == "FAILED")
    after = tasks.add.enqueue(2, 3).id
    wait_for(lambda: Job.objects.get(pk=after).status == "SUCCESSFUL")
    workers.signal(signal.SIGTERM)
    assert workers.wait(30) == 0, workers.output()[-3000:]
    job = Job.objects.get(pk=broken)
    assert job.attempts == 1
    assert job.errors[0]["not_retried"].startswith(told)
    assert f"not retried: {told}" in workers.output()


def test_the_job_page_shows_the_policy_and_why_a_failure_was_not_retried(client):
    pk = retry_tasks.calls_a_partner.enqueue("paged", "value").id
    drain()
    viewer = User.objects.filter(username="viewer").first() or staff("viewer", "view_job")
    client.force_login(viewer)
    html = client.get(f"{CHANGELIST}{pk}/change/").content.decode()
    assert "retries ConnectionError; fails at once on PermissionError; waits 0.2 s" in html
    assert (
        "Attempt 1 failed with ValueError; not retried: ValueError is not in the task&#x27;s retry_on" in html
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retry_on": "ConnectionError"}, "retry_on must be an exception class or a tuple of them"),
        ({"fail_on": (ValueError, int)}, "fail_on must be an exception class or a tuple of them"),
        ({"backoff": -1}, "backoff must be a number of seconds from 0 to 31,622,400"),
        ({"backoff": math.nan}, "backoff must be a number of seconds"),
        ({"backoff": math.inf}, "backoff must be a number of seconds"),
        ({"backoff": True}, "backoff must be a number of seconds"),
        ({"backoff": "30s"}, "backoff must be a number of seconds"),
    ],
)
def test_a_bad_policy_is_refused_when_the_task_is_defined(options, message):
    with pytest.raises(InvalidTask, match=message):
        task(**options)(tasks.add.func)


def test_one_class_stands_for_a_tuple_and_exponential_checks_its_numbers():
    defined = task(retry_on=KeyError, fail_on=[ValueError])(tasks.add.func)
    assert (defined.retry_on, defined.fail_on) == ((KeyError,), (ValueError,))
    with pytest.raises(InvalidTask, match="Exponential's cap must be a number of seconds"):
        Exponential(base=1, cap=-5)
    assert (
        described(defined) == "retries KeyError; fails at once on ValueError; waits by the backend's backoff"
    )


def test_the_verdicts_of_each_backoff_shape():
    def verdict(backoff, attempt=1):  # noqa: ANN001, ANN202
        defined = task(backoff=backoff)(tasks.add.func)
        return after_failure(defined, ConnectionError(), attempt, lambda n: 7.0)

    assert verdict(None).delay == timedelta(seconds=7)
    assert verdict(0).delay == timedelta(0)
    assert verdict(lambda n: timedelta(minutes=n), attempt=2).delay == timedelta(minutes=2)
    for broken in (lambda n: -1, lambda n: math.inf, lambda n: "soon", lambda n: 367 * 86400, lambda n: None):
        result = verdict(broken)
        assert result.delay is None and "not a delay" in result.not_retried
    assert 5 <= verdict(Exponential(base=10, cap=60), attempt=1).delay.total_seconds() <= 10
    assert verdict(Exponential(base=10, cap=60, jitter=False), attempt=5).delay == timedelta(seconds=60)
