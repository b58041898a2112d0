"""A worker's stop signals reach its main thread, however many threads the
worker runs: no database, a forked process and real signals."""

import os
import select
import signal
import threading
import time

from django_dbqueue.worker.process.signals import ForcedStop, StopSignals
from django_dbqueue.worker.threads import main_thread_signals

ROUNDS = 20


def sleeper(report: int) -> None:
    """A worker's main thread asleep in a task, beside helper threads that
    wake often (as the hold watch and the soft-stop watch do)."""
    flag = type("Flag", (), {"value": 0})()
    for interval in (0.01, 0.02):
        done = threading.Event()

        def helper(done: threading.Event = done, interval: float = interval) -> None:
            main_thread_signals()
            while True:
                done.wait(interval)

        threading.Thread(target=helper, daemon=True).start()
    while True:
        stops = StopSignals("test", lambda: None)
        stops.install()
        stops.watch_parent(flag)
        os.write(report, b"r")
        try:
            time.sleep(30)
            os.write(report, b"T")  # never interrupted
        except ForcedStop:
            time.sleep(0.05)  # the other signal's handler runs, and must not raise again
            os.write(report, b"f")
        stops.restore()


def test_a_second_signal_and_sigquit_arriving_together_stop_the_main_thread_at_once():
    # The kernel gives a signal sent to a process to any thread that does not
    # block it; two at once (the group's second SIGTERM and the supervisor's
    # SIGQUIT) went to a helper thread, and the main thread slept on.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.close(read)
            sleeper(write)
        finally:
            os._exit(0)
    os.close(write)
    try:
        for round in range(ROUNDS):
            assert os.read(read, 1) == b"r"
            time.sleep(0.02)
            os.kill(pid, signal.SIGTERM)  # the first: a graceful stop
            time.sleep(0.02)
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGQUIT)
            answered, _, _ = select.select([read], [], [], 2)
            assert answered, f"round {round}: the main thread slept through both signals"
            assert os.read(read, 1) == b"f"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
