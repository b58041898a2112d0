"""The job's ``snoozes``: how many times its task gave it back for a while
with ``Snooze``, its attempt unspent (docs/tasks.md, "Snoozing").

Online, as every migration of the queue's tables (docs/databases.md): on
MySQL and MariaDB with ``LOCK=NONE``, so the server refuses rather than
block writes: MySQL adds the column instantly (a change of the table's
metadata); MariaDB 10.11 cannot while the table has indexed virtual
columns (migration 0020) and rebuilds it online instead. On PostgreSQL a
constant default needs no rewrite (since PostgreSQL 11). Written by hand because Django's AddField
would add a CHECK (snoozes >= 0), which MySQL cannot add instantly and
PostgreSQL checks by reading every row under its table lock; the column is
UNSIGNED on MySQL and MariaDB and written only by the queue elsewhere.
"""

from django.db import migrations, models

TYPES = {"mysql": "integer UNSIGNED", "postgresql": "integer", "sqlite": "integer unsigned"}


def forwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    online = ", LOCK=NONE" if connection.vendor == "mysql" else ""
    schema_editor.execute(
        f"ALTER TABLE {quote(job._meta.db_table)} ADD COLUMN {quote('snoozes')} "
        f"{TYPES.get(connection.vendor, 'integer')} DEFAULT 0 NOT NULL{online}"
    )


def backwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    online = ", LOCK=NONE" if connection.vendor == "mysql" else ""
    schema_editor.execute(f"ALTER TABLE {quote(job._meta.db_table)} DROP COLUMN {quote('snoozes')}{online}")


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0020_partial_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.AddField(
                    model_name="job",
                    name="snoozes",
                    field=models.PositiveIntegerField(db_default=0, default=0),
                ),
            ],
        ),
    ]
