"""Admin actions on jobs: what they change, what they skip, who may run them."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from django_dbqueue.models import Job
from tests.admin_helpers import CHANGELIST, DASHBOARD, act, job, messages_of, staff

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    perms = ("view_job", "requeue_job", "cancel_job", "run_job_now", "delete_job")
    client.force_login(staff("operator", *perms))
    return client


def test_requeue_puts_finished_jobs_back_due_now_and_explains_what_it_skipped(operator):
    later = timezone.now() + timedelta(hours=1)
    failed = job(status="FAILED", attempts=3, finished_at=timezone.now(), run_after=later)
    cancelled = job(status="CANCELLED", finished_at=timezone.now())
    done = job(status="SUCCESSFUL", return_value=5, finished_at=timezone.now())
    running = job(status="RUNNING", owner="w1")
    ready = job()

    response = act(operator, "requeue", [failed, cancelled, done, running, ready])

    assert messages_of(response) == [
        "Requeued 3 jobs. Skipped 2 jobs (1 ready, 1 running): "
        "only failed, cancelled or successful jobs can be requeued."
    ]
    for requeued in Job.objects.filter(pk__in=[failed.pk, cancelled.pk, done.pk]):
        assert (requeued.status, requeued.attempts, requeued.finished_at) == ("READY", 0, None)
        assert requeued.run_after <= timezone.now()
    assert Job.objects.get(pk=running.pk).status == "RUNNING"
    assert Job.objects.filter(pk__in=[failed.pk]).claim("w2", limit=5)[0].pk == failed.pk


def test_cancel_stops_ready_jobs_and_asks_running_ones_to_stop(operator):
    ready = job()
    running = job(status="RUNNING", owner="w1")
    asked = job(status="RUNNING", owner="w2", cancel_requested_at=timezone.now() - timedelta(minutes=1))
    failed = job(status="FAILED")

    response = act(operator, "cancel", [ready, running, asked, failed])

    assert messages_of(response) == [
        "Cancelled 1 job. Asked 1 running job to stop: it ends CANCELLED when its worker stops it. "
        "Skipped 2 jobs (1 running and already asked to stop, 1 failed): "
        "finished jobs cannot be cancelled, and a running job is asked to stop once."
    ]
    assert Job.objects.get(pk=ready.pk).status == "CANCELLED"
    # The running job stays its worker's until the worker stops it.
    stopping = Job.objects.get(pk=running.pk)
    assert (stopping.status, stopping.owner) == ("RUNNING", "w1")
    assert stopping.cancel_requested_at is not None
    assert Job.objects.get(pk=asked.pk).cancel_requested_at == asked.cancel_requested_at, "asked once"


def test_cancel_says_how_many_running_jobs_it_asked_with_the_right_plural(operator):
    def said(jobs: list[Job]) -> list[str]:
        return messages_of(act(operator, "cancel", jobs))

    two = [job(status="RUNNING", owner="w1"), job(status="RUNNING", owner="w1")]
    assert said(two) == ["Asked 2 running jobs to stop: they end CANCELLED when their workers stop them."], (
        "no 'Cancelled 0 jobs' before it"
    )
    assert said([job(), job(), job(status="RUNNING", owner="w2")]) == [
        "Cancelled 2 jobs. Asked 1 running job to stop: it ends CANCELLED when its worker stops it."
    ]
    [message] = act(operator, "cancel", two).context["messages"]
    assert message.level_tag == "warning", "asking again changes nothing"
    assert str(message) == (
        "Cancelled 0 jobs. Skipped 2 jobs (2 running and already asked to stop): "
        "finished jobs cannot be cancelled, and a running job is asked to stop once."
    )


def test_run_now_clears_a_future_run_after_only(operator):
    waiting = job(run_after=timezone.now() + timedelta(days=1))
    due = job(run_after=timezone.now() - timedelta(minutes=1))
    finished = job(status="SUCCESSFUL", run_after=timezone.now() + timedelta(days=1))

    response = act(operator, "run_now", [waiting, due, finished])

    assert messages_of(response) == [
        "Made 1 job due now. Skipped 2 jobs (1 ready and already due, 1 successful): "
        "only ready jobs waiting for a later time can be made due."
    ]
    assert Job.objects.get(pk=waiting.pk).run_after <= timezone.now()
    assert [j.pk for j in Job.objects.claim("w1", limit=10)] == [due.pk, waiting.pk]


def test_each_action_says_what_it_did_in_a_sentence_with_the_right_plural(operator):
    later = timezone.now() + timedelta(days=1)

    def said(action: str, jobs: list[Job]) -> list[str]:
        return messages_of(act(operator, action, jobs))

    assert said("run_now", [job(run_after=later), job(run_after=later)]) == ["Made 2 jobs due now."]
    assert said("run_now", [job(run_after=later)]) == ["Made 1 job due now."]
    assert said("cancel", [job(), job()]) == ["Cancelled 2 jobs."]
    assert said("requeue", [job(status="FAILED")]) == ["Requeued 1 job."]
    waiting = job(run_after=later)
    page = operator.post(f"{CHANGELIST}{waiting.pk}/actions/run_now/", follow=True)
    assert messages_of(page) == ["Made 1 job due now."]


def test_an_action_that_changes_nothing_is_a_warning(operator):
    running = job(status="RUNNING", owner="w1")

    response = act(operator, "requeue", [running])

    [message] = response.context["messages"]
    assert message.level_tag == "warning"
    assert str(message).startswith("Requeued 0 jobs. Skipped 1 job (1 running)")


def test_delete_asks_first_then_deletes_all_but_running_jobs(operator):
    failed = job(status="FAILED")
    done = job(status="SUCCESSFUL")
    running = job(status="RUNNING", owner="w1")

    confirm = act(operator, "delete_selected", [failed, done, running])
    assert "Skipped 1 job: running jobs cannot be deleted; wait for them to finish." in messages_of(confirm)
    assert Job.objects.count() == 3, "nothing is deleted before the user confirms"
    assert {o.pk for o in confirm.context["queryset"]} == {failed.pk, done.pk}

    act(operator, "delete_selected", [failed, done], post="yes")

    assert list(Job.objects.values_list("pk", flat=True)) == [running.pk]


def test_a_running_job_has_no_delete_button_and_its_delete_page_is_refused(operator):
    running = job(status="RUNNING", owner="w1")
    failed = job(status="FAILED")

    assert operator.get(f"{CHANGELIST}{running.pk}/delete/").status_code == 403
    assert operator.post(f"{CHANGELIST}{failed.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Job.objects.filter(pk=failed.pk).exists()


def test_a_view_only_user_sees_jobs_but_cannot_run_any_action(client):
    failed = job(status="FAILED")
    ready = job()
    client.force_login(staff("viewer", "view_job"))

    page = client.get(CHANGELIST)
    assert page.status_code == 200
    assert page.context["cl"].model_admin.get_actions(page.wsgi_request) == {}
    assert b'name="action"' not in page.content

    attempts = [("requeue", failed), ("cancel", ready), ("run_now", ready), ("delete_selected", failed)]
    for action, target in attempts:
        act(client, action, [target])
    assert Job.objects.get(pk=failed.pk).status == "FAILED"
    assert Job.objects.get(pk=ready.pk).status == "READY"
    assert client.get(f"{CHANGELIST}{failed.pk}/delete/").status_code == 403


def test_each_action_needs_its_own_permission(client):
    failed = job(status="FAILED")
    ready = job()
    client.force_login(staff("requeuer", "view_job", "requeue_job"))

    page = client.get(CHANGELIST)
    actions = page.context["cl"].model_admin.get_actions(page.wsgi_request)
    assert set(actions) == {"requeue"}
    act(client, "cancel", [ready])
    assert Job.objects.get(pk=ready.pk).status == "READY"
    act(client, "requeue", [failed])
    assert Job.objects.get(pk=failed.pk).status == "READY"


def test_nobody_may_add_or_edit_a_job_by_hand(admin_client):
    ready = job()

    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    admin_client.post(f"{CHANGELIST}{ready.pk}/change/", {"status": "SUCCESSFUL", "task_path": "x"})
    assert Job.objects.get(pk=ready.pk).status == "READY"


@pytest.mark.parametrize("path", [CHANGELIST, DASHBOARD, "/admin/django_dbqueue/dashboard/", "/admin/"])
def test_a_user_who_is_not_staff_reaches_no_page(client, path):
    from django.contrib.auth.models import User

    ready = job()
    User.objects.create_user("visitor", password="pw")
    client.login(username="visitor", password="pw")

    for url in [path, f"{CHANGELIST}{ready.pk}/change/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_staff_without_job_permissions_cannot_open_the_dashboard(client):
    client.force_login(staff("stranger"))

    assert client.get(DASHBOARD).status_code == 403
    assert client.get(CHANGELIST).status_code == 403


def test_the_dashboard_shows_workers_only_to_whoever_may_open_the_workers_list(client):
    from django_dbqueue.models import Worker

    job()
    Worker.objects.create(name="web-7:4242:0", host="web-7", pid=4242, queues=["default"])
    workers = "/admin/django_dbqueue/worker/"

    client.force_login(staff("viewer", "view_job"))
    dashboard = client.get(DASHBOARD)
    assert dashboard.status_code == 200 and dashboard.context["queues"]
    assert b"web-7" not in dashboard.content and b"4242" not in dashboard.content
    assert b"Workers are shown to users who may view workers." in dashboard.content
    assert client.get(workers).status_code == 403

    client.force_login(staff("operator", "view_job", "view_worker"))
    dashboard = client.get(DASHBOARD)
    assert b"web-7" in dashboard.content and b"4242" in dashboard.content
    assert client.get(workers).status_code == 200


def page_buttons(client, target: Job) -> list[str]:
    html = client.get(f"{CHANGELIST}{target.pk}/change/").content.decode()
    return re.findall(r'<button type="submit" name="action" value="(\w+)">', html)


def test_the_job_page_offers_the_actions_that_apply_and_the_user_may_run(operator, client):
    failed = job(status="FAILED", finished_at=timezone.now())
    waiting = job(run_after=timezone.now() + timedelta(hours=1))
    due = job()
    running = job(status="RUNNING", owner="w1")

    assert page_buttons(operator, failed) == ["requeue"]
    assert page_buttons(operator, waiting) == ["cancel", "run_now"]
    assert page_buttons(operator, due) == ["cancel"]
    assert page_buttons(operator, running) == ["cancel"]

    page = operator.post(f"{CHANGELIST}{failed.pk}/actions/requeue/", follow=True)
    assert page.redirect_chain[-1][0] == f"{CHANGELIST}{failed.pk}/change/"
    assert messages_of(page) == ["Requeued 1 job."]
    assert Job.objects.get(pk=failed.pk).status == "READY"
    operator.post(f"{CHANGELIST}{waiting.pk}/actions/run_now/")
    assert Job.objects.get(pk=waiting.pk).run_after <= timezone.now()
    operator.post(f"{CHANGELIST}{due.pk}/actions/cancel/")
    assert Job.objects.get(pk=due.pk).status == "CANCELLED"
    assert operator.get(f"{CHANGELIST}{due.pk}/actions/requeue/").status_code == 405
    assert operator.post(f"{CHANGELIST}{due.pk}/actions/delete_selected/").status_code == 403
    assert operator.post(f"{CHANGELIST}999999/actions/cancel/").status_code == 302


def test_the_job_page_refuses_actions_the_user_may_not_run(client):
    failed = job(status="FAILED")
    ready = job()
    client.force_login(staff("requeuer", "view_job", "requeue_job"))

    assert page_buttons(client, failed) == ["requeue"]
    assert page_buttons(client, ready) == [], "no cancel button without cancel_job"
    assert client.post(f"{CHANGELIST}{ready.pk}/actions/cancel/").status_code == 403
    assert client.post(f"{CHANGELIST}{ready.pk}/actions/run_now/").status_code == 403
    assert Job.objects.get(pk=ready.pk).status == "READY"

    client.force_login(staff("blind", "requeue_job"))
    assert client.post(f"{CHANGELIST}{failed.pk}/actions/requeue/").status_code == 403, "no view_job"
    assert Job.objects.get(pk=failed.pk).status == "FAILED"


def test_every_action_is_in_the_admin_log_with_who_what_and_when(operator):
    from django.contrib.admin.models import CHANGE, DELETION, LogEntry

    failed = job(status="FAILED")
    cancelled = job(status="CANCELLED")
    running = job(status="RUNNING", owner="w1")
    ready = job()
    start = timezone.now()

    act(operator, "requeue", [failed, cancelled, running])
    operator.post(f"{CHANGELIST}{ready.pk}/actions/cancel/")
    act(operator, "delete_selected", [ready], post="yes")

    entries = LogEntry.objects.order_by("pk")
    assert [(e.object_id, e.action_flag, e.get_change_message()) for e in entries] == [
        (str(failed.pk), CHANGE, "Requeued (was FAILED)."),
        (str(cancelled.pk), CHANGE, "Requeued (was CANCELLED)."),
        (str(ready.pk), CHANGE, "Cancelled (was READY)."),
        (str(ready.pk), DELETION, ""),
    ], "the running job was skipped, so it has no entry"
    assert {e.user.username for e in entries} == {"operator"}
    assert all(e.action_time >= start - timedelta(seconds=1) for e in entries)
    assert {e.content_type.model_class() for e in entries} == {Job}
    history = operator.get(f"{CHANGELIST}{failed.pk}/history/").content.decode()
    assert "Requeued (was FAILED)." in history and "operator" in history


def test_a_big_selection_is_changed_and_logged_chunk_by_chunk(operator, monkeypatch):
    from django.contrib.admin.models import LogEntry

    from django_dbqueue.admin import actions

    monkeypatch.setattr(actions, "CHUNK", 4)
    sizes = []
    whole = actions.change_locked

    def change_locked(rows, ids, change):
        sizes.append(len(ids))
        return whole(rows, ids, change)

    monkeypatch.setattr(actions, "change_locked", change_locked)
    Job.objects.bulk_create([Job(task_path="demo.tasks.add", status="FAILED") for _ in range(10)])
    job()

    page = operator.post(
        CHANGELIST,
        {"action": "requeue", "select_across": "1", "index": "0", "_selected_action": ["0"]},
        follow=True,
    )

    assert messages_of(page) == [
        "Requeued 10 jobs. Skipped 1 job (1 ready): "
        "only failed, cancelled or successful jobs can be requeued."
    ]
    assert Job.objects.filter(status="READY").count() == 11
    assert LogEntry.objects.count() == 10
    assert sizes == [4, 4, 3], "each chunk locked and changed in its own transaction"
