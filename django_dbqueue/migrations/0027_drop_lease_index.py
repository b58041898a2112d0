"""Drop the ``(status, lease_expires_at)`` index (issue 33: move less of
the wide row). Every claim wrote the lease into it and every outcome took
it out again, and every heartbeat moved the entry of each running job, so
that lease recovery could read only the expired ones. Recovery now reads
the RUNNING range of ``(status, id)`` (as many rows as the workers hold)
and checks each one's lease there: still one index range, in id order, and
a claim moves one secondary-index entry fewer, an outcome one fewer.
docs/performance.md, "Moving less of the wide row", has what it saves.

Online on every server (docs/databases.md, "Migrations run online"):
dropping an index is a change of metadata on MySQL and MariaDB
(``ALGORITHM=INPLACE, LOCK=NONE``) and ``DROP INDEX CONCURRENTLY`` on
PostgreSQL; backwards builds it again the same way.
"""

from django.db import migrations

INDEX = "dbqueue_job_lease"
ONLINE = "ALGORITHM=INPLACE, LOCK=NONE"


def forwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    table = quote(job._meta.db_table)
    if connection.vendor == "mysql":
        schema_editor.execute(f"ALTER TABLE {table} DROP INDEX {quote(INDEX)}, {ONLINE}")
    elif connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(INDEX)}")
    else:
        schema_editor.execute(f"DROP INDEX IF EXISTS {quote(INDEX)}")


def backwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    table = quote(job._meta.db_table)
    columns = f"{quote('status')}, {quote('lease_expires_at')}"
    if connection.vendor == "mysql":
        schema_editor.execute(f"ALTER TABLE {table} ADD INDEX {quote(INDEX)} ({columns}), {ONLINE}")
    else:
        concurrently = " CONCURRENTLY" if connection.vendor == "postgresql" else ""
        schema_editor.execute(f"CREATE INDEX{concurrently} {quote(INDEX)} ON {table} ({columns})")


class Migration(migrations.Migration):
    # DROP INDEX CONCURRENTLY cannot run in a transaction; MySQL's DDL commits anyway.
    atomic = False

    dependencies = [
        ("django_dbqueue", "0026_job_tag"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[migrations.RemoveIndex(model_name="job", name=INDEX)],
        ),
    ]
