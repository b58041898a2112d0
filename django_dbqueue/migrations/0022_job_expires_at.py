"""The job's ``expires_at``: the deadline for a run to start, from the
task's or the call's ``expires=`` (docs/tasks.md, "Expiry"). NULL for a
job without one, which is every job of a task that does not ask.

Online, as every migration of the queue's tables (docs/databases.md): on
MySQL and MariaDB with ``LOCK=NONE``, so the server refuses rather than
block writes (a nullable column without a default is added instantly by
MySQL, and by MariaDB since 10.3); on PostgreSQL adding a nullable column
only changes the catalog. No index: workers read the column with the rows
they claim and never search it.
"""

from django.db import migrations, models


def forwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    online = ", LOCK=NONE" if connection.vendor == "mysql" else ""
    kind = models.DateTimeField(null=True).db_type(connection)  # the state here has no such field yet
    schema_editor.execute(
        f"ALTER TABLE {quote(job._meta.db_table)} ADD COLUMN {quote('expires_at')} {kind} NULL{online}"
    )


def backwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    online = ", LOCK=NONE" if connection.vendor == "mysql" else ""
    schema_editor.execute(f"ALTER TABLE {quote(job._meta.db_table)} DROP COLUMN {quote('expires_at')}{online}")


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0021_job_snoozes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.AddField(
                    model_name="job",
                    name="expires_at",
                    field=models.DateTimeField(blank=True, null=True),
                ),
            ],
        ),
    ]
