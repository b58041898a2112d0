"""Arguments that do not fit the task function are refused at enqueue (and
in bulk_enqueue), not found by a worker later."""

import pytest

from demo import tasks
from django_dbqueue import bulk_enqueue
from django_dbqueue.exceptions import InvalidTaskArguments
from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("args", "kwargs", "reason"),
    [
        ((1, 2, 3), {}, "too many positional arguments"),
        ((1,), {}, "missing a required argument: 'b'"),
        ((), {}, "missing a required argument: 'a'"),
        ((1, 2), {"c": 3}, "got an unexpected keyword argument 'c'"),
        ((1,), {"a": 2}, "multiple values for argument 'a'"),
    ],
)
def test_arguments_that_do_not_fit_are_refused_and_nothing_is_written(args, kwargs, reason):
    with pytest.raises(InvalidTaskArguments) as raised:
        tasks.add.enqueue(*args, **kwargs)
    assert str(raised.value) == (
        f"The arguments do not fit the task demo.tasks.add(a: int, b: int): {reason}."
    )
    assert not Job.objects.exists()


def test_arguments_that_fit_are_accepted_however_they_are_passed():
    tasks.add.enqueue(1, 2)
    tasks.add.enqueue(1, b=2)
    tasks.add.enqueue(a=1, b=2)
    tasks.sleep.enqueue(0.1)  # key has a default
    tasks.sleep.enqueue(0.1, key="k")
    assert Job.objects.count() == 5


def test_a_context_task_is_called_without_its_context():
    tasks.which_attempt.enqueue()
    with pytest.raises(InvalidTaskArguments) as raised:
        tasks.which_attempt.enqueue(1)
    assert str(raised.value) == (
        "The arguments do not fit the task demo.tasks.which_attempt() (its first parameter, "
        "context, is passed by the worker): too many positional arguments."
    )
    with pytest.raises(InvalidTaskArguments, match="unexpected keyword argument 'context'"):
        tasks.which_attempt.enqueue(context=None)
    assert Job.objects.count() == 1


def test_async_tasks_are_checked_too():
    with pytest.raises(InvalidTaskArguments, match="async_add\\(a: int, b: int\\): too many"):
        tasks.async_add.enqueue(1, 2, 3)


def test_bulk_enqueue_checks_every_call_before_writing_any():
    with pytest.raises(InvalidTaskArguments) as raised:
        bulk_enqueue(tasks.add, [((1, 2), {}), ((1, 2), {}), ((1,), {})])
    assert str(raised.value) == (
        "The arguments do not fit the task demo.tasks.add(a: int, b: int): missing a required argument: 'b'."
    )
    assert not Job.objects.exists()
    assert len(bulk_enqueue(tasks.add, [((1, 2), {}), ((3,), {"b": 4})])) == 2


def test_a_refused_call_is_still_refused_after_a_good_one():
    # The signature is cached per task function: the cache must not remember
    # a call, only the signature.
    tasks.add.enqueue(1, 2)
    with pytest.raises(InvalidTaskArguments):
        tasks.add.enqueue(1, 2, 3)
    assert Job.objects.count() == 1
