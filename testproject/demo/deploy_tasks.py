"""Tasks of two releases, for the rolling-deploy tests (tests/test_rolling_deploy.py):
a process started with DBQUEUE_OLD_RELEASE=1 imports the older release, in
which this module exists but ``call_partner`` does not yet."""

import os

from django_dbqueue import task

from .models import Execution


@task
def ping(key: str) -> str:
    """In both releases."""
    Execution.objects.create(key=key, pid=os.getpid())
    return key


if os.environ.get("DBQUEUE_OLD_RELEASE") != "1":

    @task
    def call_partner(key: str) -> str:
        """New in the newer release."""
        Execution.objects.create(key=key, pid=os.getpid())
        return key
