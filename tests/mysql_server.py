"""A local Oracle MySQL server for the MySQL lane of the tests and the benchmarks.

    .venv/bin/python tests/mysql_server.py start|stop|status|update   (what ./dev mysql runs)

The server is Debian sid's, unpacked into a cache outside the checkout and
run in place (``tests/mysql_packages.py``): nothing is installed system-wide.
It listens on 127.0.0.1:PORT (``DBQUEUE_MYSQL_PORT``, default 3307) with root
and no password, and keeps its data directory, socket, pid file and log in
``DBQUEUE_MYSQL_DIR`` (default ``${XDG_STATE_HOME:-~/.local/state}/django-dbqueue/mysql-PORT``).
Everything else is MySQL's default, as users get it: the binary log on
(ROW, ``sync_binlog=1``), REPEATABLE READ, ``caching_sha2_password``.

``start`` is idempotent (a server already answering is left as it is);
``stop`` shuts it down and keeps its data; ``update`` looks in sid for a newer
version than the cached one (``start`` otherwise runs the cache's, and goes
to sid only when the cache is empty).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import MySQLdb

from tests.mysql_packages import NoMySQL, command, obtain
from tests.server_processes import connect, execute

DEFAULT_PORT = 3307


def state_dir(port: int) -> Path:
    if os.environ.get("DBQUEUE_MYSQL_DIR"):
        return Path(os.environ["DBQUEUE_MYSQL_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "django-dbqueue" / f"mysql-{port}"


class MySQLServer:
    def __init__(self, port: int | None = None, root: Path | None = None) -> None:
        self.port = port or int(os.environ.get("DBQUEUE_MYSQL_PORT") or DEFAULT_PORT)
        self.root = root or state_dir(self.port)
        self.datadir = self.root / "data"
        self.socket = self.root / "mysqld.sock"
        self.pid_file = self.root / "mysqld.pid"
        self.log = self.root / "error.log"
        # mysqld refuses to run as root unless told to.
        self.user_args = ["--user=root"] if os.geteuid() == 0 else []

    def mysqld(self, install: Path, *args: str) -> list[str]:
        return command(
            install,
            "usr/sbin/mysqld",
            "--no-defaults",
            *self.user_args,
            f"--basedir={install / 'usr'}",
            f"--datadir={self.datadir}",
            f"--lc-messages-dir={install / 'usr/share/mysql'}",
            f"--character-sets-dir={install / 'usr/share/mysql/charsets'}",
            f"--plugin-dir={install / 'usr/lib/mysql/plugin'}",
            f"--log-error={self.log}",
            *args,
        )

    def serving(self, *more: str) -> list[str]:
        """The options that make ``mysqld`` serve this server's port and files."""
        return [
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            "--mysqlx=OFF",
            "--secure-file-priv=NULL",  # its default, /var/lib/mysql-files, does not exist here
            *more,
        ]

    def initialize(self, install: Path, version: str) -> None:
        """A new data directory for ``version`` (a directory of another
        version is thrown away: the data is the tests' own, and a downgrade
        would not start)."""
        marker = self.root / "data.version"
        if self.datadir.is_dir() and marker.is_file() and marker.read_text().strip() == version:
            return
        shutil.rmtree(self.datadir, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log.unlink(missing_ok=True)
        done = subprocess.run(self.mysqld(install, "--initialize-insecure"), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mysqld --initialize-insecure failed:\n{done.stderr}{self.error_log()}")
        marker.write_text(version + "\n")

    def start(self, refresh: bool = False, timeout: float = 120.0) -> tuple[str, float]:
        """Start the server unless it answers; return (version, seconds it took)."""
        began = time.monotonic()
        if self.answers():
            return self.version(), time.monotonic() - began
        version, install = obtain(refresh)
        self.initialize(install, version)
        with open(self.root / "mysqld.out", "ab") as out:
            process = subprocess.Popen(
                self.mysqld(install, *self.serving()),
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        while not self.answers():
            if process.poll() is not None:
                raise RuntimeError(f"mysqld exited at start:\n{self.error_log()}")
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"mysqld did not answer on {self.port} in {timeout}s:\n{self.error_log()}")
            time.sleep(0.2)
        # The binary log stays on (MySQL's default); old runs' logs need not fill the disk.
        self.execute("PURGE BINARY LOGS BEFORE NOW()")
        return self.version(), time.monotonic() - began

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def stop(self, timeout: float = 120.0) -> bool:
        """Shut the server down cleanly; return whether one was running.
        SQL's SHUTDOWN reaches a server whose pid file is gone, too."""
        pid = self.pid()
        if self.answers():
            self.execute("SHUTDOWN")
        elif pid is not None:
            os.kill(pid, signal.SIGTERM)
        else:
            return False
        deadline = time.monotonic() + timeout
        while (pid is not None and self.pid() == pid) or self.answers():
            if time.monotonic() > deadline:
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)  # InnoDB recovers at the next start
                break
            time.sleep(0.2)
        return True

    def answers(self) -> bool:
        try:
            self.connect(connect_timeout=2).close()
            return True
        except MySQLdb.OperationalError:
            return False

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        return connect(self.port, database, **kwargs)

    def execute(self, sql: str, args: object = None, database: str | None = None) -> list[tuple]:
        return execute(self.connect(database), sql, args)

    def version(self) -> str:
        return str(self.execute("SELECT VERSION()")[0][0])

    def status(self) -> str:
        if not self.answers():
            return f"MySQL on 127.0.0.1:{self.port}: down (data in {self.root})"
        (row,) = self.execute(
            "SELECT VERSION(), @@log_bin, @@binlog_format, @@sync_binlog, @@transaction_isolation, "
            "@@authentication_policy, @@collation_server"
        )
        return (
            f"MySQL {row[0]} on 127.0.0.1:{self.port} (pid {self.pid()}, data in {self.root}): "
            f"log_bin={row[1]}, binlog_format={row[2]}, sync_binlog={row[3]}, {row[4]}, "
            f"authentication_policy={row[5]}, collation_server={row[6]}"
        )

    def error_log(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


class SandboxMySQL(MySQLServer):
    """A private, throwaway MySQL server that tests may stop, kill and
    restart (the outage and chaos tests on the MySQL lane), as
    tests/mariadb_sandbox.py's SandboxMariaDB is on MariaDB's, with the same
    methods: its own data directory, port and socket in a temporary folder,
    MySQL's defaults (binary log on), gone when destroyed. The lane's server
    on DBQUEUE_MYSQL_PORT is never touched."""

    kind = "mysql"  # the DBQUEUE_DATABASE a project on it runs with

    def __init__(self) -> None:
        super().__init__(port=_free_port(), root=Path(tempfile.mkdtemp(prefix="dbqueue-mysql-")))
        self.process: subprocess.Popen | None = None
        self.install_dir: Path | None = None

    def install(self) -> None:
        version, self.install_dir = obtain(False)
        self.initialize(self.install_dir, version)

    def start(self, refresh: bool = False, timeout: float = 120.0) -> float:  # type: ignore[override]
        """Start the server; return the seconds it took to accept connections."""
        began = time.monotonic()
        if self.install_dir is None:
            self.install()
        assert self.install_dir is not None
        args = self.serving("--innodb-buffer-pool-size=128M", "--max-connections=200")
        self.process = subprocess.Popen(
            self.mysqld(self.install_dir, *args),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        while not self.answers():
            if self.process.poll() is not None:
                raise RuntimeError(f"mysqld exited at start:\n{self.error_log()}")
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"mysqld did not answer on {self.port} in {timeout}s:\n{self.error_log()}")
            time.sleep(0.1)
        return time.monotonic() - began

    def stop(self, kill: bool = False, timeout: float = 120.0) -> bool:  # type: ignore[override]
        """Shut down cleanly, or with ``kill`` crash it (InnoDB recovers at start)."""
        if self.process is None or self.process.poll() is not None:
            return False
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        self.process.wait(timeout)
        return True

    def restart(self, kill: bool = False, down_for: float = 0.0) -> float:
        self.stop(kill=kill)
        time.sleep(down_for)
        return self.start()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str]) -> int:
    command_name = argv[1] if len(argv) > 1 else ""
    server = MySQLServer()
    try:
        if command_name in ("start", "update"):
            already = server.answers()
            if command_name == "update" and already:
                server.stop()
            version, seconds = server.start(refresh=command_name == "update")
            state = "already running" if already and command_name == "start" else f"up in {seconds:.1f}s"
            where = f"127.0.0.1:{server.port} (root, no password; data in {server.root})"
            print(f"MySQL {version} {state} on {where}")
        elif command_name == "stop":
            print("MySQL stopped" if server.stop() else f"no MySQL was running from {server.root}")
        elif command_name == "status":
            print(server.status())
            return 0 if server.answers() else 3
        else:
            print(__doc__)
            return 2
    except (NoMySQL, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
