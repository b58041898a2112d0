"""Process and connection helpers for the servers the tests start and
kill (tests/local_cluster.py, tests/cluster_proxy.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import MySQLdb


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone for our purpose


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not ours: init reaps it


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        _reap(pid)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def connect(port: int, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
    params: dict = {"host": "127.0.0.1", "port": port, "user": "root", "passwd": "", **kwargs}
    if database:
        params["database"] = database
    return MySQLdb.connect(autocommit=True, charset="utf8mb4", **params)


def execute(conn: MySQLdb.Connection, sql: str, args: object) -> list[tuple]:
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())
    finally:
        conn.close()
