"""The batches' admin: the list with progress, a batch's page, a job's
workflow section, the pictures (SVG), and cancel and retry as actions and
buttons, permissioned and logged."""

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from django_dbqueue.admin.dag import layers
from django_dbqueue.admin.workflow import MAX_NODES
from django_dbqueue.models import Job
from django_dbqueue.workflows.models import Batch, Dependency
from tests.admin_helpers import CHANGELIST, act, job, messages_of, staff

pytestmark = pytest.mark.django_db

BATCHES = "/admin/django_dbqueue/batch/"


def page(pk: int) -> str:
    return f"{BATCHES}{pk}/change/"


def depends(child: Job, *parents: Job) -> None:
    for parent in parents:
        Dependency.objects.create(parent_id=parent.pk, child_id=child.pk)
        Job.objects.filter(pk=parent.pk).update(has_dependants=True)


def svg_of(html: str) -> str:
    found = re.search(r'<svg class="dbqueue-dag".*?</svg>', html, re.S)
    assert found, "the page draws the workflow"
    return found.group(0)


def edges_of(svg: str) -> set[tuple[str, str]]:
    return set(re.findall(r'data-from="([^"]+)" data-to="([^"]+)"', svg))


def nodes_of(svg: str) -> list[str]:
    return re.findall(r'<g class="dbqueue-dag-node[^"]*" data-key="([^"]+)"', svg)


@pytest.fixture
def sample():
    """A batch of five: a done, b failed, c cancelled, d running, e waiting on a and b."""
    batch = Batch.objects.create(
        description="Nightly import\nsecond line",
        metadata={"source": "s3://bucket/2026-11-23"},
        on_success={"task": "demo.tasks.notify", "args": ["done"], "kwargs": {}},
        sealed=True,
    )
    now = timezone.now()
    a = job(batch=batch, status="SUCCESSFUL", finished_at=now)
    b = job(batch=batch, status="FAILED", finished_at=now, task_path="demo.tasks.fetch")
    c = job(batch=batch, status="CANCELLED", finished_at=now)
    d = job(batch=batch, status="RUNNING", owner="w1")
    e = job(batch=batch, status="WAITING", on_parent_failure="run", pass_result=True)
    depends(e, a, b)
    return batch, [a, b, c, d, e]


@pytest.fixture
def viewer(client):
    client.force_login(staff("viewer", "view_batch", "view_job"))
    return client


@pytest.fixture
def operator(client):
    client.force_login(staff("operator", "view_batch", "view_job", "cancel_batch", "retry_batch"))
    return client


def test_the_list_shows_each_batch_with_its_progress_and_filters_by_status(viewer, sample):
    batch, _ = sample
    Batch.objects.create(description="empty one", status="SUCCEEDED", sealed=True)

    html = viewer.get(BATCHES).content.decode()

    assert "Nightly import" in html and "second line" not in html, "the description's first line"
    assert "5 total: 1 succeeded, 1 failed, 1 cancelled, 2 pending" in html
    assert "0 total: 0 succeeded, 0 failed, 0 pending" in html
    assert html.count('class="dbqueue-progress"') == 2
    assert 'class="dbqueue-progress-failed"' in html and "1 failed</title>" in html
    filtered = viewer.get(BATCHES, {"status__exact": "SUCCEEDED"}).content.decode()
    assert "empty one" in filtered and "Nightly import" not in filtered


def test_who_may_view_jobs_may_view_batches_and_no_one_else(client, sample):
    batch, _ = sample
    client.force_login(staff("jobs_only", "view_job"))
    assert client.get(page(batch.pk)).status_code == 200
    client.force_login(staff("nothing"))
    assert client.get(BATCHES).status_code == 403
    assert client.get(page(batch.pk)).status_code == 403


def test_a_batch_page_shows_progress_metadata_callbacks_and_links_its_members(viewer, sample):
    batch, members = sample
    callback = job(task_path="demo.tasks.notify", kwargs={"batch_id": batch.pk})
    Batch.objects.filter(pk=batch.pk).update(callback_job_ids=[callback.pk])

    html = viewer.get(page(batch.pk)).content.decode()

    assert "5 total: 1 succeeded, 1 failed, 1 cancelled, 2 pending" in html
    assert "s3://bucket/2026-11-23" in html
    assert "on_success" in html and "demo.tasks.notify" in html
    assert f'href="/admin/django_dbqueue/job/{callback.pk}/change/"' in html
    assert f'href="/admin/django_dbqueue/job/?batch_id={batch.pk}"' in html
    assert f'href="/admin/django_dbqueue/job/?batch_id={batch.pk}&amp;status__exact=FAILED">1 failed' in html
    assert "Cancel batch" not in html and "Retry failed jobs" not in html, "no permission, no button"


def test_the_job_list_filtered_by_batch_shows_only_its_members(viewer, sample):
    batch, members = sample
    outsider = job()

    response = viewer.get(CHANGELIST, {"batch_id": batch.pk})

    shown = {row.pk for row in response.context["cl"].result_list}
    assert shown == {m.pk for m in members} and outsider.pk not in shown
    assert f"#{batch.pk}" in response.content.decode(), "the filter says which batch"
    assert not viewer.get(CHANGELIST, {"batch_id": "x"}).context["cl"].result_list


def test_a_jobs_page_shows_its_batch_parents_dependants_and_policy(viewer, sample):
    batch, (a, b, _, _, e) = sample

    child = viewer.get(f"{CHANGELIST}{e.pk}/change/").content.decode()
    assert f'href="/admin/django_dbqueue/batch/{batch.pk}/change/">batch #{batch.pk}' in child
    assert f'href="/admin/django_dbqueue/job/{a.pk}/change/"' in child
    assert 'fetch</a> <span class="dbqueue-badge dbqueue-failed">FAILED' in child, "each parent, its status"
    assert "on_parent_failure=run" in child and "pass_result=True" in child

    parent = viewer.get(f"{CHANGELIST}{a.pk}/change/").content.decode()
    assert f'href="/admin/django_dbqueue/job/{e.pk}/change/"' in parent
    assert "dbqueue-waiting" in parent
    assert "on_parent_failure" not in parent, "a job without parents has no policy to show"

    plain = viewer.get(f"{CHANGELIST}{job().pk}/change/").content.decode()
    assert "Workflow" not in plain and "dbqueue-dag" not in plain


def test_a_chain_is_drawn_as_three_layers_with_two_arrows(viewer):
    batch = Batch.objects.create(sealed=True)
    a, b, c = (job(batch=batch) for _ in range(3))
    depends(b, a)
    depends(c, b)

    svg = svg_of(viewer.get(page(batch.pk)).content.decode())

    assert nodes_of(svg) == [f"job:{a.pk}", f"job:{b.pk}", f"job:{c.pk}"]
    assert edges_of(svg) == {(f"job:{a.pk}", f"job:{b.pk}"), (f"job:{b.pk}", f"job:{c.pk}")}
    xs = [float(x) for x in re.findall(r'<rect x="([\d.]+)"', svg)]
    assert xs[0] < xs[1] < xs[2], "each step one layer to the right"
    assert "<title>" in svg and f'href="/admin/django_dbqueue/job/{a.pk}/change/"' in svg


def test_a_fan_in_is_drawn_on_the_jobs_page_with_its_parents_and_dependant(viewer):
    parents = [job() for _ in range(3)]
    join = job(status="WAITING")
    after = job(status="WAITING")
    depends(join, *parents)
    depends(after, join)

    svg = svg_of(viewer.get(f"{CHANGELIST}{join.pk}/change/").content.decode())

    assert set(nodes_of(svg)) == {f"job:{p.pk}" for p in [*parents, join, after]}
    assert edges_of(svg) == {(f"job:{p.pk}", f"job:{join.pk}") for p in parents} | {
        (f"job:{join.pk}", f"job:{after.pk}")
    }
    assert "dbqueue-dag-current" in svg


def test_layers_are_longest_paths_and_a_long_chain_needs_no_recursion():
    keys = ["a", "b", "c", "d"]
    assert layers(keys, [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]) == {"a": 0, "b": 1, "c": 2, "d": 3}
    chain = [str(i) for i in range(5000)]
    assert layers(chain, list(zip(chain, chain[1:], strict=False)))["4999"] == 4999


def test_a_big_batch_draws_at_most_max_nodes_and_says_how_many_more(viewer):
    batch = Batch.objects.create(sealed=True)
    Job.objects.bulk_create([Job(task_path="demo.tasks.add", batch=batch) for _ in range(MAX_NODES + 7)])

    html = viewer.get(page(batch.pk)).content.decode()

    assert len(nodes_of(svg_of(html))) == MAX_NODES
    assert "… and 7 more not drawn" in html


def test_cancel_and_retry_need_their_permissions(viewer, sample):
    batch, _ = sample
    for name in ("cancel_batches", "retry_batches"):
        assert viewer.post(f"{BATCHES}{batch.pk}/actions/{name}/").status_code == 403
        viewer.post(BATCHES, {"action": name, "_selected_action": [batch.pk]})
    assert Batch.objects.get(pk=batch.pk).status == "OPEN"
    assert Job.objects.filter(batch=batch, status="FAILED").count() == 1
    assert not LogEntry.objects.exists()


def test_cancelling_a_batch_from_its_page_cancels_its_unfinished_members_and_is_logged(operator, sample):
    batch, (_, _, _, running, waiting) = sample
    html = operator.get(page(batch.pk)).content.decode()
    assert "Cancel batch" in html and "Retry failed jobs" in html

    response = operator.post(f"{BATCHES}{batch.pk}/actions/cancel_batches/", follow=True)

    assert messages_of(response) == ["Cancelled 1 batch (1 job)."]
    assert Batch.objects.get(pk=batch.pk).status == "CANCELLED"
    assert Job.objects.get(pk=waiting.pk).status == "CANCELLED"
    assert Job.objects.get(pk=running.pk).status == "RUNNING", "a running member finishes"
    entry = LogEntry.objects.get()
    assert (entry.object_id, entry.user.username) == (str(batch.pk), "operator")
    assert entry.content_type == ContentType.objects.get_for_model(Batch)
    assert entry.get_change_message() == "Cancelled the batch and 1 job (was OPEN)."
    assert "Cancel batch" not in response.content.decode(), "a cancelled batch has no cancel button"


def test_retry_requeues_failed_and_cancelled_members_and_skips_batches_with_none(operator, sample):
    batch, (_, failed, cancelled, _, _) = sample
    clean = Batch.objects.create(status="SUCCEEDED", sealed=True)
    job(batch=clean, status="SUCCESSFUL")

    response = operator.post(
        BATCHES, {"action": "retry_batches", "_selected_action": [batch.pk, clean.pk]}, follow=True
    )

    assert messages_of(response) == [
        f"Retried 1 batch (2 jobs requeued). Skipped 1 (#{clean.pk}): "
        "only batches with failed or cancelled jobs can be retried."
    ]
    assert set(Job.objects.filter(pk__in=[failed.pk, cancelled.pk]).values_list("status", flat=True)) == {
        "READY"
    }
    assert Batch.objects.get(pk=clean.pk).status == "SUCCEEDED", "left finished, not reopened"
    assert LogEntry.objects.get().get_change_message() == (
        "Requeued 2 jobs failed or cancelled and opened the batch again (was OPEN)."
    )


def test_a_job_that_waits_for_a_whole_batch_shows_and_draws_that_batch(viewer, sample):
    batch, _ = sample
    after = job(status="WAITING")
    Dependency.objects.create(parent_batch_id=batch.pk, child_id=after.pk)

    html = viewer.get(f"{CHANGELIST}{after.pk}/change/").content.decode()

    assert f'href="/admin/django_dbqueue/batch/{batch.pk}/change/">batch #{batch.pk}</a>' in html
    assert 'dbqueue-badge dbqueue-open">OPEN' in html, "the batch's status"
    svg = svg_of(html)
    assert edges_of(svg) == {(f"batch:{batch.pk}", f"job:{after.pk}")}
    assert "on_parent_failure=cancel" in html
    on_batch_page = viewer.get(page(batch.pk)).content.decode()
    assert f'<a href="/admin/django_dbqueue/job/{after.pk}/change/">' in on_batch_page, "its dependants"


def test_a_waiting_job_has_a_cancel_button_that_cancels_it(client):
    client.force_login(staff("canceller", "view_job", "cancel_job"))
    parent = job(status="RUNNING", owner="w1")
    waiting = job(status="WAITING")
    depends(waiting, parent)
    url = f"{CHANGELIST}{waiting.pk}/change/"
    assert (
        '<button type="submit" name="action" value="cancel">Cancel</button>'
        in client.get(url).content.decode()
    )

    response = client.post(f"{CHANGELIST}{waiting.pk}/actions/cancel/", follow=True)

    assert messages_of(response) == ["Cancelled 1 job."]
    assert Job.objects.get(pk=waiting.pk).status == "CANCELLED"
    assert LogEntry.objects.get().get_change_message() == "Cancelled (was WAITING)."


def test_an_unfinished_member_or_parent_cannot_be_deleted_so_nothing_waits_forever(client, sample):
    client.force_login(staff("deleter", "view_job", "delete_job"))
    batch, (done, failed, _, _, _) = sample
    parent, child = job(), job(status="WAITING")
    depends(child, parent)
    member = job(batch=batch)
    loner = job()

    confirm = act(client, "delete_selected", [parent, member, loner, failed])
    assert (
        "Skipped 2 jobs: a ready or waiting job in a workflow (a batch member, or a parent of other "
        "jobs) cannot be deleted; cancel it first, so that its batch and dependants learn it has ended."
    ) in messages_of(confirm)
    assert {o.pk for o in confirm.context["queryset"]} == {loner.pk, failed.pk}
    # Confirming with the stranding jobs posted anyway deletes only the others.
    act(client, "delete_selected", [parent, member, loner, failed], post="yes")
    assert set(
        Job.objects.filter(pk__in=[parent.pk, member.pk, loner.pk, failed.pk]).values_list("pk", flat=True)
    ) == {
        parent.pk,
        member.pk,
    }
    assert client.get(f"{CHANGELIST}{parent.pk}/delete/").status_code == 403
    assert client.get(f"{CHANGELIST}{member.pk}/delete/").status_code == 403
    assert client.get(f"{CHANGELIST}{done.pk}/delete/").status_code == 200, "a finished member may go"
