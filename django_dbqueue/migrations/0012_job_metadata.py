"""Metadata on a job (issue 23): a small JSON object set at enqueue, which
carries the enqueuing trace context. A column with a database default
(instant on MariaDB 10.3+ and PostgreSQL 11+), so a row written by a plain
INSERT stays a valid job. On MySQL/MariaDB the SQL contract's procedure is
installed again as version 4, which names it (docs/sql-contract.md)."""

from django.db import migrations

import django_dbqueue.jsonfield


def install(apps, schema_editor) -> None:
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0011_stored_schedules"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="metadata",
            field=django_dbqueue.jsonfield.TolerantJSONField(blank=True, db_default={}, default=dict),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
