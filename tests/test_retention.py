"""Retention: the option, `prunejobs`, and the heartbeat pruning by itself."""

import io
import json
import signal
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import transaction

from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job
from django_dbqueue.options import QueueOptions
from django_dbqueue.transitions.pruning import delete_batch
from django_dbqueue.workflows.models import Batch, BatchStatus, Dependency
from tests.conftest import needs_row_locks, wait_for
from tests.threads import elsewhere

pytestmark = pytest.mark.django_db(transaction=True)


def make(status: str, days_ago: float | None, n: int = 1, queue: str = "email") -> None:
    now = read_database_now("default")
    finished = None if days_ago is None else now - timedelta(days=days_ago)
    # READY ones in a queue the test's workers do not serve; a RUNNING one held by a live
    # worker's lease (one without a lease is lease recovery's to take back).
    held = dict(owner="elsewhere", lease_expires_at=now + timedelta(hours=1)) if status == "RUNNING" else {}
    Job.objects.bulk_create(
        Job(task_path="demo.tasks.add", queue_name=queue, status=status, finished_at=finished, **held)
        for _ in range(n)
    )


def remaining() -> dict[tuple[str, bool], int]:
    """How many jobs are left per (status, finished more than 5 days ago)."""
    cutoff = read_database_now("default") - timedelta(days=5)
    left: dict[tuple[str, bool], int] = {}
    for status, finished in Job.objects.values_list("status", "finished_at"):
        key = (status, bool(finished and finished < cutoff))
        left[key] = left.get(key, 0) + 1
    return left


@pytest.fixture
def jobs():
    make("SUCCESSFUL", 10, 7)
    make("SUCCESSFUL", 1, 2)
    make("FAILED", 10, 3)
    make("CANCELLED", 40, 1)
    make("READY", None, 2)
    make("RUNNING", None, 1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([7], "OPTIONS RETENTION must be a dict of days per outcome"),
        ({"READY": 1}, "OPTIONS RETENTION names 'READY'; the outcomes are SUCCESSFUL, FAILED, CANCELLED."),
        ({"FAILED": 0}, "OPTIONS RETENTION['FAILED'] must be a number of days above zero, not 0."),
        ({"FAILED": "7"}, "must be a number of days above zero, not '7'"),
        ({"FAILED": True}, "not True"),
    ],
)
def test_bad_retention_values_are_refused_with_a_clear_message(value, message):
    with pytest.raises(ImproperlyConfigured, match=message.replace("[", r"\[").replace("]", r"\]")):
        QueueOptions.parse({"RETENTION": value})
    assert dict(QueueOptions.parse({"RETENTION": {"FAILED": 30, "SUCCESSFUL": 0.5}}).RETENTION) == {
        "FAILED": 30.0,
        "SUCCESSFUL": 0.5,
    }


def test_prunejobs_dry_run_counts_and_deletes_nothing(jobs, settings, capsys):
    settings.TASKS = with_retention(settings, {"SUCCESSFUL": 5, "CANCELLED": 30})
    before = remaining()
    call_command("prunejobs", "--dry-run")
    out = capsys.readouterr().out
    assert "SUCCESSFUL: 7 jobs finished more than 5 days ago would be deleted." in out
    assert "CANCELLED: 1 job finished more than 30 days ago would be deleted." in out
    assert remaining() == before


def test_prunejobs_deletes_per_outcome_in_batches_with_progress(jobs, settings, capsys):
    settings.TASKS = with_retention(settings, {"SUCCESSFUL": 5, "CANCELLED": 30})
    call_command("prunejobs", "--batch", "3", "--verbosity", "2")
    captured = capsys.readouterr()
    assert "SUCCESSFUL: deleted 7 jobs finished more than 5 days ago." in captured.out
    assert "SUCCESSFUL: 3 deleted so far" in captured.err and "SUCCESSFUL: 6 deleted so far" in captured.err
    assert remaining() == {
        ("SUCCESSFUL", False): 2,
        ("FAILED", True): 3,
        ("READY", False): 2,
        ("RUNNING", False): 1,
    }
    call_command("prunejobs", "--older-than", "5", "--status", "FAILED")
    assert ("FAILED", True) not in remaining()


def test_prunejobs_refuses_bad_input(settings):
    with pytest.raises(CommandError, match="OPTIONS RETENTION is not set; give --older-than DAYS"):
        call_command("prunejobs")
    with pytest.raises(CommandError, match="'-1' must be a number above zero"):
        call_command("prunejobs", "--older-than", "-1")
    with pytest.raises(CommandError, match="--batch must be between 1 and 10000, not 0"):
        call_command("prunejobs", "--older-than", "1", "--batch", "0")
    settings.TASKS = with_retention(settings, {"SUCCESSFUL": 5})
    with pytest.raises(CommandError, match="OPTIONS RETENTION keeps FAILED for ever"):
        call_command("prunejobs", "--status", "FAILED")
    settings.TASKS = with_retention(settings, {"SUCCESSFUL": -5})
    with pytest.raises(CommandError, match=r"RETENTION\['SUCCESSFUL'\] must be a number of days above zero"):
        call_command("prunejobs")


@needs_row_locks
def test_a_batch_skips_rows_another_pruner_holds_and_waits_for_nothing(jobs):
    ids = list(Job.objects.filter(status="SUCCESSFUL").values_list("pk", flat=True))
    with transaction.atomic():
        held = list(Job.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))
        other = elsewhere(lambda: delete_batch("default", "SUCCESSFUL", 5), timeout=10)
    assert len(held) == 9 and other == 0, "the locked rows were skipped, not waited for"
    assert delete_batch("default", "SUCCESSFUL", 5) == 7


def test_the_querysets_prune_deletes_its_own_expired_jobs_in_batches(jobs):
    make("FAILED", 10, 2, queue="default")
    assert Job.objects.filter(queue_name="email").prune(timedelta(days=5), batch=2) == 11
    assert remaining() == {
        ("SUCCESSFUL", False): 2,
        ("FAILED", True): 2,  # the other queue's, outside the queryset
        ("READY", False): 2,
        ("RUNNING", False): 1,
    }
    assert Job.objects.prune(timedelta(days=5)) == 2
    assert Job.objects.prune(timedelta(hours=1)) == 2


def test_pruning_takes_pruned_jobs_dependencies_and_emptied_old_batches_with_it(settings):
    now = read_database_now("default")
    old, recent = now - timedelta(days=10), now - timedelta(days=1)
    emptied = Batch.objects.create(status=BatchStatus.SUCCEEDED, sealed=True, finished_at=old)
    kept = Batch.objects.create(status=BatchStatus.FAILED, sealed=True, finished_at=old)
    young = Batch.objects.create(status=BatchStatus.SUCCEEDED, sealed=True, finished_at=recent)
    filling = Batch.objects.create()  # OPEN, no member yet
    done = dict(task_path="demo.tasks.add", queue_name="email", status="SUCCESSFUL")
    parent = Job.objects.create(**done, finished_at=old, batch=emptied)
    child = Job.objects.create(**done, finished_at=old, batch=kept)
    survivor = Job.objects.create(**done, finished_at=recent, batch=kept)
    Dependency.objects.bulk_create(
        [
            Dependency(parent_id=parent.pk, child_id=child.pk, resolved=True),
            Dependency(parent_id=parent.pk, child_id=survivor.pk, resolved=True),
            Dependency(parent_batch_id=emptied.pk, child_id=survivor.pk, resolved=True),
        ]
    )
    settings.TASKS = with_retention(settings, {"SUCCESSFUL": 5})
    call_command("prunejobs", stdout=io.StringIO())
    assert list(Job.objects.values_list("pk", flat=True)) == [survivor.pk]
    # The survivor keeps the record of its parents, pruned or not.
    assert sorted(Dependency.objects.values_list("child_id", flat=True)) == [survivor.pk, survivor.pk]
    assert sorted(Batch.objects.values_list("pk", flat=True)) == [kept.pk, young.pk, filling.pk]


def test_the_heartbeat_prunes_expired_jobs_by_itself(jobs, runqueue):
    worker = runqueue("--queue", "default", DBQUEUE_RETENTION=json.dumps({"SUCCESSFUL": 5, "FAILED": 5}))
    wait_for(lambda: ("SUCCESSFUL", True) not in remaining() and ("FAILED", True) not in remaining())
    assert remaining() == {
        ("SUCCESSFUL", False): 2,
        ("CANCELLED", True): 1,
        ("READY", False): 2,
        ("RUNNING", False): 1,
    }
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert "Pruned 10 finished jobs past their retention (SUCCESSFUL 7, FAILED 3)." in worker.output()


def with_retention(settings, retention):
    tasks = json.loads(json.dumps(settings.TASKS))
    tasks["default"]["OPTIONS"]["RETENTION"] = retention
    return tasks
