"""A private, throwaway MariaDB server that tests may stop, kill and restart.

The shared server on 3306 serves everybody's tests; outages are rehearsed on
this one instead: its own data directory, port and socket, no configuration
files read, root without a password, gone when stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import MySQLdb

from tests.server_processes import connect, execute

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"


def available() -> bool:
    return os.access(MARIADBD, os.X_OK) and os.access(INSTALL_DB, os.X_OK)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(
    datadir: Path, port: int, socket: Path, pid_file: Path, log: Path, user_args: list[str]
) -> list[str]:
    """The start of a private server's command line: its own files, on
    127.0.0.1 only, no configuration file read, row-based binary log format
    (SKIP LOCKED is unsafe for statement-based replication)."""
    return [
        MARIADBD,
        "--no-defaults",
        *user_args,
        f"--datadir={datadir}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={socket}",
        f"--pid-file={pid_file}",
        f"--log-error={log}",
        "--binlog-format=ROW",
    ]


def install_datadir(datadir: Path, user_args: list[str]) -> None:
    """Create the system tables of a new server in ``datadir``: root with
    no password, no test database, no configuration file read."""
    subprocess.run(
        [
            INSTALL_DB,
            "--no-defaults",
            *user_args,
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


class SandboxMariaDB:
    kind = "mariadb"  # the DBQUEUE_DATABASE a project on it runs with

    def __init__(self, root: Path | None = None, *, events: bool = False) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="dbqueue-mariadb-"))
        self.datadir = self.root / "data"
        self.socket = self.root / "mariadb.sock"
        self.log = self.root / "error.log"
        self.port = _free_port()
        self.process: subprocess.Popen | None = None
        # As root, mariadbd must drop to the mysql user, which must own the files.
        self.as_root = os.geteuid() == 0
        self.user_args = ["--user=mysql"] if self.as_root else []
        # The event scheduler needs the grant tables (--skip-grant-tables
        # disables it); root@127.0.0.1 has no password either way.
        self.server_args = ["--event-scheduler=ON"] if events else ["--skip-grant-tables"]

    def install(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # mkdtemp's 0700 would keep the mysql user out
        self.datadir.mkdir(exist_ok=True)
        if self.as_root:
            shutil.chown(self.root, "mysql", "mysql")
            shutil.chown(self.datadir, "mysql", "mysql")
        install_datadir(self.datadir, self.user_args)

    def start(self, timeout: float = 60.0) -> float:
        """Start the server; return the seconds it took to accept connections."""
        began = time.monotonic()
        self.process = subprocess.Popen(
            [
                *server_command(
                    self.datadir, self.port, self.socket, self.root / "mariadb.pid", self.log, self.user_args
                ),
                *self.server_args,
                "--innodb-buffer-pool-size=128M",
                "--max-connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            try:
                self.connect(connect_timeout=1).close()
                return time.monotonic() - began
            except MySQLdb.OperationalError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"mariadbd exited at start:\n{self.error_log()}") from None
                if time.monotonic() - began > timeout:
                    raise RuntimeError(f"mariadbd did not start in {timeout}s:\n{self.error_log()}") from None
                time.sleep(0.1)

    def stop(self, kill: bool = False, timeout: float = 60.0) -> None:
        """Shut down cleanly, or with ``kill`` crash it (InnoDB recovers at start)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        self.process.wait(timeout)

    def restart(self, kill: bool = False, down_for: float = 0.0) -> float:
        self.stop(kill=kill)
        time.sleep(down_for)
        return self.start()

    def connect(self, database: str | None = None, **kwargs: object) -> MySQLdb.Connection:
        return connect(self.port, database, **kwargs)

    def execute(self, sql: str, args: object = None, database: str | None = None) -> list[tuple]:
        return execute(self.connect(database), sql, args)

    def error_log(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
