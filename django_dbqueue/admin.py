from django.contrib import admin

from .models import Job, Worker


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "task_path", "queue_name", "status", "priority", "attempts", "run_after", "owner")
    list_filter = ("status", "queue_name")
    ordering = ("-id",)
    actions = ("requeue", "cancel")

    @admin.action(description="Requeue selected jobs", permissions=["change"])
    def requeue(self, request, queryset) -> None:  # type: ignore[no-untyped-def]
        changed = queryset.requeue()
        self.message_user(request, f"Requeued {changed} jobs.")

    @admin.action(description="Cancel selected jobs", permissions=["change"])
    def cancel(self, request, queryset) -> None:  # type: ignore[no-untyped-def]
        changed = queryset.cancel()
        self.message_user(request, f"Cancelled {changed} jobs.")


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ("name", "host", "pid", "started_at", "last_seen_at", "processed", "failed")
