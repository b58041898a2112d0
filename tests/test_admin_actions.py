"""Admin actions on jobs: what they change, what they skip, who may run them."""

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


def test_cancel_stops_ready_jobs_and_leaves_running_ones_alone(operator):
    ready = job()
    running = job(status="RUNNING", owner="w1")
    failed = job(status="FAILED")

    response = act(operator, "cancel", [ready, running, failed])

    assert messages_of(response) == [
        "Cancelled 1 job. Skipped 2 jobs (1 running, 1 failed): "
        "only ready jobs can be cancelled; a running job is left to finish."
    ]
    assert Job.objects.get(pk=ready.pk).status == "CANCELLED"
    assert Job.objects.get(pk=running.pk).status == "RUNNING"
    assert Job.objects.get(pk=running.pk).owner == "w1"


def test_run_now_clears_a_future_run_after_only(operator):
    waiting = job(run_after=timezone.now() + timedelta(days=1))
    due = job(run_after=timezone.now() - timedelta(minutes=1))
    finished = job(status="SUCCESSFUL", run_after=timezone.now() + timedelta(days=1))

    response = act(operator, "run_now", [waiting, due, finished])

    assert messages_of(response) == [
        "Made due now 1 job. Skipped 2 jobs (1 successful, 1 ready and already due): "
        "only ready jobs waiting for a later time can be made due."
    ]
    assert Job.objects.get(pk=waiting.pk).run_after <= timezone.now()
    assert [j.pk for j in Job.objects.claim("w1", limit=10)] == [due.pk, waiting.pk]


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
