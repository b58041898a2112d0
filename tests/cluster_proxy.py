"""HAProxy in front of a local cluster (tests/local_cluster.py): one
writer, the other nodes as backups, each health-checked by the cluster's
own script (``CHECK_SCRIPT``: which node takes writes differs by engine)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import MySQLdb

from tests.server_processes import alive, read_pid, wait_gone

if TYPE_CHECKING:
    from tests.local_cluster import LocalCluster

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

# One writer: node1 while its check passes, else the first backup whose
# check does. A stick table keeps the writer a former backup became when
# node1 comes back, so writes never move to a second node while connections
# to the first live on; shutdown-sessions cuts clients off a node the check
# marks down. A check may take 3 s: without that, the interval (1 s) bounds
# it, and a check that forks the client on a busy machine (0.2 to 0.95 s
# each, seen here with a drain and three servers on two cores) may fail
# twice in a row and cut every client off a writer that serves; three
# failures in a row mark a node down (a second more to fail over).
HAPROXY_CONFIG = """global
    external-check
    insecure-fork-wanted
    maxconn 4000
    pidfile {root}/haproxy.pid
    stats socket {root}/haproxy.sock mode 600 level admin

defaults
    mode tcp
    timeout connect 2s
    timeout client 8h
    timeout server 8h

listen {name}
    bind 127.0.0.1:{port}
    option external-check
    external-check path "/usr/bin:/bin"
    external-check command {root}/check.sh
    option redispatch
    retries 3
    stick-table type integer size 1
    stick on int(1)
    timeout check 3s
    default-server inter 1s fall 3 rise 2 on-marked-down shutdown-sessions
{servers}
"""


class Proxy:
    """The cluster's HAProxy, on the cluster's port: what clients connect to."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    @property
    def root(self) -> Path:
        return self.cluster.root

    @property
    def port(self) -> int:
        return self.cluster.port

    def start(self, timeout: float = 30.0) -> None:
        check = self.root / "check.sh"
        check.write_text(self.cluster.CHECK_SCRIPT)
        check.chmod(0o755)
        servers = "\n".join(
            f"    server {node.name} 127.0.0.1:{node.port} check{' backup' if node.index > 1 else ''}"
            for node in self.cluster.nodes
        )
        config = self.root / "haproxy.cfg"
        config.write_text(
            HAPROXY_CONFIG.format(root=self.root, port=self.port, name=self.cluster.NAME, servers=servers)
        )
        subprocess.run([HAPROXY, "-D", "-q", "-f", str(config)], check=True)
        deadline = time.monotonic() + timeout
        while not self.answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy on {self.port} did not reach a writer in {timeout}s")
            time.sleep(0.1)

    def stop(self) -> None:
        pid = read_pid(self.root / "haproxy.pid")
        if alive(pid):
            assert pid is not None
            os.kill(pid, signal.SIGTERM)
            if not wait_gone(pid, 10):
                os.kill(pid, signal.SIGKILL)

    def ask(self, command: str) -> str:
        """What HAProxy's admin socket answers to ``command`` ("" if it is away)."""
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(2)
                sock.connect(str(self.root / "haproxy.sock"))
                sock.sendall(command.encode() + b"\n")
                return b"".join(iter(lambda: sock.recv(65536), b"")).decode()
        except OSError:
            return ""

    def stats(self) -> list[dict[str, str]]:
        """HAProxy's statistics, a row per node."""
        data = self.ask("show stat")
        if not data:
            return []
        header, *rows = data.lstrip("# ").splitlines()
        columns = header.split(",")
        found = [dict(zip(columns, row.split(","), strict=False)) for row in rows if row]
        return [row for row in found if row.get("svname", "").startswith("node")]

    def view(self) -> dict[str, str]:
        """What HAProxy's health checks say of each node (UP, DOWN, ...)."""
        return {row["svname"]: row["status"] for row in self.stats()}

    def retries(self) -> dict[str, dict[str, str]]:
        """Per node, HAProxy's counts of failed connections (econ), retries
        (wretr) and redispatches to another server (wredis)."""
        return {
            row["svname"]: {name: row.get(name, "") for name in ("econ", "wretr", "wredis")}
            for row in self.stats()
        }

    def answers(self) -> bool:
        return self.writer_name() is not None

    def writer_name(self) -> str | None:
        """The node the proxy sends new connections to, or None."""
        try:
            rows = self.cluster.execute("SELECT @@port", connect_timeout=2)
        except MySQLdb.Error:
            return None
        return next((node.name for node in self.cluster.nodes if node.port == rows[0][0]), None)
