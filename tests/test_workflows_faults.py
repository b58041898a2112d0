"""Workflows through a crash of the database itself: a private server
(MySQL or MariaDB, tests/conftest.py's sandbox_server) killed (SIGKILL,
InnoDB recovery at start) while batches and chains drain under workers that
are SIGKILLed too. Each callback job is inserted once, each chain step
released once, with its parent's result."""

import os
import random
import signal
import subprocess
import sys
from collections import Counter

from benchmarks.chaos import DATABASE, environment, prepare
from tests.conftest import MANAGE, ROOT, Runqueue, needs_sandbox, wait_for

pytestmark = needs_sandbox

BATCHES, MEMBERS, CHAINS, STEPS = 8, 60, 5, 6

PRODUCE = f"""
from django_dbqueue import batch, bulk_enqueue, call, chain
from demo import workflow_tasks as wt
for number in range({BATCHES}):
    with batch(on_success=call(wt.callback, "ok"), on_finish=call(wt.callback, "fin")):
        bulk_enqueue(wt.member, [((f"{{number}}-{{i}}", 0.02), {{}}) for i in range({MEMBERS})])
for _ in range({CHAINS}):
    chain(call(wt.add_one, 0), *[call(wt.add_one)] * {STEPS - 1}, pass_result=True)
"""


def counts(server) -> dict[str, int]:
    return dict(
        server.execute("SELECT status, COUNT(*) FROM django_dbqueue_job GROUP BY status", database=DATABASE)
    )


def kill_a_worker(worker: Runqueue) -> None:
    children = worker.children()
    if children:
        os.kill(random.choice(children), signal.SIGKILL)


def test_callbacks_and_chain_steps_once_across_a_database_crash_and_killed_workers(sandbox_server, tmp_path):
    server = sandbox_server
    env = environment(server, lease=5)
    prepare(server, 0, env)
    produced = subprocess.run(
        [sys.executable, str(MANAGE), "shell", "-c", PRODUCE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert produced.returncode == 0, produced.stderr
    total = BATCHES * MEMBERS + CHAINS * STEPS
    worker = Runqueue(["--processes", "2", "--batch", "10"], tmp_path / "runqueue.log", env)
    try:
        wait_for(lambda: counts(server).get("SUCCESSFUL", 0) >= 60, timeout=120)
        kill_a_worker(worker)
        server.restart(kill=True, down_for=2)
        wait_for(lambda: counts(server).get("SUCCESSFUL", 0) >= 200, timeout=120, interval=0.5)
        kill_a_worker(worker)
        finished = BATCHES * 2 + total
        wait_for(lambda: counts(server) == {"SUCCESSFUL": finished}, timeout=240, interval=0.5)
    finally:
        worker.signal(signal.SIGTERM)
        worker.wait(60)
        worker.stop()
    callbacks = server.execute(
        "SELECT JSON_VALUE(kwargs, '$.batch_id'), JSON_VALUE(args, '$[0]') FROM django_dbqueue_job "
        "WHERE task_path = 'demo.workflow_tasks.callback'",
        database=DATABASE,
    )
    per_batch = Counter(batch_id for batch_id, _ in callbacks)
    assert len(per_batch) == BATCHES and set(per_batch.values()) == {2}, per_batch
    assert Counter(name for _, name in callbacks) == {"ok": BATCHES, "fin": BATCHES}
    batches = dict(
        server.execute("SELECT status, COUNT(*) FROM django_dbqueue_batch GROUP BY status", database=DATABASE)
    )
    assert batches == {"SUCCEEDED": BATCHES}
    steps = server.execute(
        "SELECT return_value, COUNT(*) FROM django_dbqueue_job "
        "WHERE task_path = 'demo.workflow_tasks.add_one' GROUP BY return_value",
        database=DATABASE,
    )
    assert {int(value): n for value, n in steps} == {value: CHAINS for value in range(1, STEPS + 1)}
