from django.apps import AppConfig


class DbQueueConfig(AppConfig):
    name = "django_dbqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from . import checks  # noqa: F401  (registers the system checks)
        from .schedules.runs import task_problems
        from .schedules.table import plug_task_check
        from .transitions.rows import forget_virtual_status

        # The stored schedules' model asks the enqueue side whether a task
        # can run, without importing it (schedules/table.py).
        plug_task_check(task_problems)
        # Whether the job table has migration 0020's virtual columns is asked
        # once per database; a migration may add or remove them.
        post_migrate.connect(forget_virtual_status, dispatch_uid="dbqueue_virtual_status")
