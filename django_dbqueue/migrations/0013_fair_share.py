"""Fair share (issue 23): Job.fairness_key (0014_rate_limits builds the
claim index anew with it, so that the ordinary claim, every key NULL,
still reads its jobs in claim order and the fair claim reads each key's
jobs so). The column is nullable (instant on MariaDB 10.3+ and PostgreSQL 11+); a row
inserted by SQL without it is an ordinary job. On MySQL/MariaDB the SQL
contract's procedure is installed again as version 4, which names the
column (docs/sql-contract.md)."""

from django.db import migrations

import django_dbqueue.fields


def install(apps, schema_editor) -> None:
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0012_job_metadata"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="fairness_key",
            field=django_dbqueue.fields.KeyField(blank=True, max_length=191, null=True),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
