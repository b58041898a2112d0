"""The SQL contract's dbqueue_enqueue() procedure, on MySQL/MariaDB only.

Optional: where the migrating user may not create routines, the migration
says so and succeeds (plain INSERTs need no procedure); `manage.py
install_sql_contract --print` gives the SQL to run by hand.
"""

from django.db import migrations


def install(apps, schema_editor):
    from django_dbqueue import sql_contract

    sql_contract.install_if_permitted(schema_editor.connection)


def uninstall(apps, schema_editor):
    from django_dbqueue import sql_contract

    if schema_editor.connection.vendor == "mysql":
        sql_contract.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbqueue", "0005_paused_queue"),
    ]

    operations = [
        migrations.RunPython(install, uninstall, elidable=False),
    ]
