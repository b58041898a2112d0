from django.apps import AppConfig


class DbQueueConfig(AppConfig):
    name = "django_dbqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .schedules.runs import task_problems
        from .schedules.table import plug_task_check

        # The stored schedules' model asks the enqueue side whether a task
        # can run, without importing it (schedules/table.py).
        plug_task_check(task_problems)
