"""The SQL-level contract for producers in any language (docs/sql-contract.md):
its version, and ``dbqueue_enqueue()``, the MySQL/MariaDB procedure that
checks a call as ``enqueue()`` would, as far as SQL can, and inserts the job.

The procedure carries the backend's QUEUES and its MAX_ATTEMPTS and
MAX_ARGUMENTS_BYTES as they were when it was installed, so that a call
naming a queue no worker serves is refused instead of waiting for ever:
after changing them, run ``manage.py install_sql_contract`` again.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

# 2: refuses numbers Python cannot read back (integers over 4,300 digits,
# numbers beyond a double), and measures MAX_ARGUMENTS_BYTES as enqueue() does.
# 3: the WAITING status (workflows), and the control columns producers may
# write (cancel_requested_at) or read (progress, progress_message,
# progress_at, interruptions); the procedure itself is unchanged.
# 4: metadata, a JSON object a producer may write (its trace context under
# "trace_context", which a worker links its span to); fairness_key (fair
# share, fairness.py) and the rate-limit columns rate_key and rate_limit,
# which a producer may set; the procedure itself is unchanged.
VERSION = 4
PROCEDURE = "dbqueue_enqueue"
COMMENT = f"django-dbqueue SQL contract {VERSION}"

# MySQL/MariaDB errors that mean this user may not create routines:
# ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR,
# ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_PROCACCESS_DENIED_ERROR,
# ER_BINLOG_CREATE_ROUTINE_NEED_SUPER.
NOT_PERMITTED = frozenset({1044, 1142, 1227, 1370, 1419})
# The most digits Python converts to an int by default (sys.int_info).
INT_DIGITS = 4300


@dataclass(frozen=True)
class ProcedureConfig:
    queues: tuple[str, ...] = ("default",)
    max_attempts: int = 3
    max_argument_bytes: int = 1_000_000


def config_for(database: str) -> ProcedureConfig:
    """What the procedure on ``database`` checks: the QUEUES of every
    DatabaseBackend kept there, and the limits of the first of them (the
    default backend if it is one)."""
    from .backend import DatabaseBackend
    from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, task_backends

    backends = [b for b in task_backends.all() if isinstance(b, DatabaseBackend) and b.database == database]
    if not backends:
        return ProcedureConfig()
    backends.sort(key=lambda b: b.alias != DEFAULT_TASK_BACKEND_ALIAS)
    queues = sorted({name for b in backends for name in b.queues})
    first = backends[0].config
    return ProcedureConfig(tuple(queues), first.MAX_ATTEMPTS, first.MAX_ARGUMENTS_BYTES)


def _text(value: str) -> str:
    """``value`` as a MySQL string literal (backslash escapes on, as by default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


# What the procedure refuses, in the words of its SQL error (SQLSTATE 45000).
REFUSALS = {
    "task_path": (
        "task_path must be a dotted path such as myapp.tasks.send_welcome, of at most 255 characters."
    ),
    "args_json": "args is not valid JSON (or is nested more than 31 lists or objects deep).",
    "args_type": 'args must be a JSON array, such as [42, "text"].',
    "kwargs_json": "kwargs is not valid JSON (or is nested more than 31 lists or objects deep).",
    "kwargs_type": 'kwargs must be a JSON object, such as {"user_id": 42}.',
    "depth": "args and kwargs may be nested at most 31 lists or objects deep.",
    "queue_length": "the queue name must be 1 to 64 characters long.",
    "priority": "priority must be between -100 and 100.",
    "max_attempts": "max_attempts must be at least 1.",
    "long_integer": (
        f"args and kwargs hold an integer of more than {INT_DIGITS:,} digits, more than Python "
        "converts; send such numbers as strings."
    ),
    "not_finite": (
        "args and kwargs hold a number at or beyond the largest double (1.7976931348623157e308), "
        "which Python would read as infinity; send such numbers as strings."
    ),
}


def _refuse(reason: str) -> str:
    return _signal(_text(f"{PROCEDURE}: {REFUSALS[reason]}"))


def _signal(message: str) -> str:
    return f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = {message};"


def procedure_sql(table: str, config: ProcedureConfig) -> str:
    """``CREATE PROCEDURE dbqueue_enqueue(...)`` for ``table`` and ``config``."""
    if config.queues:
        # As hex: an exact, byte-wise match (as QUEUES is), and a list
        # installed_queues() reads back without parsing SQL escapes.
        names = ", ".join(f"'{q.encode().hex().upper()}'" for q in config.queues)
        listed = _text(", ".join(config.queues))
        queue_check = f"""
    IF HEX(v_queue) NOT IN ({names}) THEN
        SET v_message = CONCAT('dbqueue_enqueue: the queue ', QUOTE(LEFT(v_queue, 64)),
            ' is not one of QUEUES (', {listed}, '), so no worker would run the job.');
        {_signal("v_message")}
    END IF;"""
    else:
        queue_check = ""
    return f"""CREATE PROCEDURE {PROCEDURE}(
    IN p_task_path TEXT, IN p_args LONGTEXT, IN p_kwargs LONGTEXT, IN p_queue TEXT,
    IN p_priority INT, IN p_run_after DATETIME(6), IN p_max_attempts INT, OUT p_job_id BIGINT)
MODIFIES SQL DATA
COMMENT {_text(COMMENT)}
BEGIN
    DECLARE v_args LONGTEXT DEFAULT COALESCE(p_args, '[]');
    DECLARE v_kwargs LONGTEXT DEFAULT COALESCE(p_kwargs, '{{}}');
    DECLARE v_queue TEXT DEFAULT COALESCE(p_queue, 'default');
    DECLARE v_priority INT DEFAULT COALESCE(p_priority, 0);
    DECLARE v_max_attempts INT DEFAULT COALESCE(p_max_attempts, {int(config.max_attempts)});
    DECLARE v_message VARCHAR(512);
    DECLARE v_size BIGINT;
    DECLARE v_long, v_huge INT;
    IF p_task_path IS NULL OR CHAR_LENGTH(p_task_path) NOT BETWEEN 3 AND 255
            OR p_task_path NOT REGEXP '^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)+$' THEN
        {_refuse("task_path")}
    END IF;
    IF JSON_VALID(v_args) IS NOT TRUE THEN
        {_refuse("args_json")}
    END IF;
    IF JSON_TYPE(v_args) <> 'ARRAY' THEN
        {_refuse("args_type")}
    END IF;
    IF JSON_VALID(v_kwargs) IS NOT TRUE THEN
        {_refuse("kwargs_json")}
    END IF;
    IF JSON_TYPE(v_kwargs) <> 'OBJECT' THEN
        {_refuse("kwargs_type")}
    END IF;
    IF JSON_DEPTH(v_args) > 32 OR JSON_DEPTH(v_kwargs) > 32 THEN
        {_refuse("depth")}
    END IF;
    -- As enqueue() measures: compact JSON, in UTF-8 bytes.
    SET v_size = LENGTH(JSON_COMPACT(v_args)) + LENGTH(JSON_COMPACT(v_kwargs));
    IF v_size > {int(config.max_argument_bytes)} THEN
        SET v_message = CONCAT('dbqueue_enqueue: args and kwargs take ', v_size,
            ' bytes as compact JSON, more than the limit of {int(config.max_argument_bytes)} ',
            '(MAX_ARGUMENTS_BYTES).');
        {_signal("v_message")}
    END IF;
    -- Numbers Python cannot read back: an integer of more digits than it
    -- converts, or a float beyond a double. Only text with 210 digits in a
    -- row or an exponent of 100 or more can hold one (strings included, so
    -- the test is cheap): just then is every value looked at, as JSON, so
    -- that digits inside strings never count.
    IF CONCAT(v_args, ' ', v_kwargs) REGEXP '[0-9]{{210}}|[eE][+]?0*[1-9][0-9]{{2}}' THEN
        SELECT COALESCE(SUM(j REGEXP '^-?[0-9]{{{INT_DIGITS + 1},}}$'), 0),
               COALESCE(SUM(j REGEXP '^-?[0-9]+[.eE]' AND ABS(d) >= 1.7976931348623157e308), 0)
            INTO v_long, v_huge
            FROM (SELECT j, d FROM JSON_TABLE(JSON_EXTRACT(v_args, '$**[*]', '$**.*'),
                      '$[*]' COLUMNS (j JSON PATH '$', d DOUBLE PATH '$')) AS a
                  UNION ALL
                  SELECT j, d FROM JSON_TABLE(JSON_EXTRACT(v_kwargs, '$**[*]', '$**.*'),
                      '$[*]' COLUMNS (j JSON PATH '$', d DOUBLE PATH '$')) AS k) AS scalars
            -- Containers convert to NULL; a float beyond a double, to the largest one.
            WHERE d IS NOT NULL;
        IF v_long > 0 THEN
            {_refuse("long_integer")}
        END IF;
        IF v_huge > 0 THEN
            {_refuse("not_finite")}
        END IF;
    END IF;
    IF CHAR_LENGTH(v_queue) NOT BETWEEN 1 AND 64 THEN
        {_refuse("queue_length")}
    END IF;{queue_check}
    IF v_priority NOT BETWEEN -100 AND 100 THEN
        {_refuse("priority")}
    END IF;
    IF v_max_attempts < 1 THEN
        {_refuse("max_attempts")}
    END IF;
    -- Times in UTC whatever the session's time_zone: workers compare
    -- run_after with UTC_TIMESTAMP().
    INSERT INTO {table} (task_path, args, kwargs, queue_name, priority, run_after, max_attempts, enqueued_at)
    VALUES (p_task_path, v_args, v_kwargs, v_queue, v_priority,
            COALESCE(p_run_after, UTC_TIMESTAMP(6)), v_max_attempts, UTC_TIMESTAMP(6));
    SET p_job_id = LAST_INSERT_ID();
END"""


def install_statements(connection: Any, config: ProcedureConfig | None = None) -> list[str]:
    from .models import Job

    config = config or config_for(connection.alias)
    table = connection.ops.quote_name(Job._meta.db_table)
    return [f"DROP PROCEDURE IF EXISTS {PROCEDURE}", procedure_sql(table, config)]


def install(connection: Any, config: ProcedureConfig | None = None) -> None:
    """(Re)create the procedure on ``connection``, a MySQL/MariaDB one."""
    drop, create = install_statements(connection, config)
    with connection.cursor() as cursor:
        # DROP ... IF EXISTS needs ALTER ROUTINE even when there is nothing
        # to drop; a user who may only create gets to the CREATE this way.
        if installed_version(connection) is not None:
            cursor.execute(drop)
        cursor.execute(create)


def installed_version(connection: Any) -> str | None:
    """The comment of the installed procedure (``django-dbqueue SQL contract 1``), or None."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT routine_comment FROM information_schema.routines "
            "WHERE routine_schema = DATABASE() AND routine_name = %s",
            [PROCEDURE],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def uninstall(connection: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP PROCEDURE IF EXISTS {PROCEDURE}")


def installed_limits(connection: Any) -> tuple[int, int] | None:
    """The MAX_ATTEMPTS default and MAX_ARGUMENTS_BYTES limit the installed
    procedure applies, or None where it is not installed, this user may not
    see its body, or the body is not one this version wrote."""
    body = _installed_body(connection)
    attempts = re.search(r"COALESCE\(p_max_attempts, (\d+)\)", body or "")
    size = re.search(r"(?:LENGTH\(v_kwargs\)|v_size) > (\d+) THEN", body or "")
    if attempts is None or size is None:
        return None
    return int(attempts.group(1)), int(size.group(1))


def _installed_body(connection: Any) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT routine_definition FROM information_schema.routines "
            "WHERE routine_schema = DATABASE() AND routine_name = %s",
            [PROCEDURE],
        )
        row = cursor.fetchone()
    return row[0] if row and row[0] else None


def installed_queues(connection: Any) -> tuple[str, ...] | None:
    """The queues the installed procedure accepts (``()``: any), or None
    where it is not installed, this user may not see its body, or the body
    is not one this version wrote."""
    body = _installed_body(connection)
    if body is None:
        return None
    listed = re.search(r"IF HEX\(v_queue\) NOT IN \(([0-9A-F', ]*)\) THEN", body)
    if listed is None:
        # No queue check at all (QUEUES was empty), or one this version cannot read.
        return None if "NOT IN" in body else ()
    return tuple(bytes.fromhex(name).decode() for name in re.findall(r"'([0-9A-F]*)'", listed.group(1)))


def error_code(exc: BaseException) -> int | None:
    args = getattr(exc.__cause__, "args", None) or exc.args
    return args[0] if args and isinstance(args[0], int) else None


def install_if_permitted(connection: Any, out: Any = None) -> bool:
    """Install the procedure, or, where this user may not create routines,
    say so and how to install it by hand; the migration goes on either way
    (plain INSERTs need no procedure). Other errors are raised."""
    if connection.vendor != "mysql":
        return False
    try:
        install(connection)
    except DatabaseError as exc:
        if error_code(exc) not in NOT_PERMITTED:
            raise
        (out or sys.stderr).write(not_permitted_message(connection.alias, exc))
        return False
    return True


def not_permitted_message(alias: str, exc: BaseException) -> str:
    return (
        f"\ndjango_dbqueue: the database user of {alias!r} may not create the procedure "
        f"{PROCEDURE}() ({exc}). Producers can still enqueue with plain INSERTs. To install "
        f"it, have a user with CREATE ROUTINE run the output of "
        f"`manage.py install_sql_contract --database {alias} --print`.\n"
    )
