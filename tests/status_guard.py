"""A watch on the SQL the package sends: which of its files writes a job's
or a batch's status (``transitions/`` holds "every state change of a job or
a batch, and nowhere else", docs/development.md).

Read from the statements, not from the code's text, so a write through a
dict of values (``.update(**changes)``), a ``RowUpdate``, raw SQL or a
helper in another room all count alike. For each statement that assigns
the ``status`` column of ``django_dbqueue_job`` or ``django_dbqueue_batch``
(an ``UPDATE``, or the update half of an ``INSERT ... ON DUPLICATE KEY
UPDATE`` / ``ON CONFLICT DO UPDATE``), the innermost stack frame inside the
package names the writer; one outside ``transitions/`` is a violation.

What is not a status change, and so not watched:

- a plain ``INSERT`` of a new row: it writes the row's first state
  (an enqueue's READY, a dependant's WAITING), it does not move a row
  from one state to another;
- a statement no frame of the package issues: a test setting up its rows
  with ``Job.objects.filter(...).update(status=...)`` writes as a person
  with SQL would;
- the package's migrations, which rewrite stored rows, not run the queue.

The guard sits in every connection's ``execute_wrappers`` (those made
later too, in threads, through ``connection_created``), so worker threads
are watched as well; subprocess workers are not (their SQL never passes
through this process).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import django_dbqueue

PACKAGE = str(Path(django_dbqueue.__file__).resolve().parent) + "/"
OWNER = PACKAGE + "transitions/"
EXEMPT = (PACKAGE + "migrations/",)
TABLES = ("django_dbqueue_job", "django_dbqueue_batch")

_UPDATE = re.compile(r"\s*UPDATE\s+(?:LOW_PRIORITY\s+|IGNORE\s+)*([`\"\w.]+)\s+SET\s", re.IGNORECASE)
_INSERT = re.compile(r"\s*(?:INSERT|REPLACE)\s+(?:IGNORE\s+)?INTO\s+([`\"\w.]+)", re.IGNORECASE)
_UPSERT = re.compile(r"\bON\s+DUPLICATE\s+KEY\s+UPDATE\s|\bDO\s+UPDATE\s+SET\s", re.IGNORECASE)
_WHERE = re.compile(r"\b(WHERE|ORDER\s+BY|LIMIT|RETURNING)\b", re.IGNORECASE)


def _table(name: str) -> str:
    return name.replace("`", "").replace('"', "").rsplit(".", 1)[-1].lower()


def _starts_word(text: str, i: int) -> bool:
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _top_level(text: str) -> list[tuple[int, str]]:
    """``text`` split at commas outside parentheses and quotes, each part
    with its offset; stops at the first top-level WHERE (and the like)."""
    parts: list[tuple[int, str]] = []
    depth, quote, start, i = 0, "", 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'`\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and char == ",":
            parts.append((start, text[start:i]))
            start = i + 1
        elif depth == 0 and _starts_word(text, i) and _WHERE.match(text, i):
            break
        i += 1
    parts.append((start, text[start:i]))
    return parts


def _sets_status(assignments: str) -> bool:
    for _, part in _top_level(assignments):
        column = part.split("=", 1)[0].strip()
        if "=" in part and _table(column) == "status":
            return True
    return False


def writes_status(sql: str) -> bool:
    """Whether ``sql`` assigns the status of a job or a batch row that exists."""
    update = _UPDATE.match(sql)
    if update:
        return _table(update.group(1)) in TABLES and _sets_status(sql[update.end() :])
    insert = _INSERT.match(sql)
    if insert and _table(insert.group(1)) in TABLES:
        upsert = _UPSERT.search(sql)
        return upsert is not None and _sets_status(sql[upsert.end() :])
    return False


def writer(frame: Any) -> str | None:
    """``path:line`` of the innermost frame inside the package, from
    ``frame`` outward; None when the package is not on the stack."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(PACKAGE):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


@dataclass
class Violation:
    where: str
    sql: str

    def __str__(self) -> str:
        return f"{self.where[len(PACKAGE) - len('django_dbqueue/') :]}: {self.sql[:300]}"


class StatusGuard:
    """The execute wrapper: every status write from a package file outside
    ``transitions/`` lands in ``violations``."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.lock = threading.Lock()

    def __call__(self, execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: Any) -> Any:
        if isinstance(sql, str) and writes_status(sql):
            where = writer(sys._getframe(1))
            if where is not None and not where.startswith(OWNER) and not where.startswith(EXEMPT):
                with self.lock:
                    self.violations.append(Violation(where, sql))
        return execute(sql, params, many, context)

    def install(self, connection: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)

    def take(self) -> list[Violation]:
        """The violations seen so far, forgotten here."""
        with self.lock:
            taken, self.violations = self.violations, []
        return taken
