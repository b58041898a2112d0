"""Workers connected straight to different nodes of a Galera cluster
(multi-writer). A node sees only its own row locks, so workers on two nodes
lock the same head of the queue; one of them loses at commit (certification
failure) or is aborted when the other's write set arrives (a brute-force
abort). MariaDB reports both as deadlock 1213, and django-dbqueue runs the
transaction again: never an outage, never a failed attempt, every job once.

These run in ``./dev test``'s cluster run, on the cluster ``./dev cluster
start`` runs (DBQUEUE_CLUSTER=1), and are skipped elsewhere.
"""

import os
import re
import signal

import pytest

from benchmarks.chaos import DATABASE, environment, prepare
from tests.conftest import Runqueue, wait_for
from tests.galera import GaleraCluster, Node, in_cluster_run

pytestmark = pytest.mark.skipif(
    not in_cluster_run(), reason="runs on the Galera cluster, in ./dev test's cluster run (DBQUEUE_CLUSTER=1)"
)

JOBS = int(os.environ.get("DBQUEUE_CLUSTER_JOBS", "4000"))
CONFLICTS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")
RETRIED = "Retrying after a lock conflict or certification failure"
GROUP_LOST = "ran in a transaction that was rolled back"


@pytest.fixture(scope="module")
def cluster():
    cluster = GaleraCluster()
    cluster.heal()
    yield cluster
    cluster.heal()


def on(node: Node, env: dict[str, str]) -> dict[str, str]:
    """The environment of a worker connected straight to ``node``, not through the proxy."""
    return {**env, "DBQUEUE_DB_PORT": str(node.port)}


def test_workers_on_every_node_run_each_job_once_retrying_their_conflicts(cluster, tmp_path):
    env = environment(cluster, lease=10)
    prepare(cluster, JOBS, env)
    before = {name: cluster.counter(name) for name in CONFLICTS}
    # Small batches: many claims, so workers on different nodes often want the same rows.
    args = ["--burst", "--processes", "2", "--batch", "5", "-v", "3"]
    runs = [Runqueue(args, tmp_path / f"{node.name}.log", on(node, env)) for node in cluster.nodes]
    try:
        codes = [run.wait(300) for run in runs]
    finally:
        for run in runs:
            run.stop()
    logs = [run.output() for run in runs]
    conflicts = {name: cluster.counter(name) - before[name] for name in CONFLICTS}
    retried = sum(log.count(RETRIED) for log in logs)

    def one(sql: str) -> int:
        return cluster.execute(sql, database=DATABASE)[0][0]

    span = one("SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) FROM django_dbqueue_job")
    done = [int(re.search(r"Done: processed (\d+) jobs", log)[1]) for log in logs]
    print(f"multi-writer: {JOBS / (span / 1e6):.0f} jobs/s, {conflicts}, {retried} retried, by node {done}")

    assert codes == [0, 0, 0]
    assert all(done) and sum(done) == JOBS, "workers on every node took part"
    # Every job once, on its first attempt, with no error recorded.
    clean = "status = 'SUCCESSFUL' AND attempts = 1 AND JSON_LENGTH(errors) = 0"
    assert one(f"SELECT COUNT(*) FROM django_dbqueue_job WHERE {clean}") == JOBS
    assert one("SELECT COUNT(*) FROM demo_execution") == JOBS
    assert one("SELECT COUNT(DISTINCT `key`) FROM demo_execution") == JOBS
    # The conflicts happened, and were retried: not an outage, not a crash.
    assert sum(conflicts.values()) > 0 and retried > 0
    for log in logs:
        assert "lost the database connection" not in log
        assert "Traceback" not in log and "exited with code" not in log, log[-3000:]


def test_an_atomic_task_aborted_by_another_nodes_write_runs_again_without_losing_an_attempt(
    cluster, tmp_path
):
    """The worker on one node is inside an atomic task's transaction when a
    write from another node reaches a row it holds: Galera aborts the
    worker's transaction, the whole run rolls back and runs again, its
    attempt unspent."""
    env = environment(cluster, lease=10)
    prepare(cluster, 0, env)
    first, second = cluster.nodes[0], cluster.nodes[1]
    cluster.execute(
        "INSERT INTO django_dbqueue_job (task_path, queue_name, args) "
        "VALUES ('demo.tasks.record_then_sleep', 'slow', '[\"bf\", 2]')",
        database=DATABASE,
    )
    aborts = int(first.status("wsrep_local_bf_aborts")["wsrep_local_bf_aborts"])
    worker = Runqueue(["--queue", "slow", "-v", "3"], tmp_path / "runqueue.log", on(first, env))
    try:
        row = wait_for(lambda: uncommitted_execution(first, "bf"), timeout=60)
        # The row's primary key, written on the other node: its write set
        # conflicts with the row the task inserted and has not committed.
        second.execute(
            "INSERT INTO demo_execution (id, `key`, pid, at) VALUES (%s, 'intruder', 0, UTC_TIMESTAMP())",
            [row],
            database=DATABASE,
        )
        wait_for(lambda: job_row(cluster)[0] == "SUCCESSFUL", timeout=60)
    finally:
        worker.signal_group(signal.SIGTERM)
        code = worker.wait(30)
        worker.stop()
    log = worker.output()

    status, attempts, errors = job_row(cluster)
    assert (status, attempts, errors) == ("SUCCESSFUL", 1, 0), "no failed attempt was counted"
    keys = cluster.execute("SELECT `key` FROM demo_execution ORDER BY id", database=DATABASE)
    assert sorted(key for (key,) in keys) == ["bf", "intruder"], "the aborted run left nothing"
    assert int(first.status("wsrep_local_bf_aborts")["wsrep_local_bf_aborts"]) > aborts
    # Run again in place when the abort met the body (a job run alone), or
    # given back and claimed again when it met its atomic group's commit
    # (worker/process/groups.py): either way once, its attempt unspent.
    assert RETRIED in log or GROUP_LOST in log
    assert code == 0 and "Traceback" not in log and "lost the database connection" not in log


def uncommitted_execution(node: Node, key: str) -> int | None:
    """The id of the row a running task inserted but has not committed (a dirty read)."""
    conn = node.connect(DATABASE)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
            cursor.execute("SELECT id FROM demo_execution WHERE `key` = %s", [key])
            row = cursor.fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def job_row(cluster: GaleraCluster) -> tuple[str, int, int]:
    return cluster.execute(
        "SELECT status, attempts, JSON_LENGTH(errors) FROM django_dbqueue_job", database=DATABASE
    )[0]
