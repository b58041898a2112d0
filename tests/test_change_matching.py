"""Changing every job that matches a filter (operations/matching.py): from
code, from ``manage.py changejobs`` and from the dashboard's "Retry failed"
and "Discard ready"; a few at once, more by an operation job that a real
worker runs a chunk at a time; a job past the decision's largest id is not
among them. Sizes kept small by OPERATION_INLINE_ROWS and OPERATION_CHUNK_ROWS."""

import io

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_dbqueue.models import Job
from django_dbqueue.operations.big import TASK_PATH
from django_dbqueue.operations.matching import change_all
from django_dbqueue.tasks_api import task_backends
from django_dbqueue.worker import Worker
from tests.admin_helpers import job, messages_of, staff
from tests.test_big_operations import INLINE, options

pytestmark = pytest.mark.django_db(transaction=True)
DASHBOARD = "/admin/django_dbqueue/job/dashboard/"


def jobs(n: int, status: str, queue: str = "email") -> list[int]:
    return [job(status=status, queue_name=queue).pk for _ in range(n)]


def statuses(ids: list[int]) -> set[str]:
    return set(Job.objects.filter(pk__in=ids).values_list("status", flat=True))


def run_operations() -> None:
    assert Worker(task_backends["default"], ["default"], burst=True).run() == 0


def test_a_few_matching_jobs_change_at_once_and_no_other():
    failed, other_queue, ready = jobs(3, "FAILED"), jobs(2, "FAILED", "default"), jobs(2, "READY")
    started = change_all("requeue", status="FAILED", queue_name="email")
    assert (int(started), started.inline) == (3, True)
    assert statuses(failed) == {"READY"}
    assert statuses(other_queue) == {"FAILED"} and statuses(ready) == {"READY"}


@override_settings(TASKS=options())
def test_many_are_changed_by_an_operation_job_up_to_the_largest_id_when_decided():
    failed = jobs(INLINE * 3, "FAILED")
    started = change_all("requeue", status="FAILED", queue_name="email")
    assert (int(started), started.inline) == (INLINE * 3, False)
    assert statuses(failed) == {"FAILED"}, "nothing changed in the caller's request"
    later = jobs(2, "FAILED")  # failed after the decision
    run_operations()
    assert statuses(failed) == {"READY"} and statuses(later) == {"FAILED"}
    operation = Job.objects.get(pk=started.job_id)
    assert operation.task_path == TASK_PATH and operation.status == "SUCCESSFUL"
    assert operation.return_value == {"operation": "change_matching", "rows": INLINE * 3}


def test_a_bad_filter_is_refused_before_anything_changes():
    jobs(2, "FAILED")
    with pytest.raises(ValueError, match="status must be one of"):
        change_all("requeue", status="BROKEN")
    with pytest.raises(ValueError, match="ChangeMatching changes jobs by requeue, cancel, run_now"):
        change_all("delete", status="FAILED")
    assert statuses(list(Job.objects.values_list("pk", flat=True))) == {"FAILED"}


@override_settings(TASKS=options())
def test_the_command_changes_and_follows_an_operation_job():
    ready = jobs(INLINE + 5, "READY")
    out = io.StringIO()
    call_command("changejobs", "cancel", "--status", "READY", "--queue", "email", stdout=out)
    said = out.getvalue()
    assert f"{INLINE + 5} jobs match: the operation job #" in said
    run_operations()
    assert statuses(ready) == {"CANCELLED"}
    out = io.StringIO()
    call_command("changejobs", "cancel", "--status", "READY", "--queue", "email", stdout=out)
    assert out.getvalue() == "No job matches.\n"
    with pytest.raises(CommandError, match="No filter given"):
        call_command("changejobs", "requeue")


def test_the_dashboard_retries_failed_and_discards_ready_per_queue_for_whoever_may(client):
    failed, ready, elsewhere = jobs(3, "FAILED"), jobs(2, "READY"), jobs(1, "FAILED", "default")
    viewer = staff("viewer", "view_job")
    client.force_login(viewer)
    page = client.get(DASHBOARD).content.decode()
    assert "Retry failed" not in page and "Discard ready" not in page
    assert client.post(f"{DASHBOARD}change/", {"what": "retry_failed", "queue": "email"}).status_code == 403
    operator = staff("operator", "view_job", "requeue_job", "cancel_job")
    client.force_login(operator)
    page = client.get(DASHBOARD).content.decode()
    # Where there are jobs to change: two queues have failed jobs, one has ready ones.
    assert page.count(">Retry failed<") == 2 and page.count(">Discard ready<") == 1
    assert client.get(f"{DASHBOARD}change/").status_code == 405
    response = client.post(f"{DASHBOARD}change/", {"what": "retry_failed", "queue": "email"}, follow=True)
    assert "Requeued 3 failed jobs of the queue 'email'." in messages_of(response)
    assert statuses(failed) == {"READY"} and statuses(elsewhere) == {"FAILED"}
    response = client.post(f"{DASHBOARD}change/", {"what": "discard_ready", "queue": "email"}, follow=True)
    assert "Cancelled 5 ready jobs of the queue 'email'." in messages_of(response)
    assert statuses(ready + failed) == {"CANCELLED"}
    logged = LogEntry.objects.filter(user=operator).values_list("change_message", flat=True)
    assert sorted(set(logged)) == ["Cancelled (was READY).", "Requeued (was FAILED)."]


@override_settings(TASKS=options())
def test_select_all_on_a_filtered_list_keeps_the_filter_and_a_search_keeps_the_ids(client):
    from tests.admin_helpers import CHANGELIST
    from tests.test_big_operations import operation_jobs

    failed, others = jobs(INLINE + 3, "FAILED"), jobs(2, "FAILED", "default")
    client.force_login(staff("operator", "view_job", "requeue_job"))
    post = {"action": "requeue", "select_across": "1", "index": "0", "_selected_action": [str(failed[0])]}
    response = client.post(f"{CHANGELIST}?status__exact=FAILED&queue_name__exact=email", post, follow=True)
    assert any("in the background" in message for message in messages_of(response))
    [operation] = operation_jobs("change_matching")
    assert operation.kwargs["params"]["filter"] == {"status": "FAILED", "queue_name": "email"}
    run_operations()
    assert statuses(failed) == {"READY"} and statuses(others) == {"FAILED"}
    # A search is not one of the list's filters: the selection is its ids.
    more = jobs(INLINE + 1, "FAILED")
    client.post(f"{CHANGELIST}?q=demo.tasks.add&status__exact=FAILED", post, follow=True)
    assert operation_jobs("change_jobs"), "changed by its ids"
    run_operations()
    assert statuses(more) == {"READY"}
