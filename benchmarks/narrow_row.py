"""What the server spends on a job's claim and outcome, in plain SQL, for
seven designs of the job table (issue 33: move less of the wide row). Each
design drains the same N no-op jobs through one MySQLdb client with the
statements that design would send, batches of 100, and is timed by the
server process's own CPU seconds (``/proc``, as server_cpu.py), beside the
ceiling's drain in the same round:

- ``today``: the job table as migrated up to 0026 (with its lease index)
  and the queue's statements (docs/statements.md): read candidates, lock
  them, mark them RUNNING with a lease; one UPDATE of the outcomes. The
  claim moves 5 secondary-index entries, the outcome 6 (on MySQL, whose
  key and batch indexes are partial since 0020, 3 and 4).
- ``partial``: ``today`` with the concurrency-key and batch indexes made
  partial: on a virtual column that is NULL for a job without that key, so
  a status change moves nothing there (3 entries at claim, 4 at outcome).
  On MySQL this is what migration 0020 built, so it equals ``today``.
- ``nolease``: ``today`` without the ``(status, lease_expires_at)`` index
  (below); on MariaDB, which keeps plain key indexes, the step it can take.
- ``unleased``: ``partial`` without the ``(status, lease_expires_at)``
  index: lease recovery reads the RUNNING range of ``(status, id)`` and
  checks each row's lease, so neither the claim's lease nor the heartbeat's
  moves an index entry (2 at claim, 3 at outcome).
- ``due``: ``unleased`` with the claim index on a virtual column that is
  the queue's name while a job is READY and NULL after: the claim moves its
  entry once, the outcome leaves it (2 at claim, 2 at outcome).
- ``middle``: due jobs in a narrow ``ready`` table (claimed with SKIP
  LOCKED, deleted at claim), running ones in a narrow ``claimed`` table
  (job, worker), the lease per worker (no lease column written); the wide
  row's ``status`` still written at claim, so it reads RUNNING, with no
  index of the wide row moving but ``(status, id)`` (and ``finished_at``
  at the outcome).
- ``once``: as ``middle``, but the wide row is written once, at the
  outcome: RUNNING is a row of ``claimed``, not of the job table.

    DBQUEUE_BENCH_DB=proto .venv/bin/python benchmarks/narrow_row.py [N] [ROUNDS] [--only=a,b] [--workers=W]

With ``--workers=W`` (1 by default) W client processes drain each design
together, and the ceiling with as many: each round gives the design's jobs
per second over the ceiling's, the server's CPU a job for all of them.

``DBQUEUE_DATABASE=mysql`` for the MySQL server of ``./dev mysql``. The server
must run on this host and serve nothing else meanwhile.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from server_cpu import cpu_seconds, server_pid  # noqa: E402

BATCH = 100
WIDE = "proto_job"
OUTCOME = (
    "status = 'SUCCESSFUL', attempts = attempts + 1, started_at = NOW(6), last_attempted_at = NOW(6), "
    "finished_at = NOW(6), worker_ids = '[\"w\"]', owner = NULL, unique_key = NULL, "
    "cancel_requested_at = NULL, suspect = 0, return_value = 'null'"
)


def marks(ids: list[int]) -> str:
    return ",".join(["%s"] * len(ids))


class Today:
    """The job table and the statements the queue sends now."""

    claim_rows = f"SELECT id FROM {WIDE} WHERE status = 'READY' AND run_after <= NOW(6) AND queue_name = 'default' AND concurrency_key IS NULL AND rate_key IS NULL AND fairness_key IS NULL ORDER BY priority DESC, run_after, id LIMIT {BATCH}"  # noqa: E501

    def create(self, cur) -> None:
        cur.execute(f"CREATE TABLE {WIDE} LIKE django_dbqueue_job")
        # Today is the table before migration 0027 dropped the lease index.
        cur.execute(f"SHOW INDEX FROM {WIDE} WHERE Key_name = 'dbqueue_job_lease'")
        if not cur.fetchall():
            cur.execute(f"ALTER TABLE {WIDE} ADD INDEX dbqueue_job_lease (status, lease_expires_at)")

    def fill(self, cur, n: int) -> None:
        rows = [("demo.tasks.noop",)] * 1000
        for start in range(0, n, 1000):
            cur.executemany(f"INSERT INTO {WIDE} (task_path) VALUES (%s)", rows[: n - start])

    def claim(self, conn, cur, worker: str) -> list[int] | None:
        cur.execute(self.claim_rows)
        candidates = [row[0] for row in cur.fetchall()]
        if not candidates:
            conn.commit()
            return None
        cur.execute(
            f"SELECT * FROM {WIDE} WHERE run_after <= NOW(6) AND status = 'READY' "
            f"AND id IN ({marks(candidates)}) FOR UPDATE SKIP LOCKED",
            candidates,
        )
        ids = [row[0] for row in cur.fetchall()]
        if ids:
            cur.execute(
                f"UPDATE {WIDE} SET lease_expires_at = NOW(6) + INTERVAL 60 SECOND, claimed_at = NOW(6), "
                f"status = 'RUNNING', owner = %s WHERE id IN ({marks(ids)})",
                [worker, *ids],
            )
        conn.commit()
        return ids

    def finish(self, conn, cur, worker: str, ids: list[int]) -> None:
        cur.execute(
            f"UPDATE {WIDE} SET {OUTCOME}, lease_expires_at = NULL WHERE id IN ({marks(ids)}) "
            "AND owner = %s AND status = 'RUNNING' AND has_dependants = 0",
            [*ids, worker],
        )
        conn.commit()


class Partial(Today):
    """The key and batch indexes on virtual columns, NULL for a job without the key."""

    def create(self, cur) -> None:
        super().create(cur)
        cur.execute(f"SHOW COLUMNS FROM {WIDE} LIKE 'keyed_status'")
        if cur.fetchall():  # MySQL: migration 0020 made them so
            return
        cur.execute(
            f"ALTER TABLE {WIDE} DROP INDEX dbqueue_job_keyed_status, DROP INDEX dbqueue_job_batched_status"
        )
        cur.execute(
            f"ALTER TABLE {WIDE} "
            "ADD COLUMN keyed_status VARCHAR(10) AS (IF(concurrency_key IS NULL, NULL, status)) VIRTUAL, "
            "ADD COLUMN batched_status VARCHAR(10) AS (IF(batch_id IS NULL, NULL, status)) VIRTUAL, "
            "ADD INDEX proto_key_status (concurrency_key, keyed_status), "
            "ADD INDEX proto_batch_status (batch_id, batched_status)"
        )


class NoLease(Today):
    """Today's table without the lease index."""

    def create(self, cur) -> None:
        super().create(cur)
        cur.execute(f"ALTER TABLE {WIDE} DROP INDEX dbqueue_job_lease")


class Unleased(Partial):
    """No lease index: recovery reads the RUNNING range of (status, id)."""

    def create(self, cur) -> None:
        super().create(cur)
        cur.execute(f"ALTER TABLE {WIDE} DROP INDEX dbqueue_job_lease")


class Due(Unleased):
    """The claim index only on READY jobs: a virtual column NULL once claimed."""

    # FORCE INDEX: MySQL 9.7 otherwise reads the index in ORDER BY order
    # from its start, through every claimed job's NULL entry (its LIMIT
    # heuristic), 2.3x today's server CPU.
    claim_rows = (
        Today.claim_rows.replace("status = 'READY' AND run_after", "run_after")
        .replace("queue_name = 'default'", "due_queue = 'default'")
        .replace(f"FROM {WIDE}", f"FROM {WIDE} FORCE INDEX (proto_due)")
    )

    def create(self, cur) -> None:
        super().create(cur)
        cur.execute(
            f"ALTER TABLE {WIDE} DROP INDEX dbqueue_job_claim_keys, "
            "ADD COLUMN due_queue VARCHAR(100) AS (IF(status = 'READY', queue_name, NULL)) VIRTUAL"
        )
        cur.execute(
            f"ALTER TABLE {WIDE} ADD INDEX proto_due (due_queue, concurrency_key, rate_key, fairness_key, "
            "priority DESC, run_after)"
        )


class Middle(Partial):
    """Narrow ready and claimed tables; the wide row's status still written at claim."""

    def create(self, cur) -> None:
        super().create(cur)
        # The claim reads the ready table, the lease is the worker's: neither index is written.
        cur.execute(f"ALTER TABLE {WIDE} DROP INDEX dbqueue_job_claim_keys, DROP INDEX dbqueue_job_lease")
        cur.execute(
            "CREATE TABLE proto_ready (job_id BIGINT NOT NULL PRIMARY KEY, queue_name VARCHAR(64) NOT NULL, "
            "priority SMALLINT NOT NULL, run_after DATETIME(6) NOT NULL, "
            "INDEX proto_ready_claim (queue_name, priority DESC, run_after, job_id))"
        )
        cur.execute(
            "CREATE TABLE proto_claimed (job_id BIGINT NOT NULL PRIMARY KEY, worker VARCHAR(128) NOT NULL, "
            "INDEX proto_claimed_worker (worker))"
        )

    def fill(self, cur, n: int) -> None:
        super().fill(cur, n)
        cur.execute(f"INSERT INTO proto_ready SELECT id, queue_name, priority, run_after FROM {WIDE}")

    def take(self, conn, cur, worker: str) -> list[int] | None:
        cur.execute(
            "SELECT job_id FROM proto_ready WHERE queue_name = 'default' AND run_after <= NOW(6) "
            f"ORDER BY priority DESC, run_after, job_id LIMIT {BATCH} FOR UPDATE SKIP LOCKED"
        )
        ids = [row[0] for row in cur.fetchall()]
        if not ids:
            conn.commit()
            return None
        cur.execute(f"DELETE FROM proto_ready WHERE job_id IN ({marks(ids)})", ids)
        claimed = [(job, worker) for job in ids]
        cur.executemany("INSERT INTO proto_claimed (job_id, worker) VALUES (%s, %s)", claimed)
        return ids

    def claim(self, conn, cur, worker: str) -> list[int] | None:
        ids = self.take(conn, cur, worker)
        if ids:
            cur.execute(
                f"UPDATE {WIDE} SET status = 'RUNNING', owner = %s, claimed_at = NOW(6) "
                f"WHERE id IN ({marks(ids)})",
                [worker, *ids],
            )
            conn.commit()
            self.read(cur, ids)
        return ids

    def read(self, cur, ids: list[int]) -> None:
        cur.execute(f"SELECT * FROM {WIDE} WHERE id IN ({marks(ids)})", ids)
        cur.fetchall()

    def unclaim(self, cur, worker: str, ids: list[int]) -> None:
        cur.execute(
            f"DELETE FROM proto_claimed WHERE job_id IN ({marks(ids)}) AND worker = %s", [*ids, worker]
        )

    def finish(self, conn, cur, worker: str, ids: list[int]) -> None:
        cur.execute(
            f"UPDATE {WIDE} SET {OUTCOME} WHERE id IN ({marks(ids)}) AND owner = %s AND status = 'RUNNING'",
            [*ids, worker],
        )
        self.unclaim(cur, worker, ids)
        conn.commit()


class Once(Middle):
    """As Middle, but the wide row is written only at the outcome."""

    def claim(self, conn, cur, worker: str) -> list[int] | None:
        ids = self.take(conn, cur, worker)
        if ids:
            conn.commit()
            self.read(cur, ids)
        return ids

    def finish(self, conn, cur, worker: str, ids: list[int]) -> None:
        self.unclaim(cur, worker, ids)
        cur.execute(
            f"UPDATE {WIDE} SET {OUTCOME.replace(', owner = NULL', '')} WHERE id IN ({marks(ids)}) "
            "AND status = 'READY'",
            ids,
        )
        conn.commit()


DESIGNS = {
    "today": Today,
    "partial": Partial,
    "nolease": NoLease,
    "unleased": Unleased,
    "due": Due,
    "middle": Middle,
    "once": Once,
}


def drop(cur) -> None:
    for table in (WIDE, "proto_ready", "proto_claimed"):
        cur.execute(f"DROP TABLE IF EXISTS {table}")


def drain(design, n: int, pid: int | None, workers: int = 1) -> tuple[float, float]:
    """Jobs/s and the server's CPU µs a job, ``workers`` clients (processes
    past one, started before the clock as the ceiling's are) draining ``n`` jobs."""
    conn = common.raw_connect()
    cur = conn.cursor()
    drop(cur)
    design.create(cur)
    design.fill(cur, n)
    conn.commit()
    if workers == 1:
        server, wall = cpu_seconds(pid), time.perf_counter()
        done = _work(design, "w1", conn)
        wall, server = time.perf_counter() - wall, cpu_seconds(pid) - server
    else:
        ctx = multiprocessing.get_context("fork")
        go, results = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(design, f"w{i}", go, results)) for i in range(workers)]
        for proc in procs:
            proc.start()
        time.sleep(0.3)  # every client connected before the clock starts
        server, wall = cpu_seconds(pid), time.perf_counter()
        go.set()
        done = sum(results.get(timeout=600) for _ in procs)
        wall, server = time.perf_counter() - wall, cpu_seconds(pid) - server
        for proc in procs:
            proc.join()
    cur.execute(f"SELECT COUNT(*) FROM {WIDE} WHERE status = 'SUCCESSFUL' AND attempts = 1")
    (finished,) = cur.fetchone()
    assert done == finished == n, f"{finished} of {n} jobs finished once"
    drop(cur)
    conn.close()
    return n / wall, server / n * 1e6


def _work(design, worker: str, conn=None) -> int:
    """Claim and finish until nothing is left; the jobs this client ran.
    A deadlock (two clients deleting from ``ready`` in the narrow designs,
    seen on MariaDB) is rolled back and the step run again, as the queue's
    own claim does."""
    conn = conn or common.raw_connect()
    cur, done = conn.cursor(), 0
    while (ids := _again_on_deadlock(conn, lambda: design.claim(conn, cur, worker))) is not None:
        if ids:
            _again_on_deadlock(conn, lambda: design.finish(conn, cur, worker, ids))  # noqa: B023
            done += len(ids)
    return done


def _again_on_deadlock(conn, step):
    import MySQLdb

    while True:
        try:
            return step()
        except MySQLdb.OperationalError as exc:
            if exc.args[0] != 1213:  # ER_LOCK_DEADLOCK
                raise
            conn.rollback()


def _worker(design, worker: str, go, results) -> None:
    conn = common.raw_connect()
    go.wait()
    results.put(_work(design, worker, conn))
    conn.close()


def main() -> None:
    numbers = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    n = int(numbers[0]) if numbers else 20_000
    rounds = int(numbers[1]) if len(numbers) > 1 else 3
    only = next((arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--only=")), ",".join(DESIGNS))
    workers = int(next((arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--workers=")), "1"))
    common.configure()
    common.create_database()
    import ceiling

    pid = server_pid()
    if pid is None:
        print("The server's process is not on this host (or not readable): its CPU shows as nan.")
    figures: dict[str, list[float]] = {}
    rates: dict[str, list[float]] = {}  # each round's jobs/s over the ceiling's
    try:
        for number in range(1, rounds + 1):
            before = cpu_seconds(pid)
            roof = ceiling.drain(n, workers)["jobs_per_s"]
            server = (cpu_seconds(pid) - before) / n * 1e6
            figures.setdefault("ceiling", []).append(server)
            print(f"round {number}: ceiling  {roof:8,.0f} jobs/s, server {server:6.1f} µs a job", flush=True)
            names = only.split(",")
            for name in names if number % 2 else reversed(names):
                rate, server = drain(DESIGNS[name](), n, pid, workers)
                figures.setdefault(name, []).append(server)
                rates.setdefault(name, []).append(rate / roof)
                line = f"round {number}: {name:8} {rate:8,.0f} jobs/s ({rate / roof:.2f}x the ceiling), "
                print(f"{line}server {server:6.1f} µs a job", flush=True)
    finally:
        ceiling.cleanup()
        common.drop_database()
    print(f"\nserver CPU a job, median of {rounds} rounds (µs; ratio to today's):")
    today = common.median(figures["today"]) if "today" in figures else None
    for name, values in figures.items():
        ratio = f"{common.median(values) / today:.2f}x" if today else "-"
        drained = f"   drain {common.median(rates[name]):.2f}x the ceiling's" if name in rates else ""
        print(f"  {name:8} {common.median(values):6.1f}   {ratio}{drained}")


if __name__ == "__main__":
    main()
