"""A ``pass_result`` fan-in whose parents' results together exceed
MAX_ARGUMENTS_BYTES, or include one that cannot be read (issue 29): the
dependant alone ends FAILED saying why, unrun; its parents keep their
outcomes, its own dependants follow their policy, and the worker and lease
recovery carry on. The limit is lowered so that kilobytes stand for the
megabytes of the issue; one MariaDB test keeps the issue's sizes, where the
release would not even fit in a packet."""

import json

import pytest
from django.db import connection
from django.test import override_settings

from demo import workflow_tasks as wt
from demo.models import Execution
from django_dbqueue.models import Job
from django_dbqueue.transitions import Finished
from tests.conftest import once_per_run, wait_for
from tests.json_texts import NESTED, stored_instead

pytestmark = pytest.mark.django_db(transaction=True)
INVALID = "django_dbqueue.exceptions.InvalidTaskArguments"
LIMIT = 5000


def limited(limit: int) -> override_settings:
    """The test process's backend with MAX_ARGUMENTS_BYTES ``limit``, as
    DBQUEUE_MAX_ARGUMENTS_BYTES sets it for the workers."""
    from django.conf import settings

    entry = settings.TASKS["default"]
    return override_settings(
        TASKS={"default": {**entry, "OPTIONS": {**entry["OPTIONS"], "MAX_ARGUMENTS_BYTES": limit}}}
    )


def passed_size(*results: str) -> int:
    """What the limit counts for a fan-in of ``results`` with no arguments of its own."""
    return len(json.dumps(list(results), separators=(",", ":"))) + len("{}")


def refusal(pk: str) -> str:
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, job.finished_at is not None) == ("FAILED", 0, True)
    assert job.errors[-1]["exception_class_path"] == INVALID
    return job.errors[-1]["traceback"]


@limited(LIMIT)
def test_a_fan_in_over_the_argument_limit_fails_alone_and_its_parents_succeed(runqueue):
    parents = [wt.sized.enqueue(f"parent-{index}", 1000) for index in range(6)]
    fan_in = wt.measure.using(depends_on=parents, pass_result=True).enqueue()
    after = wt.member.using(depends_on=[fan_in]).enqueue("after")
    runs_anyway = wt.member.using(depends_on=[fan_in], on_parent_failure="run").enqueue("runs-anyway")
    small = wt.measure.using(depends_on=parents[:2], pass_result=True).enqueue()

    worker = runqueue("--burst", DBQUEUE_MAX_ARGUMENTS_BYTES=str(LIMIT))
    assert worker.wait(120) == 0, worker.output()[-3000:]

    statuses = Job.objects.filter(pk__in=[p.id for p in parents]).values_list("status", flat=True)
    assert set(statuses) == {"SUCCESSFUL"}, "the last parent keeps its success"
    size = passed_size(*["x" * 1000] * 6)
    assert refusal(fan_in.id) == (
        f"{INVALID}: The results of its 6 parent jobs and its own arguments take {size} bytes as "
        f"compact JSON, more than the limit of {LIMIT} (OPTIONS MAX_ARGUMENTS_BYTES), so it was not "
        "run. Have the parents store large results elsewhere and return a key to them.\n"
    )
    assert not Execution.objects.filter(key="measure:6").exists()
    assert Job.objects.get(pk=after.id).status == "CANCELLED", "its dependants follow their policy"
    assert Job.objects.get(pk=runs_anyway.id).status == "SUCCESSFUL"
    small_job = Job.objects.get(pk=small.id)
    assert (small_job.status, small_job.return_value) == ("SUCCESSFUL", 2000)

    # Enqueued after its parents finished, the same fan-in fails at once, the same way.
    late = wt.measure.using(depends_on=parents, pass_result=True).enqueue()
    assert f"take {size} bytes as compact JSON, more than the limit of {LIMIT}" in refusal(late.id)
    late.refresh()
    assert late.status == "FAILED"


def test_a_parent_result_that_cannot_be_read_fails_the_fan_in_alone():
    """A parent's result rewritten by SQL into JSON Python cannot read (an
    integer of 5,000 digits) when its co-parent finishes: the dependant
    fails naming that parent, and the co-parent's success is recorded."""
    first, second = wt.member.enqueue("first"), wt.member.enqueue("second")
    fan_in = wt.measure.using(depends_on=[first, second], pass_result=True).enqueue()
    claimed = {job.pk: job for job in Job.objects.claim("w", limit=2)}
    done = claimed[int(first.id)]
    assert Job.objects.record_successes("w", [Finished(done, done.enqueued_at, done.enqueued_at)]) == 1
    with connection.cursor() as cursor:
        sql = "UPDATE django_dbqueue_job SET return_value = %s WHERE id = %s"
        text = stored_instead("1" + "0" * 5000, lambda text: cursor.execute(sql, [text, first.id]))
        cursor.execute(sql, [text, first.id])

    last = claimed[int(second.id)]
    assert Job.objects.record_successes("w", [Finished(last, last.enqueued_at, last.enqueued_at)]) == 1
    assert Job.objects.get(pk=second.id).status == "SUCCESSFUL"
    why = (
        "is nested more than 31 lists or objects deep, the queue's limit"
        if text == NESTED
        else "holds an integer of 5,001 digits, more than Python's limit of 4,300"
    )
    assert refusal(fan_in.id) == (
        f"{INVALID}: The result of its parent job #{first.id} cannot be read (return_value {why}), "
        "so it cannot be passed on.\n"
    )


@once_per_run("test_a_fan_in_over_the_argument_limit_fails_alone_and_its_parents_succeed")
def test_twenty_parents_of_a_megabyte_each_fail_only_their_fan_in(runqueue):
    """The issue's sizes, at the default limit: the release would be a 20 MB
    write, over MariaDB's 16 MiB max_allowed_packet. With the policy "run"
    the worker then died at every attempt to record the last parent, and
    lease recovery retried that write for ever."""
    parents = [wt.sized.enqueue(f"big-{index}", 999_000) for index in range(20)]
    fan_in = wt.measure.using(depends_on=parents, pass_result=True, on_parent_failure="run").enqueue()
    worker = runqueue("--processes", "2")
    later = wt.member.enqueue("later")

    wait_for(lambda: Job.objects.filter(pk=fan_in.id, status="FAILED").exists(), timeout=60, interval=0.5)
    statuses = Job.objects.filter(pk__in=[p.id for p in parents]).values_list("status", flat=True)
    assert set(statuses) == {"SUCCESSFUL"}
    assert "more than the limit of 1000000 (OPTIONS MAX_ARGUMENTS_BYTES)" in refusal(fan_in.id)
    wait_for(lambda: Job.objects.filter(pk=later.id, status="SUCCESSFUL").exists(), timeout=30)
    assert worker.proc.poll() is None
    assert "Traceback" not in worker.output(), worker.output()[-3000:]
