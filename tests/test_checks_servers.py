"""The checks of the server a queue lives on and of OPTIONS READ_DATABASE:
engines that accept SKIP LOCKED without locking (E009), told apart by what
they report of themselves; a read-only queue database (E008, on a real
replica in test_replica_reads.py); the read alias's type (E003) and
existence (E007)."""

import pytest

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.checks import check_real_row_locks, check_writable
from django_dbqueue.server_facts import lockless_engine

BACKEND = "django_dbqueue.backend.DatabaseBackend"


@pytest.mark.parametrize(
    ("version", "comment", "engine"),
    [
        # SELECT VERSION(), @@version_comment as each server answers it.
        (
            "8.0.11-TiDB-v7.5.0",
            "TiDB Server (Apache License 2.0) Community Edition, MySQL 8.0 compatible",
            "TiDB",
        ),
        ("8.0.11-TiDB-v7.5.2-serverless", "TiDB Server", "TiDB"),
        ("5.7.25-TiDB-v4.0.0-beta.2-524-g73fe3ca4d-dirty", "TiDB Server", "TiDB"),
        ("8.0.31", "Dolt", "Dolt"),  # Dolt reports a MySQL version; its comment says who it is
        ("8.0.33", "Dolt", "Dolt"),
        ("10.11.6-MariaDB-0+deb12u1-log", "Debian 12", None),
        ("11.4.2-MariaDB", "mariadb.org binary distribution", None),
        ("8.0.36", "MySQL Community Server - GPL", None),
        ("8.0.mysql_aurora.3.05.2", "Source distribution", None),
        ("8.0.34-26", "Percona Server (GPL), Release 26, Revision 0fe62c85", None),
    ],
)
def test_engines_that_fake_skip_locked_are_told_by_their_version(version, comment, engine):
    assert lockless_engine(version, comment) == engine


@pytest.mark.django_db
def test_the_test_database_is_writable_and_locks_its_rows():
    # The suite's own database: neither check may fire on a real, writable server.
    assert check_writable(databases=["default"]) == []
    assert check_real_row_locks(databases=["default"]) == []


def test_a_read_database_of_the_wrong_type_is_an_e003():
    backend = DatabaseBackend("default", {"BACKEND": BACKEND, "OPTIONS": {"READ_DATABASE": ["replica"]}})

    assert [(m.id, m.msg) for m in backend.check()] == [
        (
            "django_dbqueue.E003",
            "OPTIONS READ_DATABASE must be a database alias (a string) or None, not ['replica'].",
        )
    ]


def test_a_read_database_missing_from_databases_is_an_e007():
    backend = DatabaseBackend("mail", {"BACKEND": BACKEND, "OPTIONS": {"READ_DATABASE": "replica"}})

    assert [(m.id, m.msg, m.hint) for m in backend.check()] == [
        (
            "django_dbqueue.E007",
            "The task backend 'mail' reads its admin lists and statistics from the database 'replica' "
            "(OPTIONS READ_DATABASE), which is not in DATABASES; its aliases are default.",
            "Add the replica to DATABASES, or remove TASKS['mail']['OPTIONS']['READ_DATABASE'] to read "
            "from the queue's own DATABASE.",
        )
    ]


def test_no_read_database_reads_the_queues_own():
    from django_dbqueue.replica import lag_of, read_database

    backend = DatabaseBackend("default", {"BACKEND": BACKEND, "OPTIONS": {"READ_DATABASE": None}})

    assert backend.check() == []
    assert read_database(backend) == "default" and lag_of(backend) is None
