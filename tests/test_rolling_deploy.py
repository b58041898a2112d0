"""A rolling deploy that adds a task: the web hosts enqueue it before every
worker runs the code that defines it. An old worker gives such jobs back,
their attempts unspent and counted as no failure, for a new one to run;
past OPTIONS UNDEPLOYED_TASK_GRACE_SECONDS they fail, naming the workers
that lacked the task. A row that names no importable module, or one
outside the allow-list, still fails at once (worker/process/undeployed.py)."""

import re
import signal

import pytest
from django.db.models import Count

from demo import deploy_tasks
from demo.models import Execution
from django_dbqueue.models import Job, Worker
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NOT_DEPLOYED = "django_dbqueue.exceptions.TaskNotDeployed"
NOT_RUNNABLE = "django_dbqueue.exceptions.JobNotRunnable"
OLD = {"DBQUEUE_OLD_RELEASE": "1"}


def statuses(ids: list[str]) -> list[str]:
    by_pk = dict(Job.objects.filter(pk__in=ids).values_list("pk", "status"))
    return [by_pk[int(pk)] for pk in ids]


def given_back(ids: list[str]) -> bool:
    jobs = Job.objects.filter(pk__in=ids)
    return all(
        job.status == "READY" and job.errors and job.errors[-1]["exception_class_path"] == NOT_DEPLOYED
        for job in jobs
    )


def names_of(runqueue_process) -> set[str]:  # noqa: ANN001
    return set(Worker.objects.filter(pid__in=runqueue_process.children()).values_list("name", flat=True))


def test_an_old_worker_gives_a_new_tasks_jobs_back_and_a_new_worker_runs_them(runqueue):
    new = [deploy_tasks.call_partner.enqueue(f"partner-{i}").id for i in range(13)]
    known = deploy_tasks.ping.enqueue("known").id
    system = Job.objects.create(task_path="os.system", args=["touch /tmp/dbqueue-pwned"]).pk
    unimportable = Job.objects.create(task_path="demo.not_a_module.call_partner").pk
    old = runqueue("--processes", "1", **OLD)
    wait_for(lambda: old.children() and names_of(old))
    old_names = names_of(old)

    # The bad rows fail at once, on their first claim; the task both releases have runs.
    wait_for(lambda: statuses([str(system), str(unimportable), known]) == ["FAILED", "FAILED", "SUCCESSFUL"])
    wait_for(lambda: given_back(new), timeout=30)
    for pk, said in ((system, "outside every installed app"), (unimportable, "does not import")):
        error = Job.objects.get(pk=pk).errors[-1]
        assert error["exception_class_path"] == NOT_RUNNABLE and said in error["traceback"]
    jobs = list(Job.objects.filter(pk__in=new))
    assert {job.attempts for job in jobs} == {0}, "no attempt spent"
    assert all(len(job.errors) == 1 and job.errors[0]["workers"] == sorted(old_names) for job in jobs)
    # Not at every poll (every 2 s at most here): a delay that doubles.
    assert max(job.errors[0]["given_back"] for job in jobs) <= 3
    assert "this worker's code does not define the task" in old.output()
    assert not Execution.objects.filter(key__startswith="partner-").exists()

    # The deploy goes on: a worker with the new code starts, then the old one stops.
    newer = runqueue("--processes", "1")
    wait_for(lambda: "started on queues" in newer.output())
    old.signal(signal.SIGTERM)
    assert old.wait(30) == 0
    wait_for(lambda: statuses(new) == ["SUCCESSFUL"] * 13, timeout=60)
    runs = dict(Execution.objects.values_list("key").annotate(n=Count("id")))
    assert [runs.get(f"partner-{i}") for i in range(13)] == [1] * 13
    assert {job.attempts for job in Job.objects.filter(pk__in=new)} == {1}
    newer.signal(signal.SIGTERM)
    assert newer.wait(30) == 0
    # Give-backs are neither processed nor failed jobs: the old worker ran
    # the known task and failed the two bad rows, whatever else it gave back.
    assert re.search(r"Done: processed 3 jobs \(2 failed", old.output()), old.output()[-2000:]
    assert "exited with code" not in old.output() + newer.output()


def test_past_the_grace_the_jobs_fail_naming_the_workers_that_lacked_the_task(runqueue):
    new = [deploy_tasks.call_partner.enqueue(f"late-{i}").id for i in range(3)]
    old = runqueue("--processes", "2", DBQUEUE_UNDEPLOYED_GRACE="3", **OLD)
    wait_for(lambda: len(names_of(old)) == 2)
    old_names = names_of(old)

    wait_for(lambda: statuses(new) == ["FAILED"] * 3, timeout=60)

    for job in Job.objects.filter(pk__in=new):
        assert job.attempts == 0, "it never ran"
        [error] = job.errors
        assert error["exception_class_path"] == NOT_DEPLOYED
        assert "UNDEPLOYED_TASK_GRACE_SECONDS (3s) ran out" in error["traceback"]
        lacked = error["traceback"].split("the workers that lacked it: ")[1].split(". Deploy")[0]
        assert set(lacked.split(", ")) <= old_names and lacked
    assert not Execution.objects.exists()
    old.signal(signal.SIGTERM)
    assert old.wait(30) == 0
    assert re.search(r"Done: processed 3 jobs \(3 failed", old.output()), old.output()[-2000:]
