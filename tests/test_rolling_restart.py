"""A rolling deploy under steady load: every worker gets SIGTERM while new
ones start, and nothing is lost, duplicated or left RUNNING."""

import signal
import threading
import time
from collections import Counter

import pytest
from django.db import connection

from demo import tasks
from demo.models import Execution
from django_dbqueue.models import Job
from tests.conftest import needs_row_locks, once_per_run, wait_for

pytestmark = [
    needs_row_locks,
    once_per_run("test_processes.py runs the give-back at SIGTERM and producers beside workers"),
    pytest.mark.django_db(transaction=True),
]


def test_rolling_restart_under_load_loses_and_repeats_nothing(runqueue):
    keys: list[str] = []
    producing = threading.Event()
    producing.set()

    def produce() -> None:
        try:
            while producing.is_set():
                key = f"roll-{len(keys)}"
                tasks.record.enqueue(key)
                keys.append(key)
                time.sleep(0.005)
        finally:
            connection.close()

    producer = threading.Thread(target=produce)
    producer.start()
    generations = [
        runqueue("--processes", "2", "--batch", "10"),
        runqueue("--processes", "2", "--batch", "10"),
    ]
    restarted = []
    try:
        for _ in range(4):
            time.sleep(1.5)
            old = generations.pop(0)
            # As a service manager does it: the whole process group, while
            # a new generation is already starting beside it.
            generations.append(runqueue("--processes", "2", "--batch", "10"))
            # Signalled once its workers run: on a loaded machine a process
            # still starting Django has no handler yet, and SIGTERM kills it.
            wait_for(lambda old=old: old.output().count("started on queues") >= 2, timeout=30)
            old.signal_group(signal.SIGTERM)
            restarted.append(old)
        time.sleep(1.0)
    finally:
        producing.clear()
        producer.join(30)
    wait_for(lambda: not Job.objects.filter(status__in=["READY", "RUNNING"]).exists(), timeout=60)
    for proc in restarted:
        assert proc.wait(30) == 0, proc.output()[-2000:]
        assert "stopped after" in proc.output()
    for proc in generations:
        # The newest may still be starting Django on a loaded machine: no handler yet.
        wait_for(lambda proc=proc: proc.output().count("started on queues") >= 2, timeout=30)
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.output()[-2000:]

    assert len(keys) > 300, "the load was not steady"
    assert Job.objects.count() == len(keys)
    assert set(Job.objects.values_list("status", flat=True)) == {"SUCCESSFUL"}
    runs = Counter(Execution.objects.values_list("key", flat=True))
    assert set(runs) == set(keys)
    assert max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]
    assert not any("exited with code" in proc.output() for proc in restarted + generations)
