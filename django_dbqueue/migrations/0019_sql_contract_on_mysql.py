"""The SQL contract's dbqueue_enqueue() as version 5: on MySQL it works
(version 4 called MariaDB's JSON_COMPACT, so every call failed there) and
refuses integers beyond 64 bits, which MySQL's JSON would store as
approximate doubles. Installed again, as 0006 does, where this user may
create routines; nothing else changes.
"""

from django.db import migrations


def install(apps, schema_editor) -> None:
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0018_job_bulk_token"),
    ]

    operations = [migrations.RunPython(install, migrations.RunPython.noop, elidable=False)]
