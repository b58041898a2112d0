"""Rate limits (issue 23): on Job a rate key and its limit, the claim index
rebuilt with rate_key and fairness_key (0013) beside concurrency_key (so
the ordinary claim's "rate_key IS NULL AND fairness_key IS NULL" are
equalities for it), and the table of rate slots.
The new index is built before the old one is dropped, so claims always
have one. On MySQL/MariaDB the SQL contract's procedure is installed again
as version 4, which names these columns (docs/sql-contract.md)."""

from django.db import migrations, models

import django_dbqueue.fields


def install(apps, schema_editor) -> None:
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0013_fair_share"),
    ]

    operations = [
        migrations.CreateModel(
            name="RateSlot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", django_dbqueue.fields.KeyField(max_length=191)),
                ("slot", models.PositiveIntegerField()),
                ("free_at", models.DateTimeField()),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("key", "slot"), name="dbqueue_rate_slot")],
                "indexes": [models.Index(fields=["free_at"], name="dbqueue_rate_slot_free")],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="rate_key",
            field=django_dbqueue.fields.KeyField(blank=True, max_length=191, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="rate_limit",
            field=models.CharField(blank=True, max_length=16, null=True),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                fields=[
                    "status",
                    "queue_name",
                    "concurrency_key",
                    "rate_key",
                    "fairness_key",
                    "-priority",
                    "run_after",
                ],
                name="dbqueue_job_claim_keys",
            ),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="dbqueue_job_claim_key",
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
