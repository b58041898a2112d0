"""Queues on two database servers: the test database on the shared MariaDB
as the task backend ``default``, and a private MariaDB server started by
the test (tests/mariadb_sandbox.py) as the database and task backend
``second``. Enqueue goes where the task's backend points, get_result()
finds either server's job from its id alone although both servers number
their jobs from the same AUTO_INCREMENT, unique keys hold per server, one
runqueue drains both, and queuestats and the dashboard show both."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import signal
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from django_dbqueue.exceptions import JobAlreadyQueued
from django_dbqueue.models import Job
from django_dbqueue.routing import split_result_id
from django_dbqueue.tasks_api import TaskResultDoesNotExist, default_task_backend, task_backends
from django_dbqueue.testing import run_due_jobs
from django_dbqueue.worker.supervisor.status_line import StatusLine
from django_dbqueue.worker.supervisor.supervisor import Supervisor
from django_dbqueue.workflows import chain
from django_dbqueue.workflows.models import Dependency
from tests.admin_helpers import DASHBOARD
from tests.conftest import ROOT, wait_for

needs_sandbox = pytest.mark.skipif(
    os.environ.get("DBQUEUE_DATABASE", "sqlite") != "mariadb",
    reason="starts a second, private MariaDB server; runs with DBQUEUE_DATABASE=mariadb",
)
pytestmark = [needs_sandbox, pytest.mark.django_db(transaction=True)]

SECOND = "second"
NAME = "dbq_second_queue"


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    from tests.mariadb_sandbox import SandboxMariaDB, available

    if not available():
        pytest.skip("mariadbd and mariadb-install-db are needed for a second server")
    sandbox = SandboxMariaDB()
    sandbox.install()
    sandbox.start()
    sandbox.execute(f"CREATE DATABASE {NAME}")
    sandbox.migrated = False
    yield sandbox
    sandbox.destroy()


@pytest.fixture
def second(server, transactional_db, django_db_blocker, settings) -> Iterator[object]:
    """The second server as the alias and task backend ``second``, beside
    the test database. Unblocked and added at run time, as
    test_replica_reads.py does: the test case's teardown must not flush it."""
    with django_db_blocker.unblock():
        base = copy.deepcopy(connections.settings["default"])
        connections.settings[SECOND] = {**base, "NAME": NAME, "HOST": "127.0.0.1", "PORT": str(server.port)}
        entry = settings.TASKS["default"]
        options = {**entry.get("OPTIONS", {}), "DATABASE": SECOND}
        settings.TASKS = {
            **settings.TASKS,
            SECOND: {**entry, "QUEUES": ["default", "reports"], "OPTIONS": options},
        }
        if not server.migrated:
            call_command("migrate", database=SECOND, verbosity=0)
            server.migrated = True
        yield server
        for table in ("django_dbqueue_job", "django_dbqueue_worker"):
            server.execute(f"DELETE FROM {table}", database=NAME)
        connections[SECOND].close()
        del connections[SECOND]
        del connections.settings[SECOND]


def queuestats(*args: str) -> str:
    out = StringIO()
    call_command("queuestats", *args, stdout=out)
    return out.getvalue()


def test_enqueue_goes_to_the_tasks_backend_and_get_result_finds_each_servers_job_from_its_id(second):
    from demo.tasks import add

    home = add.enqueue(1, 2)
    # The second server numbers its jobs from where the first is: both have a job 'pk'.
    pk = int(home.id)
    second.execute(f"ALTER TABLE django_dbqueue_job AUTO_INCREMENT = {pk}", database=NAME)
    away = add.using(backend=SECOND).enqueue(3, 4)

    assert Job.objects.using(SECOND).get().pk == pk == Job.objects.get().pk
    assert (home.id, away.id, away.backend) == (str(pk), f"{SECOND}:{pk}", SECOND)
    for backend in (default_task_backend, task_backends[SECOND]):
        assert backend.get_result(home.id).args == [1, 2]
        assert backend.get_result(away.id).args == [3, 4]
    assert add.get_result(away.id).args == [3, 4]
    away.refresh()
    assert away.status == "READY" and away.args == [3, 4]
    with pytest.raises(TaskResultDoesNotExist, match="names the task backend 'nowhere', which is not"):
        default_task_backend.get_result(f"nowhere:{pk}")


def test_unique_keys_hold_per_server(second):
    from demo.tasks import add

    first = add.using(unique_key="nightly").enqueue(1, 1)
    again = add.using(unique_key="nightly").enqueue(2, 2)
    there = add.using(unique_key="nightly", backend=SECOND).enqueue(3, 3)
    there_again = add.using(unique_key="nightly", backend=SECOND).enqueue(4, 4)

    assert again.id == first.id and there_again.id == there.id
    assert Job.objects.filter(unique_key="nightly").count() == 1
    assert Job.objects.using(SECOND).filter(unique_key="nightly").count() == 1


def test_ids_of_a_held_key_and_of_run_due_jobs_are_the_backends_result_ids(second):
    from demo.tasks import add

    home = add.using(unique_key="held").enqueue(1, 1)
    there = add.using(unique_key="held", backend=SECOND).enqueue(2, 2)
    for held in (home, there):
        with pytest.raises(JobAlreadyQueued, match=f"The unfinished job {held.id} ") as raised:
            add.using(unique_key="held", on_duplicate="raise", backend=held.backend).enqueue(3, 3)
        assert raised.value.job_id == held.id
    assert there.id.startswith(f"{SECOND}:") and ":" not in home.id

    [ran_there] = run_due_jobs(backend=SECOND)
    [ran_home] = run_due_jobs()
    assert (ran_home.id, ran_there.id) == (home.id, there.id)
    assert ran_there.return_value == 4


def test_depends_on_a_job_of_another_server_is_refused_and_one_on_the_same_database_is_not(second, settings):
    from demo.tasks import add

    home = add.enqueue(1, 1)
    there = add.using(backend=SECOND).enqueue(2, 2)
    refusals = [
        (add.using(depends_on=[home], backend=SECOND), f"the job #{home.id} of the database 'default'"),
        (add.using(depends_on=[there]), "of the database 'second', but the job of demo.tasks.add goes "),
        (add.using(depends_on=[there.id]), "to the database 'default': a job's parents must be on its own"),
        (add.using(depends_on=[home.id], backend=SECOND), "goes to the database 'second'"),
    ]
    for dependant, message in refusals:
        with pytest.raises(ValueError, match=message):
            dependant.enqueue(3, 3)
    with pytest.raises(ValueError, match="database 'default'"):
        chain((add.using(backend=SECOND), (1, 2)), (add, (3, 4)))
    assert (Job.objects.count(), Job.objects.using(SECOND).count()) == (1, 1), "a refusal writes nothing"

    # Backends that share a DATABASE share its jobs: their parents are found.
    entries = {alias: dict(entry) for alias, entry in settings.TASKS.items()}
    settings.TASKS = {**entries, "home2": entries["default"], "second2": entries[SECOND]}
    here = add.using(depends_on=[home], backend="home2").enqueue(4, 4)
    away = add.using(depends_on=[there.id], backend="second2").enqueue(5, 5)
    assert away.id.startswith("second2:") and ":" not in here.id
    parents = [
        Dependency.objects.using(database).get(child_id=split_result_id(result.id)[1]).parent_id
        for database, result in (("default", here), (SECOND, away))
    ]
    assert parents == [int(home.id), int(split_result_id(there.id)[1])]


def test_one_runqueue_serving_both_backends_drains_both_servers(second, runqueue):
    from demo.tasks import noop

    for _ in range(40):
        noop.enqueue()
        noop.using(backend=SECOND).enqueue()

    run = runqueue(
        "--backend", "default", "--backend", SECOND, "--processes", "2", "--burst",
        DJANGO_SETTINGS_MODULE="tests.several_servers_settings",
        PYTHONPATH=str(ROOT),
        DBQUEUE_SECOND_PORT=str(second.port),
        DBQUEUE_SECOND_NAME=NAME,
    )  # fmt: skip

    assert run.wait(60) == 0, run.output()
    for alias in ("default", SECOND):
        assert list(Job.objects.using(alias).values_list("status", "attempts").distinct()) == [
            ("SUCCESSFUL", 1)
        ], alias
    # Each server's jobs were run by its own backend's worker processes.
    workers = [
        {name for job in Job.objects.using(alias) for name in job.worker_ids} for alias in ("default", SECOND)
    ]
    assert all(workers) and not workers[0] & workers[1], workers
    for alias in ("default", SECOND):
        assert re.search(
            rf"Done: processed 40 jobs \(0 failed\) in .*, for the backend '{alias}'\.", run.output()
        )


def test_the_status_lines_name_the_backend_only_when_runqueue_serves_several(second, caplog):
    from demo.tasks import noop

    noop.using(backend=SECOND).enqueue()  # a backlog: a status line is due
    lines = {}
    for several in (False, True):
        status = StatusLine(Supervisor(SECOND, ["default"], processes=1, batch=1, burst=True))
        if several:
            status.name_backend()  # as SupervisorGroup does for each of several backends
        status.interval = 0.0
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="django_dbqueue"):
            status.maybe_log()
            status.summary()
        lines[several] = [record.getMessage() for record in caplog.records]
    line, summary = (
        r"processed=0 failed=0 rate=0\.0 jobs/s ready_backlog=1",
        r"Done: processed 0 jobs \(0 failed\)",
    )
    restarts = r" in \d+\.\ds, 0\.0 jobs/s, 0 worker restarts"
    assert re.fullmatch(line, lines[False][0]) and re.fullmatch(summary + restarts + r"\.", lines[False][1])
    assert re.fullmatch("backend=second " + line, lines[True][0]), lines[True]
    assert re.fullmatch(summary + restarts + ", for the backend 'second'\\.", lines[True][1]), lines[True]


@pytest.mark.parametrize("to_group", [False, True], ids=["runqueue", "its-process-group"])
def test_a_stop_signal_stops_every_backends_workers_once(second, runqueue, to_group):
    """SIGTERM to runqueue alone, or to its whole group as Ctrl-C and
    service managers send it (each worker then sees it too): every
    backend's workers stop, none is forced."""
    run = runqueue(
        "--backend", "default", "--backend", SECOND, "--processes", "2",
        DJANGO_SETTINGS_MODULE="tests.several_servers_settings",
        PYTHONPATH=str(ROOT),
        DBQUEUE_SECOND_PORT=str(second.port),
        DBQUEUE_SECOND_NAME=NAME,
    )  # fmt: skip
    wait_for(lambda: run.output().count("started on queues") == 4, timeout=30)

    (run.signal_group if to_group else run.signal)(signal.SIGTERM)

    assert run.wait(30) == 0, run.output()
    assert run.output().count("stopped after 0 jobs") == 4
    assert "stopping the workers at once" not in run.output()


def test_queuestats_and_the_dashboard_show_both_servers(second, admin_client):
    from demo.tasks import add, noop

    add.enqueue(1, 2)
    for _ in range(3):
        noop.using(backend=SECOND, queue_name="reports").enqueue()

    text = queuestats()
    assert "Database 'default' (task backend 'default')" in text
    assert "Database 'second' (task backend 'second')" in text
    servers = {s["database"]: s for s in json.loads(queuestats("--json"))["servers"]}
    assert servers["default"]["backends"] == ["default"]
    assert {q["name"]: q["counts"]["READY"] for q in servers["default"]["queues"]}["default"] == 1
    assert {q["name"]: q["counts"]["READY"] for q in servers[SECOND]["queues"]}["reports"] == 3
    # One backend named: its snapshot alone, as on a single server.
    alone = json.loads(queuestats("--json", "--backend", SECOND))
    assert "servers" not in alone and {q["name"] for q in alone["queues"]} == {"default", "reports"}
    reports = json.loads(queuestats("--json", "--queue", "reports"))
    assert [q["name"] for q in reports["queues"]] == ["reports"], "only the server that has the queue"

    page = admin_client.get(DASHBOARD).content.decode()
    assert "Queues in Database &#x27;default&#x27; (task backend &#x27;default&#x27;)" in page
    assert "Queues in Database &#x27;second&#x27; (task backend &#x27;second&#x27;)" in page
    [section] = admin_client.get(DASHBOARD).context["servers"]
    assert {q.name: q.counts.get("READY", 0) for q in section["queues"]}["reports"] == 3


def test_runqueue_says_which_backend_serves_none_of_the_queues_named(second):
    with pytest.raises(CommandError, match="The backend 'second' has none of the queues named by --queue"):
        call_command("runqueue", "--backend", "default", "--backend", SECOND, "--queue", "email")
    with pytest.raises(CommandError, match=r"Unknown queue 'nope' for the backends 'default' \(QUEUES"):
        call_command("runqueue", "--backend", "default", "--backend", SECOND, "--queue", "nope")
