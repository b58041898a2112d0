"""The worker's claim shapes agree with claim() and never share a job."""

import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from django_dbqueue.claiming import SHAPES, claim_from_queues
from django_dbqueue.models import Job
from tests.conftest import needs_row_locks

pytestmark = pytest.mark.django_db
QUEUES = ["default", "email", "slow"]


def make(n: int = 1, **fields) -> list[Job]:
    return Job.objects.bulk_create([Job(task_path="demo.tasks.noop", **fields) for _ in range(n)])


def shapes_for(queues):
    return [s for s in SHAPES if not (s == "locking-select" and len(queues) > 1)]


@pytest.mark.parametrize("queues", [["default"], QUEUES])
def test_every_shape_claims_in_the_same_order(queues):
    now = timezone.now()
    for i, queue in enumerate(QUEUES * 3):
        make(queue_name=queue, priority=(i * 7) % 5, run_after=now - timedelta(seconds=i))
    make(queue_name="default", run_after=now + timedelta(hours=1))  # not due
    wanted = list(
        Job.objects.filter(queue_name__in=queues)
        .due()
        .order_by("-priority", "run_after", "id")
        .values_list("pk", flat=True)
    )[:4]

    for shape in shapes_for(queues):
        claimed = claim_from_queues(Job.objects.all(), queues, f"w-{shape}", 4, 60.0, shape=shape)
        assert [job.pk for job in claimed] == wanted, shape
        assert {job.status for job in claimed} == {"RUNNING"}
        Job.objects.release(f"w-{shape}", wanted)


@pytest.mark.parametrize("queues", [["default"], QUEUES])
def test_a_suspect_is_claimed_alone_by_every_shape(queues):
    make(3)
    suspect = make(suspect=True, priority=5)[0]
    for shape in shapes_for(queues):
        claimed = claim_from_queues(Job.objects.all(), queues, "w", 10, 60.0, shape=shape)
        assert [job.pk for job in claimed] == [suspect.pk]
        assert claimed[0].attempts == 1
        Job.objects.release("w", [suspect.pk])


def test_the_locking_select_serves_one_queue_only():
    with pytest.raises(ValueError, match="exactly one queue"):
        claim_from_queues(Job.objects.all(), QUEUES, "w", 10, 60.0, shape="locking-select")


@needs_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("shape", "queues"), [("locking-select", ["default"]), ("per-queue", QUEUES)])
def test_concurrent_claimers_never_share_a_job(shape, queues):
    total = 1500
    for queue in queues:
        make(total // len(queues), queue_name=queue)
    seen: list[list[int]] = [[] for _ in range(6)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def claimer(index: int) -> None:
        try:
            barrier.wait()
            while Job.objects.ready().exists():
                got = claim_from_queues(Job.objects.all(), queues, f"t{index}", 7, 60.0, shape=shape)
                seen[index].extend(job.pk for job in got)
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert not errors
    claimed = [pk for ids in seen for pk in ids]
    assert len(claimed) == len(set(claimed)) == total
    assert sum(1 for ids in seen if ids) > 1, "the work should have been shared"
