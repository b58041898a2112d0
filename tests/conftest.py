"""Fixtures for real worker processes against the test database."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.status_guard import StatusGuard
from tests.threads import together

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "testproject" / "manage.py"


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing() -> Iterator[None]:
    """The admin tests create staff users with a password and log them in:
    PBKDF2's 1.5 million rounds cost half a second a time, 30 s per suite.
    No test is about hashing (Django's advice for test settings)."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


def vendor() -> str:
    return connection.vendor


# The suite's database (testproject/settings.py). "mariadb" and "mysql" both
# go through Django's MySQL backend: a test for what they share checks
# DATABASE in MYSQL_FAMILY; one for a MariaDB server of its own (a private
# mariadbd, Galera) checks DATABASE == "mariadb".
DATABASE = os.environ.get("DBQUEUE_DATABASE", "sqlite")
MYSQL_FAMILY = ("mariadb", "mysql")

needs_row_locks = pytest.mark.skipif(
    DATABASE == "sqlite",
    reason="needs a database with row locks (MySQL, MariaDB or PostgreSQL)",
)


# The database the database-independent process tests run on. ./dev sets it to
# the one server of the run that has them (MySQL, or MariaDB when the MySQL
# lane cannot run), so that CI runs them once; run by hand, they run on either.
ONCE_ON = os.environ.get("DBQUEUE_ONCE_ON", " ".join(MYSQL_FAMILY)).split()


def once_per_run(covered: str) -> pytest.MarkDecorator:
    """Run a process test whose behaviour does not depend on the database
    once per CI run: in the MySQL suite (the MariaDB suite's when the MySQL
    lane cannot run; CI fails rather than skips without them). ``covered``
    says which tests run its SQL on the other databases."""
    return pytest.mark.skipif(
        DATABASE not in ONCE_ON,
        reason=f"database-independent: runs once, in the {' or '.join(ONCE_ON)} suite; "
        f"on this database, {covered}",
    )


def subprocess_env(**overrides: str) -> dict[str, str]:
    """The environment for a child process that must use the test database."""
    env = os.environ.copy()
    name = str(connection.settings_dict["NAME"])
    if connection.vendor == "sqlite":
        env["DBQUEUE_SQLITE"] = name
    else:
        env["DBQUEUE_DB_NAME"] = name
    env.setdefault("DBQUEUE_LEASE", "3")
    env.setdefault("DBQUEUE_BACKOFF", "0.05")
    env.setdefault("DBQUEUE_STATUS_INTERVAL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.1) -> object:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(interval)


def claim_in_threads(
    claim: Callable[[str], list], threads: int, ready: Callable[[], bool]
) -> list[list[int]]:
    """Run ``claim(owner)`` in ``threads`` threads (each with its own
    connection) started together, until ``ready()`` says nothing is left;
    return the ids each owner ``t0``, ``t1``, ... got. An empty claim may only
    mean the others held every candidate at that instant, so a thread stops
    when nothing is READY, not on its first empty claim."""

    def claimer(index: int) -> list[int]:
        seen: list[int] = []
        while ready():
            seen.extend(job.pk for job in claim(f"t{index}"))
        return seen

    return together(claimer, threads)


class Runqueue:
    """A `manage.py runqueue` subprocess whose output goes to a log file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(MANAGE), "runqueue", *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,  # its own process group, like a service
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def signal_group(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"runqueue did not exit in {timeout}s:\n{self.output()[-3000:]}") from None

    def children(self, kind: str = "dbqueue-worker") -> list[int]:
        """The supervisor's worker processes (``kind="dbqueue-heartbt"``: its heartbeat)."""
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        pids = [int(pid) for pid in path.read_text().split()] if path.exists() else []
        return [pid for pid in pids if _comm(pid) == kind]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._out.close()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.fixture
def runqueue(tmp_path: Path) -> Iterator[Callable[..., Runqueue]]:
    """Start real `runqueue` processes on the test database; all are killed at teardown."""
    started: list[Runqueue] = []

    def start(*args: str, **env: str) -> Runqueue:
        proc = Runqueue(list(args), tmp_path / f"runqueue-{len(started)}.log", subprocess_env(**env))
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


# The outage and chaos tests stop, kill and restart a server of their own
# (sandbox_server): in CI once, in the MySQL suite (ONCE_ON), and in the
# cluster run on Galera; by hand, in the MySQL or the MariaDB suite.
needs_sandbox = pytest.mark.skipif(
    DATABASE not in ONCE_ON,
    reason=f"rehearses outages on a private server: runs once, in the {' or '.join(ONCE_ON)} suite",
)


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[object]:
    """A private server of the suite's kind that tests may kill and restart;
    never the shared one: MySQL's (tests/mysql_server.py) in the MySQL suite,
    MariaDB's otherwise. In the cluster run (DBQUEUE_CLUSTER=1), the Galera
    cluster instead: its crash SIGKILLs the writer node and the proxy fails
    over (tests/galera.py)."""
    from tests.galera import GaleraCluster, WriterAsServer, in_cluster_run
    from tests.mariadb_sandbox import SandboxMariaDB, available
    from tests.mysql_server import SandboxMySQL

    if in_cluster_run():
        cluster = GaleraCluster()
        cluster.heal()
        yield WriterAsServer(cluster)
        cluster.heal()
        return
    server: SandboxMySQL | SandboxMariaDB
    if DATABASE == "mysql":
        server = SandboxMySQL()
    elif available():
        server = SandboxMariaDB()
    else:
        pytest.skip("mariadbd and mariadb-install-db are needed for the outage tests")
    server.install()
    server.start()
    yield server
    server.destroy()


# Only transitions/ writes a job's or a batch's status (tests/status_guard.py):
# every test's SQL is watched, and a status written from another room of the
# package fails the test that made it, naming the file, the line and the SQL.
STATUS_GUARD = StatusGuard()


def _guard_new_connection(sender: object, connection: object, **kwargs: object) -> None:
    STATUS_GUARD.install(connection)


@pytest.fixture(scope="session", autouse=True)
def status_guard_installed() -> Iterator[StatusGuard]:
    from django.db import connections
    from django.db.backends.signals import connection_created

    for each in connections.all(initialized_only=True):
        STATUS_GUARD.install(each)
    connection_created.connect(_guard_new_connection, dispatch_uid="tests.status_guard")
    yield STATUS_GUARD
    connection_created.disconnect(dispatch_uid="tests.status_guard")


@pytest.fixture(autouse=True)
def status_writes(status_guard_installed: StatusGuard) -> Iterator[StatusGuard]:
    """The guard, for a test to read (and ``take()``) what it caught; any
    violation left at the end fails the test."""
    from django.db import connections

    for each in connections.all(initialized_only=True):
        status_guard_installed.install(each)
    status_guard_installed.take()
    yield status_guard_installed
    left = status_guard_installed.take()
    if left:
        pytest.fail(
            "A job's or batch's status was written outside transitions/:\n"
            + "\n".join(f"  {violation}" for violation in left),
            pytrace=False,
        )


@pytest.fixture
def restore_signal_handlers() -> Iterator[None]:
    """For a test that runs a Worker in this process: it installs its stop
    handlers, which must not outlive the test."""
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
    saved = {signum: signal.getsignal(signum) for signum in signals}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def drain_in_bursts(queues: tuple[str, ...] = ("default",), batch: int = 10, timeout: float = 20.0) -> None:
    """Burst runs of a Worker in this process until nothing is READY;
    retries and snoozes wait out their delay in between."""
    from django_dbqueue.models import Job
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.worker import Worker

    deadline = time.monotonic() + timeout
    while Job.objects.ready().exists():
        assert time.monotonic() < deadline, "jobs were still READY"
        assert Worker(task_backends["default"], list(queues), batch=batch, burst=True).run() == 0
        time.sleep(0.05)
