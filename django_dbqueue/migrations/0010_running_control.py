"""Control over running jobs (issue 20): on Job a cancel request, the latest
progress, the saved checkpoint and the count of interruptions, and an index
on the cancel request. Safe on a big job table: nullable or defaulted columns
(instant on MariaDB 10.3+ and PostgreSQL 11+) and one small index built
online. On MySQL/MariaDB the SQL contract's procedure is installed again as
version 3, which names these columns (docs/sql-contract.md)."""

from django.db import migrations, models

import django_dbqueue.jsonfield


def install(apps, schema_editor) -> None:
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0009_workflows"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="cancel_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="checkpoint",
            field=django_dbqueue.jsonfield.TolerantJSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="interruptions",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="job",
            name="progress",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="progress_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="progress_message",
            field=models.CharField(blank=True, db_default="", default="", max_length=255),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["cancel_requested_at"], name="dbqueue_job_cancel"),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
