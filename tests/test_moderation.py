"""Claim-for-review on a model of the user's own (testproject's Post)."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import close_old_connections
from django.utils import timezone

from moderation.models import Post
from tests.conftest import needs_row_locks

pytestmark = pytest.mark.django_db
POSTS = "/admin/moderation/post/"


def posts(n: int, **fields) -> list[Post]:
    return Post.objects.bulk_create([Post(author=f"a{i}", body=f"post {i}", **fields) for i in range(n)])


def moderator(client, name: str):
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_post", "change_post"]))
    client.force_login(user)
    return client


def test_claim_takes_the_oldest_free_rows_for_the_owner_with_a_lease():
    first = posts(5)
    posts(2, status=Post.Status.SPAM)

    claimed = Post.objects.pending().claim("alice", limit=3, lease=60)

    assert [p.pk for p in claimed] == [p.pk for p in first[:3]]
    stored = Post.objects.filter(pk__in=[p.pk for p in claimed])
    assert {p.claimed_by for p in stored} == {"alice"}
    assert all(timezone.now() < p.claim_expires_at <= timezone.now() + timedelta(seconds=60) for p in stored)
    assert [p.pk for p in Post.objects.pending().claim("bob", limit=10)] == [p.pk for p in first[3:]]
    assert Post.objects.pending().claim("carol", limit=10) == []


def test_a_claim_whose_lease_ran_out_goes_back_to_the_pool():
    [post] = posts(1)
    Post.objects.claim("alice", limit=1, lease=60)
    assert Post.objects.claim("bob", limit=1) == []

    Post.objects.filter(pk=post.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))

    assert Post.objects.claimed_by("alice").count() == 0
    assert [p.pk for p in Post.objects.claim("bob", limit=1)] == [post.pk]
    assert Post.objects.filter(pk=post.pk).done("alice", status=Post.Status.SPAM) == 0, "it is bob's now"
    assert Post.objects.filter(pk=post.pk).done("bob", status=Post.Status.APPROVED) == 1
    assert Post.objects.get(pk=post.pk).status == Post.Status.APPROVED


def test_release_and_done_touch_only_the_owners_rows():
    posts(4)
    mine = Post.objects.pending().claim("alice", limit=2)
    theirs = Post.objects.pending().claim("bob", limit=2)
    every = Post.objects.all()

    assert every.release("alice") == 2
    assert every.done("alice", status=Post.Status.SPAM) == 0
    assert Post.objects.filter(pk__in=[p.pk for p in mine], claimed_by=None).count() == 2
    assert every.done("bob", status=Post.Status.SPAM) == 2
    assert set(Post.objects.filter(status=Post.Status.SPAM).values_list("pk", flat=True)) == {
        p.pk for p in theirs
    }


def test_claim_needs_a_limit_and_an_owner():
    with pytest.raises(ValueError, match="limit of at least 1"):
        Post.objects.claim("alice", limit=0)
    with pytest.raises(ValueError, match="needs an owner"):
        Post.objects.claim("", limit=1)


@needs_row_locks
@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_get_disjoint_rows():
    posts(60)
    results: dict[str, list[int]] = {}
    start = threading.Barrier(4)

    def claim(name: str) -> None:
        try:
            start.wait()
            results[name] = [p.pk for p in Post.objects.pending().claim(name, limit=10)]
        finally:
            close_old_connections()

    threads = [threading.Thread(target=claim, args=(f"m{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    claimed = [pk for pks in results.values() for pk in pks]
    assert len(claimed) == 40 and len(set(claimed)) == 40, results
    for name, pks in results.items():
        assert set(Post.objects.filter(claimed_by=name).values_list("pk", flat=True)) == set(pks)


def test_admin_claim_button_my_items_and_actions(client):
    first = posts(12)
    alice = moderator(client, "alice")

    page = alice.get(POSTS)
    assert b"Claim next 10 for me" in page.content and b"My claimed items (0)" in page.content

    mine = alice.post(f"{POSTS}claim/", {"n": "3"}, follow=True)
    assert [str(m) for m in mine.context["messages"]] == [
        "Claimed 3 posts for you; they are yours for 15 minutes."
    ]
    assert [p.pk for p in mine.context["cl"].result_list] == [p.pk for p in first[:3]]
    assert b"My claimed items (3)" in mine.content

    selected = [str(first[0].pk), str(first[1].pk), str(first[5].pk)]
    done = alice.post(POSTS, {"action": "done", "_selected_action": selected}, follow=True)
    assert [str(m) for m in done.context["messages"]] == [
        "Finished 2 posts. Skipped 1: they are not claimed by you (claim them first)."
    ]
    statuses = dict(Post.objects.values_list("pk", "status"))
    assert statuses[first[0].pk] == statuses[first[1].pk] == Post.Status.APPROVED
    assert statuses[first[5].pk] == Post.Status.PENDING

    alice.post(POSTS, {"action": "release", "_selected_action": [str(first[2].pk)]})
    assert Post.objects.get(pk=first[2].pk).claimed_by is None


def test_claim_is_post_only_and_needs_change_permission(client):
    posts(3)
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_post"))
    client.force_login(viewer)

    assert b"Claim next" not in client.get(POSTS).content
    assert client.get(f"{POSTS}claim/").status_code == 405
    assert client.post(f"{POSTS}claim/", {"n": "3"}).status_code == 403
    assert Post.objects.exclude(claimed_by=None).count() == 0
