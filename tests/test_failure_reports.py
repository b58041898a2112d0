"""How a failed attempt is reported: its exception class, as a result reads
it, and its traceback in the log of a real `runqueue`, printed once."""

import signal

import pytest

from demo import tasks
from django_dbqueue.models import Job
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def finished(*results) -> bool:
    return set(Job.objects.filter(pk__in=[r.id for r in results]).values_list("status", flat=True)) == {
        "FAILED"
    }


def test_each_failure_is_a_typed_error_whose_traceback_the_log_shows_once(runqueue):
    """Under DEBUG, Django's own receiver logs a `state=FAILED` line for each
    failure; the worker logs the failure with its traceback already."""
    failing = tasks.always_fails.enqueue("on purpose")  # two attempts
    unstorable = tasks.returns_object.enqueue()
    worker = runqueue("--queue", "default", DJANGO_DEBUG="1")
    wait_for(lambda: finished(failing, unstorable))
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    log = worker.output()
    assert log.count("state=FAILED") == 2, log  # Django's lines are kept
    assert log.count("\nValueError: on purpose") == 2, log
    assert log.count("\ndjango_dbqueue.exceptions.ResultNotStorable: ") == 1, log

    error = tasks.returns_object.get_result(unstorable.id).errors[-1]
    assert error.exception_class_path == "django_dbqueue.exceptions.ResultNotStorable"
    # As InvalidTaskArguments for arguments, and as Django's ImmediateBackend records it.
    assert issubclass(error.exception_class, TypeError)
