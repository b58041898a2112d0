"""System checks, each tested for its exact message, and runqueue's options."""

import io

import pytest
from django.core import checks
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings

from django_dbqueue.checks import (
    binlog_warning,
    check_binlog_format,
    check_packet_size,
    check_skip_locked,
    check_sql_contract,
)

pytestmark = pytest.mark.django_db


def test_no_skip_locked_error_on_the_test_database():
    assert check_skip_locked(databases=["default"]) == []


def test_checks_ignore_databases_they_were_not_asked_about():
    assert check_skip_locked(databases=[]) == []
    assert check_binlog_format(databases=None) == []


def test_a_database_that_cannot_skip_locked_is_an_error(monkeypatch):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises claims instead; it is never reported")
    # Simulates an old server (MySQL 5.7, MariaDB 10.5) on the real connection.
    monkeypatch.setattr(connection.features, "has_select_for_update_skip_locked", False)

    (error,) = check_skip_locked(databases=["default"])

    assert error.id == "django_dbqueue.E001"
    assert error.msg == (
        f"The database 'default' ({connection.vendor} {connection.display_name}) cannot "
        "SELECT ... FOR UPDATE SKIP LOCKED, which django_dbqueue's claim needs."
    )
    assert error.hint == "Use MySQL 8.0.1+, MariaDB 10.6+ or PostgreSQL 9.5+."


@pytest.mark.parametrize("value", ["STATEMENT", "MIXED", "mixed"])
def test_statement_based_binlog_is_a_warning_while_the_binary_log_is_on(value):
    warning = binlog_warning("default", 1, value)

    assert warning.id == "django_dbqueue.W002"
    assert warning.msg == (
        f"The database 'default' writes a binary log with binlog_format={value}; statements "
        "that use SKIP LOCKED are unsafe for statement-based replication."
    )
    assert warning.hint == (
        "Set binlog_format=ROW in the server's configuration (the default of MySQL 8). "
        "If this server is never replicated, silence django_dbqueue.W002 in SILENCED_SYSTEM_CHECKS."
    )


@pytest.mark.parametrize(("log_bin", "value"), [(0, "MIXED"), (0, "STATEMENT"), (1, "ROW"), (None, "MIXED")])
def test_no_warning_with_the_binary_log_off_or_row_based(log_bin, value):
    assert binlog_warning("default", log_bin, value) is None


@pytest.fixture
def server_binlog():
    """The server's own @@log_bin, with the session's binlog_format set to
    MIXED (MariaDB's default) for the test and restored after it."""
    if connection.vendor != "mysql":
        pytest.skip("binlog_format is a MySQL/MariaDB setting")
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@log_bin, @@SESSION.binlog_format")
        log_bin, saved = cursor.fetchone()
        cursor.execute("SET SESSION binlog_format = 'MIXED'")
    yield int(log_bin)
    with connection.cursor() as cursor:
        cursor.execute(f"SET SESSION binlog_format = '{saved}'")


def test_the_check_reads_the_server_as_it_is(server_binlog):
    messages = check_binlog_format(databases=["default"])
    if server_binlog:
        assert [m.id for m in messages] == ["django_dbqueue.W002"]
        assert "binlog_format=MIXED" in messages[0].msg
    else:
        # The usual MariaDB server: MIXED, but no binary log to replicate.
        assert messages == []


def test_a_payload_limit_above_the_servers_packet_is_a_warning(settings):
    """The server's own max_allowed_packet (MariaDB's 16 MiB, MySQL's 64 MiB
    by default): the defaults fit it; a limit as large as the packet does not."""
    if connection.vendor != "mysql":
        pytest.skip("max_allowed_packet is a MySQL/MariaDB setting")
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        (packet,) = cursor.fetchone()
    assert check_packet_size(databases=["default"]) == []
    options = {**settings.TASKS["default"].get("OPTIONS", {}), "MAX_RETURN_BYTES": packet}
    settings.TASKS = {**settings.TASKS, "default": {**settings.TASKS["default"], "OPTIONS": options}}
    [warning] = check_packet_size(databases=["default"])
    assert warning.id == "django_dbqueue.W008"
    assert f"allows {packet:,} bytes (OPTIONS MAX_RETURN_BYTES)" in warning.msg
    assert f"over {packet:,} bytes (max_allowed_packet)" in warning.msg
    assert f"to at most {packet - 64 * 1024:,}" in warning.hint


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"processes": 0}, "--processes must be between 1 and 256, not 0."),
        ({"processes": 1000}, "--processes must be between 1 and 256, not 1000."),
        ({"batch": 0}, "--batch must be between 1 and 1000, not 0."),
        ({"batch": 5000}, "--batch must be between 1 and 1000, not 5000."),
        (
            {"queues": ["default", "nope"]},
            "Unknown queue 'nope' for backend 'default'; its QUEUES are default, email, slow.",
        ),
        ({"backend": "missing"}, "No task backend 'missing' in settings.TASKS"),
    ],
)
def test_runqueue_refuses_options_out_of_range(options, message):
    with pytest.raises(CommandError) as raised:
        call_command("runqueue", **options)
    assert str(raised.value).startswith(message)


def test_runqueue_asks_which_queues_when_the_backend_accepts_any(settings):
    # Django reads an empty QUEUES as "any queue name": there is no list to serve.
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": []}}
    with pytest.raises(CommandError, match=r"accepts any queue name .* name them with --queue\.$"):
        call_command("runqueue", burst=True)


@pytest.fixture
def failing_check():
    def fails(**kwargs):
        return [checks.Error("failing on purpose", id="tests.E001")]

    checks.register(fails)
    yield
    checks.registry.registry.registered_checks.discard(fails)


def test_runqueue_runs_the_checks_unless_told_to_skip_them(failing_check):
    # The checks come first; past them, --processes 0 is refused.
    with pytest.raises(SystemCheckError, match="failing on purpose"):
        call_command("runqueue", processes=0, skip_checks=False)
    with pytest.raises(CommandError, match="--processes must be between") as refused:
        call_command("runqueue", processes=0, skip_checks=True)
    assert not isinstance(refused.value, SystemCheckError)


def test_runqueue_refuses_a_backend_that_is_not_ours(settings):
    settings.TASKS = {
        "default": settings.TASKS["default"],
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
    }
    with pytest.raises(CommandError, match="is ImmediateBackend; runqueue serves"):
        call_command("runqueue", backend="immediate")


@pytest.mark.parametrize("command", ["runqueue", "queuestats", "queuehealth", "prunejobs", "pausequeue"])
def test_the_commands_refuse_a_misconfigured_backend_even_when_checks_are_skipped(settings, command):
    settings.TASKS = {"default": {**settings.TASKS["default"], "OPTIONS": {"LEASE_SECONDS": -1}}}
    with pytest.raises(CommandError, match="misconfigured: OPTIONS LEASE_SECONDS must be a positive number"):
        call_command(command, skip_checks=True)


# -- W005: the SQL producers' procedure and the settings ----------------------


def backend_with(queues: list[str]) -> dict:
    return {"default": {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "QUEUES": queues}}


@pytest.fixture
def procedure_for():
    """Install dbqueue_enqueue() as it would have been for other QUEUES; put
    back the test settings' one after the test."""
    if connection.vendor != "mysql":
        pytest.skip("dbqueue_enqueue() is a MySQL/MariaDB procedure")

    def install(queues: list[str]) -> None:
        with override_settings(TASKS=backend_with(queues)):
            call_command("install_sql_contract", stdout=io.StringIO())

    yield install
    call_command("install_sql_contract", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_a_queue_added_since_the_procedure_was_installed_is_no_warning(procedure_for):
    # The procedure refuses the new queue with an error of its own; a site
    # without SQL producers is not warned at every runqueue start.
    procedure_for(["default", "email"])
    assert check_sql_contract(databases=["default"]) == []


@pytest.mark.django_db(transaction=True)
def test_backends_that_accept_any_queue_name_get_no_warning(procedure_for):
    procedure_for(["default", "email"])
    with override_settings(TASKS=backend_with([])):
        assert check_sql_contract(databases=["default"]) == []


@pytest.mark.django_db(transaction=True)
def test_a_procedure_that_accepts_any_queue_name_is_a_warning(procedure_for):
    procedure_for([])
    (warning,) = check_sql_contract(databases=["default"])
    assert warning.id == "django_dbqueue.W005"
    assert warning.msg == (
        "The procedure dbqueue_enqueue() for SQL producers, installed on the database 'default', accepts "
        "any queue name, but the task backends there serve only the queues default, email, slow, so SQL "
        "producers can enqueue jobs that no worker runs."
    )


@pytest.mark.django_db(transaction=True)
def test_a_queue_removed_since_the_procedure_was_installed_is_a_warning(procedure_for):
    procedure_for(["default", "email", "slow", "sms"])
    (warning,) = check_sql_contract(databases=["default"])
    assert warning.msg == (
        "The procedure dbqueue_enqueue() for SQL producers, installed on the database 'default', accepts "
        "the queue sms, which no task backend there serves (their QUEUES are default, email, slow), so "
        "SQL producers can enqueue jobs that no worker runs."
    )
    assert warning.hint == (
        "If SQL producers call dbqueue_enqueue(), run manage.py install_sql_contract --database default "
        "to update it; if none does, silence django_dbqueue.W005 in SILENCED_SYSTEM_CHECKS."
    )
