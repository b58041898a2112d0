"""django_dbqueue.task: the per-task options on every Django, and under
Django's own test backends (ImmediateBackend, DummyBackend)."""

import importlib
import sys

import django
import pytest
from django.test import override_settings

from demo import tasks
from django_dbqueue import task
from django_dbqueue.backend import DatabaseTask
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import API_MODULE, BACKPORT, InvalidTask
from django_dbqueue.tasks_api import task as django_task

IMMEDIATE = {"default": {"BACKEND": f"{API_MODULE}.backends.immediate.ImmediateBackend"}}
DUMMY = {"default": {"BACKEND": f"{API_MODULE}.backends.dummy.DummyBackend"}}
HERE_ALLOWED = {
    "default": {
        "BACKEND": "django_dbqueue.backend.DatabaseBackend",
        "QUEUES": ["default", "email"],
        "OPTIONS": {"ALLOWED_TASK_MODULES": [__name__]},
    }
}


def greet(name: str) -> str:
    return f"hello {name}"


def import_afresh(name: str):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.mark.parametrize("setting", [IMMEDIATE, DUMMY], ids=["immediate", "dummy"])
def test_a_task_module_with_queue_options_imports_under_djangos_test_backends(setting):
    with override_settings(TASKS=setting):
        greeting = import_afresh("tests.tasks_for_test_backends").greet
        assert isinstance(greeting, DatabaseTask)
        assert (greeting.max_attempts, greeting.timeout) == (5, 30)
        result = greeting.enqueue("ada")
    if setting is IMMEDIATE:
        assert (result.status, result.return_value) == ("SUCCESSFUL", "hello ada")
    else:
        assert result.status == "READY"


def test_djangos_own_task_refuses_the_options_under_its_test_backends():
    # The reason for django_dbqueue.task: Django's builds its backend's plain Task.
    with override_settings(TASKS=IMMEDIATE), pytest.raises(TypeError):
        django_task(max_attempts=5)(greet)


def test_the_options_are_checked_under_the_test_backends_too():
    with override_settings(TASKS=IMMEDIATE):
        with pytest.raises(InvalidTask, match="max_attempts must be a whole number from 1 to .*, not 0"):
            task(max_attempts=0)(greet)
        with pytest.raises(TypeError, match="'retries', which django_dbqueue does not know"):
            task(retries=3)(greet)


def test_run_after_cannot_be_a_decorator_argument():
    with pytest.raises(TypeError, match=r"Use task.using\(run_after=...\)"):
        task(run_after=None)


@pytest.mark.django_db
def test_the_options_reach_the_job_with_the_database_backend():
    assert (tasks.flaky.max_attempts, tasks.hang.timeout) == (4, 1)
    job = Job.objects.get(pk=int(tasks.flaky.enqueue("k", 0).id))
    assert job.max_attempts == 4


@pytest.mark.django_db
@override_settings(TASKS=HERE_ALLOWED)
def test_a_bare_decorator_takes_the_backends_defaults():
    job = Job.objects.get(pk=int(task(greet).enqueue("ada").id))
    assert (job.queue_name, job.priority, job.max_attempts) == ("default", 0, 3)
    job = Job.objects.get(pk=int(task(queue_name="email", priority=3)(greet).enqueue("ada").id))
    assert (job.queue_name, job.priority, job.max_attempts) == ("email", 3, 3)


@override_settings(TASKS=HERE_ALLOWED)
def test_djangos_own_task_passes_the_options_where_this_django_does():
    # Django 6.1 and the django-tasks backport pass @task's extra keyword
    # arguments to the backend's task_class; Django 6.0 refuses them.
    if django.VERSION[:2] == (6, 0):
        with pytest.raises(TypeError):
            django_task(max_attempts=5)(greet)
    else:
        assert django_task(max_attempts=5)(greet).max_attempts == 5
    assert BACKPORT == (django.VERSION < (6, 0))
