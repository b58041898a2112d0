"""Schedules in the database (issue 23): the Schedule table, which the
admin and code edit and every scheduler reads each tick. A new table, so
nothing of the job table changes."""

import django.db.models.functions.datetime
from django.db import migrations, models

import django_dbqueue.jsonfield
import django_dbqueue.stored_schedules


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0010_running_control"),
    ]

    operations = [
        migrations.CreateModel(
            name="Schedule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                (
                    "task",
                    models.CharField(
                        help_text="The import path of a task, e.g. myapp.tasks.report.", max_length=255
                    ),
                ),
                (
                    "cron",
                    models.CharField(
                        help_text="5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first.",
                        max_length=100,
                    ),
                ),
                (
                    "timezone",
                    models.CharField(
                        db_default="UTC",
                        default=django_dbqueue.stored_schedules.default_timezone,
                        max_length=64,
                    ),
                ),
                (
                    "args",
                    django_dbqueue.jsonfield.TolerantJSONField(
                        blank=True, db_default=[], default=list, help_text="A JSON list."
                    ),
                ),
                (
                    "kwargs",
                    django_dbqueue.jsonfield.TolerantJSONField(
                        blank=True, db_default={}, default=dict, help_text="A JSON object."
                    ),
                ),
                (
                    "catch_up",
                    models.CharField(
                        choices=[("latest", "latest"), ("all", "all"), ("skip", "skip")],
                        db_default="latest",
                        default="latest",
                        max_length=6,
                    ),
                ),
                ("backend", models.CharField(db_default="default", default="default", max_length=100)),
                (
                    "enabled",
                    models.BooleanField(db_default=True, default=True, help_text="Unticked: paused."),
                ),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), editable=False
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), editable=False
                    ),
                ),
            ],
            options={
                "ordering": ["name"],
                "indexes": [models.Index(fields=["backend", "enabled"], name="dbqueue_schedule_tick")],
            },
        ),
    ]
