from django.contrib import admin

from django_dbqueue.admin import ModerationAdminMixin

from .models import Post


@admin.register(Post)
class PostAdmin(ModerationAdminMixin, admin.ModelAdmin):
    list_display = ("id", "author", "short_body", "status", "created_at")
    list_filter = ("status",)
    ordering = ("id",)
    # Added to the mixin's "done" and "release".
    actions = ("mark_spam",)
    claim_done_changes = {"status": Post.Status.APPROVED}

    def claimable_queryset(self, request):
        return super().claimable_queryset(request).pending()

    @admin.action(description="Approve (done with the selected posts)", permissions=["change"])
    def done(self, request, queryset) -> None:
        super().done(request, queryset)

    @admin.display(description="body")
    def short_body(self, post: Post) -> str:
        return post.body[:80]

    @admin.action(description="Mark as spam (done with the selected posts)", permissions=["change"])
    def mark_spam(self, request, queryset) -> None:
        total = queryset.count()
        changed = queryset.done(self.claim_owner(request), status=Post.Status.SPAM)
        self._report(request, "Marked as spam", changed, total)
