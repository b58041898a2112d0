"""The SQL contract (docs/sql-contract.md) as the database reports it: a
migration that changes a column producers write or read, or adds one that a
plain INSERT would have to fill, fails here."""

import io
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection
from django.test import override_settings

from django_dbqueue import sql_contract
from django_dbqueue.checks import check_sql_contract
from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parent.parent / "docs" / "sql-contract.md"
TABLE = "django_dbqueue_job"

# The contract (version 5): (type, nullable, default) of each column it
# names, as information_schema reports them. None: no default; MariaDB
# reports an explicit DEFAULT NULL as the text 'NULL'.
MARIADB = {
    "id": ("bigint(20)", "NO", None),
    "task_path": ("varchar(255)", "NO", None),
    "args": ("longtext", "NO", "'[]'"),
    "kwargs": ("longtext", "NO", "'{}'"),
    "queue_name": ("varchar(64)", "NO", "'default'"),
    "priority": ("smallint(6)", "NO", "0"),
    "run_after": ("datetime(6)", "NO", "current_timestamp(6)"),
    "max_attempts": ("int(10) unsigned", "NO", "3"),
    "status": ("varchar(10)", "NO", "'READY'"),
    "attempts": ("int(10) unsigned", "NO", "0"),
    "enqueued_at": ("datetime(6)", "NO", "current_timestamp(6)"),
    "started_at": ("datetime(6)", "YES", "NULL"),
    "finished_at": ("datetime(6)", "YES", "NULL"),
    "return_value": ("longtext", "YES", "NULL"),
    "errors": ("longtext", "NO", "'[]'"),
    # Version 3: a producer may set the first, and read the others.
    "cancel_requested_at": ("datetime(6)", "YES", "NULL"),
    "progress": ("double", "YES", "NULL"),
    "progress_message": ("varchar(255)", "NO", "''"),
    "progress_at": ("datetime(6)", "YES", "NULL"),
    "interruptions": ("int(10) unsigned", "NO", "0"),
    # Version 4: a producer may set it.
    "metadata": ("longtext", "NO", "'{}'"),
    # Version 4: a producer may set it (fair share).
    "fairness_key": ("varchar(191)", "YES", "NULL"),
    # Version 4: a producer may set them (rate limits).
    "rate_key": ("varchar(191)", "YES", "NULL"),
    "rate_limit": ("varchar(16)", "YES", "NULL"),
}
# MySQL (9.7) spells them its own way: JSON columns of its JSON type, with
# expression defaults; integers without display widths; defaults unquoted,
# or None for NULL; CURRENT_TIMESTAMP(6) as now(6).
MYSQL = {
    "id": ("bigint", "NO", None),
    "task_path": ("varchar(255)", "NO", None),
    "args": ("json", "NO", "_utf8mb4\\'[]\\'"),
    "kwargs": ("json", "NO", "_utf8mb4\\'{}\\'"),
    "queue_name": ("varchar(64)", "NO", "default"),
    "priority": ("smallint", "NO", "0"),
    "run_after": ("datetime(6)", "NO", "now(6)"),
    "max_attempts": ("int unsigned", "NO", "3"),
    "status": ("varchar(10)", "NO", "READY"),
    "attempts": ("int unsigned", "NO", "0"),
    "enqueued_at": ("datetime(6)", "NO", "now(6)"),
    "started_at": ("datetime(6)", "YES", None),
    "finished_at": ("datetime(6)", "YES", None),
    "return_value": ("json", "YES", None),
    "errors": ("json", "NO", "_utf8mb4\\'[]\\'"),
    "cancel_requested_at": ("datetime(6)", "YES", None),
    "progress": ("double", "YES", None),
    "progress_message": ("varchar(255)", "NO", ""),
    "progress_at": ("datetime(6)", "YES", None),
    "interruptions": ("int unsigned", "NO", "0"),
    "metadata": ("json", "NO", "_utf8mb4\\'{}\\'"),
    "fairness_key": ("varchar(191)", "YES", None),
    "rate_key": ("varchar(191)", "YES", None),
    "rate_limit": ("varchar(16)", "YES", None),
}
POSTGRES = {
    "id": ("bigint", "NO", None),
    "task_path": ("character varying(255)", "NO", None),
    "args": ("jsonb", "NO", "'[]'::jsonb"),
    "kwargs": ("jsonb", "NO", "'{}'::jsonb"),
    "queue_name": ("character varying(64)", "NO", "'default'::character varying"),
    "priority": ("smallint", "NO", "0"),
    "run_after": ("timestamp with time zone", "NO", "statement_timestamp()"),
    "max_attempts": ("integer", "NO", "3"),
    "status": ("character varying(10)", "NO", "'READY'::character varying"),
    "attempts": ("integer", "NO", "0"),
    "enqueued_at": ("timestamp with time zone", "NO", "statement_timestamp()"),
    "started_at": ("timestamp with time zone", "YES", None),
    "finished_at": ("timestamp with time zone", "YES", None),
    "return_value": ("jsonb", "YES", None),
    "errors": ("jsonb", "NO", "'[]'::jsonb"),
    "cancel_requested_at": ("timestamp with time zone", "YES", None),
    "progress": ("double precision", "YES", None),
    "progress_message": ("character varying(255)", "NO", "''::character varying"),
    "progress_at": ("timestamp with time zone", "YES", None),
    "interruptions": ("integer", "NO", "0"),
    "metadata": ("jsonb", "NO", "'{}'::jsonb"),
    "fairness_key": ("character varying(191)", "YES", None),
    "rate_key": ("character varying(191)", "YES", None),
    "rate_limit": ("character varying(16)", "YES", None),
}
# The procedure's parameters, in order (MariaDB/MySQL).
PARAMETERS = [
    ("IN", "p_task_path", "text"),
    ("IN", "p_args", "longtext"),
    ("IN", "p_kwargs", "longtext"),
    ("IN", "p_queue", "text"),
    ("IN", "p_priority", "int"),
    ("IN", "p_run_after", "datetime"),
    ("IN", "p_max_attempts", "int"),
    ("OUT", "p_job_id", "bigint"),
]


def columns() -> dict[str, tuple[str, str, str | None, bool]]:
    """Each column's (type, nullable, default, generated by the database)."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(
                "SELECT column_name, column_type, is_nullable, column_default, extra "
                "FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = %s",
                [TABLE],
            )
            return {
                name: (kind, nullable, default, "auto_increment" in extra)
                for name, kind, nullable, default, extra in cursor.fetchall()
            }
        cursor.execute(
            "SELECT column_name, data_type, character_maximum_length, is_nullable, column_default, "
            "is_identity FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            [TABLE],
        )
        return {
            name: (f"{kind}({length})" if length else kind, nullable, default, identity == "YES")
            for name, kind, length, nullable, default, identity in cursor.fetchall()
        }


@pytest.fixture
def expected():
    if connection.vendor == "sqlite":
        pytest.skip("the contract's column types are pinned on MySQL, MariaDB and PostgreSQL")
    if connection.vendor == "mysql":
        return MARIADB if connection.mysql_is_mariadb else MYSQL
    return POSTGRES


def test_the_contract_columns_keep_their_types_nullability_and_defaults(expected):
    actual = columns()
    assert MARIADB.keys() == MYSQL.keys() == POSTGRES.keys()
    assert {name: actual[name][:3] for name in expected if name in actual} == expected
    assert actual["id"][3], "the job id must be generated by the database"


def test_every_other_column_has_a_default_so_a_plain_insert_stays_valid(expected):
    """A new column is accepted into the table without touching the pinned
    list above as long as a producer's INSERT need not name it."""
    required = [
        name
        for name, (_, nullable, default, generated) in columns().items()
        if nullable == "NO" and default is None and not generated
    ]
    assert required == ["task_path"]


def test_the_procedure_keeps_its_parameters_and_says_its_contract_version():
    if connection.vendor != "mysql":
        pytest.skip("dbqueue_enqueue() is a MySQL/MariaDB procedure")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT parameter_mode, parameter_name, data_type FROM information_schema.parameters "
            "WHERE specific_schema = DATABASE() AND specific_name = %s ORDER BY ordinal_position",
            [sql_contract.PROCEDURE],
        )
        assert [tuple(row) for row in cursor.fetchall()] == PARAMETERS
        cursor.execute(
            "SELECT routine_comment FROM information_schema.routines "
            "WHERE routine_schema = DATABASE() AND routine_name = %s",
            [sql_contract.PROCEDURE],
        )
        assert cursor.fetchone() == (f"django-dbqueue SQL contract {sql_contract.VERSION}",)


def test_the_page_states_the_version_the_code_carries():
    text = DOC.read_text()
    assert re.search(r"^\*\*Contract version: (\d+)\*\*", text, re.M).group(1) == str(sql_contract.VERSION)
    for name in MARIADB:
        assert f"`{name}`" in text, f"docs/sql-contract.md does not describe the column {name}"


@pytest.fixture
def mariadb_user():
    """A MariaDB account on the test database, dropped afterwards: ``grant(privileges)``
    returns a connection wrapper for it."""
    if connection.vendor != "mysql":
        pytest.skip("MySQL/MariaDB accounts")
    from django.db.backends.mysql.base import DatabaseWrapper

    name = f"{connection.settings_dict['NAME']}_limited"[:80]
    account = f"'{name}'@'{connection.settings_dict['HOST']}'"
    wrappers = []

    def grant(privileges: str) -> DatabaseWrapper:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE USER {account} IDENTIFIED BY 'limited-pw'")
            cursor.execute(f"GRANT {privileges.format(db=connection.settings_dict['NAME'])} TO {account}")
        wrapper = DatabaseWrapper({**connection.settings_dict, "USER": name, "PASSWORD": "limited-pw"})
        wrappers.append(wrapper)
        return wrapper

    yield grant
    for wrapper in wrappers:
        wrapper.close()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS {account}")


@pytest.mark.django_db(transaction=True)
def test_a_user_who_may_not_create_routines_is_told_how_and_the_migration_goes_on(mariadb_user):
    limited = mariadb_user("SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP ON `{db}`.*")
    try:
        # Once where migrate installed it, once where it is missing.
        for _ in range(2):
            out = io.StringIO()
            assert sql_contract.install_if_permitted(limited, out) is False
            message = out.getvalue()
            assert re.search(r"\(\(1044, .Access denied for user .test_\w+_limited.", message), message
            assert "may not create the procedure dbqueue_enqueue()" in message
            assert "Producers can still enqueue with plain INSERTs" in message
            assert "`manage.py install_sql_contract --database default --print`" in message
            sql_contract.uninstall(connection)
    finally:
        sql_contract.install(connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE()")
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_an_account_with_only_execute_can_enqueue_checked_jobs_and_write_nothing_else(mariadb_user):
    producer = mariadb_user("EXECUTE ON PROCEDURE `{db}`.dbqueue_enqueue")
    with producer.cursor() as cursor:
        cursor.execute("CALL dbqueue_enqueue('demo.tasks.add', '[1, 2]', NULL, NULL, NULL, NULL, NULL, @id)")
        cursor.execute("SELECT @id")
        (job_id,) = cursor.fetchone()
        with pytest.raises(DatabaseError, match="INSERT command denied"):
            cursor.execute(
                "INSERT INTO django_dbqueue_job (task_path, status) VALUES ('demo.tasks.add', 'RUNNING')"
            )
    assert list(Job.objects.values_list("pk", "status", "args")) == [(job_id, "READY", [1, 2])]


@pytest.mark.django_db(transaction=True)
def test_install_sql_contract_follows_a_change_of_queues_and_prints_its_sql():
    if connection.vendor != "mysql":
        with pytest.raises(CommandError, match="the procedure is for MySQL/MariaDB only"):
            call_command("install_sql_contract")
        return
    tasks = {"default": {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "QUEUES": ["reports"]}}
    try:
        with override_settings(TASKS=tasks):
            out = io.StringIO()
            call_command("install_sql_contract", stdout=out)
            assert "queues reports, max_attempts 3 by default" in out.getvalue()
        with connection.cursor() as cursor:
            cursor.execute(
                "CALL dbqueue_enqueue('demo.tasks.add', '[1, 2]', NULL, 'reports', 0, NULL, 2, @id)"
            )
            with pytest.raises(DatabaseError, match="the queue 'default' is not one of QUEUES \\(reports\\)"):
                cursor.execute("CALL dbqueue_enqueue('demo.tasks.add', '[]', NULL, NULL, 0, NULL, 2, @id)")
        assert list(Job.objects.values_list("queue_name", "max_attempts")) == [("reports", 2)]
    finally:
        call_command("install_sql_contract", stdout=io.StringIO())
    printed = io.StringIO()
    call_command("install_sql_contract", "--print", stdout=printed)
    assert printed.getvalue().startswith("DELIMITER //\nDROP PROCEDURE IF EXISTS dbqueue_enqueue\n//\n")
    hexed = ", ".join(f"'{name.encode().hex().upper()}'" for name in ["default", "email", "slow"])
    assert f"IF HEX(v_queue) NOT IN ({hexed}) THEN" in printed.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_procedure_installed_for_other_queues_is_a_warning_until_reinstalled():
    if connection.vendor != "mysql":
        pytest.skip("dbqueue_enqueue() is a MySQL/MariaDB procedure")
    assert check_sql_contract(databases=["default"]) == []
    odd = ["default", "o'neil", "back\\slash"]
    tasks = {"default": {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "QUEUES": odd}}
    try:
        with override_settings(TASKS=tasks):
            call_command("install_sql_contract", stdout=io.StringIO())
            assert sql_contract.installed_queues(connection) == tuple(sorted(odd))
            assert check_sql_contract(databases=["default"]) == []
        (warning,) = check_sql_contract(databases=["default"])
    finally:
        call_command("install_sql_contract", stdout=io.StringIO())
    assert warning.id == "django_dbqueue.W005"
    assert warning.msg == (
        "The procedure dbqueue_enqueue() for SQL producers, installed on the database 'default', accepts "
        "the queues back\\slash, o'neil, which no task backend there serves (their QUEUES are default, "
        "email, slow), so SQL producers can enqueue jobs that no worker runs."
    )
    assert warning.hint == (
        "If SQL producers call dbqueue_enqueue(), run manage.py install_sql_contract --database default "
        "to update it; if none does, silence django_dbqueue.W005 in SILENCED_SYSTEM_CHECKS."
    )
    assert check_sql_contract(databases=["default"]) == []


@pytest.mark.django_db(transaction=True)
def test_a_procedure_installed_with_other_limits_is_a_warning_until_reinstalled(settings):
    if connection.vendor != "mysql":
        pytest.skip("dbqueue_enqueue() is a MySQL/MariaDB procedure")
    options = {**settings.TASKS["default"].get("OPTIONS", {}), "MAX_ATTEMPTS": 7, "MAX_ARGUMENTS_BYTES": 5000}
    changed = {**settings.TASKS, "default": {**settings.TASKS["default"], "OPTIONS": options}}
    try:
        with override_settings(TASKS=changed):
            (warning,) = check_sql_contract(databases=["default"])
            assert warning.id == "django_dbqueue.W005"
            assert warning.msg == (
                "The procedure dbqueue_enqueue() for SQL producers, installed on the database 'default', "
                "defaults to MAX_ATTEMPTS 3 and refuses arguments over 1000000 bytes, but the task "
                "backends there have "
                "MAX_ATTEMPTS 7 and MAX_ARGUMENTS_BYTES 5000."
            )
            call_command("install_sql_contract", stdout=io.StringIO())
            assert check_sql_contract(databases=["default"]) == []
        assert len(check_sql_contract(databases=["default"])) == 1, "installed for the other limits"
    finally:
        call_command("install_sql_contract", stdout=io.StringIO())
    assert check_sql_contract(databases=["default"]) == []
