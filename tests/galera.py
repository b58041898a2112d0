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
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import MySQLdb

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
PROVIDER = "/usr/lib/galera/libgalera_smm.so"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
DEFAULT_PORT = 24300
SYNCED = 4  # wsrep_local_state: the node is a full member, serving clients

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


def available() -> bool:
    """Whether this machine has what the cluster needs."""
    return all(os.access(path, os.X_OK) for path in (MARIADBD, INSTALL_DB, HAPROXY)) and (
        os.path.exists(PROVIDER) and shutil.which("rsync") is not None
    )


def _alive(pid: int | None) -> bool:
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


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        _reap(pid)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Node:
    """One ``mariadbd`` of the cluster."""

    def __init__(self, cluster: GaleraCluster, index: int) -> None:
        self.cluster, self.index = cluster, index
        self.name = f"node{index}"
        self.root = cluster.root / self.name
        self.datadir = self.root / "data"
        self.port = cluster.port + index
        self.gcomm_port = cluster.port + 10 + index
        self.ist_port = cluster.port + 20 + index
        self.sst_port = cluster.port + 30 + index
        self.socket = self.root / "mariadb.sock"
        self.pid_file = self.root / "mariadb.pid"
        self.log = self.root / "error.log"
        self.process: subprocess.Popen | None = None

    def __repr__(self) -> str:
        return f"<Node {self.name} :{self.port}>"

    def arguments(self, new_cluster: bool) -> list[str]:
        cluster = self.cluster
        members = ",".join(f"127.0.0.1:{node.gcomm_port}" for node in cluster.nodes)
        provider_options = ";".join(
            [
                f"gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm_port}",
                f"ist.recv_addr=127.0.0.1:{self.ist_port}",
                "gcache.size=256M",
            ]
        )
        return [
            MARIADBD,
            "--no-defaults",
            *cluster.user_args,
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.log}",
            "--binlog-format=ROW",
            "--default-storage-engine=InnoDB",
            "--innodb-autoinc-lock-mode=2",
            "--innodb-buffer-pool-size=128M",
            "--max-connections=300",
            "--wsrep-on=ON",
            f"--wsrep-provider={PROVIDER}",
            "--wsrep-cluster-name=dbqueue",
            f"--wsrep-cluster-address=gcomm://{members}",
            f"--wsrep-node-name={self.name}",
            f"--wsrep-node-address=127.0.0.1:{self.gcomm_port}",
            f"--wsrep-node-incoming-address=127.0.0.1:{self.port}",
            f"--wsrep-provider-options={provider_options}",
            "--wsrep-sst-method=rsync",
            f"--wsrep-sst-receive-address=127.0.0.1:{self.sst_port}",
            *(["--wsrep-new-cluster"] if new_cluster else []),
        ]

    @property
    def pid(self) -> int | None:
        if self.process is not None and self.process.poll() is None:
            return self.process.pid
        pid = _read_pid(self.pid_file)
        return pid if _alive(pid) else None

    def running(self) -> bool:
        return self.pid is not None

    def prepare(self, install: bool) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self.cluster.as_root:
            for path in (self.root, self.datadir):
                shutil.chown(path, "mysql", "mysql")
        if install:
            subprocess.run(
                [
                    INSTALL_DB,
                    "--no-defaults",
                    *self.cluster.user_args,
                    f"--datadir={self.datadir}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )

    def launch(self, new_cluster: bool = False) -> None:
        """Start the node without waiting (see :meth:`wait_synced`)."""
        if self.running():
            return
        self.pid_file.unlink(missing_ok=True)
        if new_cluster:
            self._mark_safe_to_bootstrap()
        extra = [f"--wsrep-sst-donor={self.preferred_donors()}"]
        position = self.recovered_position()
        if position:
            extra.append(f"--wsrep-start-position={position}")
        self.process = subprocess.Popen(
            [*self.arguments(new_cluster), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives ./dev cluster start, like a service
        )

    def preferred_donors(self) -> str:
        """The nodes to copy state from, the writer last: a donor of a full
        copy (SST) blocks its writes and fails the proxy's check, which
        would move every client off the writer a second time. The trailing
        comma lets Galera pick any node when these cannot serve."""
        writer = self.cluster.writer_name()
        others = [node.name for node in self.cluster.nodes if node is not self]
        return ",".join(sorted(others, key=lambda name: name == writer)) + ","

    def recovered_position(self) -> str | None:
        """After a crash, grastate.dat holds no position: read the last one
        committed from InnoDB (``mariadbd --wsrep-recover``, as MariaDB's
        service scripts do), so the node rejoins by IST, sending only what
        it missed, instead of by a full copy."""
        state = self.datadir / "grastate.dat"
        if not state.exists() or not re.search(r"seqno:\s+-1", state.read_text()):
            return None
        log = self.root / "recover.log"
        log.unlink(missing_ok=True)
        subprocess.run(
            [*self.arguments(False), f"--log-error={log}", "--wsrep-recover"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(r"Recovered position: ([0-9a-f-]{36}:\d+)", text)
        return found[1] if found else None

    def _mark_safe_to_bootstrap(self) -> None:
        state = self.datadir / "grastate.dat"
        if state.exists():
            state.write_text(state.read_text().replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1"))

    def wait_synced(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.state() != SYNCED:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited while starting:\n{self.error_log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not join the cluster in {timeout}s:\n{self.error_log()}")
            time.sleep(0.1)

    def state(self) -> int | None:
        """``wsrep_local_state`` (4: synced), or None when the node does not answer."""
        try:
            conn = self.connect(connect_timeout=1)
        except MySQLdb.Error:
            return None
        try:
            with conn.cursor() as cursor:
                cursor.execute("SHOW GLOBAL STATUS LIKE 'wsrep_local_state'")
                row = cursor.fetchone()
            return int(row[1]) if row else None
        except MySQLdb.Error:
            return None
        finally:
            conn.close()

    def status(self, *names: str) -> dict[str, str]:
        """The node's ``wsrep_*`` status variables named (all of them if none)."""
        rows = self.execute("SHOW GLOBAL STATUS LIKE 'wsrep%'")
        found = {name: value for name, value in rows}
        return {name: found.get(name, "") for name in names} if names else found

    def kill(self) -> None:
        """SIGKILL: the node crashes (no clean shutdown, InnoDB recovers at start)."""
        self._signal(signal.SIGKILL, timeout=30)

    def stop(self, timeout: float = 60.0) -> None:
        """A clean shutdown: the node leaves the cluster and may rejoin by IST."""
        if not self._signal(signal.SIGTERM, timeout):
            self.kill()

    def _signal(self, signum: int, timeout: float) -> bool:
        pid = self.pid
        if pid is None:
            return True
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return True
        gone = _wait_gone(pid, timeout)
        if gone and self.process is not None:
            self.process.poll()
        return gone

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        return _connect(self.port, database, **kwargs)

    def execute(self, sql: str, args: object = None, database: str | None = None) -> list[tuple]:
        return _execute(self.connect(database), sql, args)

    def checksum(self, database: str, table: str) -> int:
        """``CHECKSUM TABLE`` once this node applied every write committed before it asked."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SET SESSION wsrep_sync_wait = 1")
                cursor.execute(f"CHECKSUM TABLE `{table}`")
                return int(cursor.fetchone()[1])
        finally:
            conn.close()

    def error_log(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def in_cluster_run() -> bool:
    """Whether the tests run on the cluster (``./dev test`` sets it after
    ``./dev cluster start``): the cluster tests skip elsewhere."""
    return os.environ.get("DBQUEUE_CLUSTER") == "1"


def _connect(port: int, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
    params: dict = {"host": "127.0.0.1", "port": port, "user": "root", "passwd": "", **kwargs}
    if database:
        params["database"] = database
    return MySQLdb.connect(autocommit=True, charset="utf8mb4", **params)


def _execute(conn: MySQLdb.Connection, sql: str, args: object) -> list[tuple]:
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())
    finally:
        conn.close()


class GaleraCluster:
    """Three nodes and the proxy. ``port`` is the proxy's: what clients use."""

    def __init__(self, root: Path | None = None, port: int | None = None) -> None:
        self.port = port or int(os.environ.get("DBQUEUE_CLUSTER_PORT", DEFAULT_PORT))
        default_root = os.environ.get("DBQUEUE_CLUSTER_DIR") or f"/tmp/dbqueue-cluster-{self.port}"
        self.root = Path(root or default_root)
        self.as_root = os.geteuid() == 0
        self.user_args = ["--user=mysql"] if self.as_root else []
        self.nodes: list[Node] = []
        self.nodes = [Node(self, index) for index in (1, 2, 3)]

    # -- the whole cluster ---------------------------------------------------------

    def running(self) -> bool:
        """Every node synced, and the proxy answering."""
        return all(node.state() == SYNCED for node in self.nodes) and self.proxy_answers()

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
        self.start_proxy()
        return time.monotonic() - began

    def stop(self) -> None:
        """Stop the proxy and every node, and remove the cluster's files."""
        self.stop_proxy()
        for node in self.nodes:
            node.kill()  # throwaway data: no need for a clean shutdown
        shutil.rmtree(self.root, ignore_errors=True)

    def heal(self, timeout: float = 120.0) -> None:
        """Start every node that is down and wait until all are synced and
        the proxy answers: each test leaves the cluster whole."""
        for node in self.nodes:
            node.launch()
        for node in self.nodes:
            node.wait_synced(timeout)
        deadline = time.monotonic() + timeout
        while not self.proxy_answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy on {self.port} reaches no node after {timeout}s.")
            time.sleep(0.1)

    def counter(self, name: str) -> int:
        """A status counter summed over the nodes that answer, such as
        ``wsrep_local_cert_failures`` (commits that failed certification)
        or ``wsrep_local_bf_aborts`` (transactions another node's write aborted)."""
        return sum(int(node.status(name)[name] or 0) for node in self.nodes if node.running())

    def status(self) -> list[str]:
        lines = [f"proxy 127.0.0.1:{self.port}: {'up' if self.proxy_answers() else 'down'}"]
        writer, checks = self.writer_name(), self.proxy_view()
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

    # -- the proxy -----------------------------------------------------------------

    def start_proxy(self, timeout: float = 30.0) -> None:
        check = self.root / "check.sh"
        check.write_text(CHECK_SCRIPT.format(synced=SYNCED))
        check.chmod(0o755)
        servers = "\n".join(
            f"    server {node.name} 127.0.0.1:{node.port} check{' backup' if node.index > 1 else ''}"
            for node in self.nodes
        )
        config = self.root / "haproxy.cfg"
        config.write_text(HAPROXY_CONFIG.format(root=self.root, port=self.port, servers=servers))
        subprocess.run([HAPROXY, "-D", "-q", "-f", str(config)], check=True)
        deadline = time.monotonic() + timeout
        while not self.proxy_answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy on {self.port} did not reach a synced node in {timeout}s")
            time.sleep(0.1)

    def stop_proxy(self) -> None:
        pid = _read_pid(self.root / "haproxy.pid")
        if _alive(pid):
            assert pid is not None
            os.kill(pid, signal.SIGTERM)
            if not _wait_gone(pid, 10):
                os.kill(pid, signal.SIGKILL)

    def proxy_view(self) -> dict[str, str]:
        """What HAProxy's health checks say of each node (UP, DOWN, ...)."""
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(2)
                sock.connect(str(self.root / "haproxy.sock"))
                sock.sendall(b"show stat\n")
                data = b"".join(iter(lambda: sock.recv(65536), b""))
        except OSError:
            return {}
        header, *rows = data.decode().lstrip("# ").splitlines()
        columns = header.split(",")
        found = [dict(zip(columns, row.split(","), strict=False)) for row in rows if row]
        return {row["svname"]: row["status"] for row in found if row.get("svname", "").startswith("node")}

    def proxy_answers(self) -> bool:
        return self.writer_name() is not None

    def writer_name(self) -> str | None:
        """The node the proxy sends new connections to, or None."""
        try:
            rows = self.execute("SELECT @@wsrep_node_name", connect_timeout=2)
        except MySQLdb.Error:
            return None
        return rows[0][0]

    def writer(self) -> Node:
        name = self.writer_name()
        for node in self.nodes:
            if node.name == name:
                return node
        raise RuntimeError("The proxy reaches no node.")

    # -- clients ---------------------------------------------------------------------

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        """A connection through the proxy (to the writer)."""
        return _connect(self.port, database, **kwargs)

    def execute(
        self, sql: str, args: object = None, database: str | None = None, **kwargs: object
    ) -> list[tuple]:
        return _execute(self.connect(database, **kwargs), sql, args)


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
