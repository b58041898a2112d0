"""The test project's settings, with the knobs the benchmark turns."""

import os

from testproject.settings import *  # noqa: F403
from testproject.settings import LOGGING, TASKS

_options = TASKS["default"]["OPTIONS"]
if os.environ.get("DBQUEUE_BENCH_HOLD"):
    _options["BATCH_HOLD_SECONDS"] = float(os.environ["DBQUEUE_BENCH_HOLD"])
if os.environ.get("DBQUEUE_BENCH_POLL_MIN"):
    _options["POLL_INTERVAL_MIN"] = float(os.environ["DBQUEUE_BENCH_POLL_MIN"])
if os.environ.get("DBQUEUE_BENCH_BATCH"):
    _options["BATCH_SIZE"] = int(os.environ["DBQUEUE_BENCH_BATCH"])
# Django logs every task start and finish at INFO ("django.tasks"); the
# benchmark keeps that unless told otherwise, as a default project would.
LOGGING["loggers"]["django.tasks"] = {"level": os.environ.get("DBQUEUE_BENCH_TASK_LOG", "INFO")}
