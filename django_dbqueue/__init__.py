"""A MySQL/MariaDB table as a fast, crash-safe job queue for django.tasks."""

__version__ = "0.1.0"
