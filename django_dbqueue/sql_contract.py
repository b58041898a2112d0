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

from .sql_checks import (
    MYSQL_DECLARATIONS,
    PROCEDURE,
    mariadb_json_checks,
    mysql_json_checks,
    refuse,
    signal_message,
    sql_text,
)

# 2: refuses numbers Python cannot read back (integers over 4,300 digits,
# numbers beyond a double), and measures MAX_ARGUMENTS_BYTES as enqueue() does.
# 3: the WAITING status (workflows), and the control columns producers may
# write (cancel_requested_at) or read (progress, progress_message,
# progress_at, interruptions); the procedure itself is unchanged.
# 4: metadata, a JSON object a producer may write (its trace context under
# "trace_context", which a worker links its span to); fairness_key (fair
# share, transitions/fair.py) and the rate-limit columns rate_key and rate_limit,
# which a producer may set; the procedure itself is unchanged.
# 5: the procedure works on MySQL (4 called MariaDB's JSON_COMPACT there),
# where it also refuses integers beyond 64 bits, which MySQL's JSON would
# store as approximate doubles; on MariaDB it is unchanged.
VERSION = 5
COMMENT = f"django-dbqueue SQL contract {VERSION}"

# MySQL/MariaDB errors that mean this user may not create routines:
# ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR,
# ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_PROCACCESS_DENIED_ERROR,
# ER_BINLOG_CREATE_ROUTINE_NEED_SUPER.
NOT_PERMITTED = frozenset({1044, 1142, 1227, 1370, 1419})


@dataclass(frozen=True)
class ProcedureConfig:
    queues: tuple[str, ...] = ("default",)
    max_attempts: int = 3
    max_argument_bytes: int = 1_000_000


def config_for(database: str) -> ProcedureConfig:
    """What the procedure on ``database`` checks: the QUEUES of every
    DatabaseBackend kept there, and the limits of the first of them (the
    default backend if it is one)."""
    from .routing import is_queue_backend
    from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, task_backends

    backends = [b for b in task_backends.all() if is_queue_backend(b) and b.database == database]
    if not backends:
        return ProcedureConfig()
    backends.sort(key=lambda b: b.alias != DEFAULT_TASK_BACKEND_ALIAS)
    queues = sorted({name for b in backends for name in b.queues})
    first = backends[0].config
    return ProcedureConfig(tuple(queues), first.MAX_ATTEMPTS, first.MAX_ARGUMENTS_BYTES)


def procedure_sql(table: str, config: ProcedureConfig, mariadb: bool = True) -> str:
    """``CREATE PROCEDURE dbqueue_enqueue(...)`` for ``table`` and ``config``,
    on MariaDB or (``mariadb=False``) MySQL, whose JSON functions differ."""
    limit = int(config.max_argument_bytes)
    json_checks = mariadb_json_checks(limit) if mariadb else mysql_json_checks(limit)
    signal = signal_message(mariadb)
    if config.queues:
        # As hex: an exact, byte-wise match (as QUEUES is), and a list
        # installed_queues() reads back without parsing SQL escapes.
        names = ", ".join(f"'{q.encode().hex().upper()}'" for q in config.queues)
        listed = sql_text(", ".join(config.queues))
        queue_check = f"""
    IF HEX(v_queue) NOT IN ({names}) THEN
        SET v_message = CONCAT('dbqueue_enqueue: the queue ', QUOTE(LEFT(v_queue, 64)),
            ' is not one of QUEUES (', {listed}, '), so no worker would run the job.');
        {signal}
    END IF;"""
    else:
        queue_check = ""
    return f"""CREATE PROCEDURE {PROCEDURE}(
    IN p_task_path TEXT, IN p_args LONGTEXT, IN p_kwargs LONGTEXT, IN p_queue TEXT,
    IN p_priority INT, IN p_run_after DATETIME(6), IN p_max_attempts INT, OUT p_job_id BIGINT)
MODIFIES SQL DATA
COMMENT {sql_text(COMMENT)}
BEGIN
    DECLARE v_args LONGTEXT DEFAULT COALESCE(p_args, '[]');
    DECLARE v_kwargs LONGTEXT DEFAULT COALESCE(p_kwargs, '{{}}');
    DECLARE v_queue TEXT DEFAULT COALESCE(p_queue, 'default');
    DECLARE v_priority INT DEFAULT COALESCE(p_priority, 0);
    DECLARE v_max_attempts INT DEFAULT COALESCE(p_max_attempts, {int(config.max_attempts)});
    DECLARE v_message VARCHAR(512);
    DECLARE v_size BIGINT;
    DECLARE v_long, v_huge INT;{"" if mariadb else MYSQL_DECLARATIONS}
    IF p_task_path IS NULL OR CHAR_LENGTH(p_task_path) NOT BETWEEN 3 AND 255
            OR p_task_path NOT REGEXP '^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)+$' THEN
        {refuse("task_path")}
    END IF;
{json_checks}    IF CHAR_LENGTH(v_queue) NOT BETWEEN 1 AND 64 THEN
        {refuse("queue_length")}
    END IF;{queue_check}
    IF v_priority NOT BETWEEN -100 AND 100 THEN
        {refuse("priority")}
    END IF;
    IF v_max_attempts < 1 THEN
        {refuse("max_attempts")}
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
    return [
        f"DROP PROCEDURE IF EXISTS {PROCEDURE}",
        procedure_sql(table, config, mariadb=connection.mysql_is_mariadb),
    ]


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
