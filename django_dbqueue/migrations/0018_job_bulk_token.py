"""Bulk enqueue on MySQL (issue 30): MySQL has no INSERT ... RETURNING, so a
multi-row INSERT tags its rows with a token and reads their ids back by it
(enqueue/inserting.py). A nullable column without a default and without an
index: instant on MariaDB 10.3+, MySQL 8.0+ and PostgreSQL, free for the
rows that leave it NULL, and a plain INSERT needs no change."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0017_schedule_admin_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="bulk_token",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
    ]
