"""Tasks with retry policies, snoozes, deadlines, debounce, windows and
sequences (tests/test_retry_policies.py, test_snooze.py, test_expiry.py,
test_debounce.py, test_unique_windows.py, test_sequences.py): each run
leaves an Execution row, so a test counts the runs."""

import os
from datetime import timedelta

from django_dbqueue import current_job, task
from django_dbqueue.debounce import Debounce
from django_dbqueue.exceptions import Snooze
from django_dbqueue.retries import Exponential

from .models import Execution

ERRORS = {"connection": ConnectionError, "value": ValueError, "permission": PermissionError}


def raise_kind(key: str, kind: str) -> None:
    Execution.objects.create(key=key, pid=os.getpid())
    raise ERRORS[kind](f"{key}: {kind}")


@task(retry_on=ConnectionError, fail_on=PermissionError, backoff=0.2, max_attempts=3)
def calls_a_partner(key: str, kind: str) -> None:
    """Retries what a network raises, fails at once on anything else."""
    raise_kind(key, kind)


@task(fail_on=(PermissionError,), backoff=lambda attempt: 0.1 * attempt, max_attempts=3)
def grows_its_wait(key: str, kind: str) -> None:
    """Retries every exception but PermissionError, waiting 0.1 s more each time."""
    raise_kind(key, kind)


@task(backoff=lambda attempt: float("nan"), max_attempts=3)
def has_a_broken_backoff(key: str) -> None:
    """Its backoff gives NaN: the job fails alone, saying why, not the worker."""
    raise_kind(key, "connection")


def refuses(attempt: int) -> float:
    raise RuntimeError("no wait for you")


@task(backoff=refuses, max_attempts=3)
def has_a_raising_backoff(key: str) -> None:
    raise_kind(key, "connection")


@task(backoff=Exponential(base=0.05, cap=0.1, jitter=False), max_attempts=3)
def doubles_its_wait(key: str) -> None:
    raise_kind(key, "connection")


@task(max_snoozes=2)
def snoozes_until(key: str, times: int, seconds: object = 0.1) -> str:
    """Snoozes while it has snoozed fewer than ``times`` times, then succeeds.
    ``seconds`` as JSON carries it: "nan", and "timedelta:S" for a timedelta."""
    Execution.objects.create(key=key, pid=os.getpid())
    job = current_job()
    if job.snoozes < times:
        raise Snooze(snooze_time(seconds))
    return f"ran after {job.snoozes} snoozes, attempt {job.attempt}"


def snooze_time(seconds: object) -> object:
    if seconds == "nan":
        return float("nan")
    if isinstance(seconds, str) and seconds.startswith("timedelta:"):
        return timedelta(seconds=float(seconds.partition(":")[2]))
    return seconds


@task(expires=timedelta(hours=1))
def reports_within_the_hour(key: str) -> str:
    """Not worth running once an hour has passed since its enqueue."""
    Execution.objects.create(key=key, pid=os.getpid())
    return key


@task(unique_key=lambda user_id, note="": f"reindex:{user_id}", debounce=Debounce(0.3, max_wait=120))
def reindex(user_id: int, note: str = "") -> str:
    """One run per burst of calls for a user, with the last call's note."""
    Execution.objects.create(key=f"reindex:{user_id}:{note}", pid=os.getpid())
    return note


@task(unique_key=lambda user_id, note="": f"digest:{user_id}", debounce=Debounce(60, replace=False))
def send_digest(user_id: int, note: str = "") -> str:
    """Keeps the first call's note; later calls only move its start."""
    Execution.objects.create(key=f"digest:{user_id}:{note}", pid=os.getpid())
    return note


@task(unique_key=lambda account_id: f"statement:{account_id}", unique_period=timedelta(hours=23))
def send_statement(account_id: int) -> int:
    """At most once per 23-hour window for an account, even after it ran."""
    Execution.objects.create(key=f"statement:{account_id}", pid=os.getpid())
    return account_id


@task(sequence_key=lambda account_id, step, fail=False: f"ledger:{account_id}", fail_on=ValueError)
def post_entry(account_id: int, step: int, fail: bool = False) -> int:
    """Ledger entries of one account, in the order they were enqueued."""
    Execution.objects.create(key=f"ledger:{account_id}:{step}", pid=os.getpid())
    if fail:
        raise ValueError(f"entry {step} of account {account_id} is refused")
    return step


@task(sequence_key="feed", on_sequence_failure="continue", max_attempts=1)
def update_feed(step: int, fail: bool = False) -> int:
    """A feed whose failed updates are skipped."""
    Execution.objects.create(key=f"feed:{step}", pid=os.getpid())
    if fail:
        raise ValueError(f"update {step} failed")
    return step
