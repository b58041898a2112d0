"""The ceiling: the batch-claim recipe in plain SQL over MySQLdb, with none
of django-dbqueue in the way. Every other figure is printed as a ratio to it.

The recipe: read up to ``batch`` candidate ids with a plain SELECT, lock them
by primary key with FOR UPDATE SKIP LOCKED, mark them claimed, commit, "run"
them (no-op), delete them, commit.
"""

import multiprocessing
import time

import MySQLdb
from common import JOB_TABLE, raw_connect

TABLE = "ceiling_job"
BATCH = 100


def setup(n: int) -> None:
    conn = raw_connect()
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
    cur.execute(
        f"""CREATE TABLE {TABLE} (
            id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            payload VARCHAR(64) NOT NULL,
            status VARCHAR(10) NOT NULL,
            owner VARCHAR(128) NULL,
            claimed_at DATETIME(6) NULL,
            INDEX (status)
        )"""
    )
    rows = [("noop", "READY")] * 1000
    for start in range(0, n, 1000):
        cur.executemany(f"INSERT INTO {TABLE} (payload, status) VALUES (%s, %s)", rows[: n - start])
    conn.commit()
    conn.close()


def _consumer(name: str, go, results) -> None:
    conn = raw_connect()
    cur = conn.cursor()
    conn.commit()
    go.wait()
    started = time.time()
    claimed = 0
    while True:
        try:
            ran = _claim_run_delete(conn, cur, name)
        except MySQLdb.OperationalError as exc:
            # InnoDB picks deadlock victims among claimers too; start over.
            if exc.args[0] not in (1213, 1205):
                raise
            conn.rollback()
            continue
        if ran is None:
            break
        claimed += ran
    results.put((started, time.time(), claimed))
    conn.close()


def _claim_run_delete(conn, cur, name: str) -> int | None:
    cur.execute(f"SELECT id FROM {TABLE} WHERE status = 'READY' LIMIT %s", (BATCH,))
    candidates = [row[0] for row in cur.fetchall()]
    if not candidates:
        conn.commit()
        return None
    marks = ",".join(["%s"] * len(candidates))
    cur.execute(
        f"SELECT id, payload FROM {TABLE} WHERE status = 'READY' AND id IN ({marks}) FOR UPDATE SKIP LOCKED",
        candidates,
    )
    ids = [row[0] for row in cur.fetchall()]
    if not ids:
        conn.commit()
        return 0
    marks = ",".join(["%s"] * len(ids))
    cur.execute(
        f"UPDATE {TABLE} SET status = 'RUNNING', owner = %s, claimed_at = NOW(6) WHERE id IN ({marks})",
        [name, *ids],
    )
    conn.commit()
    # the jobs run here: no-ops
    cur.execute(f"DELETE FROM {TABLE} WHERE id IN ({marks})", ids)
    conn.commit()
    return len(ids)


def drain(n: int, processes: int) -> dict:
    setup(n)
    ctx = multiprocessing.get_context("fork")
    go, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_consumer, args=(f"c{i}", go, results)) for i in range(processes)]
    for proc in procs:
        proc.start()
    time.sleep(0.3)  # let every consumer connect before the clock starts
    go.set()
    outcomes = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    start = min(o[0] for o in outcomes)
    end = max(o[1] for o in outcomes)
    done = sum(o[2] for o in outcomes)
    assert done == n, f"the ceiling ran {done} of {n} jobs"
    return {"jobs": n, "processes": processes, "seconds": end - start, "jobs_per_s": n / (end - start)}


def single_insert(n: int) -> dict:
    """One autocommitted INSERT per job into the real job table, with every
    column the Django enqueue writes: the floor under one-by-one enqueue."""
    conn = raw_connect()
    conn.autocommit(True)
    cur = conn.cursor()
    sql = (
        f"INSERT INTO {JOB_TABLE} (task_path, queue_name, priority, args, kwargs, status, run_after, "
        "attempts, max_attempts, suspect, owner, lease_expires_at, enqueued_at, started_at, "
        "last_attempted_at, finished_at, return_value, errors, worker_ids) VALUES "
        "(%s, %s, %s, %s, %s, %s, NOW(6), 0, 3, 0, NULL, NULL, NOW(6), NULL, NULL, NULL, NULL, '[]', '[]')"
    )
    params = ("demo.tasks.noop", "default", 0, "[]", "{}", "READY")
    started = time.perf_counter()
    for _ in range(n):
        cur.execute(sql, params)
    seconds = time.perf_counter() - started
    conn.close()
    return {"jobs": n, "seconds": seconds, "jobs_per_s": n / seconds}


def multi_row_insert(n: int, chunk: int = 1000) -> dict:
    """The rows ``bulk_enqueue()`` writes for ``n`` no-op calls (the same
    columns), through MySQLdb's ``executemany``, which sends them as
    multi-row INSERTs of up to 64 kB: the floor under bulk enqueue. Like
    it, one transaction per ``chunk`` rows. Every value is a parameter:
    executemany() sends one INSERT per row for a VALUES list with a literal."""
    from datetime import UTC, datetime

    conn = raw_connect()
    cur = conn.cursor()
    sql = (
        f"INSERT INTO {JOB_TABLE} (task_path, queue_name, priority, max_attempts, args, kwargs, "
        "run_after, enqueued_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
    )
    started = time.perf_counter()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    rows = [("demo.tasks.noop", "default", 0, 3, "[]", "{}", now, now)] * n
    for start in range(0, n, chunk):
        cur.executemany(sql, rows[start : start + chunk])
        conn.commit()
    seconds = time.perf_counter() - started
    conn.close()
    return {"jobs": n, "chunk": chunk, "seconds": seconds, "jobs_per_s": n / seconds}


def cleanup() -> None:
    conn = raw_connect()
    conn.cursor().execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.close()
