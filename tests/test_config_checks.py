"""Mistakes in a TASKS entry, each named by `manage.py check` with its exact
message, all at once; and unapplied migrations (W006)."""

import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from django_dbqueue.backend import DatabaseBackend
from django_dbqueue.checks import check_migrations, unapplied_warning
from django_dbqueue.options import QueueOptions
from django_dbqueue.tasks_api import InvalidTaskBackend
from tests.conftest import ROOT, subprocess_env
from tests.test_project_setup import run, write

BACKEND = "django_dbqueue.backend.DatabaseBackend"
KNOWN = (
    "ALLOWED_TASK_MODULES, ARCHIVE, BATCH_HOLD_SECONDS, BATCH_SIZE, CANCEL_GRACE_SECONDS, CONTROL_INTERVAL, "
    "DATABASE, FAIRNESS_WEIGHTS, JOB_TIMEOUT, LEASE_SECONDS, MAX_ARGUMENTS_BYTES, MAX_ATTEMPTS, "
    "MAX_RETURN_BYTES, MAX_SNOOZES, OPERATIONS_QUEUE, OPERATION_CHUNK_ROWS, OPERATION_INLINE_ROWS, "
    "POLL_INTERVAL_MAX, POLL_INTERVAL_MIN, RATE_LIMITS, READ_DATABASE, "
    "RECONNECT_BACKOFF_MAX, RETENTION, RETRY_BACKOFF_BASE, RETRY_BACKOFF_MAX, SCHEDULES, STATUS_INTERVAL, "
    "STOP_TIMEOUT, UNDEPLOYED_TASK_GRACE_SECONDS"
)


def messages_of(params: dict) -> list[tuple[str, str, str]]:
    return [(m.id, m.msg, m.hint) for m in DatabaseBackend("default", params).check()]


def test_every_unknown_key_of_the_entry_is_named_at_once():
    params = {
        "BACKEND": BACKEND,
        "QUEUE": ["default", "email"],
        "LEASE_SECONDS": 60,
        "OPTION": {"BATCH_SIZE": 50},
        "batch_sise": 10,
        "WORKERS": 4,
    }
    where = "TASKS['default'] has the key"
    hint = "Fix TASKS['default']."
    assert messages_of(params) == [
        ("django_dbqueue.E006", f"{where} 'QUEUE', which Django does not read; did you mean 'QUEUES'?", hint),
        (
            "django_dbqueue.E006",
            f"{where} 'LEASE_SECONDS', which is one of django_dbqueue's OPTIONS: put it under 'OPTIONS'.",
            hint,
        ),
        (
            "django_dbqueue.E006",
            f"{where} 'OPTION', which Django does not read; did you mean 'OPTIONS'?",
            hint,
        ),
        (
            "django_dbqueue.E006",
            f"{where} 'batch_sise', which Django does not read; did you mean the option 'BATCH_SIZE', "
            "under 'OPTIONS'?",
            hint,
        ),
        (
            "django_dbqueue.E006",
            f"{where} 'WORKERS', which Django does not read; the keys of a TASKS entry are BACKEND, "
            "QUEUES and OPTIONS.",
            hint,
        ),
    ]


def test_every_bad_option_is_named_at_once_with_a_did_you_mean():
    options = {
        "LEASE_SECOND": 60,
        "QUEUES": ["default"],
        "NO_SUCH": 1,
        "BATCH_SIZE": 0,
        "RETENTION": {"READY": 1, "FAILED": 0, "SUCCESSFUL": "7"},
    }
    hint = "Fix TASKS['default']['OPTIONS']."
    assert messages_of({"BACKEND": BACKEND, "OPTIONS": options}) == [
        (
            "django_dbqueue.E003",
            "Unknown django_dbqueue OPTIONS LEASE_SECOND; did you mean LEASE_SECONDS?",
            hint,
        ),
        (
            "django_dbqueue.E003",
            "Unknown django_dbqueue OPTIONS QUEUES: QUEUES belongs beside BACKEND, not under OPTIONS; "
            "move it out of OPTIONS.",
            hint,
        ),
        ("django_dbqueue.E003", f"Unknown django_dbqueue OPTIONS NO_SUCH; the known ones are {KNOWN}.", hint),
        ("django_dbqueue.E003", "OPTIONS BATCH_SIZE must be a positive number, not 0.", hint),
        (
            "django_dbqueue.E003",
            "OPTIONS RETENTION names 'READY'; the outcomes are SUCCESSFUL, FAILED, CANCELLED.",
            hint,
        ),
        (
            "django_dbqueue.E003",
            "OPTIONS RETENTION['FAILED'] must be a number of days above zero, not 0.",
            hint,
        ),
        (
            "django_dbqueue.E003",
            "OPTIONS RETENTION['SUCCESSFUL'] must be a number of days above zero, not '7'.",
            hint,
        ),
    ]


def test_a_database_alias_missing_from_databases_is_an_error_and_enqueue_says_so():
    backend = DatabaseBackend("mail", {"BACKEND": BACKEND, "OPTIONS": {"DATABASE": "queue"}})
    message = (
        "The task backend 'mail' keeps its jobs in the database 'queue' (OPTIONS DATABASE), which is not "
        "in DATABASES; its aliases are default."
    )
    assert [(m.id, m.msg, m.hint) for m in backend.check()] == [
        (
            "django_dbqueue.E007",
            message,
            "Add it to DATABASES, or set TASKS['mail']['OPTIONS']['DATABASE'] to one that is.",
        )
    ]
    # Not ConnectionDoesNotExist from deep inside the first query.
    assert backend.options_error == message


def test_a_schedule_name_the_admin_cannot_address_is_refused_at_check_time():
    schedule = {"task": "demo.tasks.noop", "cron": "* * * * *"}
    options = {"SCHEDULES": {"reports/daily": schedule, "..": schedule, "ok": {**schedule, "cronn": "x"}}}
    rule = (
        "a schedule's name may not contain '/' nor be '.' or '..', because the admin addresses each "
        "schedule by its name in a URL; rename it, for example with '-' for '/'."
    )
    assert [m.msg for m in DatabaseBackend("default", {"OPTIONS": options}).check()] == [
        f"OPTIONS SCHEDULES['reports/daily']: {rule}",
        f"OPTIONS SCHEDULES['..']: {rule}",
        "OPTIONS SCHEDULES['ok'] has unknown keys cronn (did you mean cron?); the keys are args, catch_up, "
        "cron, kwargs, task, timezone.",
    ]


def test_a_misconfigured_entry_defines_tasks_and_refuses_to_enqueue_them():
    # The queue 'email' is not in the default QUEUES Django falls back to
    # when QUEUES is misspelt: defining the task must not fail on that.
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, "QUEUE": ["default", "email"]}}):
        from django_dbqueue.tasks_api import task

        def mail() -> None: ...

        defined = task(queue_name="email")(mail)
        with pytest.raises(ImproperlyConfigured, match=r"^TASKS\['default'\] has the key 'QUEUE'"):
            defined.enqueue()


def test_queue_options_parse_reports_every_problem():
    with pytest.raises(ImproperlyConfigured) as raised:
        QueueOptions.parse({"LEASE_SECONDS": 0, "MAX_ATTEMPTS": 1.5})
    assert str(raised.value) == (
        "OPTIONS LEASE_SECONDS must be a positive number, not 0. "
        "OPTIONS MAX_ATTEMPTS must be a whole number, not 1.5."
    )


# -- manage.py check in a project of its own ---------------------------------

MISSPELT = {
    "site_settings.py": """
        from testproject.settings import *  # the test database
        INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_dbqueue", "shop"]
        ROOT_URLCONF = "shop.urls"
        TASKS = {
            "default": {
                "BACKEND": "django_dbqueue.backend.DatabaseBackend",
                "QUEUE": ["default", "email"],
                "LEASE_SECONDS": 60,
                "OPTIONS": {"DATABASE": "queue"},
            }
        }
    """,
    "shop/__init__.py": "",
    "shop/urls.py": "urlpatterns = []",
    # Loaded with the models, as apps whose signal handlers enqueue do: a
    # task of the queue 'email', which the misspelt QUEUES leaves out.
    "shop/models.py": "from . import tasks  # noqa: F401\n",
    "shop/tasks.py": """
        from django_dbqueue.tasks_api import task

        @task(queue_name="email")
        def send_receipt(order_id):
            return order_id
    """,
}


def test_check_names_every_mistake_of_the_entry_even_when_a_task_is_defined_as_apps_load(tmp_path):
    write(tmp_path, MISSPELT)

    check = run(tmp_path, "-m", "django", "check")

    assert "InvalidTask" not in check.stderr
    assert check.returncode == 1, check.stderr
    for line in [
        "?: (django_dbqueue.E006) TASKS['default'] has the key 'QUEUE', which Django does not read; "
        "did you mean 'QUEUES'?",
        "?: (django_dbqueue.E006) TASKS['default'] has the key 'LEASE_SECONDS', which is one of "
        "django_dbqueue's OPTIONS: put it under 'OPTIONS'.",
        "?: (django_dbqueue.E007) The task backend 'default' keeps its jobs in the database 'queue' "
        "(OPTIONS DATABASE), which is not in DATABASES; its aliases are default.",
    ]:
        assert line in check.stderr


LATE = {
    "site_settings.py": """
        from testproject.settings import *
        INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_dbqueue"]
        ROOT_URLCONF = "plain_urls"
        TASKS = {"default": {"BACKEND": "django_dbqueue.backend.DatabaseBackend", "OPTION": {}}}
    """,
    "plain_urls.py": "urlpatterns = []",
}


def test_check_runs_the_backend_checks_in_a_project_that_imports_no_task_while_loading(tmp_path):
    write(tmp_path, LATE)

    check = run(tmp_path, "-m", "django", "check")

    assert check.returncode == 1, check.stderr
    assert (
        "?: (django_dbqueue.E006) TASKS['default'] has the key 'OPTION', which Django does not read; "
        "did you mean 'OPTIONS'?"
    ) in check.stderr


NO_DEFAULT = {
    "site_settings.py": """
        from testproject.settings import *
        INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_dbqueue"]
        ROOT_URLCONF = "plain_urls"
        TASKS = {"queue": {"BACKEND": "django_dbqueue.backend.DatabaseBackend"}}
    """,
    "plain_urls.py": "urlpatterns = []",
    "hello.py": """
        from django_dbqueue import task

        @task
        def hello() -> None: ...
    """,
}


def test_tasks_without_a_default_alias_is_a_check_message_and_a_clear_error_not_a_traceback(tmp_path):
    write(tmp_path, NO_DEFAULT)
    said = (
        "TASKS has no 'default' alias (it has 'queue'): a task that names no backend uses 'default', "
        "so defining one raises InvalidTaskBackend."
    )

    check = run(tmp_path, "-m", "django", "check")
    assert check.returncode == 0, check.stderr
    assert f"?: (django_dbqueue.W007) {said}" in check.stderr
    assert "HINT: Rename TASKS['queue'] to TASKS['default'], or give every task @task(backend='queue')." in (
        check.stderr
    )

    defined = run(tmp_path, "-c", "import django; django.setup(); import hello")
    assert defined.returncode == 1
    assert defined.stderr.splitlines()[-1] == (
        f"django.tasks.exceptions.InvalidTaskBackend: {said} Give the task backend=..., or name one of "
        "TASKS 'default' (manage.py check: django_dbqueue.W007)."
    ).replace("django.tasks.exceptions", InvalidTaskBackend.__module__)


# -- W006: migrations not applied ---------------------------------------------


@pytest.mark.django_db
def test_a_migrated_queue_database_has_no_warning():
    assert check_migrations(databases=["default"]) == []


@pytest.mark.django_db
def test_an_unapplied_migration_is_a_warning_naming_migrate():
    recorder = MigrationRecorder(connection)
    latest = max(name for app, name in recorder.applied_migrations() if app == "django_dbqueue")
    recorder.record_unapplied("django_dbqueue", latest)  # rolled back with the test

    (warning,) = check_migrations(databases=["default"])

    assert warning.id == "django_dbqueue.W006"
    assert warning.msg == (
        f"django_dbqueue has 1 unapplied migration ({latest}) on the database 'default', so its tables "
        "are missing or out of date there: enqueue() and runqueue fail until they are applied."
    )
    assert warning.hint == "Run manage.py migrate."


def test_a_separate_queue_database_is_named_in_the_command():
    warning = unapplied_warning("queue", ["0001_initial", "0002_admin_indexes", "0003_job_history"])
    assert warning.msg == (
        "django_dbqueue has 3 unapplied migrations (0001_initial to 0003_job_history) on the database "
        "'queue', so its tables are missing or out of date there: enqueue() and runqueue fail until "
        "they are applied."
    )
    assert warning.hint == "Run manage.py migrate --database queue."


def test_check_database_warns_on_a_database_never_migrated_and_migrate_does_not(tmp_path):
    # A fresh SQLite file: what a new user has before `migrate`.
    env = subprocess_env(DBQUEUE_DATABASE="sqlite", DBQUEUE_SQLITE=str(tmp_path / "new.sqlite3"))

    def manage(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, str(ROOT / "testproject" / "manage.py"), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    check = manage("check", "--database", "default")
    assert check.returncode == 0, check.stderr  # a warning, as runserver's
    assert "?: (django_dbqueue.W006) django_dbqueue has " in check.stderr
    assert "HINT: Run manage.py migrate." in check.stderr
    # migrate runs the database checks first: it is not told to run itself.
    migrate = manage("migrate")
    assert migrate.returncode == 0, migrate.stderr
    assert "W006" not in migrate.stdout + migrate.stderr
    assert "W006" not in manage("check", "--database", "default").stderr
