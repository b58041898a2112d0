"""The two schedule entries of the admin's app list get distinct names
(issue 32): "Stored schedules" (the database's, edited there) and "All
schedules" (every schedule with its runs and Run now). Options only: no SQL."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0016_job_claimed_at"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="schedule",
            options={"ordering": ["name"], "verbose_name": "stored schedule"},
        ),
        migrations.AlterModelOptions(
            name="scheduledrun",
            options={
                "permissions": [("run_schedule_now", "Can run a schedule now")],
                "verbose_name_plural": "all schedules",
            },
        ),
    ]
