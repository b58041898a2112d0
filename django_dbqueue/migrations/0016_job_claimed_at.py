"""When the latest claim took a job (issue 32), for the job's page: a
batch claim records no start per job, so a running job's page could say
neither when nor since when. A nullable column without a default: instant
on MariaDB 10.3+, MySQL 8.0+ and PostgreSQL, and a plain INSERT needs no
change. The claim sets it in the UPDATE it already makes."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0015_schedule_byte_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="claimed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
