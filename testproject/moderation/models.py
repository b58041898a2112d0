"""A moderation queue: posts wait PENDING until a moderator who claimed them
marks them APPROVED or SPAM (the claim machinery is django_dbqueue.moderation)."""

from django.db import models
from django.utils import timezone

from django_dbqueue.moderation import ClaimQuerySetMixin


class PostQuerySet(ClaimQuerySetMixin, models.QuerySet):
    claim_owner_field = "claimed_by"
    claim_lease_field = "claim_expires_at"

    def pending(self) -> "PostQuerySet":
        return self.filter(status=Post.Status.PENDING)


class Post(models.Model):
    class Status(models.TextChoices):
        PENDING = "PENDING", "Pending"
        APPROVED = "APPROVED", "Approved"
        SPAM = "SPAM", "Spam"

    author = models.CharField(max_length=100)
    body = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    claimed_by = models.CharField(max_length=150, null=True, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)

    objects = PostQuerySet.as_manager()

    class Meta:
        # Serves "claim next": pending posts in id order.
        indexes = [models.Index(fields=["status", "id"], name="moderation_post_status_id")]

    def __str__(self) -> str:
        return f"Post {self.pk} by {self.author}"
