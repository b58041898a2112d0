"""HAProxy in front of the local Galera cluster (tests/galera.py): one
writer, the other nodes as backups, each health-checked."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from typing import TYPE_CHECKING

import MySQLdb

from tests.galera_node import SYNCED, alive, connect, execute, read_pid, wait_gone

if TYPE_CHECKING:
    from tests.galera import GaleraCluster

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

# HAProxy asks each node whether it serves clients: synced, and not told to
# reject queries. A node that is joining, a donor, cut off from the majority
# or rejecting queries still accepts connections (and SELECT 1), so a TCP or
# MySQL handshake check would send clients to it.
CHECK_SCRIPT = """#!/bin/sh
# HAProxy's external check: $3 is the node's address, $4 its port.
state=$(mariadb --no-defaults --connect-timeout=1 -h "$3" -P "$4" -u root -N -B -e \\
    "SELECT CONCAT(@@wsrep_reject_queries, ' ', VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS
     WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE'" 2>/dev/null)
[ "$state" = "NONE {synced}" ]
"""

# One writer: node1 while it is up, else the first backup that is. A stick
# table keeps the writer a former backup became when node1 comes back, so
# writes never move to a second node while connections to the first live
# on; shutdown-sessions cuts clients off a node the check marks down.
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

listen galera
    bind 127.0.0.1:{port}
    option external-check
    external-check path "/usr/bin:/bin"
    external-check command {root}/check.sh
    option redispatch
    retries 3
    stick-table type integer size 1
    stick on int(1)
    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
{servers}
"""


class Proxy:
    """The cluster's HAProxy, on the cluster's port: what clients connect to."""

    def __init__(self, cluster: GaleraCluster) -> None:
        self.cluster = cluster
        self.root, self.port = cluster.root, cluster.port

    def start(self, timeout: float = 30.0) -> None:
        check = self.root / "check.sh"
        check.write_text(CHECK_SCRIPT.format(synced=SYNCED))
        check.chmod(0o755)
        servers = "\n".join(
            f"    server {node.name} 127.0.0.1:{node.port} check{' backup' if node.index > 1 else ''}"
            for node in self.cluster.nodes
        )
        config = self.root / "haproxy.cfg"
        config.write_text(HAPROXY_CONFIG.format(root=self.root, port=self.port, servers=servers))
        subprocess.run([HAPROXY, "-D", "-q", "-f", str(config)], check=True)
        deadline = time.monotonic() + timeout
        while not self.answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy on {self.port} did not reach a synced node in {timeout}s")
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
            rows = execute(connect(self.port, connect_timeout=2), "SELECT @@wsrep_node_name", None)
        except MySQLdb.Error:
            return None
        return rows[0][0]
