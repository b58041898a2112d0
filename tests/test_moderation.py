"""Claim-for-review on a model of the user's own (testproject's Post)."""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from django.utils.formats import localize

from moderation.models import Post
from tests.conftest import needs_row_locks
from tests.rows import inserted
from tests.threads import together

pytestmark = pytest.mark.django_db
POSTS = "/admin/moderation/post/"


def posts(n: int, **fields) -> list[Post]:
    return inserted([Post(author=f"a{i}", body=f"post {i}", **fields) for i in range(n)])


def text_of(page) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", page.content.decode()).split())


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

    def claim(index: int) -> list[int]:
        # A claim skips rows others hold locked at that instant, so it may
        # return fewer than asked: ask again for the rest, as the admin would.
        got: list[int] = []
        for _ in range(20):
            if len(got) == 10:
                break
            got += [p.pk for p in Post.objects.pending().claim(f"m{index}", limit=10 - len(got))]
        return got

    results = {f"m{index}": got for index, got in enumerate(together(claim, 4))}
    claimed = [pk for pks in results.values() for pk in pks]
    assert len(claimed) == 40 and len(set(claimed)) == 40, results
    for name, pks in results.items():
        assert set(Post.objects.filter(claimed_by=name).values_list("pk", flat=True)) == set(pks)


def test_admin_claim_button_my_items_and_actions(client):
    first = posts(12)
    alice = moderator(client, "alice")

    page = alice.get(POSTS)
    assert "Claim next 10 for me" in text_of(page) and b"My claimed items (0)" in page.content

    mine = alice.post(f"{POSTS}claim/", {"n": "3"}, follow=True)
    assert [str(m) for m in mine.context["messages"]] == [
        "Claimed 3 posts for you; they are yours for 15 minutes."
    ]
    assert [p.pk for p in mine.context["cl"].result_list] == [p.pk for p in first[:3]]
    assert b"My claimed items (3)" in mine.content

    selected = [str(first[0].pk), str(first[1].pk), str(first[5].pk)]
    done = alice.post(POSTS, {"action": "done", "_selected_action": selected}, follow=True)
    assert [str(m) for m in done.context["messages"]] == [
        "Finished 2 posts. Skipped 1: it is not claimed by you (claim it first)."
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


def test_a_post_another_moderator_holds_can_be_read_but_not_changed(client):
    [held, free] = posts(2)
    Post.objects.filter(pk=held.pk).claim("alice", limit=1)
    bob = moderator(client, "bob")

    page = bob.get(f"{POSTS}{held.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode(), "no save button"
    assert [str(m) for m in page.context["messages"]] == [
        f"Post “{held}” is being reviewed by alice until "
        f"{localize(timezone.template_localtime(Post.objects.get(pk=held.pk).claim_expires_at))}; "
        "you can look at it, but not change it until they finish or their claim runs out."
    ]

    refused = bob.post(f"{POSTS}{held.pk}/change/", {"author": "bob", "body": "mine now", "status": "SPAM"})
    assert refused.status_code == 302 and refused["Location"] == f"{POSTS}{held.pk}/change/"
    after = Post.objects.get(pk=held.pk)
    assert (after.body, after.status, after.claimed_by) == (held.body, Post.Status.PENDING, "alice")
    followed = bob.get(refused["Location"])
    assert str(list(followed.context["messages"])[0]).startswith("Not saved. Post “")

    # A free post, or one whose claim ran out, is anyone's to change.
    assert 'name="_save"' in bob.get(f"{POSTS}{free.pk}/change/").content.decode()
    Post.objects.filter(pk=held.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    assert 'name="_save"' in bob.get(f"{POSTS}{held.pk}/change/").content.decode()


def test_the_claim_columns_are_read_only_on_the_change_form(client):
    [post] = posts(1)
    Post.objects.filter(pk=post.pk).claim("alice", limit=1)
    alice = moderator(client, "alice")

    page = alice.get(f"{POSTS}{post.pk}/change/").content.decode()
    assert 'name="_save"' in page, "her own claim: she may change the post"
    assert 'name="claimed_by"' not in page and 'name="claim_expires_at"' not in page
    assert "alice" in page, "the claim is still shown"

    fields = {"author": "a0", "body": "edited", "status": "APPROVED"}
    fields.update(created_at_0="2026-01-01", created_at_1="12:00:00")
    forged = {
        **fields,
        "claimed_by": "mallory",
        "claim_expires_at_0": "2099-01-01",
        "claim_expires_at_1": "0:00",
    }
    assert alice.post(f"{POSTS}{post.pk}/change/", forged).status_code == 302
    after = Post.objects.get(pk=post.pk)
    assert (after.body, after.claimed_by) == ("edited", "alice")
    assert after.claim_expires_at < timezone.now() + timedelta(hours=1)


def test_the_mixin_adds_its_actions_to_the_model_admins_own(rf):
    from django.contrib import admin

    from django_dbqueue.admin import ModerationAdminMixin

    @admin.action(description="Export")
    def export(modeladmin, request, queryset):
        return None

    class ExportingAdmin(admin.ModelAdmin):
        actions = [export]

    class Inherited(ModerationAdminMixin, ExportingAdmin):
        pass

    class Declared(ModerationAdminMixin, admin.ModelAdmin):
        actions = ["approve_all"]

        @admin.action(description="Approve all")
        def approve_all(self, request, queryset):
            return None

    class NoActions(ModerationAdminMixin, admin.ModelAdmin):
        actions = None

    request = rf.get(POSTS)
    request.user = User.objects.create_superuser("root", password="pw")

    def names(admin_class) -> list[str]:
        return list(admin_class(Post, admin.site).get_actions(request))

    assert names(Inherited) == ["delete_selected", "done", "release", "export"]
    assert names(Declared) == ["delete_selected", "done", "release", "approve_all"]
    assert names(NoActions) == []
    for admin_class in (Inherited, Declared):
        assert admin_class(Post, admin.site).check() == []
    assert names(type(admin.site.get_model_admin(Post))) == [
        "delete_selected",
        "done",
        "release",
        "mark_spam",
    ]


def test_who_holds_a_post_is_not_told_to_staff_who_may_not_see_posts(client):
    [post] = posts(1)
    Post.objects.filter(pk=post.pk).claim("alice", limit=1)
    client.force_login(User.objects.create_user("stranger", password="pw", is_staff=True))

    assert client.get(f"{POSTS}{post.pk}/change/").status_code == 403
    assert client.post(f"{POSTS}{post.pk}/change/", {"body": "x"}).status_code == 403
    later = client.get("/admin/")
    assert [str(m) for m in later.context["messages"]] == []
    assert Post.objects.get(pk=post.pk).body == post.body


def shown_lease(page) -> str:
    """The lease column as the change form itself shows it (read-only)."""
    html = page.content.decode()
    found = re.search(r'field-claim_expires_at.*?<div class="readonly">(.*?)</div>', html, re.DOTALL)
    assert found, "the lease column is on the page"
    return found.group(1).strip()


@pytest.mark.parametrize("use_tz", [True, False])
def test_the_held_banner_writes_its_date_as_the_page_writes_the_lease(client, settings, use_tz):
    settings.USE_TZ, settings.TIME_ZONE = use_tz, "America/Chicago"
    [held] = posts(1)
    Post.objects.filter(pk=held.pk).claim("alice", limit=1)
    bob = moderator(client, "bob")

    page = bob.get(f"{POSTS}{held.pk}/change/")

    assert page.status_code == 200
    until = shown_lease(page)
    assert re.fullmatch(r"[A-Z][a-z]+\.? \d{1,2}, \d{4}, \d{1,2}(:\d\d)? [ap]\.m\.", until), until
    assert [str(m) for m in page.context["messages"]] == [
        f"Post “{held}” is being reviewed by alice until {until}; "
        "you can look at it, but not change it until they finish or their claim runs out."
    ]


def test_a_post_another_moderator_holds_cannot_be_deleted(client):
    [held, free] = posts(2)
    Post.objects.filter(pk=held.pk).claim("alice", limit=1)
    bob = User.objects.create_user("bob", password="pw", is_staff=True)
    codenames = ["view_post", "change_post", "delete_post"]
    bob.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(bob)

    assert f"{POSTS}{held.pk}/delete/" not in client.get(f"{POSTS}{held.pk}/change/").content.decode()
    assert f"{POSTS}{free.pk}/delete/" in client.get(f"{POSTS}{free.pk}/change/").content.decode()
    assert client.get(f"{POSTS}{held.pk}/delete/").status_code == 403
    assert client.post(f"{POSTS}{held.pk}/delete/", {"post": "yes"}).status_code == 403

    # Deleting a selection asks first, listing only the rows nobody else holds.
    assert (
        '<option value="delete_selected">Delete selected posts</option>' in client.get(POSTS).content.decode()
    )
    selected = {"action": "delete_selected", "_selected_action": [str(held.pk), str(free.pk)]}
    confirm = client.post(POSTS, selected)
    assert [str(m) for m in confirm.context["messages"]] == [
        "Skipped 1 post: another moderator is reviewing it; "
        "it can be deleted once they finish or their claim runs out."
    ]
    assert [post.pk for post in confirm.context["queryset"]] == [free.pk]
    assert Post.objects.count() == 2, "nothing is deleted before bob confirms"
    assert client.post(POSTS, {**selected, "post": "yes"}).status_code == 302
    assert list(Post.objects.values_list("pk", flat=True)) == [held.pk], "the free one only"

    Post.objects.filter(pk=held.pk).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    assert client.post(f"{POSTS}{held.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Post.objects.exists(), "a lapsed claim holds nothing"


def test_listing_the_claim_columns_gives_one_claimed_by_column(rf):
    from django.contrib import admin

    from django_dbqueue.admin import ModerationAdminMixin

    class ListsTheClaim(ModerationAdminMixin, admin.ModelAdmin):
        list_display = ("id", "claimed_by", "claim_expires_at", "status")

    request = rf.get(POSTS)
    request.user = User.objects.create_superuser("root", password="pw")
    model_admin = ListsTheClaim(Post, admin.site)
    [post] = posts(1)
    Post.objects.filter(pk=post.pk).claim("root", limit=1)

    assert model_admin.get_list_display(request) == ["id", "claim_state", "status"]
    page = model_admin.changelist_view(request)
    page.render()
    head = page.content.decode().split("<thead>")[1].split("</thead>")[0]
    headers = [" ".join(re.sub(r"<[^>]+>", " ", th).split()) for th in re.findall(r"<th.*?</th>", head, re.S)]
    assert headers[1:] == ["ID", "Claimed by", "Status"]  # [0]: the checkbox
    assert "root" in text_of(page)
    registered = type(admin.site.get_model_admin(Post))(Post, admin.site)
    assert registered.get_list_display(request)[-1] == "claim_state", "appended when not listed"


def test_the_docs_show_the_test_projects_post_model_whole():
    root = Path(__file__).resolve().parent.parent
    docs = (root / "docs" / "admin.md").read_text()
    shown = docs.split("```python\n# posts/models.py\n", 1)[1].split("```", 1)[0]
    model = (root / "testproject" / "moderation" / "models.py").read_text()
    assert shown == model.split('"""', 2)[2].lstrip("\n"), "docs/admin.md shows models.py less its docstring"


def test_claim_and_action_messages_count_in_the_singular_and_plural(client, monkeypatch):
    from django.contrib import admin

    first = posts(4)
    monkeypatch.setattr(type(admin.site.get_model_admin(Post)), "claim_lease", 60.0)
    alice = moderator(client, "alice")

    def said(response) -> list[str]:
        return [str(m) for m in response.context["messages"]]

    one = alice.post(f"{POSTS}claim/", {"n": "1"}, follow=True)
    assert said(one) == ["Claimed 1 post for you; it is yours for 1 minute."]
    Post.objects.filter(pk=first[1].pk).claim("bob", limit=1)
    Post.objects.filter(pk=first[2].pk).claim("bob", limit=1)
    selected = [str(p.pk) for p in first[:3]]
    done = alice.post(POSTS, {"action": "done", "_selected_action": selected}, follow=True)
    assert said(done) == ["Finished 1 post. Skipped 2: they are not claimed by you (claim them first)."]
    nothing = alice.post(POSTS, {"action": "release", "_selected_action": [selected[1]]}, follow=True)
    assert said(nothing) == ["Released 0 posts. Skipped 1: it is not claimed by you (claim it first)."]


def test_the_review_claim_keeps_its_documented_import_path():
    """The mixin's code lives with the other claims (transitions/review.py);
    docs/admin.md and the reference import it from django_dbqueue.moderation."""
    from django_dbqueue import moderation
    from django_dbqueue.transitions import review

    assert moderation.ClaimQuerySetMixin is review.ClaimQuerySetMixin
    assert moderation.DEFAULT_REVIEW_LEASE == review.DEFAULT_REVIEW_LEASE
