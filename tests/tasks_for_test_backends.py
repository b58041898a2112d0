"""A task module as a project writes it, imported afresh by test_decorator
under each backend (Django's ImmediateBackend and DummyBackend among them)."""

from django_dbqueue import task


@task(queue_name="default", max_attempts=5, timeout=30)
def greet(name: str) -> str:
    return f"hello {name}"
