"""A private MariaDB primary and its replica, for the tests of reads from
a replica: two SandboxMariaDB servers, the first writing a binary log,
the second replicating it with ``read_only`` on, as a replica is run.

Both are the sandbox's throwaway servers (their own data directories and
ports, no configuration file read); nothing of the shared server on 3306
is touched.
"""

from __future__ import annotations

from tests.mariadb_sandbox import SandboxMariaDB


class ReplicatedPair:
    def __init__(self) -> None:
        self.primary = SandboxMariaDB()
        self.replica = SandboxMariaDB()
        # With the grant tables (not the sandbox's --skip-grant-tables): the
        # procedure migrate installs needs a DEFINER the replica can replay.
        # Row-based binary log (the sandbox's --binlog-format=ROW) under one
        # server id per server; the replica refuses writes but from replication.
        self.primary.server_args = ["--server-id=1", "--log-bin=primary-bin"]
        self.replica.server_args = ["--server-id=2", "--read-only=1", "--relay-log=replica-relay"]

    def start(self) -> None:
        for server in (self.primary, self.replica):
            server.install()
            server.start()
        # From the start of the primary's binary log: everything written
        # after its start (databases, tables, rows) reaches the replica.
        self.replica.execute(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%s, MASTER_USER='root', "
            "MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos",
            [self.primary.port],
        )
        self.replica.execute("START SLAVE")

    def stop_replication(self) -> None:
        self.replica.execute("STOP SLAVE")

    def start_replication(self) -> None:
        self.replica.execute("START SLAVE")

    def wait_until_caught_up(self, timeout: float = 20.0) -> None:
        """Until the replica has applied every transaction the primary has logged."""
        (position,) = self.primary.execute("SELECT @@gtid_binlog_pos")[0]
        if not position:
            return
        (done,) = self.replica.execute("SELECT MASTER_GTID_WAIT(%s, %s)", [position, timeout])[0]
        if done != 0:
            status = self.replica.execute("SHOW SLAVE STATUS")
            raise AssertionError(f"the replica did not reach {position} in {timeout}s: {status}")

    def destroy(self) -> None:
        for server in (self.replica, self.primary):
            server.destroy()
