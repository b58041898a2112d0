"""The ``SequenceTail`` table: the latest job of each sequence key, which
the key's next job waits for (docs/workflows.md, "Sequences").

A new table: online on every database; jobs without a sequence key never
touch it.
"""

from django.db import migrations, models

import django_dbqueue.fields


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0023_unique_window"),
    ]

    operations = [
        migrations.CreateModel(
            name="SequenceTail",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", django_dbqueue.fields.KeyField(max_length=255, unique=True)),
                ("job_id", models.BigIntegerField(null=True)),
            ],
        ),
    ]
