"""Archive instead of delete (OPTIONS ARCHIVE): retention copies each job it
deletes into ArchivedJob in the transaction that deletes it, with its whole
row; the admin reads the archive and changes nothing in it."""

import copy
import io
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from django_dbqueue.clock import read_database_now
from django_dbqueue.models import ArchivedJob, Job
from django_dbqueue.operations.retention import Pruner
from django_dbqueue.options import QueueOptions
from django_dbqueue.tasks_api import task_backends
from tests.admin_helpers import staff
from tests.conftest import DATABASE, MYSQL_FAMILY, ROOT

pytestmark = pytest.mark.django_db(transaction=True)
ARCHIVE = "/admin/django_dbqueue/archivedjob/"


def options(archive: bool) -> dict:
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"].update(ARCHIVE=archive, RETENTION={"SUCCESSFUL": 1, "FAILED": 1})
    return tasks


def finished(status: str, days_ago: float, **fields) -> Job:
    at = read_database_now("default") - timedelta(days=days_ago)
    return Job.objects.create(task_path="demo.tasks.add", status=status, finished_at=at, attempts=1, **fields)


def test_prunejobs_archives_what_it_deletes_with_its_whole_row():
    old = finished("SUCCESSFUL", 3, args=[1, 2], return_value={"sum": 3}, metadata={"customer": 42})
    failed = finished(
        "FAILED", 3, errors=[{"exception_class_path": "builtins.ValueError", "traceback": "..."}]
    )
    recent = finished("SUCCESSFUL", 0.1)
    with override_settings(TASKS=options(archive=True)):
        call_command("prunejobs", stdout=io.StringIO())
    assert list(Job.objects.values_list("pk", flat=True)) == [recent.pk]
    archived = {a.pk: a for a in ArchivedJob.objects.all()}
    assert set(archived) == {old.pk, failed.pk}
    row = archived[old.pk].row
    assert (row["args"], row["return_value"], row["metadata"], row["status"]) == (
        [1, 2],
        {"sum": 3},
        {"customer": 42},
        "SUCCESSFUL",
    )
    assert archived[failed.pk].row["errors"][0]["exception_class_path"] == "builtins.ValueError"
    assert archived[failed.pk].status == "FAILED" and archived[failed.pk].finished_at is not None


def test_without_archive_nothing_is_copied_and_the_heartbeat_archives_when_asked():
    finished("SUCCESSFUL", 3)
    with override_settings(TASKS=options(archive=False)):
        call_command("prunejobs", stdout=io.StringIO())
    assert not Job.objects.exists() and not ArchivedJob.objects.exists()
    kept = finished("SUCCESSFUL", 3)
    with override_settings(TASKS=options(archive=True)):
        assert Pruner(task_backends["default"]).run() >= 1
    assert list(ArchivedJob.objects.values_list("pk", flat=True)) == [kept.pk]


def test_an_id_met_again_replaces_its_older_copy():
    job = finished("SUCCESSFUL", 3, args=["new"])
    ArchivedJob.objects.create(
        id=job.pk, task_path="old.task", queue_name="default", status="FAILED", enqueued_at=job.enqueued_at
    )
    with override_settings(TASKS=options(archive=True)):
        call_command("prunejobs", stdout=io.StringIO())
    copy_ = ArchivedJob.objects.get(pk=job.pk)
    assert (copy_.task_path, copy_.status, copy_.row["args"]) == ("demo.tasks.add", "SUCCESSFUL", ["new"])


def test_the_admin_reads_the_archive_and_changes_nothing(client):
    job = finished("SUCCESSFUL", 3, args=["<script>x</script>"])
    with override_settings(TASKS=options(archive=True)):
        call_command("prunejobs", stdout=io.StringIO())
    client.force_login(staff("reader", "view_archivedjob"))
    listed = client.get(ARCHIVE).content.decode()
    assert f">{job.pk}<" in listed and "demo.tasks.add" in listed
    page = client.get(f"{ARCHIVE}{job.pk}/change/").content.decode()
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x</script>" not in page
    assert client.post(f"{ARCHIVE}{job.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ArchivedJob.objects.filter(pk=job.pk).exists()
    client.force_login(staff("nobody", "view_job"))
    assert client.get(ARCHIVE).status_code == 403


def test_archive_must_be_true_or_false():
    with pytest.raises(ImproperlyConfigured, match="OPTIONS ARCHIVE must be True or False, not 'yes'"):
        QueueOptions.parse({"ARCHIVE": "yes"})
    assert QueueOptions.parse({"ARCHIVE": True}).ARCHIVE is True


@pytest.mark.skipif(DATABASE not in MYSQL_FAMILY, reason="partitions of MySQL and MariaDB")
def test_the_partition_recipe_runs_and_drops_a_month(tmp_path):
    text = (ROOT / "docs" / "operations.md").read_text()
    recipe = text.split("so the recipe widens it first", 1)[1].split("```mysql\n", 1)[1].split("```", 1)[0]
    copy_table = "dbqueue_archive_recipe"
    statements = [s.strip() for s in recipe.replace("django_dbqueue_archivedjob", copy_table).split(";")]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {copy_table}")
        cursor.execute(f"CREATE TABLE {copy_table} LIKE django_dbqueue_archivedjob")
        try:
            for statement in filter(None, (strip_comments(s) for s in statements)):
                if "DROP PARTITION" in statement:
                    cursor.execute(
                        f"INSERT INTO {copy_table} "
                        "(id, task_path, queue_name, status, enqueued_at, archived_at, `row`)"
                        " VALUES (1, 't', 'q', 'SUCCESSFUL', '2026-11-02', '2026-11-02', '{}'),"
                        " (2, 't', 'q', 'SUCCESSFUL', '2027-01-02', '2027-01-02', '{}')"
                    )
                cursor.execute(statement)
            cursor.execute(f"SELECT id FROM {copy_table} ORDER BY id")
            assert [row[0] for row in cursor.fetchall()] == [2], "November went with its partition"
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS {copy_table}")


def strip_comments(statement: str) -> str:
    return "\n".join(line for line in statement.splitlines() if not line.strip().startswith("--")).strip()
