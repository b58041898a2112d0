"""Reads from a replica, on a real MariaDB primary and replica started by
the test (tests/mariadb_replica.py): the admin's lists, its dashboard and
queuestats read OPTIONS READ_DATABASE and say how far behind it is; the
admin's actions change the primary; the replica refused as a queue's
DATABASE (E008). A row written while replication is stopped exists on the
primary only, which shows which server each page read."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections
from django.utils.html import escape

from django_dbqueue.checks import check_writable
from django_dbqueue.models import Job, Worker
from django_dbqueue.workflows.models import Batch
from tests.admin_helpers import CHANGELIST, DASHBOARD

needs_sandbox = pytest.mark.skipif(
    os.environ.get("DBQUEUE_DATABASE", "sqlite") != "mariadb",
    reason="starts a private MariaDB primary and its replica; runs with DBQUEUE_DATABASE=mariadb",
)
pytestmark = [needs_sandbox, pytest.mark.django_db(transaction=True)]

PRIMARY, REPLICA = "replica_test_primary", "replica_test_replica"
NAME = "dbq_replica_queue"
NOT_REPLICATING = (
    f"Read from the replica {REPLICA!r}: replica not replicating (IO thread: No, SQL thread: No)."
)
CAUGHT_UP = f"Read from the replica {REPLICA!r}: replica lag: 0 s."


@pytest.fixture(scope="module")
def pair() -> Iterator[object]:
    from tests.mariadb_replica import ReplicatedPair
    from tests.mariadb_sandbox import available

    if not available():
        pytest.skip("mariadbd and mariadb-install-db are needed for a replica")
    servers = ReplicatedPair()
    servers.start()
    servers.primary.execute(f"CREATE DATABASE {NAME}")
    servers.migrated = False
    yield servers
    servers.destroy()


@pytest.fixture
def replica(pair, transactional_db, django_db_blocker, settings) -> Iterator[object]:
    """The pair as two aliases in DATABASES, the default task backend's
    DATABASE on the primary and its READ_DATABASE on the replica. Unblocked
    on purpose: a Django test case refuses connections to aliases it was not
    given, and giving it these two would have its teardown flush the
    replica behind replication's back."""
    with django_db_blocker.unblock():
        yield from _aliases(pair, settings)


def _aliases(pair, settings) -> Iterator[object]:
    base = copy.deepcopy(connections.settings["default"])
    for alias, server in ((PRIMARY, pair.primary), (REPLICA, pair.replica)):
        connections.settings[alias] = {**base, "NAME": NAME, "HOST": "127.0.0.1", "PORT": str(server.port)}
    entry = settings.TASKS["default"]
    options = {**entry.get("OPTIONS", {}), "DATABASE": PRIMARY, "READ_DATABASE": REPLICA}
    settings.TASKS = {**settings.TASKS, "default": {**entry, "OPTIONS": options}}
    if not pair.migrated:
        call_command("migrate", database=PRIMARY, verbosity=0)
        pair.migrated = True
    yield pair
    pair.start_replication()
    for table in ("django_dbqueue_job", "django_dbqueue_worker", "django_dbqueue_batch"):
        pair.primary.execute(f"DELETE FROM {table}", database=NAME)
    pair.wait_until_caught_up()
    for alias in (PRIMARY, REPLICA):
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


def shows(page: object, line: str) -> bool:
    """Whether the admin page shows ``line`` as its subtitle, under its title."""
    return f"<h2>{escape(line)}</h2>" in page.content.decode()


def ready_job(name: str) -> Job:
    return Job.objects.using(PRIMARY).create(task_path="demo.tasks.noop", queue_name=name)


def queuestats(*args: str) -> str:
    out = StringIO()
    call_command("queuestats", *args, stdout=out)
    return out.getvalue()


def test_the_lists_dashboard_and_queuestats_read_the_replica_and_show_its_lag(replica, admin_client):
    both = ready_job("both")
    replica.wait_until_caught_up()
    replica.stop_replication()
    only_primary = ready_job("primary-only")
    Worker.objects.using(PRIMARY).create(name="w", host="primary-only-host", pid=7, queues=["both"])
    Batch.objects.using(PRIMARY).create(description="primary-only batch")

    listed = admin_client.get(CHANGELIST)
    assert [job.pk for job in listed.context["cl"].result_list] == [both.pk]
    assert shows(listed, NOT_REPLICATING)
    assert "primary-only-host" not in admin_client.get("/admin/django_dbqueue/worker/").content.decode()
    assert "primary-only batch" not in admin_client.get("/admin/django_dbqueue/batch/").content.decode()
    dashboard = admin_client.get(DASHBOARD)
    assert [q.name for q in dashboard.context["queues"]] == ["both"]
    assert shows(dashboard, NOT_REPLICATING)
    stats = json.loads(queuestats("--json"))
    assert {q["name"]: q["counts"]["READY"] for q in stats["queues"]}.get("primary-only", 0) == 0
    assert stats["replica"]["database"] == REPLICA and stats["replica"]["lag_seconds"] is None
    assert NOT_REPLICATING in queuestats()
    # The job page reads the primary, where the buttons act.
    assert admin_client.get(f"{CHANGELIST}{only_primary.pk}/change/").status_code == 200

    replica.start_replication()
    replica.wait_until_caught_up()
    listed = admin_client.get(CHANGELIST)
    assert [job.pk for job in listed.context["cl"].result_list] == [only_primary.pk, both.pk]
    assert shows(listed, CAUGHT_UP)
    assert "primary-only-host" in admin_client.get(DASHBOARD).content.decode()
    assert "primary-only batch" in admin_client.get("/admin/django_dbqueue/batch/").content.decode()
    assert CAUGHT_UP in queuestats()
    assert json.loads(queuestats("--json"))["replica"]["lag_seconds"] == 0


def test_an_action_started_from_the_replica_list_changes_the_primary(replica, admin_client):
    job = ready_job("default")
    replica.wait_until_caught_up()
    replica.stop_replication()

    response = admin_client.post(CHANGELIST, {"action": "cancel", "_selected_action": [job.pk]})

    assert response.status_code == 302
    assert Job.objects.using(PRIMARY).get(pk=job.pk).status == "CANCELLED"
    # Replication is stopped: had the action written to the replica, it would show there.
    assert Job.objects.using(REPLICA).get(pk=job.pk).status == "READY"
    replica.start_replication()
    replica.wait_until_caught_up()
    assert Job.objects.using(REPLICA).get(pk=job.pk).status == "CANCELLED"


def test_the_replica_as_a_queues_database_is_refused(replica, settings):
    entry = settings.TASKS["default"]
    settings.TASKS = {
        **settings.TASKS,
        "default": {**entry, "OPTIONS": {**entry["OPTIONS"], "DATABASE": REPLICA}},
    }

    errors = check_writable(databases=[REPLICA])

    assert [(e.id, e.msg) for e in errors] == [
        (
            "django_dbqueue.E008",
            f"The database {REPLICA!r} is read-only (read_only=ON), so workers cannot claim jobs there "
            "and enqueue() fails: a queue's DATABASE must be its writable primary.",
        )
    ]
    with pytest.raises(SystemCheckError, match="django_dbqueue.E008"):
        call_command("check", databases=[REPLICA])
    settings.TASKS = {
        **settings.TASKS,
        "default": {**entry, "OPTIONS": {**entry["OPTIONS"], "DATABASE": PRIMARY}},
    }
    assert check_writable(databases=[PRIMARY]) == []
