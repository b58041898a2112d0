"""The worker's claim shapes agree with claim() and never share a job."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbqueue.models import Job
from django_dbqueue.transitions.shapes import PER_QUEUE_MAX, SHAPES, claim_from_queues
from tests.conftest import claim_in_threads, needs_row_locks
from tests.rows import inserted

pytestmark = pytest.mark.django_db
QUEUES = ["default", "email", "slow"]


def make(n: int = 1, **fields) -> list[Job]:
    return inserted([Job(task_path="demo.tasks.noop", **fields) for _ in range(n)])


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
@pytest.mark.parametrize(
    ("shape", "queues"), [("locking-select", ["default"]), ("per-queue", QUEUES), ("candidates", QUEUES)]
)
def test_concurrent_claimers_never_share_a_job(shape, queues):
    total = 1500
    for queue in queues:
        make(total // len(queues), queue_name=queue)
    seen = claim_in_threads(
        lambda owner: claim_from_queues(Job.objects.all(), queues, owner, 7, 60.0, shape=shape),
        6,
        lambda: Job.objects.ready().exists(),
    )

    claimed = [pk for ids in seen for pk in ids]
    assert len(claimed) == len(set(claimed)) == total
    assert sum(1 for ids in seen if ids) > 1, "the work should have been shared"


def claim_sql(queues: list[str], limit: int) -> tuple[list[int], list[str]]:
    with CaptureQueriesContext(connection) as captured:
        claimed = claim_from_queues(Job.objects.all(), queues, "w", limit, 60.0)
    return [job.pk for job in claimed], [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("count", [PER_QUEUE_MAX + 1, 1000])
def test_many_queues_cost_one_read_not_one_branch_per_queue(count):
    queues = [f"tenant-{i:04d}" for i in range(count)]
    now = timezone.now()
    for i, queue in enumerate(queues[::7]):
        make(2, queue_name=queue, priority=i % 4, run_after=now - timedelta(seconds=i))
    make(queue_name="not-served", priority=100, run_after=now - timedelta(hours=1))
    wanted = list(
        Job.objects.filter(queue_name__in=queues)
        .order_by("-priority", "run_after", "id")
        .values_list("pk", flat=True)[:10]
    )

    claimed, statements = claim_sql(queues, 10)

    assert claimed == wanted
    assert not any("UNION" in sql for sql in statements)
    # One candidate read, whose IN list is the only part that grows with the
    # queues: about 12 kB of SQL for 1,000 queues, where one UNION branch per
    # queue sent 400 kB (and read up to `limit` rows of each queue).
    candidate_reads = [sql for sql in statements if "tenant-0000" in sql and "FOR UPDATE" not in sql]
    assert len(candidate_reads) == 1
    assert not any("tenant-0001" in sql for sql in statements if sql not in candidate_reads)
    # The same read for one queue (which finds nothing) sets its fixed part:
    # the columns and clauses, whatever columns the table has by now.
    _, alone = claim_sql(["no-such-queue"], 10)
    [one_queue] = [sql for sql in alone if "no-such-queue" in sql and "FOR UPDATE" not in sql]
    assert len(candidate_reads[0]) < len(one_queue) + 20 * count


def test_up_to_the_threshold_several_queues_are_read_per_queue():
    if not connection.features.supports_slicing_ordering_in_compound:
        pytest.skip("SQLite has no LIMIT inside a UNION: it reads the queues one by one")
    queues = [f"tenant-{i:04d}" for i in range(PER_QUEUE_MAX)]
    make(queue_name=queues[-1])

    claimed, statements = claim_sql(queues, 10)

    assert len(claimed) == 1
    assert sum("UNION ALL" in sql for sql in statements) == 1
