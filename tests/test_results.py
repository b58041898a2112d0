"""get_result(): the task as the row has it, and what a row may make it import."""

import sys
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from demo import tasks
from django_dbqueue.enqueue.results import StoredTaskError
from django_dbqueue.exceptions import JobCancelled, TaskResultNotLoadable, WorkerLost
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import TaskResultDoesNotExist, TaskResultStatus, default_task_backend

pytestmark = pytest.mark.django_db


# -- the task as enqueued ------------------------------------------------------


def test_get_result_equals_what_enqueue_returned_after_using():
    when = timezone.now() + timedelta(hours=3)
    enqueued = tasks.add.using(priority=10, queue_name="slow", run_after=when).enqueue(1, 2)

    stored = default_task_backend.get_result(enqueued.id)

    assert (stored.task.priority, stored.task.queue_name, stored.task.run_after) == (10, "slow", when)
    assert stored.task == enqueued.task
    assert stored == enqueued


def test_a_cancelled_job_reads_as_finished_and_failed_with_the_reason():
    # Django's tasks API has no cancelled state: a caller polling
    # is_finished must stop, and must learn why the job did not run.
    enqueued = tasks.add.enqueue(1, 2)
    assert Job.objects.filter(pk=enqueued.id).cancel() == 1

    result = tasks.add.get_result(enqueued.id)

    assert (result.status, result.is_finished) == (TaskResultStatus.FAILED, True)
    [error] = result.errors
    assert error.exception_class is JobCancelled
    assert "cancelled before it ran" in error.traceback
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018
    assert Job.objects.get(pk=enqueued.id).status == "CANCELLED", "the row keeps its own status"


def test_get_result_of_a_plain_enqueue_has_the_decorators_task():
    enqueued = tasks.send_welcome.enqueue(5)

    stored = tasks.send_welcome.get_result(enqueued.id)

    assert stored.task == tasks.send_welcome  # run_after stays None
    assert stored == enqueued


def test_a_past_run_after_is_kept_too():
    when = timezone.now() - timedelta(minutes=5)
    enqueued = tasks.add.using(run_after=when).enqueue(1, 2)
    assert default_task_backend.get_result(enqueued.id).task.run_after == when


def test_a_row_the_task_would_now_refuse_is_still_readable():
    # A queue since dropped from QUEUES, or a row written by hand.
    job = Job.objects.create(task_path="demo.tasks.add", queue_name="retired", priority=3, args=[1, 2])

    result = default_task_backend.get_result(str(job.pk))

    assert (result.task.queue_name, result.task.priority, result.task.func) == ("retired", 3, tasks.add.func)


@pytest.mark.django_db(transaction=True)
def test_the_running_tasks_context_sees_using(runqueue):
    when = timezone.now() - timedelta(seconds=1)  # due now
    enqueued = tasks.describe_own_task.using(priority=7, queue_name="email", run_after=when).enqueue()

    assert runqueue("--burst").wait() == 0

    enqueued.refresh()
    assert enqueued.return_value == {"priority": 7, "queue_name": "email", "run_after": when.isoformat()}


# -- rows that name what may not be imported ------------------------------------


@pytest.fixture
def canary(tmp_path, monkeypatch):
    """A module outside every app that leaves a file behind if it is ever imported."""
    (tmp_path / "canary_errors.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\n\nclass Boom(Exception):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "imported"
    sys.modules.pop("canary_errors", None)


def failed_job(*paths: str) -> Job:
    errors = [{"exception_class_path": path, "traceback": "Traceback ..."} for path in paths]
    return Job.objects.create(task_path="demo.tasks.add", status="FAILED", args=[1, 2], errors=errors)


def test_errors_resolve_builtins_and_installed_apps_exceptions():
    job = failed_job("builtins.ValueError", "django_dbqueue.exceptions.WorkerLost")

    errors = default_task_backend.get_result(str(job.pk)).errors

    assert all(isinstance(error, StoredTaskError) for error in errors)
    assert [error.exception_class for error in errors] == [ValueError, WorkerLost]


def test_an_error_class_outside_the_allowed_modules_is_never_imported(canary):
    job = failed_job("canary_errors.Boom")

    (error,) = default_task_backend.get_result(str(job.pk)).errors

    with pytest.raises(ValueError) as raised:
        _ = error.exception_class
    assert str(raised.value) == (
        "The exception class 'canary_errors.Boom' is not resolved: only builtins and the modules of "
        "installed apps and OPTIONS ALLOWED_TASK_MODULES are imported from a job row. Its path is "
        "in exception_class_path."
    )
    assert not canary.exists() and "canary_errors" not in sys.modules
    assert error.exception_class_path == "canary_errors.Boom"


@override_settings(
    TASKS={
        "default": {
            "BACKEND": "django_dbqueue.backend.DatabaseBackend",
            "QUEUES": ["default", "email", "slow"],
            "OPTIONS": {"ALLOWED_TASK_MODULES": ["canary_errors"]},
        }
    }
)
def test_allowed_task_modules_admit_an_error_class(canary):
    job = failed_job("canary_errors.Boom")

    (error,) = default_task_backend.get_result(str(job.pk)).errors

    assert error.exception_class.__name__ == "Boom" and canary.exists()


def test_a_non_exception_in_an_allowed_module_is_still_refused():
    (error,) = default_task_backend.get_result(str(failed_job("demo.tasks.add").pk)).errors
    with pytest.raises(ValueError, match="does not reference a valid exception"):
        _ = error.exception_class


@pytest.mark.parametrize(
    ("task_path", "reason"),
    [
        (
            "os.system",
            "The task path 'os.system' is outside every installed app and OPTIONS ALLOWED_TASK_MODULES, "
            "so it is not imported or run.",
        ),
        (
            "demo.tasks.not_a_task",
            "The task path 'demo.tasks.not_a_task' names a function, not a task; only functions "
            "decorated with @task can be run from the queue.",
        ),
    ],
)
def test_a_row_whose_task_cannot_be_loaded_is_a_clear_does_not_exist(task_path, reason):
    job = Job.objects.create(task_path=task_path)

    with pytest.raises(TaskResultNotLoadable) as raised:
        default_task_backend.get_result(str(job.pk))

    assert isinstance(raised.value, TaskResultDoesNotExist)
    assert str(raised.value) == (
        f"The job {job.pk} exists, but get_result() cannot return it without its task: {reason}"
    )


# -- the result as the worker makes it ----------------------------------------

JSON_VALUES = [
    [],
    {},
    [1, 2.5, None, True, "x", [], {}],
    {"a": [{"b": [1, {"c": None}]}], "d": "e"},
    [[[[]]]],
    ("a", ("b",)),  # not what JSON decodes to: the fallback
    {"k": (1, 2)},
]


@pytest.mark.parametrize("value", JSON_VALUES)
def test_the_json_copy_equals_djangos_normalisation_and_shares_no_container(value):
    from django_dbqueue.enqueue.results import _json_copy
    from django_dbqueue.tasks_api import normalize_json

    copied = _json_copy(value)
    assert copied == normalize_json(value)
    assert type(copied) is type(normalize_json(value))

    def containers(v):
        if isinstance(v, dict):
            return [v, *(c for item in v.values() for c in containers(item))]
        if isinstance(v, list | tuple):
            return [v, *(c for item in v for c in containers(item))]
        return []

    originals = {id(c) for c in containers(value)}
    assert not any(id(c) in originals for c in containers(copied))


def test_to_result_sets_what_task_results_own_init_would():
    """to_result() fills the TaskResult's fields itself: they must equal
    what its __init__ and __post_init__ make of the same row."""
    import dataclasses

    from django_dbqueue.enqueue.results import JobResult

    args, kwargs = [{"a": [1, {"b": None}]}, "x"], {"k": {"n": [1.5, True]}}
    job = Job.objects.create(task_path="demo.tasks.add", args=args, kwargs=kwargs, worker_ids=["w1", 7])
    job.refresh_from_db()
    made = default_task_backend.to_result(job)
    expected = JobResult(
        task=made.task,
        id=made.id,
        status=job.status,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.last_attempted_at,
        args=job.args,
        kwargs=job.kwargs,
        backend="default",
        errors=[],
        worker_ids=["w1", "7"],
    )
    names = {field.name for field in dataclasses.fields(expected)}
    for name in names:
        assert getattr(made, name) == getattr(expected, name), name

    def others(result):  # what is not a field (a field of the backport's may live on the class)
        return {name: value for name, value in vars(result).items() if name not in names}

    assert made == expected and others(made) == others(expected)
    assert made.args[0]["a"] is not job.args[0]["a"] and made.kwargs["k"] is not job.kwargs["k"]


def test_a_result_reads_in_one_short_line_in_the_shell():
    # A job with long arguments, errors and progress: the dataclass's repr
    # spelled each out (900 characters for a small job).
    job = Job.objects.get(pk=tasks.add.enqueue(10**18, "7" * 300).id)
    job.errors = [{"exception_class_path": "builtins.ValueError", "traceback": "x" * 500}] * 3
    job.progress, job.progress_at, job.status = 0.25, timezone.now(), "RUNNING"
    job.save()
    result = default_task_backend.get_result(str(job.pk))
    assert repr(result) == f"<JobResult {job.pk} demo.tasks.add RUNNING progress=25%>"
    assert repr(tasks.add.enqueue(1, 2)).endswith(" demo.tasks.add READY>")
