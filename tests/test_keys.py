"""Key columns compare byte for byte, whatever the table's collation
(fields.KeyField, migration 0007_byte_keys)."""

from types import SimpleNamespace

import pytest
from django.db import connection

from django_dbqueue.fields import binary_collation
from django_dbqueue.models import ConcurrencyLock, Job


def server(mariadb: bool, version: tuple[int, ...] = (10, 11, 9)) -> SimpleNamespace:
    return SimpleNamespace(vendor="mysql", mysql_is_mariadb=mariadb, mysql_version=version)


def test_each_server_gets_its_binary_no_pad_collation():
    assert binary_collation(server(True)) == "utf8mb4_nopad_bin"  # MariaDB's utf8mb4_bin pads
    assert binary_collation(server(False, (8, 4, 3))) == "utf8mb4_0900_bin"
    assert binary_collation(server(False, (8, 0, 16))) == "utf8mb4_bin", "no NO PAD binary before 8.0.17"
    assert binary_collation(SimpleNamespace(vendor="postgresql")) is None
    assert binary_collation(SimpleNamespace(vendor="sqlite")) is None


@pytest.mark.django_db
def test_a_trailing_space_or_a_case_makes_another_lock_key():
    keys = ["a", "a ", "A", "á"]
    ConcurrencyLock.objects.bulk_create([ConcurrencyLock(key=key) for key in keys])
    assert sorted(ConcurrencyLock.objects.values_list("key", flat=True)) == sorted(keys)
    assert [ConcurrencyLock.objects.get(key=key).key for key in keys] == keys


@pytest.mark.skipif(connection.vendor != "mysql", reason="the collation is MySQL/MariaDB's own")
@pytest.mark.django_db
def test_the_key_columns_are_binary_in_a_case_insensitive_table():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name IN (%s, %s) "
            "AND column_name IN ('unique_key', 'concurrency_key', 'key', 'queue_name')",
            [Job._meta.db_table, ConcurrencyLock._meta.db_table],
        )
        found = {(table, column): collation for table, column, collation in cursor.fetchall()}
    binary = binary_collation(connection)
    assert found == {
        (Job._meta.db_table, "unique_key"): binary,
        (Job._meta.db_table, "concurrency_key"): binary,
        (ConcurrencyLock._meta.db_table, "key"): binary,
        (Job._meta.db_table, "queue_name"): found[(Job._meta.db_table, "queue_name")],
    }
    assert found[(Job._meta.db_table, "queue_name")].endswith("_ci"), "the test table is case-insensitive"


@pytest.mark.skipif(connection.vendor != "mysql", reason="the collation is MySQL/MariaDB's own")
@pytest.mark.django_db
def test_schedule_names_are_binary_in_a_case_insensitive_table():
    """Migration 0015: the runs' key and the stored schedules' name."""
    from django_dbqueue.models import Schedule, ScheduledRun

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name IN (%s, %s) "
            "AND column_name IN ('schedule', 'name')",
            [ScheduledRun._meta.db_table, Schedule._meta.db_table],
        )
        found = {(table, column): collation for table, column, collation in cursor.fetchall()}
    binary = binary_collation(connection)
    assert found == {
        (ScheduledRun._meta.db_table, "schedule"): binary,
        (Schedule._meta.db_table, "name"): binary,
    }
