"""Tasks in a module that is not an installed app: runnable only when
OPTIONS ALLOWED_TASK_MODULES names it."""

from django.test import override_settings

from django_dbqueue.tasks_api import task

# Defining a task validates it against the backend, whose allow-list must
# already name this module.
with override_settings(
    TASKS={
        "default": {
            "BACKEND": "django_dbqueue.backend.DatabaseBackend",
            "OPTIONS": {"ALLOWED_TASK_MODULES": ["tests.allowed_tasks"]},
        }
    }
):

    @task
    def double(n: int) -> int:
        return 2 * n
