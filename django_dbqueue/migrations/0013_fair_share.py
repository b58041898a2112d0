"""Fair share (issue 23): Job.fairness_key, and the claim index with it
after concurrency_key, so that the ordinary claim (both keys NULL) still
reads its jobs in claim order and the fair claim reads each key's jobs so.
The new index is built before the old one is dropped: claims never lack one.
The column is nullable (instant on MariaDB 10.3+ and PostgreSQL 11+); a row
inserted by SQL without it is an ordinary job. On MySQL/MariaDB the SQL
contract's procedure is installed again as version 4, which names the
column (docs/sql-contract.md)."""

from django.db import migrations, models

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
            field=django_dbqueue.fields.KeyField(blank=True, max_length=255, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                fields=["status", "queue_name", "concurrency_key", "fairness_key", "-priority", "run_after"],
                name="dbqueue_job_claim_fair",
            ),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="dbqueue_job_claim_key",
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
