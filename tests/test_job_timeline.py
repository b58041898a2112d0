"""A job's page tells its story (docs/admin.md, "The job page"), from
real `runqueue` processes: a run interrupted by a stopping worker (not
counted, before the run that finished it), a run whose worker was
SIGKILLed (named, not counted, the job then run alone), a running job
(its attempt, claim and worker, no start it does not know), and a retry
with its delay."""

import os
import re
import signal

import pytest
from django.contrib.auth.models import User

from demo import control_tasks, story_tasks
from demo.models import Execution
from django_dbqueue.models import Job
from tests.admin_helpers import CHANGELIST, staff
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ENV = {"DBQUEUE_LEASE": "4", "DBQUEUE_CANCEL_GRACE": "1"}


def serve(runqueue, *args: str, **env: str):  # noqa: ANN001, ANN201
    return runqueue("--processes", "1", "--queue", "slow", *args, **{**ENV, **env})


def stop(workers) -> None:  # noqa: ANN001
    workers.signal(signal.SIGTERM)
    assert workers.wait(30) == 0, workers.output()[-3000:]


def page(client, pk: str | int) -> str:  # noqa: ANN001
    viewer = User.objects.filter(username="viewer").first() or staff("viewer", "view_job")
    client.force_login(viewer)
    return client.get(f"{CHANGELIST}{pk}/change/").content.decode()


def told(html: str) -> list[str]:
    """The timeline's lines, as the page shows them, in order."""
    shown = html.split('class="dbqueue-timeline"')[1].split("</ol>")[0]
    return [
        " ".join(re.sub(r"<[^>]+>", "", line).split())
        for line in re.findall(r"</time> (.*?)</li>", shown, re.S)
    ]


def field(html: str, name: str) -> str:
    """The text of a read-only field of the job page."""
    found = re.search(r'<div class="readonly">(.*?)</div>', html.split(f"field-{name}")[1], re.S)
    assert found, name
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def test_an_interrupted_run_is_told_uncounted_before_the_run_that_finished_it(runqueue, client):
    pk = control_tasks.counts_with_checkpoints.enqueue("interrupted", 40, 0.1).id
    old = serve(runqueue, "--stop-timeout", "1")
    wait_for(lambda: Execution.objects.filter(key="interrupted:start:0").exists())
    stopping = Job.objects.get(pk=pk).owner
    old.signal_group(signal.SIGTERM)
    assert old.wait(30) == 0, old.output()[-3000:]
    new = serve(runqueue)
    wait_for(lambda: Job.objects.get(pk=pk).status == "SUCCESSFUL")
    stop(new)
    done = Job.objects.get(pk=pk)

    html = page(client, pk)

    assert field(html, "attempts_of_max") == "1 / 3", "the interruption spent no attempt"
    assert told(html) == [
        "Enqueued",
        f"Attempt 1 interrupted by its stopping worker {stopping}: back to the queue, not counted",
        f"Attempt 1 claimed by {done.worker_ids[-1]}",
        "Started (first attempt)",
        "Finished: SUCCESSFUL",
    ]
    assert "Attempt 1, not counted: django_dbqueue.exceptions.JobInterrupted" in html


def test_a_killed_run_names_its_worker_and_a_running_job_says_what_is_known(runqueue, client):
    pk = control_tasks.counts_with_checkpoints.enqueue("killed", 100, 0.1).id
    workers = serve(runqueue)
    wait_for(lambda: Execution.objects.filter(key="killed:5").exists())
    running = Job.objects.get(pk=pk)

    # Running, claimed in a batch: no start is known yet, only the claim.
    html = page(client, pk)
    assert field(html, "attempts_of_max") == "attempt 1 of 3 running"
    assert told(html) == [
        "Enqueued",
        f"Attempt 1 claimed by {running.owner} (in a batch: its start is recorded with its outcome)",
    ]
    assert "Started" not in " ".join(told(html))

    [victim] = workers.children()
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: Job.objects.get(pk=pk).status == "SUCCESSFUL", timeout=60)
    stop(workers)
    done = Job.objects.get(pk=pk)
    assert done.attempts == 1, "the killed run was claimed in a batch: it does not count"

    html = page(client, pk)
    lines = told(html)
    assert lines[0] == "Enqueued" and lines[-1] == "Finished: SUCCESSFUL"
    assert lines[1] == (
        f"Attempt 1 lost: its worker {running.owner} stopped heartbeating while holding it; back to the "
        "queue as a suspect, not counted"
    )
    assert lines[2:-1] == [f"Attempt 1 claimed by {done.worker_ids[-1]}", "Started (first attempt)"]
    [lost] = done.errors
    assert (lost["worker"], lost["attempt"], lost["spent"]) == (running.owner, 1, False)
    assert "claimed at " in lost["traceback"] and "this run does not count" in lost["traceback"]
    assert "Attempt 1, not counted: django_dbqueue.exceptions.WorkerLost" in html
    # Why it took longer: the lost run's events are on the page, each with its time.
    times = re.findall(r'<time datetime="([^"]+)"', html.split('class="dbqueue-timeline"')[1])
    assert times == sorted(times)


def test_a_retry_is_told_with_its_delay(runqueue, client):
    pk = story_tasks.fails_first.enqueue("retried").id
    workers = serve(runqueue, DBQUEUE_BACKOFF="1")
    wait_for(lambda: Job.objects.get(pk=pk).status == "SUCCESSFUL")
    stop(workers)
    done = Job.objects.get(pk=pk)
    delay = done.errors[0]["retry_in"]
    assert 0.5 <= delay <= 1.0, delay  # RETRY_BACKOFF_BASE 1: the upper half of 1 s

    lines = told(page(client, pk))

    assert lines == [
        "Enqueued",
        "Started (first attempt)",
        f"Attempt 1 failed with ConnectionError; retry due {delay:g} s later",
        f"Attempt 2 claimed by {done.worker_ids[-1]}",
        "Attempt 2 started",
        "Finished: SUCCESSFUL",
    ]
