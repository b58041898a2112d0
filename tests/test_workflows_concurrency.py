"""Exactly once where it is hardest: two transactions finishing a batch's
last two members at the same moment, and workers SIGKILLed while batches
and chains drain. MariaDB and PostgreSQL (SQLite has one writer)."""

import os
import random
import signal
import threading
import time

import pytest
from django.db import connection, connections

from demo import workflow_tasks as wt
from django_dbqueue import batch, bulk_enqueue, call, chain, get_batch
from django_dbqueue.db import retry_on_conflict
from django_dbqueue.models import Job
from django_dbqueue.transitions import Finished
from tests.conftest import needs_row_locks, wait_for

pytestmark = [needs_row_locks, pytest.mark.django_db(transaction=True)]


def callback_jobs(batch_id: int) -> list[str]:
    jobs = Job.objects.filter(task_path="demo.workflow_tasks.callback").order_by("pk")
    return [job.args[0] for job in jobs if job.kwargs.get("batch_id") == batch_id]


def finish_together(jobs: list[Job], single: bool, barrier: threading.Barrier | None = None) -> list[str]:
    """Record each job's success from its own thread and connection. Each
    waits, after the UPDATE of its member and before its completion check,
    until the other has written its member too: both are then the "last"
    unfinished member as far as the database can tell."""
    both_updated = barrier or threading.Barrier(len(jobs), timeout=30)
    errors: list[BaseException] = []
    waited: list[str] = []

    def finisher(job: Job) -> None:
        def pause_after_outcome(execute, sql, params, many, context):
            result = execute(sql, params, many, context)
            if sql.startswith("UPDATE") and "return_value" in sql and not waited.count(job.owner):
                waited.append(job.owner)
                both_updated.wait()
            return result

        try:
            now = job.lease_expires_at
            outcome = Finished(job, now, now, return_value=job.args[0])
            jobs_api = Job.objects.using("default")
            write = (
                (lambda: jobs_api.record(job.owner, outcome))
                if single
                else (lambda: jobs_api.record_successes(job.owner, [outcome]))
            )
            with connection.execute_wrapper(pause_after_outcome):
                assert retry_on_conflict(write, "default") == 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=finisher, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return waited


@pytest.mark.parametrize("single", [False, True], ids=["batched outcomes", "one outcome"])
def test_two_workers_finishing_the_last_two_members_at_once_fire_the_callback_once(single):
    for round_ in range(5):
        with batch(on_success=call(wt.callback, "once")) as pair:
            wt.member.enqueue(f"a{round_}")
            wt.member.enqueue(f"b{round_}")
        child = wt.member.using(depends_on=[pair]).enqueue(f"after{round_}")
        first = Job.objects.filter(batch_id=pair.id).claim(f"w1-{round_}", limit=1)
        second = Job.objects.filter(batch_id=pair.id).claim(f"w2-{round_}", limit=1)
        assert len(first) == len(second) == 1
        waited = finish_together([first[0], second[0]], single)
        assert len(waited) == 2, "both transactions had written their member before either checked"
        pair = get_batch(pair.id)
        assert (pair.status, pair.succeeded) == ("SUCCEEDED", 2)
        assert callback_jobs(pair.id) == ["once"]
        assert Job.objects.get(pk=child.id).status == "READY", "the batch's dependant released once"


def test_two_parents_finishing_at_once_release_their_child_once():
    for round_ in range(5):
        left, right = wt.member.enqueue(f"l{round_}"), wt.member.enqueue(f"r{round_}")
        child = wt.concat.using(depends_on=[left, right], pass_result=True).enqueue("c")
        claimed = [
            Job.objects.filter(pk=r.id).claim(f"p{i}-{round_}", limit=1)[0]
            for i, r in enumerate((left, right))
        ]
        finish_together(claimed, single=False)
        row = Job.objects.get(pk=child.id)
        assert (row.status, row.args) == ("READY", [f"l{round_}", f"r{round_}", "c"])


def test_callbacks_and_releases_happen_once_under_sigkilled_workers(runqueue):
    batches = []
    for number in range(10):
        hooks = {"on_success": call(wt.callback, "ok"), "on_finish": call(wt.callback, "fin")}
        with batch(f"chaos {number}", **hooks) as made:
            bulk_enqueue(wt.member, [((f"{number}-{i}", 0.01), {}) for i in range(40)])
        batches.append(made)
    chains = [chain(call(wt.add_one, 0), *[call(wt.add_one)] * 5, pass_result=True) for _ in range(6)]
    workers = runqueue("--processes", "3", "--batch", "10")
    kills = 0
    while kills < 6 and Job.objects.filter(status__in=["READY", "RUNNING", "WAITING"]).exists():
        time.sleep(random.uniform(0.3, 1.0))
        children = workers.children()
        if children:
            os.kill(random.choice(children), signal.SIGKILL)
            kills += 1
    assert kills >= 3, "the run ended before the workers could be killed: make it longer"
    unfinished = Job.objects.filter(status__in=["READY", "RUNNING", "WAITING"])
    wait_for(lambda: not unfinished.exists(), timeout=240, interval=0.5)
    workers.signal(signal.SIGTERM)
    for made in batches:
        made = get_batch(made.id)
        assert (made.status, made.succeeded) == ("SUCCEEDED", 40), made
        assert callback_jobs(made.id) == ["ok", "fin"], "each callback inserted exactly once"
    for steps in chains:
        assert [Job.objects.get(pk=r.id).return_value for r in steps] == [1, 2, 3, 4, 5, 6]


def seal_after(barrier: threading.Barrier, made, errors: list[BaseException]) -> None:
    try:
        barrier.wait()
        made.seal()
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)
    finally:
        connections.close_all()


def test_sealing_a_batch_as_its_last_member_finishes_fires_the_callback_once():
    for round_ in range(3):
        made = batch(on_success=call(wt.callback, "sealed"))
        made.add(wt.member, f"only{round_}")
        (job,) = Job.objects.filter(batch_id=made.id).claim(f"w-{round_}", limit=1)
        updated = threading.Barrier(2, timeout=30)
        errors: list[BaseException] = []
        sealer = threading.Thread(target=seal_after, args=(updated, made, errors))
        sealer.start()
        # The member's outcome waits, its row written, until the seal starts.
        waited = finish_together([job], single=False, barrier=updated)
        sealer.join(60)
        if errors:
            raise errors[0]
        assert waited == [f"w-{round_}"]
        assert (get_batch(made.id).status, callback_jobs(made.id)) == ("SUCCEEDED", ["sealed"])
