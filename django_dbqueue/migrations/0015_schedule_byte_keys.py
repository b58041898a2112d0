"""Schedule names compare byte for byte, as the other keys do (0007): the
scheduled runs' key (ScheduledRun.schedule, unique with scheduled_at) and
the stored schedules' unique name. On MySQL/MariaDB they took the table's
collation, which ignores accents and case (MariaDB's utf8mb4_unicode_ci,
MySQL's utf8mb4_0900_ai_ci): a stored schedule "rèport" and a settings
schedule "report" shared one key, so only one of them ran each time, and
"Report" could not be stored beside "rèport". PostgreSQL and SQLite already
compare bytes: nothing runs there.

Written by hand as 0007 is, with FORCE on MariaDB for the reason given
there; both tables are small (a row per schedule, and a day of runs per
schedule), so the rebuild is quick.
"""

from django.db import migrations

import django_dbqueue.fields

# (model, column): each varchar(200) NOT NULL
NAME_COLUMNS = [("scheduledrun", "schedule"), ("schedule", "name")]


def alter_sql(schema_editor, table: str, column: str, collation: str | None) -> str:
    quote = schema_editor.quote_name
    collate = f" COLLATE {collation}" if collation else ""
    force = ", FORCE" if schema_editor.connection.mysql_is_mariadb else ""
    return f"ALTER TABLE {quote(table)} MODIFY {quote(column)} varchar(200){collate} NOT NULL{force}"


def alter(apps, schema_editor, forward: bool) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    # Backwards, no COLLATE: the columns take the table's own collation again.
    collation = django_dbqueue.fields.binary_collation(connection) if forward else None
    for model, column in NAME_COLUMNS:
        table = apps.get_model("django_dbqueue", model)._meta.db_table
        schema_editor.execute(alter_sql(schema_editor, table, column, collation))


def forwards(apps, schema_editor) -> None:
    alter(apps, schema_editor, forward=True)


def backwards(apps, schema_editor) -> None:
    alter(apps, schema_editor, forward=False)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0014_rate_limits"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.AlterField(
                    model_name="scheduledrun",
                    name="schedule",
                    field=django_dbqueue.fields.KeyField(max_length=200),
                ),
                migrations.AlterField(
                    model_name="schedule",
                    name="name",
                    field=django_dbqueue.fields.KeyField(max_length=200, unique=True),
                ),
            ],
        ),
    ]
