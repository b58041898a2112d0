"""A local MariaDB Galera cluster for development and CI: three ``mariadbd``
nodes with wsrep on, and HAProxy in front sending every connection to one
writer (the others are backups, health-checked on ``wsrep_local_state``).

    .venv/bin/python tests/galera.py start|stop|status     (what ./dev cluster runs)

Nothing of the system's MariaDB is touched: each node has its own data
directory, socket and ports under one directory (``DBQUEUE_CLUSTER_DIR``,
default ``/tmp/dbqueue-cluster-PORT``), reads no configuration file, and
runs as the ``mysql`` user when started by root (mariadbd refuses root).
The cluster is throwaway: ``start`` builds it afresh unless it is running,
``stop`` removes it. Ports (``DBQUEUE_CLUSTER_PORT``, default 24300): the
proxy on PORT, node i's clients on PORT+i, its group communication on
PORT+10+i, IST on PORT+20+i and SST on PORT+30+i.

What it shares with the Group Replication group (tests/mysql_group.py) is
in tests/local_cluster.py.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import MySQLdb

from tests.cluster_proxy import HAPROXY
from tests.galera_node import PROVIDER, SYNCED, Node
from tests.local_cluster import LocalCluster, cluster_engine, command
from tests.mariadb_sandbox import INSTALL_DB, MARIADBD

DEFAULT_PORT = 24300


def available() -> bool:
    """Whether this machine has what the Galera cluster needs."""
    return all(os.access(path, os.X_OK) for path in (MARIADBD, INSTALL_DB, HAPROXY)) and (
        os.path.exists(PROVIDER) and shutil.which("rsync") is not None
    )


def in_cluster_run() -> bool:
    """Whether the tests run on the Galera cluster (``./dev test`` sets it
    after ``./dev cluster start``): the Galera tests skip elsewhere."""
    return cluster_engine() == "galera"


# HAProxy asks each node whether it serves clients: synced, and not told to
# reject queries. A node that is joining, a donor, cut off from the majority
# or rejecting queries still accepts connections (and SELECT 1), so a TCP or
# MySQL handshake check would send clients to it.
CHECK_SCRIPT = f"""#!/bin/sh
# HAProxy's external check: $3 is the node's address, $4 its port.
state=$(mariadb --no-defaults --connect-timeout=1 -h "$3" -P "$4" -u root -N -B -e \\
    "SELECT CONCAT(@@wsrep_reject_queries, ' ', VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS
     WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE'" 2>/dev/null)
[ "$state" = "NONE {SYNCED}" ]
"""


class GaleraCluster(LocalCluster):
    """Three nodes and the proxy. ``port`` is the proxy's: what clients use."""

    NAME = "galera"
    TITLE = "Galera cluster"
    NEEDS = "mariadbd, galera-4, haproxy and rsync"
    DEFAULT_PORT = DEFAULT_PORT
    CHECK_SCRIPT = CHECK_SCRIPT
    nodes: list[Node]

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.as_root = os.geteuid() == 0
        self.user_args = ["--user=mysql"] if self.as_root else []
        self.nodes = [Node(self, index) for index in (1, 2, 3)]

    def default_root(self) -> Path:
        return Path(f"/tmp/dbqueue-cluster-{self.port}")

    def available(self) -> bool:
        return available()

    def build(self) -> None:
        first, *others = self.nodes
        first.prepare(install=True)
        first.launch(new_cluster=True)
        first.wait_synced()
        for node in others:  # the joiners copy the first node's data (rsync SST)
            node.prepare(install=False)
            node.launch()
        for node in others:
            node.wait_synced()

    def counter(self, name: str) -> int:
        """A status counter summed over the nodes that answer, such as
        ``wsrep_local_cert_failures`` (commits that failed certification)
        or ``wsrep_local_bf_aborts`` (transactions another node's write aborted)."""
        return sum(int(node.status(name)[name] or 0) for node in self.nodes if node.running())


class WriterAsServer:
    """The cluster behind the face of a ``tests/mariadb_sandbox.py`` server,
    for the chaos run (``benchmarks/chaos.py``): its crash SIGKILLs the
    writer node, so the proxy moves every client to a backup, and its start
    brings that node back, returning once the proxy serves clients again
    (the node recovers and rejoins by IST meanwhile)."""

    def __init__(self, cluster: GaleraCluster) -> None:
        self.cluster = cluster
        self.port = cluster.port
        self.down: Node | None = None

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        return self.cluster.connect(database, **kwargs)

    def execute(self, sql: str, args: object = None, database: str | None = None) -> list[tuple]:
        return self.cluster.execute(sql, args, database)

    def stop(self, kill: bool = False) -> None:
        self.cluster.heal()  # a node still rejoining from the last crash would leave no majority
        self.down = self.cluster.writer()
        if kill:
            self.down.kill()
        else:
            self.down.stop()

    def start(self, timeout: float = 60.0) -> float:
        began = time.monotonic()
        if self.down is not None:
            self.down.launch()
        while self.cluster.writer_name() in (None, getattr(self.down, "name", None)):
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"The proxy found no new writer in {timeout}s.")
            time.sleep(0.05)
        return time.monotonic() - began

    def restart(self, kill: bool = False, down_for: float = 0.0) -> float:
        self.stop(kill=kill)
        time.sleep(down_for)
        return self.start()


if __name__ == "__main__":
    sys.exit(command(GaleraCluster(), sys.argv, __doc__ or ""))
