"""The pytest fixture ``run_due_jobs`` (loaded through the package's pytest11
entry point): django_dbqueue.testing.run_due_jobs, for a test that may use
the database (``@pytest.mark.django_db``, either kind)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def run_due_jobs(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run the due jobs in this process; see django_dbqueue.testing.run_due_jobs."""
    uses_db = {"db", "transactional_db"} & set(request.fixturenames)
    if request.node.get_closest_marker("django_db") is None and not uses_db:
        raise pytest.UsageError(
            "The run_due_jobs fixture runs jobs from the database: mark the test "
            "@pytest.mark.django_db (or use pytest-django's db or transactional_db fixture)."
        )
    from .testing import run_due_jobs

    return run_due_jobs
