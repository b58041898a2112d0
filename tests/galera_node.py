"""One ``mariadbd`` of the local Galera cluster (tests/galera.py), and
the process and connection helpers the cluster and its proxy share."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import MySQLdb

from tests.mariadb_sandbox import install_datadir, server_command

if TYPE_CHECKING:
    from tests.galera import GaleraCluster

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
SYNCED = 4  # wsrep_local_state: the node is a full member, serving clients


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
            *server_command(self.datadir, self.port, self.socket, self.pid_file, self.log, cluster.user_args),
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
        pid = read_pid(self.pid_file)
        return pid if alive(pid) else None

    def running(self) -> bool:
        return self.pid is not None

    def prepare(self, install: bool) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self.cluster.as_root:
            for path in (self.root, self.datadir):
                shutil.chown(path, "mysql", "mysql")
        if install:
            install_datadir(self.datadir, self.cluster.user_args)

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
        gone = wait_gone(pid, timeout)
        if gone and self.process is not None:
            self.process.poll()
        return gone

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        return connect(self.port, database, **kwargs)

    def execute(self, sql: str, args: object = None, database: str | None = None) -> list[tuple]:
        return execute(self.connect(database), sql, args)

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
