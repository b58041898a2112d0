"""The race tests' threads (tests/threads.py) report what went wrong in them."""

import threading
import time

import pytest

from tests.threads import alongside, elsewhere, holding, together


def test_together_returns_each_threads_result_in_order_and_starts_them_at_once():
    started: list[float] = []

    def work(index: int) -> int:
        started.append(time.monotonic())
        return index * index

    assert together(work, 5) == [0, 1, 4, 9, 16]
    assert max(started) - min(started) < 1.0


def test_an_error_in_a_thread_fails_the_test_with_that_error_not_a_broken_barrier():
    barrier = threading.Barrier(3, timeout=5)

    def work(index: int) -> None:
        if index == 1:
            barrier.abort()
            raise ValueError("thread 1 failed")
        barrier.wait()

    with pytest.raises(ValueError, match="thread 1 failed"):
        together(work, 3)


def test_elsewhere_fails_when_the_work_outlasts_its_timeout():
    release = threading.Event()
    with pytest.raises(AssertionError, match="still running after 0.2s"):
        elsewhere(lambda: release.wait(5), timeout=0.2)
    release.set()


@pytest.mark.django_db(transaction=True)
def test_holding_and_alongside_raise_what_their_thread_raised():
    def fails() -> None:
        raise LookupError("no such row")

    with pytest.raises(LookupError), holding(fails):
        pass
    with pytest.raises(LookupError), alongside(fails):
        pass
