"""Settings for the demo and the tests, chosen by environment variables:

DBQUEUE_DATABASE   sqlite (default), mariadb, mysql or postgres
DBQUEUE_MYSQL_PORT the MySQL server's port for DBQUEUE_DATABASE=mysql (default 3307: tests/mysql_server.py)
DBQUEUE_DB_NAME    database name for MariaDB/PostgreSQL (default "dbqueue"); tests use test_<name>
DBQUEUE_SQLITE     path of the SQLite file (default testproject/db.sqlite3)
DBQUEUE_LEASE      lease seconds (default 60)
DBQUEUE_BACKOFF    retry backoff base seconds (default 2)
DBQUEUE_BATCH_HOLD seconds a slow job may hold its batch-mates before they are given back (default 0.1)
DBQUEUE_CLOCK_SKEW seconds this process's wall clock runs ahead (tests of a skewed host)
DBQUEUE_RETENTION  OPTIONS RETENTION as JSON, e.g. {"SUCCESSFUL": 7} (default: none)
DBQUEUE_STOP_TIMEOUT     OPTIONS STOP_TIMEOUT seconds, as JSON (default null: finish the job in hand)
DBQUEUE_CANCEL_GRACE     OPTIONS CANCEL_GRACE_SECONDS (default 10)
DBQUEUE_CONTROL_INTERVAL OPTIONS CONTROL_INTERVAL (default 1)
DBQUEUE_FAIRNESS_WEIGHTS OPTIONS FAIRNESS_WEIGHTS as JSON, e.g. {"vip": 3} (default: none)
DBQUEUE_MAX_ARGUMENTS_BYTES OPTIONS MAX_ARGUMENTS_BYTES (default 1000000; tests of the limit lower it)
DBQUEUE_UNDEPLOYED_GRACE OPTIONS UNDEPLOYED_TASK_GRACE_SECONDS (default 900)
DBQUEUE_OLD_RELEASE      1: demo.deploy_tasks as an older release has it, without call_partner
DBQUEUE_USE_TZ     0 for USE_TZ = False (default 1)
DBQUEUE_TIME_ZONE  TIME_ZONE (default UTC), e.g. America/New_York to test naive local times
"""

import json
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

if os.environ.get("DBQUEUE_CLOCK_SKEW"):
    # A host whose clock is wrong, as Python sees it: time.time() and
    # Django's timezone.now(). libfaketime would skew the C library instead,
    # but it breaks Python's timed waits (time.sleep fails with EINVAL, or
    # every wait lasts the skew longer), so the worker could not run at all.
    import time as _time
    from datetime import timedelta as _timedelta

    from django.utils import timezone as _timezone

    _skew = float(os.environ["DBQUEUE_CLOCK_SKEW"])
    _real_time, _real_now = _time.time, _timezone.now
    _time.time = lambda: _real_time() + _skew
    _timezone.now = lambda: _real_now() + _timedelta(seconds=_skew)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "testproject-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
USE_TZ = os.environ.get("DBQUEUE_USE_TZ", "1") != "0"
TIME_ZONE = os.environ.get("DBQUEUE_TIME_ZONE", "UTC")
ROOT_URLCONF = "testproject.urls"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_dbqueue",
    "demo",
    "moderation",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

_engine = os.environ.get("DBQUEUE_DATABASE", "sqlite")
_name = os.environ.get("DBQUEUE_DB_NAME", "dbqueue")
if _engine in ("mariadb", "mysql"):
    # Both through Django's MySQL backend. MariaDB is the system's server on
    # 3306; MySQL is Oracle's, from tests/mysql_server.py, and its test
    # database has MySQL's own default collation, as users get it.
    _mysql = _engine == "mysql"
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": _name,
            "USER": os.environ.get("DBQUEUE_DB_USER", "root"),
            "PASSWORD": os.environ.get("DBQUEUE_DB_PASSWORD", ""),
            "HOST": os.environ.get("DBQUEUE_DB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("DBQUEUE_DB_PORT")
            or (os.environ.get("DBQUEUE_MYSQL_PORT", "3307") if _mysql else "3306"),
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {
                "CHARSET": "utf8mb4",
                "COLLATION": "utf8mb4_0900_ai_ci" if _mysql else "utf8mb4_unicode_ci",
            },
        }
    }
    if not USE_TZ:
        # As docs/databases.md asks with USE_TZ = False: the server's time_zone
        # is TIME_ZONE, so a row inserted by SQL gets local defaults. (A fixed
        # offset needs no zone tables; the tests do not cross a DST change.)
        from datetime import datetime as _datetime
        from zoneinfo import ZoneInfo as _ZoneInfo

        _offset = _datetime.now(_ZoneInfo(TIME_ZONE)).strftime("%z")
        DATABASES["default"]["OPTIONS"]["init_command"] = f"SET time_zone = '{_offset[:3]}:{_offset[3:]}'"
elif _engine == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _name,
            "USER": os.environ.get("DBQUEUE_DB_USER", "postgres"),
            "HOST": os.environ.get("DBQUEUE_DB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("DBQUEUE_DB_PORT", "5432"),
        }
    }
elif _engine == "sqlite":
    _path = Path(os.environ.get("DBQUEUE_SQLITE", BASE_DIR / "db.sqlite3"))
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _path,
            # Worker processes share the file: WAL lets readers run beside the
            # one writer, the timeout makes writers wait instead of failing, and
            # IMMEDIATE transactions take the write lock at BEGIN, so one that
            # reads then writes never fails at once with "database is locked".
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A file, not :memory:, so that subprocess workers see the test database.
            "TEST": {"NAME": str(_path.with_name("test_" + _path.name))},
        }
    }
else:
    raise RuntimeError(f"DBQUEUE_DATABASE must be sqlite, mariadb, mysql or postgres, not {_engine!r}.")

TASKS = {
    "default": {
        "BACKEND": "django_dbqueue.backend.DatabaseBackend",
        "QUEUES": ["default", "email", "slow"],
        "OPTIONS": {
            "LEASE_SECONDS": float(os.environ.get("DBQUEUE_LEASE", "60")),
            "RETRY_BACKOFF_BASE": float(os.environ.get("DBQUEUE_BACKOFF", "2")),
            "STATUS_INTERVAL": float(os.environ.get("DBQUEUE_STATUS_INTERVAL", "5")),
            "BATCH_HOLD_SECONDS": float(os.environ.get("DBQUEUE_BATCH_HOLD", "0.1")),
            # Recurring jobs for tests, as JSON: {"name": {"task": ..., "cron": ...}}.
            "SCHEDULES": json.loads(os.environ.get("DBQUEUE_SCHEDULES", "{}")),
            "RETENTION": json.loads(os.environ.get("DBQUEUE_RETENTION", "{}")),
            "STOP_TIMEOUT": json.loads(os.environ.get("DBQUEUE_STOP_TIMEOUT", "null")),
            "CANCEL_GRACE_SECONDS": float(os.environ.get("DBQUEUE_CANCEL_GRACE", "10")),
            "CONTROL_INTERVAL": float(os.environ.get("DBQUEUE_CONTROL_INTERVAL", "1")),
            "FAIRNESS_WEIGHTS": json.loads(os.environ.get("DBQUEUE_FAIRNESS_WEIGHTS", "{}")),
            "MAX_ARGUMENTS_BYTES": int(os.environ.get("DBQUEUE_MAX_ARGUMENTS_BYTES", "1000000")),
            "UNDEPLOYED_TASK_GRACE_SECONDS": float(os.environ.get("DBQUEUE_UNDEPLOYED_GRACE", "900")),
        },
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django_dbqueue": {"handlers": ["console"], "level": os.environ.get("DBQUEUE_LOG_LEVEL", "INFO")},
    },
}
