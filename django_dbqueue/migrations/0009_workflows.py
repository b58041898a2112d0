"""Workflows (issue 19): Batch and Dependency, and on Job its batch, has_dependants,
on_parent_failure, pass_result and the WAITING status. Safe on a big job table: new
nullable or defaulted columns, new tables, and one index (batch, status) built online."""

import django.db.models.deletion
import django.db.models.functions.datetime
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0008_tolerant_json"),
    ]

    operations = [
        migrations.CreateModel(
            name="Dependency",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("parent_id", models.BigIntegerField(blank=True, null=True)),
                ("parent_batch_id", models.BigIntegerField(blank=True, null=True)),
                ("child_id", models.BigIntegerField()),
                ("resolved", models.BooleanField(db_default=False, default=False)),
            ],
            options={
                "verbose_name_plural": "dependencies",
            },
        ),
        migrations.AddField(
            model_name="job",
            name="has_dependants",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="job",
            name="on_parent_failure",
            field=models.CharField(db_default="cancel", default="cancel", max_length=6),
        ),
        migrations.AddField(
            model_name="job",
            name="pass_result",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="job",
            name="status",
            field=models.CharField(
                choices=[
                    ("READY", "Ready"),
                    ("RUNNING", "Running"),
                    ("SUCCESSFUL", "Successful"),
                    ("FAILED", "Failed"),
                    ("CANCELLED", "Cancelled"),
                    ("WAITING", "Waiting"),
                ],
                db_default="READY",
                default="READY",
                max_length=10,
            ),
        ),
        migrations.CreateModel(
            name="Batch",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("description", models.TextField(blank=True, db_default="", default="")),
                ("metadata", models.JSONField(blank=True, default=dict)),
                ("on_success", models.JSONField(blank=True, null=True)),
                ("on_failure", models.JSONField(blank=True, null=True)),
                ("on_finish", models.JSONField(blank=True, null=True)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("OPEN", "Open"),
                            ("SUCCEEDED", "Succeeded"),
                            ("FAILED", "Failed"),
                            ("CANCELLED", "Cancelled"),
                        ],
                        db_default="OPEN",
                        default="OPEN",
                        max_length=10,
                    ),
                ),
                ("sealed", models.BooleanField(db_default=False, default=False)),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("callback_job_ids", models.JSONField(blank=True, default=list)),
            ],
            options={
                "verbose_name_plural": "batches",
                "permissions": [
                    ("cancel_batch", "Can cancel batches"),
                    ("retry_batch", "Can retry a batch's failed jobs"),
                ],
                "indexes": [models.Index(fields=["status", "id"], name="dbqueue_batch_status_id")],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="batch",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="jobs",
                to="django_dbqueue.batch",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["batch", "status"], name="dbqueue_job_batch_status"),
        ),
        migrations.AddIndex(
            model_name="dependency",
            index=models.Index(fields=["parent_id", "resolved"], name="dbqueue_dep_parent"),
        ),
        migrations.AddIndex(
            model_name="dependency",
            index=models.Index(fields=["parent_batch_id", "resolved"], name="dbqueue_dep_batch"),
        ),
        migrations.AddIndex(
            model_name="dependency",
            index=models.Index(fields=["child_id", "resolved"], name="dbqueue_dep_child"),
        ),
    ]
