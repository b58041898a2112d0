"""Keys compare byte for byte (fields.KeyField): on MySQL/MariaDB the key
columns get a binary NO PAD collation; PostgreSQL and SQLite already compare
bytes, so nothing runs there.

Written by hand rather than as AlterField: Django would rebuild the job
table once per column; here one ALTER TABLE changes both of its key columns.

On MariaDB the ALTER says FORCE: without it MariaDB 10.11 changes the
collation by rebuilding only the indexes of those columns (ALGORITHM=NOCOPY),
and with producers and workers writing meanwhile that left the unique index
corrupt in every trial ("tried to purge non-delete-marked record"). FORCE
rebuilds the whole table online instead (ALGORITHM=INPLACE, LOCK=NONE):
slower, but writes go on and the indexes come out whole. Figures for a
million-row table: docs/databases.md.
"""

from django.db import migrations

import django_dbqueue.fields

# (model, [(column, NULL allowed)])
KEY_COLUMNS = [
    ("job", [("unique_key", True), ("concurrency_key", True)]),
    ("concurrencylock", [("key", False)]),
]


def alter_sql(schema_editor, table: str, columns: list[tuple[str, bool]], collation: str | None) -> str:
    quote = schema_editor.quote_name
    modify = ", ".join(
        f"MODIFY {quote(column)} varchar(255)"
        + (f" COLLATE {collation}" if collation else "")
        + (" NULL" if null else " NOT NULL")
        for column, null in columns
    )
    force = ", FORCE" if schema_editor.connection.mysql_is_mariadb else ""
    return f"ALTER TABLE {quote(table)} {modify}{force}"


def alter(apps, schema_editor, forward: bool) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    # Backwards, no COLLATE: the columns take the table's own collation again.
    collation = django_dbqueue.fields.binary_collation(connection) if forward else None
    for model, columns in KEY_COLUMNS:
        table = apps.get_model("django_dbqueue", model)._meta.db_table
        schema_editor.execute(alter_sql(schema_editor, table, columns, collation))


def forwards(apps, schema_editor) -> None:
    alter(apps, schema_editor, forward=True)


def backwards(apps, schema_editor) -> None:
    alter(apps, schema_editor, forward=False)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0006_sql_contract"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.AlterField(
                    model_name="concurrencylock",
                    name="key",
                    field=django_dbqueue.fields.KeyField(max_length=255, unique=True),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="concurrency_key",
                    field=django_dbqueue.fields.KeyField(blank=True, max_length=255, null=True),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="unique_key",
                    field=django_dbqueue.fields.KeyField(blank=True, max_length=255, null=True, unique=True),
                ),
            ],
        ),
    ]
