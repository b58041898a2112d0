"""What `runqueue` prints: every failed job gets its own line and its own
traceback, successes none, with DEBUG on or off."""

import re

import pytest

from demo import tasks
from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def records(log: str) -> list[str]:
    """The log split into records: each starts with a timestamp (ours) or
    with "Task id=" (Django's own django.tasks lines, printed with DEBUG on)."""
    return re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|Task id=)", log)


@pytest.mark.parametrize("debug", ["", "1"], ids=["DEBUG=False", "DEBUG=True"])
def test_each_failure_is_logged_with_its_own_traceback(runqueue, debug):
    ok = [tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)]
    failing = tasks.always_fails.enqueue("the-reason")
    unfit = Job.objects.create(task_path="demo.tasks.add", args=[1, 2, 3])  # a row that never fitted

    worker = runqueue("--burst", "--queue", "default", DJANGO_DEBUG=debug)
    assert worker.wait(timeout=60) == 0
    log = records(worker.output())

    first = f"Job {failing.id} (demo.tasks.always_fails) failed on attempt 1 of 2"
    [failure] = [r for r in log if first in r]
    assert "Traceback (most recent call last)" in failure and "ValueError: the-reason" in failure
    [never_fit] = [r for r in log if f"Job {unfit.pk} (demo.tasks.add) FAILED on attempt 1 of 3" in r]
    assert "JobNotRunnable: The job's arguments do not fit demo.tasks.add" in never_fit
    # No traceback anywhere but under its own failure.
    own = (f"Job {failing.id} (", f"Job {unfit.pk} (", f"id={failing.id} ", f"id={unfit.pk} ")
    for record in log:
        if "Traceback" in record:
            assert any(mark in record for mark in own), record
    if debug:  # Django's own django.tasks lines: successes carry no traceback
        for result in ok:
            [line] = [r for r in log if f"id={result.id} path=demo.tasks.add state=SUCCESSFUL" in r]
            assert "Traceback" not in line
        [django_failure] = [
            r for r in log if f"id={failing.id} path=demo.tasks.always_fails state=READY" in r
        ]
        # Its traceback is printed once, under the worker's own line (issue 17.9).
        assert "Traceback" not in django_failure
