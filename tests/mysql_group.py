"""A local MySQL Group Replication group (InnoDB Cluster's engine) for
development and CI: three ``mysqld`` of the MySQL lane's server
(tests/mysql_server.py: Debian sid's Oracle MySQL, run in place) in
single-primary mode, and HAProxy in front sending every connection to the
primary (the check asks each member for its role).

    .venv/bin/python tests/mysql_group.py start|stop|status   (./dev cluster ... mysql-gr)

Each member has its own data directory, socket and ports under one
directory (``DBQUEUE_CLUSTER_DIR``, default
``${XDG_STATE_HOME:-~/.local/state}/django-dbqueue/group-PORT``) and reads
no configuration file; its memory is kept small (a 64 MB buffer pool).
The group is throwaway: ``start`` builds it afresh unless it is running,
``stop`` removes it. Ports (``DBQUEUE_CLUSTER_PORT``, default 24400): the
proxy on PORT, member i's clients on PORT+i and its group communication
on PORT+10+i. A member that comes back (``launch``) rejoins by itself and
catches up from a donor's binary log (distributed recovery, no clone).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import MySQLdb

from tests.cluster_proxy import HAPROXY
from tests.local_cluster import LocalCluster, Member, cluster_engine, command
from tests.mysql_packages import obtain
from tests.mysql_server import MySQLServer
from tests.server_processes import execute

DEFAULT_PORT = 24400
GROUP_NAME = "6a1f0d3e-2b7c-4c55-9d7e-0db0e0e0c0de"  # any UUID: the group's GTIDs carry it
# Distributed recovery's account: a joiner replicates what it missed from a
# donor as this user (caching_sha2_password: the donor's public key is asked
# for, as there is no TLS between the members here).
RECOVERY = ("dbqueue_recovery", "recovery")
ONLINE = "ONLINE"
PERFORMANCE_SCHEMA_HISTORIES = [
    f"{events}-history{long}"
    for events in ("statements", "stages", "waits", "transactions")
    for long in ("", "-long")
]


def in_group_run() -> bool:
    """Whether the tests run on the group (``./dev test``'s cluster run for mysql-gr)."""
    return cluster_engine() == "mysql-gr"


# HAProxy sends clients to the member that takes writes: the primary,
# ONLINE (a member in ERROR or RECOVERING answers connections too), and
# writable: a newly elected primary stays read-only until it has applied
# what the old one committed. Secondaries answer every query but refuse
# writes (super_read_only), so a TCP or handshake check would not do.
CHECK_SCRIPT = """#!/bin/sh
# HAProxy's external check: $3 is the member's address, $4 its port.
role=$(mariadb --no-defaults --connect-timeout=1 -h "$3" -P "$4" -u root -N -B -e \\
    "SELECT CONCAT(MEMBER_ROLE, ' ', MEMBER_STATE, ' ', @@super_read_only)
     FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid" 2>/dev/null)
case "$role" in
    "PRIMARY ONLINE 0") exit 0 ;;
    "SECONDARY ONLINE 1") exit 1 ;;
esac
# Anything else (no answer, a primary not writable, a member not ONLINE) is logged.
echo "$(date +%T.%N) $4 '$role'" >>"$(dirname "$0")/check.log"
exit 1
"""


class GroupMember(Member):
    """One ``mysqld`` of the group."""

    # A read waits until this member applied every transaction the group
    # committed before it (the group's answer to wsrep_sync_wait).
    SYNC_READS = "SET SESSION group_replication_consistency = 'BEFORE'"
    CAUGHT_UP = "Incremental recovery from a group donor"
    cluster: MySQLGroup

    def __init__(self, cluster: MySQLGroup, index: int) -> None:
        super().__init__(cluster, index)
        self.server = MySQLServer(self.port, self.root)
        self.datadir, self.pid_file, self.log = self.server.datadir, self.server.pid_file, self.server.log
        self.group_port = cluster.port + 10 + index
        self.first_start = False

    def arguments(self) -> list[str]:
        seeds = ",".join(f"127.0.0.1:{member.group_port}" for member in self.cluster.nodes)
        return self.server.mysqld(
            self.cluster.install,
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.server.socket}",
            f"--pid-file={self.pid_file}",
            "--mysqlx=OFF",
            "--secure-file-priv=NULL",
            # What Group Replication requires: a server id each, GTIDs, the
            # binary log (on by default, ROW), InnoDB only.
            f"--server-id={self.index}",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
            "--disabled-storage-engines=MyISAM,BLACKHOLE,ARCHIVE,MEMORY",
            # The members' address for distributed recovery: not the host's name.
            "--report-host=127.0.0.1",
            f"--report-port={self.port}",
            "--plugin-load-add=group_replication.so",
            f"--group-replication-group-name={GROUP_NAME}",
            f"--group-replication-local-address=127.0.0.1:{self.group_port}",
            f"--group-replication-group-seeds={seeds}",
            "--group-replication-single-primary-mode=ON",
            "--group-replication-recovery-get-public-key=ON",
            # A member started later (after a crash) joins by itself; the
            # first start is the group's own (:meth:`MySQLGroup.build`).
            f"--group-replication-start-on-boot={'OFF' if self.first_start else 'ON'}",
            # Small: three members share a machine with other servers.
            "--group-replication-message-cache-size=134217728",  # its minimum, 128 MB
            "--innodb-buffer-pool-size=64M",
            "--innodb-redo-log-capacity=64M",
            "--max-connections=200",
            "--innodb-log-buffer-size=8M",
            # The performance schema stays on (the proxy's check reads the
            # members' roles there) but records no history, digests or errors.
            "--performance-schema-instrument=%=OFF",
            "--performance-schema-digests-size=0",
            "--performance-schema-max-thread-instances=250",
            *(f"--performance-schema-{who}-size=20" for who in ("accounts", "hosts", "users")),
            "--performance-schema-error-size=0",
            *(f"--performance-schema-events-{kind}-size=0" for kind in PERFORMANCE_SCHEMA_HISTORIES),
            "--binlog-expire-logs-seconds=3600",
        )

    def launch(self) -> None:
        if not self.running():
            self.spawn()

    def member_state(self) -> tuple[str, str] | None:
        """(role, state) as this member sees itself, or None when it does not answer."""
        try:
            rows = execute(
                self.connect(connect_timeout=1),
                "SELECT MEMBER_ROLE, MEMBER_STATE FROM performance_schema.replication_group_members "
                "WHERE MEMBER_ID = @@server_uuid",
                None,
            )
        except MySQLdb.Error:
            return None
        return (rows[0][0], rows[0][1]) if rows else None

    def describe(self) -> str | None:
        found = self.member_state()
        return None if found is None else " ".join(found)

    def serves(self) -> bool:
        found = self.member_state()
        return found is not None and found[1] == ONLINE

    def join(self, bootstrap: bool) -> None:
        """Join the group for the first time, or (``bootstrap``) found it.
        Distributed recovery's account is created on each member outside
        the binary log (each was initialised alike), and the recovery
        channel's credentials are kept in the data directory, for the
        member's later starts."""
        user, password = RECOVERY
        statements = [
            "SET SQL_LOG_BIN = 0",
            f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'",
            f"GRANT REPLICATION SLAVE, CONNECTION_ADMIN, BACKUP_ADMIN ON *.* TO '{user}'@'127.0.0.1'",
            "SET SQL_LOG_BIN = 1",
            f"CHANGE REPLICATION SOURCE TO SOURCE_USER = '{user}', SOURCE_PASSWORD = '{password}' "
            "FOR CHANNEL 'group_replication_recovery'",
        ]
        if bootstrap:
            statements += [
                "SET GLOBAL group_replication_bootstrap_group = ON",
                "START GROUP_REPLICATION",
                "SET GLOBAL group_replication_bootstrap_group = OFF",
            ]
        else:
            statements.append("START GROUP_REPLICATION")
        conn = self.connect()
        try:
            with conn.cursor() as cursor:
                for sql in statements:
                    cursor.execute(sql)
        finally:
            conn.close()


class MySQLGroup(LocalCluster):
    """Three members in single-primary mode and the proxy. ``port`` is the proxy's."""

    NAME = "mysql_group"
    TITLE = "MySQL group"
    NEEDS = "haproxy and the mariadb client (the proxy's check), and MySQL (tests/mysql_server.py)"
    DEFAULT_PORT = DEFAULT_PORT
    CHECK_SCRIPT = CHECK_SCRIPT
    # The group takes about 5 s to suspect a member that went silent, then
    # expels it (group_replication_member_expel_timeout, 5 s, took 16 s
    # here), then elects a primary: 21-23 s here with MySQL's defaults.
    FAILS_OVER_WITHIN = 60.0
    nodes: list[GroupMember]

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.nodes = [GroupMember(self, index) for index in (1, 2, 3)]
        self._install: Path | None = None
        self.version = ""

    def default_root(self) -> Path:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "django-dbqueue" / f"group-{self.port}"

    def proxy_settled(self) -> bool:
        """The primary UP for the proxy, the secondaries DOWN (they refuse writes)."""
        return sorted(self.proxy.view().values()) == ["DOWN", "DOWN", "UP"]

    def available(self) -> bool:
        """HAProxy and its check's client; MySQL comes from the cache, or sid."""
        return os.access(HAPROXY, os.X_OK) and shutil.which("mariadb") is not None

    @property
    def install(self) -> Path:
        """The unpacked MySQL the members run (the MySQL lane's: tests/mysql_packages.py)."""
        if self._install is None:
            self.version, self._install = obtain()
        return self._install

    def build(self) -> None:
        """Initialise one data directory, copy it for the others (each
        gets its own server_uuid at its first start), start the three,
        found the group on the first and join the others one by one."""
        first, *others = self.nodes
        first.server.initialize(self.install, self.version)
        for member in others:
            shutil.copytree(first.datadir, member.datadir)
            (member.datadir / "auto.cnf").unlink()
        for member in self.nodes:
            member.first_start = True
            member.launch()
        for member in self.nodes:
            wait_for_server(member)
            member.first_start = False  # its later starts join the group by themselves
        first.join(bootstrap=True)
        first.wait_synced()
        for member in others:
            member.join(bootstrap=False)
            member.wait_synced(120)


def wait_for_server(member: GroupMember, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not member.server.answers():
        if member.process is not None and member.process.poll() is not None:
            raise RuntimeError(f"{member.name} exited at start:\n{member.error_log()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{member.name} did not answer in {timeout}s:\n{member.error_log()}")
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(command(MySQLGroup(), sys.argv, __doc__ or ""))
