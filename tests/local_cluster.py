"""What the local clusters share (tests/galera.py, a MariaDB Galera cluster;
tests/mysql_group.py, a MySQL Group Replication group): three server
processes on this machine, each a :class:`Member` with its own files and
ports under the cluster's directory, and HAProxy in front
(tests/cluster_proxy.py) sending every client to the one writer.

Tests use the same classes: they SIGKILL the writer, stop and restart
members, and connect to members directly.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import MySQLdb

from tests.cluster_proxy import Proxy
from tests.server_processes import alive, connect, execute, read_pid, wait_gone

ENGINES = ("galera", "mysql-gr")


def cluster_engine() -> str | None:
    """The cluster the tests run on (``./dev test``'s cluster run sets
    ``DBQUEUE_CLUSTER`` after ``./dev cluster start ENGINE``; "1" is Galera),
    or None: the cluster tests skip elsewhere."""
    engine = os.environ.get("DBQUEUE_CLUSTER", "")
    return "galera" if engine == "1" else engine if engine in ENGINES else None


class Member:
    """One server process of a cluster. Subclasses name its files, its
    command line (:meth:`arguments`) and when it serves (:meth:`serves`)."""

    # What a session sets so that its reads see every write committed
    # anywhere in the cluster before them.
    SYNC_READS = ""
    # What its error log says when, back after a crash, it caught up with
    # what it missed from another member's log instead of a full copy.
    CAUGHT_UP = ""
    process: subprocess.Popen | None = None
    pid_file: Path
    log: Path

    def __init__(self, cluster: LocalCluster, index: int) -> None:
        self.cluster, self.index = cluster, index
        self.name = f"node{index}"
        self.root = cluster.root / self.name
        self.port = cluster.port + index

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} :{self.port}>"

    def arguments(self) -> list[str]:
        raise NotImplementedError

    def launch(self) -> None:
        """Start the member unless it runs, to join the cluster, without
        waiting (see :meth:`wait_synced`)."""
        raise NotImplementedError

    def serves(self) -> bool:
        """Whether the member is a full member of the cluster, serving clients."""
        raise NotImplementedError

    def describe(self) -> str | None:
        """The member's state in the cluster, in a few words; None when it does not answer."""
        raise NotImplementedError

    def spawn(self, *extra: str) -> None:
        self.pid_file.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [*self.arguments(), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives ./dev cluster start, like a service
        )

    @property
    def pid(self) -> int | None:
        if self.process is not None and self.process.poll() is None:
            return self.process.pid
        pid = read_pid(self.pid_file)
        return pid if alive(pid) else None

    def running(self) -> bool:
        return self.pid is not None

    def wait_synced(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.serves():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited while starting:\n{self.error_log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not join the cluster in {timeout}s:\n{self.error_log()}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: the member crashes (no clean shutdown, InnoDB recovers at start)."""
        self._signal(signal.SIGKILL, timeout=30)

    def stop(self, timeout: float = 60.0) -> None:
        """A clean shutdown: the member leaves the cluster and may rejoin."""
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
        """``CHECKSUM TABLE`` once this member applied every write committed before it asked."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cursor:
                cursor.execute(self.SYNC_READS)
                cursor.execute(f"CHECKSUM TABLE `{table}`")
                return int(cursor.fetchone()[1])
        finally:
            conn.close()

    def error_log(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


class LocalCluster:
    """Three members and the proxy. ``port`` is the proxy's: what clients
    use; member i's clients use PORT+i. Subclasses build the members and
    say how the cluster starts."""

    NAME = ""  # the proxy's section
    TITLE = ""  # what the command line calls it
    NEEDS = ""  # what it needs of this machine, for when it lacks it
    DEFAULT_PORT = 0
    # Seconds from the writer's death to a job finished on the next writer,
    # at most (the failover test's bound; a busy CI machine included).
    FAILS_OVER_WITHIN = 30.0
    CHECK_SCRIPT = ""  # HAProxy's external check: exit 0 when the member takes writes
    nodes: list

    def __init__(self, port: int | None = None) -> None:
        self.port = port or int(os.environ.get("DBQUEUE_CLUSTER_PORT", self.DEFAULT_PORT))
        self.root = Path(os.environ.get("DBQUEUE_CLUSTER_DIR") or self.default_root())
        self.proxy = Proxy(self)

    def default_root(self) -> Path:
        raise NotImplementedError

    def available(self) -> bool:
        """Whether this machine has what the cluster needs."""
        raise NotImplementedError

    def build(self) -> None:
        """Create and start the members and wait until all serve."""
        raise NotImplementedError

    def status(self) -> list[str]:
        """A line for the proxy and one per member."""
        lines = [f"proxy 127.0.0.1:{self.port}: {'up' if self.proxy.answers() else 'down'}"]
        writer, checks = self.writer_name(), self.proxy.view()
        for member in self.nodes:
            state = member.describe()
            if state is None:
                lines.append(f"{member.name} 127.0.0.1:{member.port}: down")
                continue
            check = checks.get(member.name, "?")
            role = " (writer)" if member.name == writer else ""
            lines.append(f"{member.name} 127.0.0.1:{member.port}: {state}, {check} for the proxy{role}")
        return lines

    def running(self) -> bool:
        """Every member serving, and the proxy answering."""
        return all(member.serves() for member in self.nodes) and self.proxy.answers()

    def start(self) -> float:
        """Build and start the cluster unless it runs; return the seconds it took."""
        began = time.monotonic()
        if self.running():
            return time.monotonic() - began
        self.stop()  # a half-started or crashed cluster: start afresh
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.build()
        self.proxy.start()
        return time.monotonic() - began

    def stop(self) -> None:
        """Stop the proxy and every member, and remove the cluster's files."""
        self.proxy.stop()
        for member in self.nodes:
            member.kill()  # throwaway data: no need for a clean shutdown
        shutil.rmtree(self.root, ignore_errors=True)

    def heal(self, timeout: float = 120.0) -> None:
        """Start every member that is down and wait until all serve and the
        proxy's checks see every one that may take writes UP: each test
        leaves the cluster whole. (A member back stays DOWN to the proxy
        for its next two checks, about 2 s: a test starting meanwhile
        would see a cluster of two.)"""
        for member in self.nodes:
            member.launch()
        for member in self.nodes:
            member.wait_synced(timeout)
        deadline = time.monotonic() + timeout
        while not self.proxy.answers() or not self.proxy_settled():
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy on {self.port} sees {self.proxy.view()} after {timeout}s.")
            time.sleep(0.1)

    def proxy_settled(self) -> bool:
        return set(self.proxy.view().values()) == {"UP"}

    def proxy_view(self) -> dict[str, str]:
        """What HAProxy's health checks say of each member (UP, DOWN, ...)."""
        return self.proxy.view()

    def writer_name(self) -> str | None:
        """The member the proxy sends new connections to, or None."""
        return self.proxy.writer_name()

    def writer(self) -> Member:
        name = self.writer_name()
        for member in self.nodes:
            if member.name == name:
                return member
        raise RuntimeError("The proxy reaches no member.")

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        """A connection through the proxy (to the writer)."""
        return connect(self.port, database, **kwargs)

    def execute(
        self, sql: str, args: object = None, database: str | None = None, **kwargs: object
    ) -> list[tuple]:
        return execute(self.connect(database, **kwargs), sql, args)


def command(cluster: LocalCluster, argv: list[str], usage: str) -> int:
    """``start``, ``stop`` or ``status`` of ``cluster``: each cluster's command line."""
    where = f"clients connect to 127.0.0.1:{cluster.port} (the proxy)"
    name = argv[1] if len(argv) > 1 else ""
    try:
        if name == "start":
            if not cluster.available():
                print(f"The {cluster.TITLE} needs {cluster.NEEDS}.", file=sys.stderr)
                return 1
            if cluster.running():
                print(f"{cluster.TITLE} already running; {where}")
                return 0
            seconds = cluster.start()
            print(f"{cluster.TITLE} up in {seconds:.1f}s; {where}")
        elif name == "stop":
            cluster.stop()
            print(f"{cluster.TITLE} stopped")
        elif name == "status":
            print("\n".join(cluster.status()))
            return 0 if cluster.running() else 3
        else:
            print(usage)
            return 2
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
