"""The claim: order, exclusivity, suspects, release, leases and recovery."""

import logging
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbqueue.models import Job
from tests.conftest import DATABASE, MYSQL_FAMILY, claim_in_threads, needs_row_locks
from tests.rows import inserted

pytestmark = pytest.mark.django_db


def make(n: int = 1, **fields) -> list[Job]:
    return inserted([Job(task_path="demo.tasks.noop", **fields) for _ in range(n)])


def test_claim_returns_due_ready_jobs_in_priority_then_age_order():
    now = timezone.now()
    low_old = make(run_after=now - timedelta(minutes=5), priority=0)[0]
    high_new = make(run_after=now - timedelta(minutes=1), priority=50)[0]
    high_old = make(run_after=now - timedelta(minutes=2), priority=50)[0]
    negative = make(run_after=now - timedelta(minutes=9), priority=-10)[0]
    make(run_after=now + timedelta(hours=1), priority=100)  # not due
    make(status="FAILED", priority=100)  # not ready

    claimed = Job.objects.claim("w1", limit=10)

    assert [job.pk for job in claimed] == [high_old.pk, high_new.pk, low_old.pk, negative.pk]
    stored = Job.objects.filter(pk__in=[job.pk for job in claimed])
    assert {(job.status, job.owner) for job in stored} == {("RUNNING", "w1")}
    assert all(job.lease_expires_at > timezone.now() for job in stored)
    assert all(job.attempts == 0 for job in stored), "a batch claim counts no attempt"


def test_claim_respects_limit_and_the_querysets_own_filters():
    make(5, queue_name="email")
    make(5, queue_name="default")

    claimed = Job.objects.filter(queue_name="email").claim("w1", limit=3)

    assert len(claimed) == 3
    assert {job.queue_name for job in claimed} == {"email"}
    assert Job.objects.filter(queue_name="email").claim("w2", limit=10).__len__() == 2
    assert Job.objects.filter(queue_name="email").claim("w3", limit=10) == []


def test_claim_rejects_a_limit_below_one():
    with pytest.raises(ValueError, match="at least 1"):
        Job.objects.claim("w1", limit=0)


def test_a_suspect_job_is_claimed_alone_with_its_attempt_counted():
    make(3)
    suspect = make(suspect=True, priority=10)[0]

    first = Job.objects.claim("w1", limit=10)
    assert [job.pk for job in first] == [suspect.pk]
    assert first[0].attempts == 1
    suspect.refresh_from_db()
    assert (suspect.attempts, suspect.owner, suspect.last_attempted_at is not None) == (1, "w1", True)

    rest = Job.objects.claim("w1", limit=10)
    assert len(rest) == 3 and not any(job.suspect for job in rest)


def test_a_batch_stops_before_the_first_suspect():
    now = timezone.now()
    trusted = make(2, run_after=now - timedelta(minutes=3))
    make(suspect=True, run_after=now - timedelta(minutes=2))
    make(2, run_after=now - timedelta(minutes=1))

    claimed = Job.objects.claim("w1", limit=10)

    assert [job.pk for job in claimed] == [job.pk for job in trusted]


def test_release_returns_unstarted_jobs_without_costing_attempts():
    jobs = make(3)
    suspect = make(suspect=True, priority=-1)[0]
    claimed = Job.objects.claim("w1", limit=10)
    alone = Job.objects.claim("w1", limit=10)
    assert [job.pk for job in alone] == [suspect.pk]

    released = Job.objects.release("w1", [job.pk for job in claimed + alone])

    assert released == 4
    for job in [*jobs, suspect]:
        job.refresh_from_db()
        assert (job.status, job.owner, job.attempts) == ("READY", None, 0)


def test_release_only_touches_the_owners_running_jobs():
    job = make()[0]
    Job.objects.claim("w1")
    assert Job.objects.release("someone-else", [job.pk]) == 0
    job.refresh_from_db()
    assert job.status == "RUNNING"


def test_recovery_requeues_an_expired_batch_as_suspect_and_fails_a_suspect_on_its_last_attempt():
    batch_jobs = make(2)
    Job.objects.claim("dead-worker", lease=60)
    Job.objects.filter(pk__in=[j.pk for j in batch_jobs]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert Job.objects.recover_expired() == (2, 0)
    for job in batch_jobs:
        job.refresh_from_db()
        assert (job.status, job.suspect, job.attempts) == ("READY", True, 0)
        # Recorded, naming the dead worker, for an attempt that does not count.
        [lost] = job.errors
        assert (lost["worker"], lost["attempt"], lost["spent"]) == ("dead-worker", 1, False)

    # Each is now claimed alone; one kills its worker on its last attempt.
    poison = batch_jobs[0]
    Job.objects.filter(pk=poison.pk).update(max_attempts=1)
    assert [j.pk for j in Job.objects.claim("dead-again", limit=10)] == [poison.pk]
    Job.objects.filter(pk=poison.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    assert Job.objects.recover_expired() == (0, 1)
    poison.refresh_from_db()
    assert (poison.status, poison.attempts) == ("FAILED", 1)
    assert poison.errors[-1]["exception_class_path"] == "django_dbqueue.exceptions.WorkerLost"
    assert "dead-again" in poison.errors[-1]["traceback"]
    assert (poison.errors[-1]["attempt"], poison.errors[-1]["spent"]) == (1, True)


def test_recovery_leaves_live_leases_alone():
    make(2)
    Job.objects.claim("alive", lease=60)
    assert Job.objects.recover_expired() == (0, 0)
    assert Job.objects.running().count() == 2


def test_heartbeat_extends_only_the_owners_leases():
    make(2)
    mine = Job.objects.claim("me", limit=1, lease=1)[0]
    theirs = Job.objects.claim("them", limit=1, lease=1)[0]

    assert Job.objects.extend_leases("me", lease=600) == 1
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.lease_expires_at > timezone.now() + timedelta(seconds=500)
    assert theirs.lease_expires_at < timezone.now() + timedelta(seconds=5)


def test_still_held_answers_for_the_owners_jobs_and_extends_only_their_leases():
    """What a worker that cannot show its lease asks (worker/process/loop.py): a job that
    was recovered from it and claimed by another is no longer its."""
    lost, kept = make(2)
    Job.objects.claim("me", limit=2, lease=1)
    Job.objects.filter(pk=lost.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert Job.objects.recover_expired() == (1, 0)
    assert [job.pk for job in Job.objects.claim("other", limit=2, lease=1)] == [lost.pk]

    assert Job.objects.still_held("me", [lost.pk, kept.pk], lease=600) == {kept.pk}
    lost.refresh_from_db()
    kept.refresh_from_db()
    assert (lost.owner, kept.owner) == ("other", "me")
    assert kept.lease_expires_at > timezone.now() + timedelta(seconds=500)
    assert lost.lease_expires_at < timezone.now() + timedelta(seconds=5)


def test_claimed_jobs_are_the_instances_the_orm_would_load_for_the_row():
    # The claim builds its instances without Model.__init__ (transitions/instances.py).
    from django.db.models.signals import post_init, pre_init

    assert not pre_init.has_listeners(Job) and not post_init.has_listeners(Job), (
        "a receiver of Job's pre_init or post_init would not hear the claim's instances"
    )
    make(run_after=timezone.now() - timedelta(seconds=1), priority=7, kwargs={"é": [1, {"x": None}]})
    Job.objects.filter(pk=make(1, args=[1, "two"])[0].pk).update(errors=[{"at": "then"}])
    claimed = Job.objects.claim("w1", limit=5)
    for job in claimed:
        loaded = Job.objects.get(pk=job.pk)
        for field in Job._meta.concrete_fields:
            assert getattr(job, field.attname) == getattr(loaded, field.attname), field.name
        assert job._state.db == loaded._state.db and job._state.adding is False
    claimed[0].progress_message = "saved like any instance"
    claimed[0].save(update_fields=["progress_message"])
    assert Job.objects.get(pk=claimed[0].pk).progress_message == "saved like any instance"


@pytest.mark.parametrize("suspect", [False, True])
def test_a_claims_lease_runs_one_lease_from_the_databases_now(suspect):
    # A batch's mark takes the database's now in its own UPDATE, and its
    # instances then load lease_expires_at on access; a suspect's start
    # and lease come from one read of the database's clock.
    from django_dbqueue.clock import read_database_now

    make(3, suspect=suspect)
    before = read_database_now("default")
    claimed = Job.objects.claim("w1", limit=3, lease=600)
    after = read_database_now("default")
    assert len(claimed) == (1 if suspect else 3)
    for job in claimed:
        stored = Job.objects.get(pk=job.pk)
        assert job.lease_expires_at == stored.lease_expires_at
        assert before + timedelta(seconds=600) <= stored.lease_expires_at <= after + timedelta(seconds=600)
        if suspect:
            assert before <= job.started_at == stored.started_at <= after


def test_claim_costs_a_fixed_number_of_queries_whatever_the_batch_size():
    make(50)
    with CaptureQueriesContext(connection) as small:
        Job.objects.claim("w1", limit=1)
    with CaptureQueriesContext(connection) as large:
        Job.objects.claim("w1", limit=40)
    assert len(large.captured_queries) == len(small.captured_queries)


@needs_row_locks
@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_in_threads_never_share_a_job():
    """Eight threads, eight connections, claiming in small batches at once."""
    total = 2000
    make(total)
    seen = claim_in_threads(
        lambda owner: Job.objects.claim(owner, limit=7), 8, lambda: Job.objects.ready().exists()
    )

    claimed = [pk for ids in seen for pk in ids]
    assert len(claimed) == len(set(claimed)) == total
    assert sum(1 for ids in seen if ids) > 1, "the work should have been shared"
    owners = dict(Job.objects.values_list("pk", "owner"))
    for index, ids in enumerate(seen):
        assert {owners[pk] for pk in ids} <= {f"t{index}"}


BUMP = "UPDATE django_dbqueue_job SET priority = priority + 1 WHERE id = %s"


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="InnoDB's deadlock victim: MySQL and MariaDB")
@pytest.mark.django_db(transaction=True)
def test_a_worker_giving_back_jobs_runs_its_update_again_when_it_is_a_deadlock_victim(caplog):
    """Seen on MySQL as workers came back together from a failover: the
    hold watch's give-back lost a deadlock and logged a traceback. Another
    transaction holds the second of the two rows, having written more (so
    InnoDB picks the give-back as the victim), then asks for the first."""
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker.process.execution import JobRunner

    # One by one: MySQL's bulk_create() returns no primary keys.
    first, second, *heavier = [Job.objects.create(task_path="demo.tasks.noop") for _ in range(5)]
    Job.objects.claim("w1", limit=5)
    # Rate-limited, as if claimed under their rate: the give-back then locks
    # them first (to give their slots back), in id order, and still meets the
    # other transaction's lock the same way (under READ COMMITTED a plain
    # job's row would be let go before the wait, and no deadlock happen).
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(rate_key="k", rate_limit="100/m")
    other = connections.create_connection("default")
    other.set_autocommit(False)
    outcome: list[object] = []
    try:
        with other.cursor() as cursor:
            for pk in (*[job.pk for job in heavier], second.pk):
                cursor.execute(BUMP, [pk])
        runner = JobRunner(task_backends["default"], "w1")

        def give_back() -> None:
            try:
                outcome.append(runner.release([first.pk, second.pk]))
            except Exception as exc:
                outcome.append(exc)
            finally:
                connections.close_all()

        thread = threading.Thread(target=give_back)
        with caplog.at_level(logging.DEBUG, logger="django_dbqueue"):
            thread.start()
            time.sleep(1)  # the give-back holds the first row and waits for the second
            with other.cursor() as cursor:
                cursor.execute(BUMP, [first.pk])
            other.commit()
            thread.join(30)
    finally:
        other.close()

    assert outcome == [2]
    assert "Retrying after a lock conflict" in caplog.text
    assert set(Job.objects.filter(pk__in=[first.pk, second.pk]).values_list("status", flat=True)) == {"READY"}
