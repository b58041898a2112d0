"""The concurrency-key and batch indexes hold only the jobs that have a key
or a batch, so a claim or an outcome of any other job moves no entry of
them (issue 33: a claim moves 3 secondary-index entries instead of 5, an
outcome 4 instead of 6; docs/performance.md has what that saves).

PostgreSQL and SQLite have partial indexes (``WHERE concurrency_key IS NOT
NULL``). MySQL has none (and the model cannot declare the condition: Django
warns on every command there); instead each index is on a virtual column
that repeats ``status`` for the rows the index serves and is NULL for the
rest, so an ordinary job's entry stays ``(NULL, NULL)`` whatever its
status. The queue's queries name that column there (transitions/rows.py,
IndexedStatus).

MariaDB keeps its plain indexes, renamed: MariaDB 10.11 can neither add a
column instantly nor rebuild a table online while it has an indexed
virtual column (errors 1845 and 1846, "online rebuild with indexed virtual
columns"), so the partial indexes would make every later migration that
adds a column block writes; and a stored generated column cannot be added
without copying the table (docs/databases.md).

Online on every server, as every migration of the queue's tables
(docs/databases.md, "Migrations run online"): the new indexes are built
before the old ones are dropped, with ``ALGORITHM=INPLACE, LOCK=NONE`` on
MySQL and MariaDB (a virtual column is added without copying the table)
and ``CONCURRENTLY`` on PostgreSQL, so producers and workers carry on.
"""

from django.db import migrations, models

# (virtual column, the key column it follows, new index, old index)
PARTIAL = [
    ("keyed_status", "concurrency_key", "dbqueue_job_keyed_status", "dbqueue_job_key_status"),
    ("batched_status", "batch_id", "dbqueue_job_batched_status", "dbqueue_job_batch_status"),
]
ONLINE = "ALGORITHM=INPLACE, LOCK=NONE"


def forwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    table = quote(job._meta.db_table)
    if connection.vendor == "mysql" and connection.mysql_is_mariadb:
        renames = ", ".join(f"RENAME INDEX {quote(old)} TO {quote(index)}" for _c, _k, index, old in PARTIAL)
        schema_editor.execute(f"ALTER TABLE {table} {renames}, {ONLINE}")
        return
    if connection.vendor == "mysql":
        # Three statements: MySQL adds a virtual column online only in a
        # statement that does nothing else.
        columns = ", ".join(
            f"ADD COLUMN {quote(column)} varchar(10) AS (IF({quote(key)} IS NULL, NULL, {quote('status')})) VIRTUAL"
            for column, key, _index, _old in PARTIAL
        )
        schema_editor.execute(f"ALTER TABLE {table} {columns}, {ONLINE}")
        adds = ", ".join(
            f"ADD INDEX {quote(index)} ({quote(key)}, {quote(column)})"
            for column, key, index, _old in PARTIAL
        )
        schema_editor.execute(f"ALTER TABLE {table} {adds}, {ONLINE}")
        drops = ", ".join(f"DROP INDEX {quote(old)}" for *_, old in PARTIAL)
        schema_editor.execute(f"ALTER TABLE {table} {drops}, {ONLINE}")
        return
    concurrently = " CONCURRENTLY" if connection.vendor == "postgresql" else ""
    for _column, key, index, old in PARTIAL:
        schema_editor.execute(
            f"CREATE INDEX{concurrently} {quote(index)} ON {table} ({quote(key)}, {quote('status')}) "
            f"WHERE {quote(key)} IS NOT NULL"
        )
        schema_editor.execute(f"DROP INDEX{concurrently} {quote(old)}")


def backwards(apps, schema_editor) -> None:
    job = apps.get_model("django_dbqueue", "Job")
    connection, quote = schema_editor.connection, schema_editor.quote_name
    table = quote(job._meta.db_table)
    if connection.vendor == "mysql" and connection.mysql_is_mariadb:
        renames = ", ".join(f"RENAME INDEX {quote(index)} TO {quote(old)}" for _c, _k, index, old in PARTIAL)
        schema_editor.execute(f"ALTER TABLE {table} {renames}, {ONLINE}")
        return
    if connection.vendor == "mysql":
        adds = ", ".join(
            f"ADD INDEX {quote(old)} ({quote(key)}, {quote('status')})" for _c, key, _i, old in PARTIAL
        )
        schema_editor.execute(f"ALTER TABLE {table} {adds}, {ONLINE}")
        indexes = ", ".join(f"DROP INDEX {quote(index)}" for _c, _k, index, _o in PARTIAL)
        schema_editor.execute(f"ALTER TABLE {table} {indexes}, {ONLINE}")
        columns = ", ".join(f"DROP COLUMN {quote(column)}" for column, *_ in PARTIAL)
        schema_editor.execute(f"ALTER TABLE {table} {columns}, {ONLINE}")
        return
    concurrently = " CONCURRENTLY" if connection.vendor == "postgresql" else ""
    for _column, key, index, old in PARTIAL:
        schema_editor.execute(
            f"CREATE INDEX{concurrently} {quote(old)} ON {table} ({quote(key)}, {quote('status')})"
        )
        schema_editor.execute(f"DROP INDEX{concurrently} {quote(index)}")


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run in a transaction; MySQL's DDL commits anyway.
    atomic = False

    dependencies = [
        ("django_dbqueue", "0019_sql_contract_on_mysql"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
            state_operations=[
                migrations.RemoveIndex(model_name="job", name="dbqueue_job_key_status"),
                migrations.RemoveIndex(model_name="job", name="dbqueue_job_batch_status"),
                # Declared without their condition: see models.py.
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(fields=["concurrency_key", "status"], name="dbqueue_job_keyed_status"),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(fields=["batch", "status"], name="dbqueue_job_batched_status"),
                ),
            ],
        ),
    ]
