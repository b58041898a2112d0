"""One ``mariadbd`` of the local Galera cluster (tests/galera.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import TYPE_CHECKING

import MySQLdb

from tests.local_cluster import Member
from tests.mariadb_sandbox import install_datadir, server_command

if TYPE_CHECKING:
    from tests.galera import GaleraCluster

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
SYNCED = 4  # wsrep_local_state: the node is a full member, serving clients


class Node(Member):
    """One ``mariadbd`` of the cluster."""

    SYNC_READS = "SET SESSION wsrep_sync_wait = 1"
    CAUGHT_UP = "IST received"
    cluster: GaleraCluster

    def __init__(self, cluster: GaleraCluster, index: int) -> None:
        super().__init__(cluster, index)
        self.datadir = self.root / "data"
        self.gcomm_port = cluster.port + 10 + index
        self.ist_port = cluster.port + 20 + index
        self.sst_port = cluster.port + 30 + index
        self.socket = self.root / "mariadb.sock"
        self.pid_file = self.root / "mariadb.pid"
        self.log = self.root / "error.log"
        self.new_cluster = False

    def arguments(self) -> list[str]:
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
            *(["--wsrep-new-cluster"] if self.new_cluster else []),
        ]

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
        if new_cluster:
            self._mark_safe_to_bootstrap()
        self.new_cluster = False  # not for the recovery run
        extra = [f"--wsrep-sst-donor={self.preferred_donors()}"]
        position = self.recovered_position()
        if position:
            extra.append(f"--wsrep-start-position={position}")
        self.new_cluster = new_cluster
        self.spawn(*extra)

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
            [*self.arguments(), f"--log-error={log}", "--wsrep-recover"],
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

    def serves(self) -> bool:
        return self.state() == SYNCED

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

    def describe(self) -> str | None:
        if self.state() is None:
            return None
        found = self.status("wsrep_cluster_size", "wsrep_cluster_status", "wsrep_local_state_comment")
        return (
            f"{found['wsrep_local_state_comment']}, "
            f"{found['wsrep_cluster_status']} component of {found['wsrep_cluster_size']}"
        )

    def status(self, *names: str) -> dict[str, str]:
        """The node's ``wsrep_*`` status variables named (all of them if none)."""
        rows = self.execute("SHOW GLOBAL STATUS LIKE 'wsrep%'")
        found = {name: value for name, value in rows}
        return {name: found.get(name, "") for name in names} if names else found
