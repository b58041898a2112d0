"""``queuestats --tasks``: the figures of each task over the window, as a
table or JSON, per database (operations/task_stats.py). (A leading
underscore: Django does not take this module for a command.)"""

from __future__ import annotations

from typing import Any

from django_dbqueue.operations.task_stats import TaskFigures, shown_seconds, task_figures

HEADER = ["task", "successful", "failed", "cancelled", "run p50", "run p95", "wait p50", "wait p95"]


def tasks_output(backends: list[Any], minutes: float, queues: list[str] | None, as_json: bool) -> Any:
    """The table (a string), or the JSON object: ``{"minutes", "tasks": [...]}``
    for one database, ``{"servers": [{"database", "minutes", "tasks"}, ...]}`` for several."""
    databases = list(dict.fromkeys(backend.database for backend in backends))
    found = {database: task_figures(database, minutes, queues) for database in databases}
    if as_json:
        objects = [
            {"database": db, "minutes": minutes, "tasks": [f.as_json() for f in figures]}
            for db, figures in found.items()
        ]
        if len(objects) == 1:
            del objects[0]["database"]
            return objects[0]
        return {"servers": objects}
    tables = [render(figures, minutes) for figures in found.values()]
    if len(tables) == 1:
        return tables[0]
    return "\n\n".join(f"Database {db!r}\n{table}" for db, table in zip(found, tables, strict=True))


def render(figures: list[TaskFigures], minutes: float) -> str:
    rows = [HEADER]
    for f in figures:
        times = (f.run_p50, f.run_p95, f.wait_p50, f.wait_p95)
        rows.append([f.task, str(f.successful), str(f.failed), str(f.cancelled), *map(shown_seconds, times)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = [f"Tasks that finished jobs in the last {minutes:g} min (times of the latest runs):"]
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    if len(rows) == 1:
        lines.append("(none)")
    return "\n".join(lines)
