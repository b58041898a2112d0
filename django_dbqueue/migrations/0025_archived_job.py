"""The ``ArchivedJob`` table: finished jobs that retention deleted with
``OPTIONS["ARCHIVE"]`` on (docs/operations.md, "Archive"). A new table:
online on every database; the job table does not change.
"""

import django.utils.timezone
from django.db import migrations, models

import django_dbqueue.jsonfield


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0024_sequence_tail"),
    ]

    operations = [
        migrations.CreateModel(
            name="ArchivedJob",
            fields=[
                ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("task_path", models.CharField(max_length=255)),
                ("queue_name", models.CharField(max_length=64)),
                ("status", models.CharField(max_length=16)),
                ("enqueued_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField(null=True)),
                ("archived_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("row", django_dbqueue.jsonfield.TolerantJSONField(default=dict)),
            ],
            options={
                "verbose_name": "archived job",
                "verbose_name_plural": "archive",
                "indexes": [
                    models.Index(fields=["task_path", "id"], name="dbqueue_archive_task_id"),
                    models.Index(fields=["finished_at"], name="dbqueue_archive_finished"),
                ],
            },
        ),
    ]
