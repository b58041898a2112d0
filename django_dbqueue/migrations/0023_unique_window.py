"""The ``UniqueWindow`` table: the job that holds a key for one window of a
task unique for a period (docs/scheduling.md, "Unique for a period").

A new table: nothing of the job table changes, so it is online on every
database, and jobs of other tasks never touch it.
"""

from django.db import migrations, models

import django_dbqueue.fields


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0022_job_expires_at"),
    ]

    operations = [
        migrations.CreateModel(
            name="UniqueWindow",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", django_dbqueue.fields.KeyField(max_length=255)),
                ("window", models.BigIntegerField()),
                ("job_id", models.BigIntegerField(db_index=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("key", "window"), name="dbqueue_window_once"),
                ],
            },
        ),
    ]
