"""The candidate loop both claims share (django_dbqueue/transitions/candidates.py): when
another transaction holds every candidate read, a claim reads again past
them instead of coming back empty."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from django_dbqueue.models import Job
from moderation.models import Post
from tests.conftest import needs_row_locks
from tests.rows import inserted
from tests.threads import elsewhere

pytestmark = [needs_row_locks, pytest.mark.django_db(transaction=True)]


def claimed_while_held(held: list, claim) -> list:
    """``claim()`` from another connection while this one locks ``held``:
    it fails if the claim waited for the held rows instead of skipping them."""
    with transaction.atomic():
        model = type(held[0])
        locked = list(model.objects.select_for_update().filter(pk__in=[row.pk for row in held]))
        assert len(locked) == len(held)
        return list(elsewhere(claim, timeout=10))


def test_a_job_claim_looks_past_candidates_another_transaction_holds():
    now = timezone.now()
    jobs = inserted(
        Job(task_path="demo.tasks.noop", run_after=now - timedelta(minutes=10 - i)) for i in range(6)
    )
    got = claimed_while_held(jobs[:3], lambda: Job.objects.claim("w1", limit=3))
    assert sorted(job.pk for job in got) == [job.pk for job in jobs[3:]]
    assert Job.objects.filter(owner="w1").count() == 3


def test_a_review_claim_looks_past_candidates_another_transaction_holds():
    posts = inserted([Post(author=f"a{i}", body=f"post {i}") for i in range(6)])
    got = claimed_while_held(posts[:2], lambda: Post.objects.pending().claim("alice", limit=2))
    assert [post.pk for post in got] == [post.pk for post in posts[2:4]]
    assert Post.objects.filter(claimed_by="alice").count() == 2
