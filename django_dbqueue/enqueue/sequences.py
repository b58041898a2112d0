"""Sequences: jobs with the same sequence key run one at a time, in the
order they were enqueued (``@task(sequence_key=...)``; docs/workflows.md,
"Sequences").

A sequence is a chain built as calls come: each job of a key depends on the
key's previous job (workflows/dependencies.py), so it waits, WAITING and
never claimed, until that one has finished. ``SequenceTail`` keeps each
key's latest job; its row is locked while a producer appends, so producers
of one key on many hosts take turns and the order is the order of their
commits. What a FAILED job does to the rest is the task's
``on_sequence_failure``: ``"hold"`` them (its dependants' ``"hold"``
policy: they wait until it is requeued and succeeds) or ``"continue"``. A
cancelled job (by a person, or expired) lets the next one run either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from ..shown import shown
from ..tasks_api import InvalidTask
from ..transitions.inserts import insert_job
from .keys import check_key_option
from .unique import ROUNDS

if TYPE_CHECKING:
    from ..models import Job

# on_sequence_failure, and the on_parent_failure it gives each job.
POLICIES = {"hold": "hold", "continue": "run"}


def check_sequence(options: dict[str, Any]) -> None:
    """``sequence_key`` and ``on_sequence_failure`` as a task declares them."""
    policy = options.get("on_sequence_failure", "hold")
    if policy not in POLICIES:
        raise InvalidTask(f"on_sequence_failure must be 'hold' or 'continue', not {shown(policy)}.")
    key = options.get("sequence_key")
    if key is None:
        return
    check_key_option("sequence_key", key)
    if options.get("unique_key") is not None:
        raise InvalidTask(
            "sequence_key cannot go with unique_key: a sequence keeps every call in order, a unique "
            "key keeps one of them."
        )


def insert_in_sequence(job: Job, key: str, policy: str, using: str) -> None:
    """Insert ``job`` as the last of ``key``'s sequence: WAITING for the
    key's previous job while that one is unfinished (or FAILED, held),
    READY otherwise; in one transaction, holding the key's tail row."""
    from ..models import SequenceTail
    from ..workflows.dependencies import insert_dependant

    tails = SequenceTail.objects.using(using)
    job.on_parent_failure = POLICIES[policy]
    with transaction.atomic(using=using):
        tail = _locked_tail(tails, key)
        jobs = type(job)._base_manager.using(using)
        # Locked, so that retention cannot prune it before the dependency is written.
        previous = tail.job_id
        if previous is not None and jobs.filter(pk=previous).select_for_update().exists():
            insert_dependant(job, [("job", previous, using)], using)
        else:
            insert_job(job, using)
        tails.filter(pk=tail.pk).update(job_id=job.pk)


def _locked_tail(tails: Any, key: str) -> Any:
    """``key``'s tail row, locked; made if the key is new."""
    for _ in range(ROUNDS):
        tail = tails.select_for_update().filter(key=key).first()
        if tail is not None:
            return tail
        try:
            with transaction.atomic(using=tails.db):
                return tails.create(key=key, job_id=None)
        except IntegrityError:
            continue  # another producer made it first: lock theirs
    raise IntegrityError(f"The sequence key {key!r} could not be locked in {ROUNDS} rounds.")
