"""The ``JobTag`` table: a job's tags, for the admin's ``tag:NAME`` search
(docs/admin.md, "Searching"). A new table: online on every database; jobs
without tags never touch it.
"""

import django_dbqueue.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0025_archived_job"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobTag",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tag", django_dbqueue.fields.KeyField(max_length=64)),
                ("job_id", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["job_id"], name="dbqueue_tag_of_job")],
                "constraints": [models.UniqueConstraint(fields=("tag", "job_id"), name="dbqueue_tag_job")],
            },
        ),
    ]
