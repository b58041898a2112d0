"""The admin follows the backend's OPTIONS["DATABASE"].

The queue lives on its own database alias, "queue"; "default" holds users
and sessions, and (migrated without a router, as a newcomer would) an empty
job table of its own that the admin must not read. A fresh project needs its
own DATABASES, so the scenario runs in a child process (this file run as a
script) on two SQLite files.
"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("router", ["no router", "the router docs/admin.md shows"])
def test_the_admin_reads_and_writes_the_queue_database(tmp_path, router):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "testproject")])}
    args = [sys.executable, __file__, str(tmp_path), "router" if router.startswith("the") else ""]
    child = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.strip().endswith("the admin follows OPTIONS['DATABASE']")


def documented_router() -> type:
    """docs/admin.md's router, read from that page so that the page stays right."""
    text = (ROOT / "docs" / "admin.md").read_text()
    [source] = re.findall(r"```python\n( *# myproject/routers.py\n.*?)```", text, re.S)
    source = textwrap.dedent(source)
    namespace: dict = {}
    exec(source, namespace)
    return namespace["QueueRouter"]


def configure(folder: Path, router: bool) -> None:
    import django
    from django.conf import settings
    from django.test.utils import setup_test_environment

    from testproject import settings as base

    values = {name: getattr(base, name) for name in dir(base) if name.isupper()}
    sqlite = {"ENGINE": "django.db.backends.sqlite3"}
    values["DATABASES"] = {
        "default": {**sqlite, "NAME": folder / "default.sqlite3"},
        "queue": {**sqlite, "NAME": folder / "queue.sqlite3"},
    }
    values["TASKS"] = {
        "default": {
            "BACKEND": "django_dbqueue.backend.DatabaseBackend",
            "QUEUES": ["default", "email", "slow"],
            "OPTIONS": {"DATABASE": "queue"},
        }
    }
    values["DEBUG"] = False
    if router:
        globals()["QueueRouter"] = documented_router()
        values["DATABASE_ROUTERS"] = [f"{__name__}.QueueRouter"]
    settings.configure(**values)
    django.setup()
    setup_test_environment()  # so that responses carry their context


def scenario(router: bool) -> None:
    from django.contrib import admin
    from django.contrib.admin.models import LogEntry
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client
    from django.test.utils import override_settings

    from demo.tasks import add, send_welcome
    from django_dbqueue.models import Job, Worker

    call_command("migrate", verbosity=0)
    call_command("migrate", database="queue", verbosity=0)
    tables = {alias: set(connections[alias].introspection.table_names()) for alias in connections}
    if router:
        assert "django_dbqueue_job" not in tables["default"] and "auth_user" not in tables["queue"]
        assert Job.objects.db == "queue", "with the router, user code's queries go to the queue too"
        default = Job.objects.none()  # no job table there to look at
    else:
        assert "django_dbqueue_job" in tables["default"] and "auth_user" in tables["queue"]
        default = Job.objects.using("default")
    queue = Job.objects.using("queue")
    first = int(add.enqueue(2, 3).id)
    welcome = int(send_welcome.enqueue(4242).id)
    Worker.objects.using("queue").create(name="q-host:7:0", host="q-host", pid=7, queues=["default"])
    assert queue.count() == 2 and default.count() == 0

    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    jobs = "/admin/django_dbqueue/job/"

    listed = client.get(jobs)
    assert [job.pk for job in listed.context["cl"].result_list] == [welcome, first], "the job list"
    page = client.get(f"{jobs}{first}/change/")
    assert page.status_code == 200 and b"demo.tasks.add" in page.content, "the job page"
    assert [j.pk for j in client.get(jobs, {"q": str(first)}).context["cl"].result_list] == [first]
    assert [j.pk for j in client.get(jobs, {"q": "send_wel"}).context["cl"].result_list] == [welcome]
    assert {j.pk for j in client.get(jobs, {"queue_name": "email"}).context["cl"].result_list} == {welcome}

    dashboard = client.get(f"{jobs}dashboard/")
    assert {q.name: q.counts for q in dashboard.context["queues"]} == {
        "default": {"READY": 1},
        "email": {"READY": 1},
    }
    assert b"q-host" in dashboard.content, "live workers come from the queue database"
    assert b"q-host" in client.get("/admin/django_dbqueue/worker/").content

    client.post(jobs, {"action": "cancel", "_selected_action": [first]})
    assert queue.get(pk=first).status == "CANCELLED", "an action changes the queue's row"
    client.post(f"{jobs}{first}/actions/requeue/")
    assert queue.get(pk=first).status == "READY", "so does a button on the job page"
    assert LogEntry.objects.filter(object_id=str(first)).count() == 2, "history is kept in default"
    client.post(jobs, {"action": "delete_selected", "_selected_action": [welcome], "post": "yes"})
    client.post(f"{jobs}{first}/delete/", {"post": "yes"})
    assert queue.count() == 0 and default.count() == 0

    two = {
        "default": {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "OPTIONS": {"DATABASE": "queue"}},
        "other": {"BACKEND": "django_dbqueue.backend.DatabaseBackend"},
    }
    assert not [m for m in admin.site.get_model_admin(Job).check() if m.id == "django_dbqueue.W101"]
    with override_settings(TASKS=two):
        [warning] = [m for m in admin.site.get_model_admin(Job).check() if m.id == "django_dbqueue.W101"]
    assert "shows the jobs of one database only: 'queue'" in warning.msg, warning.msg
    print("the admin follows OPTIONS['DATABASE']")


if __name__ == "__main__":
    configure(Path(sys.argv[1]), router=sys.argv[2] == "router")
    scenario(router=sys.argv[2] == "router")
