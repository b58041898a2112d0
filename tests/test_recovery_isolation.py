"""One job's refused write costs no other job anything (issue 29): a dead
worker's job whose recovery the database refuses does not hold back the
recovery of the others, and a job none of whose outcomes can be written
does not cost its batch-mates theirs. A trigger on the job table stands for
the refusal (a release too big for a packet, a value the database
rejects): it refuses to write one row with the given statuses, on every
database."""

from collections.abc import Iterator

import pytest
from django.db.models import Count

from demo import workflow_tasks as wt
from demo.models import Execution
from django_dbqueue.models import Job
from tests.conftest import wait_for
from tests.refusals import REFUSAL, create_refusing_trigger, drop_refusing_trigger

pytestmark = pytest.mark.django_db(transaction=True)
DEAD = "gone-host:4242:abcdef"


def refuse(pk: int, *statuses: str) -> None:
    """Make the database refuse to write job ``pk`` with one of ``statuses`` (and nothing else)."""
    wanted = ", ".join(f"'{status}'" for status in statuses)
    create_refusing_trigger("dbq_refuse", f"OLD.id = {pk:d} AND NEW.status IN ({wanted})")


@pytest.fixture
def refusing() -> Iterator[None]:
    yield
    drop_refusing_trigger("dbq_refuse")


def test_a_job_whose_recovery_is_refused_fails_alone_and_the_others_are_given_back(refusing, runqueue):
    # More than a chunk of recovery (50), the refused job in the first one.
    good = [wt.member.enqueue(f"good-{index}") for index in range(70)]
    refused = wt.member.using(priority=1).enqueue("refused")
    claimed = Job.objects.claim(DEAD, limit=71, lease=0)  # a worker that died holding them
    assert len(claimed) == 71
    refuse(int(refused.id), "READY")

    worker = runqueue()  # its heartbeat recovers them; DBQUEUE_LEASE is 3 s
    given_back = Job.objects.filter(pk__in=[r.id for r in good], status="SUCCESSFUL")
    wait_for(lambda: given_back.count() == 70, timeout=20, interval=0.25)
    ran = dict(Execution.objects.values_list("key").annotate(n=Count("id")))
    assert ran == {f"good-{index}": 1 for index in range(70)}

    job = Job.objects.get(pk=refused.id)
    assert (job.status, job.owner, job.finished_at is not None) == ("FAILED", None, True)
    error = job.errors[-1]
    assert error["exception_class_path"] == "django_dbqueue.exceptions.WorkerLost"
    assert error["worker"] == DEAD
    assert "Lease recovery could not give it back to the queue, so it ends FAILED here" in error["traceback"]
    assert REFUSAL in error["traceback"]
    assert worker.proc.poll() is None
    assert f"Lease recovery could not give job {refused.id} back, so it ends FAILED" in worker.output()


def test_a_job_none_of_whose_outcomes_can_be_written_costs_its_batch_mates_nothing(refusing, runqueue):
    """Its success refused, then its failure too (as when what it sets off
    in workflows cannot be written): its batch-mates' successes are written
    all the same, once, before its worker gives up; none runs twice."""
    doomed = wt.member.using(priority=5).enqueue("doomed")  # claimed and run first: first in the batch
    mates = [wt.member.enqueue(f"mate-{index}") for index in range(9)]
    refuse(int(doomed.id), "SUCCESSFUL", "FAILED")

    worker = runqueue("--batch", "10", DBQUEUE_BATCH_HOLD="60")
    recorded = Job.objects.filter(pk__in=[m.id for m in mates], status="SUCCESSFUL")
    wait_for(lambda: recorded.count() == 9, timeout=30, interval=0.25)
    # Past a lease, when a mate whose outcome was lost would have been recovered and run again.
    wait_for(lambda: Job.objects.filter(pk=doomed.id, attempts__gte=2).exists(), timeout=30, interval=0.25)
    ran = dict(Execution.objects.filter(key__startswith="mate-").values_list("key").annotate(n=Count("id")))
    assert ran == {f"mate-{index}": 1 for index in range(9)}
    assert "neither its success nor its failure could be recorded" in worker.output()
