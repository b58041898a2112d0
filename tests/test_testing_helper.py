"""django_dbqueue.testing.run_due_jobs and its pytest fixture: due jobs run
in-process through the worker's claim and JobRunner."""

import importlib.metadata
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import pytest
from django.test import TestCase, override_settings
from django.utils import timezone

from demo import tasks
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import API_MODULE, task_finished
from django_dbqueue.testing import run_due_jobs
from tests.conftest import ROOT, subprocess_env

SHORT_BACKOFF = {
    "default": {
        "BACKEND": "django_dbqueue.backend.DatabaseBackend",
        "QUEUES": ["default", "email", "slow"],
        # A first retry waits 0.5 to 1 s (retry_delay's jitter).
        "OPTIONS": {"RETRY_BACKOFF_BASE": 1, "RETRY_BACKOFF_MAX": 1},
    }
}

MAILS_AN_HOUR = {"default": {**SHORT_BACKOFF["default"], "OPTIONS": {"RATE_LIMITS": {"queue:email": "1/h"}}}}


class RunDueJobsInATestCase(TestCase):
    def test_runs_what_is_due_in_claim_order_and_says_how_each_ended(self):
        later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
        low = tasks.add.enqueue(2, 3)
        high = tasks.send_welcome.enqueue(7)  # priority 10, queue "email"
        finished = []

        def on_finished(sender, task_result, **kwargs):
            finished.append(task_result.id)

        task_finished.connect(on_finished)
        try:
            ran = run_due_jobs()
        finally:
            task_finished.disconnect(on_finished)
        assert finished == [high.id, low.id]  # Django's signal, as a worker sends it
        assert [(r.id, r.status, r.attempts) for r in ran] == [
            (high.id, "SUCCESSFUL", 1),
            (low.id, "SUCCESSFUL", 1),
        ]
        assert [r.return_value for r in ran] == ["welcome mail for user 7", 5]
        assert ran[0].task_path == "demo.tasks.send_welcome"
        self.assertEqual(Job.objects.get(pk=int(later.id)).status, "READY")
        self.assertEqual(run_due_jobs(), [])

    def test_a_failure_is_recorded_and_its_retry_waits_for_its_backoff(self):
        result = tasks.flaky.enqueue("k", 1)  # fails once, then succeeds
        first = run_due_jobs()
        assert [(r.status, r.attempts) for r in first] == [("READY", 1)]
        assert [e.exception_class_path for e in first[0].result.errors] == ["builtins.RuntimeError"]
        self.assertEqual(Job.objects.get(pk=int(result.id)).status, "READY")

    @override_settings(TASKS=SHORT_BACKOFF)
    def test_once_its_backoff_has_passed_the_retry_runs(self):
        tasks.flaky.enqueue("k2", 1)
        assert [r.status for r in run_due_jobs()] == ["READY"]
        time.sleep(1.05)
        assert [(r.status, r.attempts, r.return_value) for r in run_due_jobs()] == [("SUCCESSFUL", 2, 2)]

    def test_only_the_queues_asked_for(self):
        tasks.add.enqueue(1, 2)
        tasks.send_welcome.enqueue(1)
        assert [r.task_path for r in run_due_jobs(queues=["email"])] == ["demo.tasks.send_welcome"]

    def test_a_job_row_that_names_no_task_fails_without_running(self):
        Job.objects.create(task_path="os.system", args=["true"])
        [ran] = run_due_jobs()
        assert (ran.status, ran.result) == ("FAILED", None)

    def test_max_runs_stops_a_task_that_keeps_enqueueing(self):
        for n in range(3):
            tasks.add.enqueue(n, n)
        assert len(run_due_jobs(max_runs=2)) == 2
        with self.assertRaisesMessage(ValueError, "max_runs must be at least 1, not 0."):
            run_due_jobs(max_runs=0)

    @override_settings(TASKS=MAILS_AN_HOUR)
    def test_jobs_with_keys_run_too_whatever_their_rate(self):
        # A concurrency key, a fairness key, a task's rate key and a queue
        # limited by RATE_LIMITS (1 an hour: a worker would start one of the
        # two mails now and the other in an hour).
        enqueued = [
            tasks.per_customer.enqueue("acme", 1, 0),
            tasks.per_customer.enqueue("acme", 2, 0),
            tasks.per_tenant.enqueue("t1", 3),
            tasks.rated.enqueue("acme", 4),
            tasks.send_welcome.enqueue(5),
            tasks.send_welcome.enqueue(6),
        ]
        assert Job.objects.filter(rate_key="queue:email").count() == 2
        ran = run_due_jobs()
        assert sorted((r.id, r.status) for r in ran) == sorted((e.id, "SUCCESSFUL") for e in enqueued)
        # The claim order: the mails' priority first, then as enqueued.
        assert [r.id for r in ran] == [e.id for e in enqueued[4:] + enqueued[:4]]
        assert [r.return_value for r in ran][2:] == [1, 1, 3, 4]  # one of the key RUNNING at a time

    def test_a_job_whose_concurrency_key_is_full_is_left_and_named(self):
        tasks.per_customer.enqueue("acme", 1, 0)
        Job.objects.filter(concurrency_key="customer:acme").update(concurrency_limit=1)
        held = Job.objects.create(
            task_path="demo.tasks.per_customer",
            args=["acme", 0, 0],
            concurrency_key="customer:acme",
            status="RUNNING",
            owner="another-worker",
            lease_expires_at=timezone.now() + timedelta(hours=1),
        )
        left = tasks.per_customer.enqueue("acme", 2, 0)
        tasks.add.enqueue(1, 1)
        with self.assertWarnsMessage(
            UserWarning,
            f"run_due_jobs() left 2 due jobs READY: their concurrency key 'customer:acme' has all its "
            f"slots taken by RUNNING jobs it did not run ({held.pk})",
        ) as caught:
            ran = run_due_jobs()
        assert [r.task_path for r in ran] == ["demo.tasks.add"]
        assert left.id in str(caught.warning)


def test_under_djangos_test_backends_it_says_why_it_cannot_run():
    immediate = {"default": {"BACKEND": f"{API_MODULE}.backends.immediate.ImmediateBackend"}}
    with override_settings(TASKS=immediate):
        with pytest.raises(TypeError, match="'default' is ImmediateBackend: Django's ImmediateBackend runs"):
            run_due_jobs()


FIXTURE_TEST = """
import pytest

from demo import tasks


@pytest.mark.django_db
def test_with_the_fixture(run_due_jobs):
    result = tasks.add.enqueue(20, 22)
    [ran] = run_due_jobs()
    assert (ran.id, ran.status, ran.return_value) == (result.id, "SUCCESSFUL", 42)


def test_without_the_database(run_due_jobs):
    pass
"""


def test_the_pytest_fixture_comes_with_the_installed_package(tmp_path):
    points = {e.value for e in importlib.metadata.entry_points(group="pytest11")}
    if "django_dbqueue.pytest_plugin" not in points:
        pytest.skip("django-dbqueue is not installed with its entry points here (./dev installs it)")
    (tmp_path / "test_fixture.py").write_text(textwrap.dedent(FIXTURE_TEST))
    env = subprocess_env()
    env["PYTHONPATH"] = f"{ROOT}:{ROOT / 'testproject'}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            "--ds",
            "testproject.settings",
            str(tmp_path / "test_fixture.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 passed, 1 error" in done.stdout, done.stdout + done.stderr
    assert "mark the test @pytest.mark.django_db" in done.stdout
