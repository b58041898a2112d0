"""Workflows with real `runqueue` processes: batches and their callbacks,
dependencies and their policies, cancel, a batch extended from inside a
member, chains. On every database (SQLite too)."""

import pytest
from django.db.models import Count

from demo import workflow_tasks as wt
from demo.models import Execution
from django_dbqueue import batch, call, chain, get_batch
from django_dbqueue.models import Batch, Job
from django_dbqueue.tasks_api import InvalidTask
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def runs() -> dict[str, int]:
    return dict(Execution.objects.values_list("key").annotate(n=Count("id")))


def callback_jobs(batch_id: int) -> list[str]:
    jobs = Job.objects.filter(task_path="demo.workflow_tasks.callback").order_by("pk")
    return [job.args[0] for job in jobs if job.kwargs.get("batch_id") == batch_id]


def drain(runqueue, *args: str) -> None:
    worker = runqueue("--burst", *args)
    assert worker.wait(180) == 0, worker.output()[-3000:]


def test_a_batch_runs_its_callbacks_once_with_its_counts(runqueue):
    hooks = {"on_success": call(wt.callback, "ok"), "on_finish": call(wt.callback, "fin")}
    with batch("all good", metadata={"import": 7}, **hooks) as good:
        for index in range(20):
            wt.member.enqueue(f"good-{index}")
    with batch("one bad", on_failure=call(wt.callback, "bad"), **hooks) as bad:
        wt.member.enqueue("bad-0")
        wt.fails.enqueue("bad-1")
    assert (good.total, good.pending, good.status) == (20, 20, "OPEN")
    drain(runqueue)
    good, bad = get_batch(good.id), get_batch(bad.id)
    assert (good.status, good.total, good.succeeded, good.failed, good.pending) == ("SUCCEEDED", 20, 20, 0, 0)
    assert good.metadata == {"import": 7} and good.description == "all good"
    assert (bad.status, bad.succeeded, bad.failed) == ("FAILED", 1, 1)
    assert callback_jobs(good.id) == ["ok", "fin"]
    assert callback_jobs(bad.id) == ["bad", "fin"]
    assert sorted(good.callback_job_ids) == sorted(
        Job.objects.filter(task_path="demo.workflow_tasks.callback", kwargs__batch_id=good.id).values_list(
            "pk", flat=True
        )
    )
    assert runs()[f"ok:{good.id}"] == 1 and f"ok:{bad.id}" not in runs()


def test_bulk_enqueue_inside_a_batch_makes_members_and_an_empty_batch_succeeds_at_once(runqueue):
    from django_dbqueue import bulk_enqueue

    with batch(on_success=call(wt.callback, "bulk")) as many:
        bulk_enqueue(wt.member, [((f"bulk-{i}",), {}) for i in range(300)])
    assert many.total == 300
    with batch(on_success=call(wt.callback, "empty")) as empty:
        pass
    assert (empty.status, callback_jobs(empty.id)) == ("SUCCEEDED", ["empty"])
    drain(runqueue, "--processes", "2")
    assert get_batch(many.id).succeeded == 300 and callback_jobs(many.id) == ["bulk"]


def test_a_dependant_waits_for_every_parent(runqueue):
    slow = wt.member.enqueue("slow", 3.0)
    quick = wt.member.enqueue("quick")
    child = wt.concat.using(depends_on=[slow, quick], pass_result=True).enqueue("last")
    assert Job.objects.get(pk=child.id).status == "WAITING"
    assert wt.concat.get_result(child.id).status == "READY"  # Django's API has no WAITING
    worker = runqueue("--processes", "2")
    wait_for(lambda: Job.objects.get(pk=quick.id).status == "SUCCESSFUL", timeout=60)
    assert Job.objects.get(pk=slow.id).status == "RUNNING"
    assert Job.objects.get(pk=child.id).status == "WAITING", "one parent is still running"
    wait_for(lambda: Job.objects.get(pk=child.id).status == "SUCCESSFUL", timeout=60)
    worker.signal(15)
    assert Job.objects.get(pk=child.id).return_value == "slow,quick,last"
    finished_slow = Job.objects.get(pk=slow.id).finished_at
    assert Execution.objects.get(key="concat:slow,quick,last").at >= finished_slow


def test_a_failed_parent_cancels_its_dependants_or_runs_them_by_their_policy(runqueue):
    parent = wt.fails.enqueue("parent")
    cancelled = wt.member.using(depends_on=[parent]).enqueue("cancelled")
    grandchild = wt.member.using(depends_on=[cancelled], on_parent_failure="run").enqueue("grandchild")
    runs_anyway = wt.member.using(depends_on=[parent.id], on_parent_failure="run").enqueue("anyway")
    drain(runqueue)
    status = dict(Job.objects.values_list("pk", "status"))
    assert status[int(parent.id)] == "FAILED"
    assert status[int(cancelled.id)] == "CANCELLED"
    assert status[int(grandchild.id)] == "SUCCESSFUL", "its own policy is to run"
    assert status[int(runs_anyway.id)] == "SUCCESSFUL"
    assert "cancelled" not in runs() and runs()["anyway"] == 1
    # A dependant of a parent that has already failed is cancelled at once.
    late = wt.member.using(depends_on=[parent]).enqueue("late")
    assert Job.objects.get(pk=late.id).status == "CANCELLED"


def test_cancelling_a_batch_cancels_its_unfinished_members_and_dependants(runqueue):
    with batch(on_finish=call(wt.callback, "never")) as doomed:
        members = [wt.member.enqueue(f"doomed-{i}") for i in range(5)]
    after_member = wt.member.using(depends_on=[members[0]]).enqueue("after-member")
    after_batch = wt.member.using(depends_on=[doomed]).enqueue("after-batch")
    chained = wt.member.using(depends_on=[after_batch]).enqueue("chained")
    assert doomed.cancel() == 5
    assert (doomed.status, doomed.cancelled, doomed.pending) == ("CANCELLED", 5, 0)
    drain(runqueue)
    for result in (after_member, after_batch, chained):
        assert Job.objects.get(pk=result.id).status == "CANCELLED"
    assert runs() == {} and callback_jobs(doomed.id) == []


def test_a_member_extends_its_batch_and_the_callback_waits_for_the_new_members(runqueue):
    with batch(on_success=call(wt.callback, "grown")) as grown:
        wt.extend.enqueue("ext", 3)
        wt.member.enqueue("first")
    drain(runqueue, "--processes", "2")
    grown = get_batch(grown.id)
    assert (grown.status, grown.total, grown.succeeded) == ("SUCCEEDED", 5, 5)
    assert callback_jobs(grown.id) == ["grown"]
    last_member = max(Execution.objects.filter(key__startswith="ext-").values_list("at", flat=True))
    assert Execution.objects.get(key=f"grown:{grown.id}").at >= last_member
    with pytest.raises(ValueError, match="has finished"):
        grown.add(wt.member, "too late")


def test_a_chain_passes_each_result_on_and_a_job_may_wait_for_a_batch(runqueue):
    steps = chain(call(wt.add_one, 1), call(wt.add_one), call(wt.add_one), pass_result=True)
    with batch() as fan_out:
        for index in range(3):
            wt.member.enqueue(f"fan-{index}")
    fan_in = wt.concat.using(depends_on=[steps[-1], fan_out], pass_result=True).enqueue("in")
    drain(runqueue)
    assert [Job.objects.get(pk=r.id).return_value for r in steps] == [2, 3, 4]
    assert Job.objects.get(pk=fan_in.id).return_value == "4,in"


def test_retry_failed_requeues_and_reopens_the_batch(runqueue):
    with batch(on_failure=call(wt.callback, "failed"), on_finish=call(wt.callback, "fin")) as retried:
        wt.fails.enqueue("once")
    drain(runqueue)
    assert get_batch(retried.id).status == "FAILED"
    assert retried.retry_failed() == 1 and retried.status == "OPEN"
    drain(runqueue)
    assert get_batch(retried.id).status == "FAILED"
    assert callback_jobs(retried.id) == ["failed", "fin", "failed", "fin"], "each completion once"
    assert Batch.objects.count() == 1


def test_retry_failed_makes_a_cancelled_child_wait_for_its_retried_parent(runqueue):
    with batch(on_success=call(wt.callback, "second time")) as retried:
        parent = wt.fails_once.enqueue("parent")
        child = wt.member.using(depends_on=[parent]).enqueue("child")
    drain(runqueue)
    assert Job.objects.get(pk=child.id).status == "CANCELLED"
    assert retried.retry_failed() == 2
    assert Job.objects.get(pk=child.id).status == "WAITING", "not READY before its parent ran again"
    drain(runqueue)
    assert (get_batch(retried.id).status, runs()["parent"], runs()["child"]) == ("SUCCEEDED", 2, 1)
    assert callback_jobs(retried.id) == ["second time"]


def test_a_batch_filled_with_add_completes_only_once_sealed(runqueue):
    made = batch(on_success=call(wt.callback, "sealed"))
    made.add(wt.member, "one")
    made.add(wt.member, "two")
    assert not made.sealed
    drain(runqueue)
    assert (get_batch(made.id).status, get_batch(made.id).succeeded) == ("OPEN", 2), "not sealed yet"
    assert callback_jobs(made.id) == []
    made.seal()
    assert made.status == "SUCCEEDED" and callback_jobs(made.id) == ["sealed"]


def test_bad_workflow_input_is_refused_with_what_to_do():
    with pytest.raises(TypeError, match="depends_on takes jobs"):
        wt.member.using(depends_on=["x"])
    with pytest.raises(ValueError, match="'cancel', 'run' or 'hold'"):
        wt.member.using(depends_on=[1], on_parent_failure="ignore")
    with pytest.raises(LookupError, match="job #999999"):
        wt.member.using(depends_on=[999999]).enqueue("orphan")
    from demo.tasks import record_once

    parent = wt.member.enqueue("parent")
    with pytest.raises(InvalidTask, match="has a unique_key"):
        record_once.using(depends_on=[parent]).enqueue("keyed")
    assert list(Job.objects.values_list("pk", flat=True)) == [int(parent.id)], (
        "a refused dependant writes nothing"
    )
    with pytest.raises(TypeError, match="call\\(task"):
        batch(on_success="demo.workflow_tasks.callback")
    with pytest.raises(LookupError, match="no batch #12345"):
        get_batch(12345)


def test_retry_failed_with_nothing_failed_leaves_the_batch_finished(runqueue):
    with batch(on_success=call(wt.callback, "done")) as done:
        wt.member.enqueue("done-0")
    drain(runqueue)
    assert get_batch(done.id).status == "SUCCEEDED"
    assert done.retry_failed() == 0
    again = get_batch(done.id)
    # Reopened with nothing left to finish, it would stay OPEN for ever.
    assert (again.status, again.finished_at is not None, len(again.callback_job_ids)) == (
        "SUCCEEDED",
        True,
        1,
    )


def test_only_a_running_member_may_add_to_a_sealed_batch():
    with batch() as sealed:
        wt.member.enqueue("sealed-0")
    with pytest.raises(ValueError, match=r"is sealed: only its own members, while they run, may add"):
        with get_batch(sealed.id):
            wt.member.enqueue("late")
    with pytest.raises(ValueError, match="is sealed"):
        get_batch(sealed.id).add(wt.member, "late")
    assert get_batch(sealed.id).total == 1
