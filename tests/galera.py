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

Tests use the same class: they SIGKILL the writer, stop and restart nodes,
and connect to nodes directly for multi-writer runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import MySQLdb

from tests.galera_node import PROVIDER, SYNCED, Node, connect, execute
from tests.galera_proxy import HAPROXY, Proxy
from tests.mariadb_sandbox import INSTALL_DB, MARIADBD

DEFAULT_PORT = 24300


def available() -> bool:
    """Whether this machine has what the cluster needs."""
    return all(os.access(path, os.X_OK) for path in (MARIADBD, INSTALL_DB, HAPROXY)) and (
        os.path.exists(PROVIDER) and shutil.which("rsync") is not None
    )


def in_cluster_run() -> bool:
    """Whether the tests run on the cluster (``./dev test`` sets it after
    ``./dev cluster start``): the cluster tests skip elsewhere."""
    return os.environ.get("DBQUEUE_CLUSTER") == "1"


class GaleraCluster:
    """Three nodes and the proxy. ``port`` is the proxy's: what clients use."""

    def __init__(self, root: Path | None = None, port: int | None = None) -> None:
        self.port = port or int(os.environ.get("DBQUEUE_CLUSTER_PORT", DEFAULT_PORT))
        default_root = os.environ.get("DBQUEUE_CLUSTER_DIR") or f"/tmp/dbqueue-cluster-{self.port}"
        self.root = Path(root or default_root)
        self.as_root = os.geteuid() == 0
        self.user_args = ["--user=mysql"] if self.as_root else []
        self.nodes = [Node(self, index) for index in (1, 2, 3)]
        self.proxy = Proxy(self)

    # -- the whole cluster ---------------------------------------------------------

    def running(self) -> bool:
        """Every node synced, and the proxy answering."""
        return all(node.state() == SYNCED for node in self.nodes) and self.proxy.answers()

    def start(self) -> float:
        """Build and start the cluster unless it runs; return the seconds it took."""
        began = time.monotonic()
        if self.running():
            return time.monotonic() - began
        self.stop()  # a half-started or crashed cluster: start afresh
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        first, *others = self.nodes
        first.prepare(install=True)
        first.launch(new_cluster=True)
        first.wait_synced()
        for node in others:  # the joiners copy the first node's data (rsync SST)
            node.prepare(install=False)
            node.launch()
        for node in others:
            node.wait_synced()
        self.proxy.start()
        return time.monotonic() - began

    def stop(self) -> None:
        """Stop the proxy and every node, and remove the cluster's files."""
        self.proxy.stop()
        for node in self.nodes:
            node.kill()  # throwaway data: no need for a clean shutdown
        shutil.rmtree(self.root, ignore_errors=True)

    def heal(self, timeout: float = 120.0) -> None:
        """Start every node that is down and wait until all are synced and
        the proxy's checks see every one UP: each test leaves the cluster
        whole. (A node synced again stays DOWN to the proxy for its next two
        checks, about 2 s: a test starting meanwhile would see a cluster of
        two.)"""
        for node in self.nodes:
            node.launch()
        for node in self.nodes:
            node.wait_synced(timeout)
        deadline = time.monotonic() + timeout
        while not self.proxy.answers() or set(self.proxy.view().values()) != {"UP"}:
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy on {self.port} sees {self.proxy.view()} after {timeout}s.")
            time.sleep(0.1)

    def counter(self, name: str) -> int:
        """A status counter summed over the nodes that answer, such as
        ``wsrep_local_cert_failures`` (commits that failed certification)
        or ``wsrep_local_bf_aborts`` (transactions another node's write aborted)."""
        return sum(int(node.status(name)[name] or 0) for node in self.nodes if node.running())

    def status(self) -> list[str]:
        lines = [f"proxy 127.0.0.1:{self.port}: {'up' if self.proxy.answers() else 'down'}"]
        writer, checks = self.writer_name(), self.proxy.view()
        for node in self.nodes:
            state = node.state()
            if state is None:
                lines.append(f"{node.name} 127.0.0.1:{node.port}: down")
                continue
            found = node.status("wsrep_cluster_size", "wsrep_cluster_status", "wsrep_local_state_comment")
            role = " (writer)" if node.name == writer else ""
            lines.append(
                f"{node.name} 127.0.0.1:{node.port}: {found['wsrep_local_state_comment']}, "
                f"{found['wsrep_cluster_status']} component of {found['wsrep_cluster_size']}, "
                f"{checks.get(node.name, '?')} for the proxy{role}"
            )
        return lines

    def proxy_view(self) -> dict[str, str]:
        """What HAProxy's health checks say of each node (UP, DOWN, ...)."""
        return self.proxy.view()

    def writer_name(self) -> str | None:
        """The node the proxy sends new connections to, or None."""
        return self.proxy.writer_name()

    def writer(self) -> Node:
        name = self.writer_name()
        for node in self.nodes:
            if node.name == name:
                return node
        raise RuntimeError("The proxy reaches no node.")

    # -- clients ---------------------------------------------------------------------

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        """A connection through the proxy (to the writer)."""
        return connect(self.port, database, **kwargs)

    def execute(
        self, sql: str, args: object = None, database: str | None = None, **kwargs: object
    ) -> list[tuple]:
        return execute(self.connect(database, **kwargs), sql, args)


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


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    cluster = GaleraCluster()
    if command == "start":
        if not available():
            print("The cluster needs mariadbd, galera-4, haproxy and rsync.", file=sys.stderr)
            return 1
        if cluster.running():
            print(f"cluster already running; clients connect to 127.0.0.1:{cluster.port} (the proxy)")
            return 0
        seconds = cluster.start()
        print(f"cluster up in {seconds:.1f}s; clients connect to 127.0.0.1:{cluster.port} (the proxy)")
    elif command == "stop":
        cluster.stop()
        print("cluster stopped")
    elif command == "status":
        print("\n".join(cluster.status()))
        return 0 if cluster.running() else 3
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
