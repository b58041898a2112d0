"""The test project's settings plus a second MariaDB server: the database
alias ``second`` and the task backend ``second`` on it, for the runqueue
processes of tests/test_several_servers.py (DBQUEUE_SECOND_PORT and
DBQUEUE_SECOND_NAME say where the second server's database is)."""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import DATABASES, TASKS

DATABASES["second"] = {
    **DATABASES["default"],
    "NAME": os.environ["DBQUEUE_SECOND_NAME"],
    "HOST": "127.0.0.1",
    "PORT": os.environ["DBQUEUE_SECOND_PORT"],
}
TASKS["second"] = {
    "BACKEND": "django_dbqueue.backend.DatabaseBackend",
    "QUEUES": ["default", "reports"],
    "OPTIONS": {**TASKS["default"]["OPTIONS"], "DATABASE": "second"},
}
