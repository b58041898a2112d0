"""Big operations as jobs (operations/big.py): decided first, then carried
out by a job of the queue in chunks, each chunk's transaction with its
position, so a killed worker's operation resumes without redoing or
skipping a row. Real `runqueue` processes; sizes kept small by setting
OPERATION_INLINE_ROWS and OPERATION_CHUNK_ROWS low (benchmarks/big_operations.py
measures 100,000 rows)."""

import copy
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.test import override_settings

from demo import workflow_tasks as wt
from django_dbqueue import batch, chain, get_batch
from django_dbqueue.models import Batch, Job
from django_dbqueue.operations.big import TASK_PATH
from tests.admin_helpers import act, messages_of, staff
from tests.conftest import wait_for
from tests.threads import holding

pytestmark = pytest.mark.django_db(transaction=True)

INLINE, CHUNK = 10, 7


def options(**more: object) -> dict:
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"].update(OPERATION_INLINE_ROWS=INLINE, OPERATION_CHUNK_ROWS=CHUNK, **more)
    return tasks


@pytest.fixture
def small_operations() -> Iterator[None]:
    with override_settings(TASKS=options()):
        yield


def operation_jobs(kind: str) -> list[Job]:
    return list(Job.objects.filter(task_path=TASK_PATH, metadata__operation=kind).order_by("pk"))


def finished(pk: int, timeout: float = 120) -> Job:
    wait_for(lambda: Job.objects.get(pk=pk).status in ("SUCCESSFUL", "FAILED"), timeout)
    return Job.objects.get(pk=pk)


def test_a_small_cancel_is_done_at_once_without_a_job(small_operations):
    with batch() as small:
        for index in range(INLINE):
            wt.member.enqueue(f"small-{index}")
    done = small.cancel()
    assert (done, done.job_id, done.inline, done.decided) == (INLINE, None, True, True)
    assert get_batch(small.id).cancelled == INLINE and operation_jobs("cancel_batch") == []
    again = small.cancel()
    assert (again, again.decided) == (0, False)


def test_a_big_cancel_is_decided_first_and_no_member_is_claimed_after_it(small_operations, runqueue):
    members = 150
    with batch("big") as big:
        for index in range(members):
            wt.member.enqueue(f"big-{index}", 0.02)
    worker = runqueue("--batch", "1")
    wait_for(lambda: get_batch(big.id).succeeded >= 5, 60)

    started = big.cancel()
    # The moment it returns: what a worker had claimed or finished before the
    # decision (the operation job may have cancelled some members already).
    before = set(
        Job.objects.filter(batch_id=big.id)
        .exclude(status__in=["READY", "CANCELLED"])
        .values_list("pk", flat=True)
    )
    assert started.job_id is not None and get_batch(big.id).status == "CANCELLED"
    op = finished(started.job_id)
    worker.stop()

    assert op.status == "SUCCESSFUL", op.errors
    rows = Job.objects.filter(batch_id=big.id)
    cancelled = {pk for pk, status in rows.values_list("pk", "status") if status == "CANCELLED"}
    assert cancelled == set(rows.values_list("pk", flat=True)) - before, "every member unclaimed then"
    assert int(started) == len(cancelled) > 100
    never = rows.filter(pk__in=cancelled)
    assert set(never.values_list("attempts", "claimed_at")) == {(0, None)}, "none was ever claimed"
    decided_at = Batch.objects.get(pk=big.id).finished_at
    assert decided_at <= min(never.values_list("finished_at", flat=True)), "the batch first"
    # One finish time per chunk's UPDATE: chunks of at most CHUNK rows, one after the other.
    chunks = Counter(never.values_list("finished_at", flat=True))
    assert max(chunks.values()) <= CHUNK and len(chunks) >= len(cancelled) // CHUNK
    # A claim that met a member of the cancelled batch cancelled it instead: the rest are the job's.
    rows_done = op.return_value["rows"]
    assert op.return_value["operation"] == "cancel_batch"
    assert len(cancelled) - 5 <= rows_done <= len(cancelled)
    assert (op.progress, op.progress_message, op.checkpoint["cursor"]["rows"]) == (
        1.0,
        f"{rows_done} rows: done",
        rows_done,
    )
    print(f"big cancel: {len(cancelled)} members in {len(chunks)} chunks, {len(before)} claimed before")


def test_a_long_cascade_of_cancels_hands_its_rest_to_an_operation_job(small_operations, runqueue):
    steps = chain(*[(wt.member, (f"step-{index}",)) for index in range(40)])
    head = int(steps[0].id)
    assert Job.objects.filter(pk=head).cancel() == 1
    # The cancel's own transaction went as far as its budget, and left the rest to a job.
    [op] = operation_jobs("cascade")
    waiting = Job.objects.filter(status="WAITING", task_path="demo.workflow_tasks.member").count()
    assert 0 < waiting < 39
    runqueue("--burst").wait(120)
    assert finished(op.pk).status == "SUCCESSFUL"
    statuses = Counter(
        Job.objects.filter(task_path="demo.workflow_tasks.member").values_list("status", flat=True)
    )
    assert statuses == {"CANCELLED": 40}


def test_a_big_retry_requeues_once_and_completes_the_batch_once(small_operations, runqueue):
    with batch("retried", on_finish=(wt.callback, ("again",))) as retried:
        for index in range(30):
            wt.fails_once.enqueue(f"retry-{index}")
    runqueue("--burst").wait(120)
    assert get_batch(retried.id).failed == 30
    started = retried.retry_failed()
    assert int(started) == 30 and started.job_id is not None
    runqueue("--burst").wait(120)
    done = get_batch(retried.id)
    assert (done.status, done.succeeded) == ("SUCCEEDED", 30)
    members = Job.objects.filter(batch_id=retried.id)
    assert {len(history) for history in members.values_list("history", flat=True)} == {1}
    assert len(done.callback_job_ids) == 2, "once when it failed, once when the retry finished"


@pytest.mark.skipif(
    os.environ.get("DBQUEUE_DATABASE", "sqlite") in ("sqlite", "postgres"), reason="row locks"
)
def test_a_killed_worker_s_operation_resumes_and_requeues_each_member_once(runqueue):
    # Only the operations' queue is served: the requeued members stay READY to be counted.
    with override_settings(TASKS=options(OPERATIONS_QUEUE="slow")):
        with batch("killed") as killed:
            for index in range(60):
                wt.member.enqueue(f"killed-{index}")
        ids = sorted(Job.objects.filter(batch_id=killed.id).values_list("pk", flat=True))
        Job.objects.filter(pk__in=ids).update(status="FAILED", finished_at=time_now())
        Batch.objects.filter(pk=killed.id).update(status="FAILED", finished_at=time_now())
    # Another connection holds one member's row locked until the block ends,
    # whatever failed (a lock left behind would hold up the database's flush).
    with holding(lambda: list(Job.objects.select_for_update().filter(pk=ids[30])), timeout=60):
        with override_settings(TASKS=options(OPERATIONS_QUEUE="slow")):
            started = get_batch(killed.id).retry_failed()
        assert started.job_id is not None
        first = runqueue("--queue", "slow")

        def committed() -> int:
            return (Job.objects.get(pk=started.job_id).checkpoint or {}).get("cursor", {}).get("rows") or 0

        # Chunks committed before the locked row, which no chunk can pass: how
        # many depends on the chunks' sizes, which shrink on a slow machine.
        wait_for(lambda: committed() >= 7)
        time.sleep(0.5)
        assert 7 <= committed() <= 30
        first.signal_group(signal.SIGKILL)
        first.wait(10)
    runqueue("--queue", "slow")
    op = finished(started.job_id)
    assert op.status == "SUCCESSFUL", op.errors
    assert op.return_value == {"operation": "retry_batch", "rows": 60}
    assert op.attempts == 1 and op.interruptions == 0, "the killed run counts one attempt"
    members = Job.objects.filter(batch_id=killed.id)
    assert Counter(members.values_list("status", flat=True)) == {"READY": 60}
    assert {len(history) for history in members.values_list("history", flat=True)} == {1}, "each once"
    assert Batch.objects.filter(pk=killed.id, status="OPEN", sealed=True).exists()


def time_now():
    from django.utils import timezone

    return timezone.now()


def test_the_admin_answers_at_once_and_links_the_operation_job(small_operations, client):
    user = staff("operator", "cancel_job", "view_job")
    client.force_login(user)
    jobs = [Job.objects.create(task_path="demo.tasks.add") for _ in range(30)]
    began = time.monotonic()
    response = act(client, "cancel", jobs)
    answered = time.monotonic() - began
    [op] = operation_jobs("change_jobs")
    [message] = messages_of(response)
    assert f'href="/admin/django_dbqueue/job/{op.pk}/change/"' in message
    assert message.startswith("Cancelling 30 jobs in the background"), message
    assert Job.objects.filter(pk__in=[j.pk for j in jobs], status="READY").count() == 30, "not yet"

    from django_dbqueue.testing import run_due_jobs

    [ran] = run_due_jobs(max_runs=1)
    assert ran.task_path == TASK_PATH and ran.status == "SUCCESSFUL"
    assert Job.objects.filter(pk__in=[j.pk for j in jobs], status="CANCELLED").count() == 30
    assert LogEntry.objects.filter(user=user, change_message="Cancelled (was READY).").count() == 30
    page = client.get(f"/admin/django_dbqueue/job/{op.pk}/change/").content.decode()
    assert "30 rows: done" in page
    print(f"admin: answered in {answered * 1000:.0f} ms, operation job #{op.pk}")


def test_the_batch_admin_cancels_a_big_batch_as_a_job(small_operations, client):
    user = staff("batcher", "cancel_batch", "view_batch", "view_job")
    client.force_login(user)
    with batch("admin") as big:
        for index in range(25):
            wt.member.enqueue(f"admin-{index}")
    url = f"/admin/django_dbqueue/batch/{big.id}/actions/cancel_batches/"
    response = client.post(url, follow=True)
    [op] = operation_jobs("cancel_batch")
    said = " ".join(messages_of(response))
    assert f'href="/admin/django_dbqueue/job/{op.pk}/change/"' in said, said
    assert get_batch(big.id).status == "CANCELLED"
