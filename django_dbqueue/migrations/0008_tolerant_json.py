"""Job's JSON columns are read by jsonfield.TolerantJSONField, and the SQL
contract's dbqueue_enqueue() (version 2) refuses the numbers Python cannot
read back.

Only Django's state changes for the columns: the field's column type is
JSONField's own, so nothing runs on the table (an AlterField would rebuild
the whole job table on SQLite). On MySQL/MariaDB the procedure is
installed again, as 0006 does, where this user may create routines.
"""

from typing import Any

from django.db import migrations

import django_dbqueue.jsonfield


def install(apps, schema_editor) -> None:
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


def tolerant(**options: Any) -> django_dbqueue.jsonfield.TolerantJSONField:
    return django_dbqueue.jsonfield.TolerantJSONField(**options)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0007_byte_keys"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(install, migrations.RunPython.noop, elidable=False)],
            state_operations=[
                migrations.AlterField(
                    model_name="job", name="args", field=tolerant(db_default=[], default=list)
                ),
                migrations.AlterField(
                    model_name="job", name="kwargs", field=tolerant(db_default={}, default=dict)
                ),
                migrations.AlterField(
                    model_name="job", name="return_value", field=tolerant(blank=True, null=True)
                ),
                migrations.AlterField(
                    model_name="job", name="errors", field=tolerant(blank=True, db_default=[], default=list)
                ),
                migrations.AlterField(
                    model_name="job",
                    name="worker_ids",
                    field=tolerant(blank=True, db_default=[], default=list),
                ),
                migrations.AlterField(
                    model_name="job", name="history", field=tolerant(blank=True, db_default=[], default=list)
                ),
            ],
        ),
    ]
