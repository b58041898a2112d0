"""A worker's stop signals reach its main thread, however many threads the
worker runs: no database, a forked process and real signals."""

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django_dbqueue.worker.process.signals import ForcedStop, StopSignals
from django_dbqueue.worker.threads import main_thread_signals

ROUNDS = 20
ROOT = Path(__file__).resolve().parent.parent


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


STORM = """
import os, signal, sys, time
from django_dbqueue.worker.threads import Wake

# A Wake from the start: the first signal may come while the loop makes the next one.
current = Wake()
signal.signal(signal.SIGALRM, lambda signum, frame: current.set())
signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
woken = rounds = 0
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    current = Wake()
    woken += current.wait(0.0001)
    rounds += 1
# A signal already pending runs its handler later, at shutdown perhaps:
# stop the timer, ignore what is left of it, and leave without a shutdown.
signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
print(rounds, woken, flush=True)
os._exit(0)
"""


def test_the_loops_wake_up_can_be_set_by_a_signal_handler_while_the_main_thread_waits_on_it():
    # A worker's stop handler wakes its idle loop. With a threading.Event, a
    # signal arriving as the main thread's wait() woke (its lock held for an
    # instant) made the handler wait for that lock forever: a SIGTERMed worker
    # never stopped. A signal every 0.2 ms against waits of 0.1 ms: an Event
    # hangs within a second or two here; Wake must run every round.
    done = subprocess.run(
        [sys.executable, "-c", STORM], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rounds, woken = map(int, done.stdout.split())
    assert rounds > 1000 and 0 < woken <= rounds, (rounds, woken)
