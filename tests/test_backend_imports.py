"""backend.py is the django.tasks contract: the rooms below it tell a queue
backend from another app's through routing.is_queue_backend(), and keep the
results in a field (issue 31). That only the package's entry points import
backend.py is one of test_layering.py's rules."""

from __future__ import annotations

from django_dbqueue import routing
from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.enqueue.results import ResultView
from django_dbqueue.tasks_api import ImmediateBackend


def test_is_queue_backend_tells_ours_from_others():
    ours = DatabaseBackend("default", {"QUEUES": [], "OPTIONS": {}})
    assert routing.is_queue_backend(ours)
    assert not routing.is_queue_backend(ImmediateBackend("other", {"QUEUES": [], "OPTIONS": {}}))
    assert not routing.is_queue_backend(None)
    assert not routing.is_queue_backend(DatabaseBackend)  # the class is not a backend

    class Subclass(DatabaseBackend):
        pass

    assert routing.is_queue_backend(Subclass("sub", {"QUEUES": [], "OPTIONS": {}}))


def test_results_are_a_field_not_a_base():
    assert not issubclass(DatabaseBackend, ResultView)
    backend = DatabaseBackend("default", {"QUEUES": [], "OPTIONS": {}})
    assert isinstance(backend.results, ResultView)
    assert backend.results.backend is backend
