from django.db import models


class Execution(models.Model):
    """One run of a demo task: the side effect that tests count."""

    key = models.CharField(max_length=100, db_index=True)
    pid = models.PositiveIntegerField()
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.key} in {self.pid}"
