"""Running jobs in the admin: the job page's Cancel button for a running job
and its Progress section, the job list's progress column, and the
dashboard's running jobs. Real rows on the test database; a worker's
writes are made through the same queryset methods the worker uses."""

import html as html_module
import json
import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbqueue.admin import dashboard, running
from django_dbqueue.models import Job
from tests.admin_helpers import CHANGELIST, DASHBOARD, job, messages_of, staff

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>'


def page_of(client, target: Job) -> str:
    response = client.get(f"{CHANGELIST}{target.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def buttons(html: str) -> list[str]:
    return re.findall(r'<button type="submit" name="action" value="(\w+)">', html)


def fieldset(html: str, legend: str) -> str:
    """The text of the job page's fieldset whose heading is ``legend``."""
    match = re.search(rf"<h2[^>]*>\s*{legend}\s*</h2>(.*?)</fieldset>", html, re.S)
    assert match, f"no {legend} section"
    return match.group(1)


def running_job(**fields) -> Job:
    fields.setdefault("owner", "web-1:4242:0")
    return job(status="RUNNING", **fields)


@pytest.fixture
def operator(client):
    client.force_login(staff("operator", "view_job", "cancel_job", "view_worker"))
    return client


def test_the_cancel_button_asks_a_running_jobs_worker_to_stop_it_and_logs_who(operator):
    target = running_job(progress=0.25)
    assert buttons(page_of(operator, target)) == ["cancel"]

    page = operator.post(f"{CHANGELIST}{target.pk}/actions/cancel/", follow=True)

    assert messages_of(page) == ["Asked 1 running job to stop: it ends CANCELLED when its worker stops it."]
    row = Job.objects.get(pk=target.pk)
    assert (row.status, row.owner) == ("RUNNING", "web-1:4242:0"), "the worker still holds it"
    assert row.cancel_requested_at is not None
    html = page.content.decode()
    assert buttons(html) == [], "asked once: no second button"
    progress = fieldset(html, "Progress")
    assert "Cancel requested at" in progress and "waiting for the worker to stop the task" in progress
    [entry] = LogEntry.objects.all()
    assert (entry.object_id, entry.action_flag, entry.get_change_message()) == (
        str(target.pk),
        CHANGE,
        "Asked to stop (was RUNNING).",
    )
    assert entry.user.username == "operator"
    # Asking again, by a stale page's button, changes nothing and logs nothing.
    again = operator.post(f"{CHANGELIST}{target.pk}/actions/cancel/", follow=True)
    assert messages_of(again)[0].startswith("Cancelled 0 jobs. Skipped 1 job (1 running and already asked")
    assert Job.objects.get(pk=target.pk).cancel_requested_at == row.cancel_requested_at
    assert LogEntry.objects.count() == 1


def test_cancelling_a_running_job_needs_cancel_job_a_post_and_the_csrf_token(client):
    target = running_job()
    client.force_login(staff("viewer", "view_job"))
    assert buttons(page_of(client, target)) == []
    assert client.post(f"{CHANGELIST}{target.pk}/actions/cancel/").status_code == 403

    client.force_login(staff("canceller", "view_job", "cancel_job"))
    assert client.get(f"{CHANGELIST}{target.pk}/actions/cancel/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(staff("strict", "view_job", "cancel_job"))
    assert strict.post(f"{CHANGELIST}{target.pk}/actions/cancel/").status_code == 403
    assert Job.objects.get(pk=target.pk).cancel_requested_at is None
    assert not LogEntry.objects.exists()


def test_the_job_page_shows_progress_with_its_message_time_and_an_accessible_bar(operator):
    target = running_job()
    assert Job.objects.save_progress(target.owner, target.pk, 0.4234, f"Exported 4,234 rows {HOSTILE}")

    html = page_of(operator, target)

    progress = fieldset(html, "Progress")
    bar = re.search(r"<progress [^>]*>.*?</progress>", progress).group(0)
    assert 'max="100"' in bar and 'value="42.3"' in bar, bar
    assert f'aria-label="Progress of job {target.pk}"' in bar
    assert ">42%</progress>" in bar, "its text, where a browser draws no bar"
    assert "Exported 4,234 rows &lt;script&gt;" in progress and HOSTILE not in html
    assert re.search(r"reported \d+ s ago", progress), "when the worker wrote it"
    assert "Cancel requested" not in progress and "None saved." in progress


def test_a_message_without_a_fraction_is_an_indeterminate_bar(operator):
    target = running_job()
    Job.objects.save_progress(target.owner, target.pk, None, "Waiting for the mail server")

    progress = fieldset(page_of(operator, target), "Progress")

    bar = re.search(r"<progress [^>]*>", progress).group(0)
    assert "value=" not in bar, "no value: the bar shows work going on, no figure"
    assert "Waiting for the mail server" in progress


def test_the_checkpoint_is_summarised_and_shown_as_json_cut_to_a_bound(operator):
    target = running_job()
    assert Job.objects.save_checkpoint(
        target.owner, target.pk, {"steps_done": ["export"], "step": "notify", "cursor": {"after_id": 1234}}
    )
    progress = fieldset(page_of(operator, target), "Progress")
    assert "Steps done: export. Step in progress: notify." in progress
    assert "&quot;after_id&quot;: 1234" in progress

    big = running_job()
    cursor = {"cursor": ["x" * 50 for _ in range(1000)], "step": None}
    Job.objects.save_checkpoint(big.owner, big.pk, cursor)
    html = page_of(operator, big)
    text = json.dumps(cursor, indent=2, sort_keys=True)
    shown = re.search(r'<pre class="dbqueue-json">(.*?)</pre>', fieldset(html, "Progress"), re.S).group(1)
    assert html_module.unescape(shown) == text[: running.CHECKPOINT_SHOWN] + "…"
    assert f"The first 10,000 of {len(text):,} characters." in html


def test_a_finished_job_shows_its_interruptions_and_a_plain_job_has_no_progress_section(operator):
    now = timezone.now()
    resumed = job(status="SUCCESSFUL", interruptions=2, progress=1.0, progress_at=now, finished_at=now)
    plain = job(status="SUCCESSFUL", finished_at=timezone.now())

    progress = fieldset(page_of(operator, resumed), "Progress")
    assert "2 (stopping workers gave the job back, each time without spending an attempt)." in progress
    assert 'value="100.0"' in progress and "last reported while it ran" in progress
    assert "<h2" in page_of(operator, plain) and "Progress</h2>" not in page_of(operator, plain)


def test_the_job_list_shows_a_compact_bar_for_running_jobs_only(operator):
    reporting = running_job(progress=0.5, progress_message="Half way")
    stopping = running_job(progress=0.9, cancel_requested_at=timezone.now())
    silent = running_job()
    done = job(status="SUCCESSFUL", progress=1.0, finished_at=timezone.now())

    html = operator.get(CHANGELIST).content.decode()

    def cell(target: Job) -> str:
        row = re.search(rf'<tr>(?:(?!</tr>).)*?value="{target.pk}"(?:(?!</tr>).)*</tr>', html, re.S).group(0)
        return re.search(r'<td class="field-progress_column">(.*?)</td>', row, re.S).group(1)

    assert 'title="Half way"' in cell(reporting) and ">50%</span>" in cell(reporting)
    assert "Half way</span>" not in cell(reporting), "the message is the tooltip only, in the list"
    assert "stopping" in cell(stopping) and ">90%</span>" in cell(stopping)
    assert cell(silent) == "-" and cell(done) == ""


def test_the_dashboard_lists_running_jobs_with_their_progress(operator, client, monkeypatch):
    first = running_job(
        task_path="demo.tasks.reindex", queue_name="slow", progress=0.3, progress_message="3/10"
    )
    second = running_job(task_path="demo.tasks.sleep", cancel_requested_at=timezone.now())
    job()

    html = operator.get(DASHBOARD).content.decode()

    table = re.search(r'<table class="dbqueue-running">.*?</table>', html, re.S).group(0)
    assert "<caption>Running jobs (2)</caption>" in table
    # <wbr>: task paths and worker ids may wrap at their dots and colons.
    rows = re.findall(r"<tr>.*?</tr>", table.split("<tbody>")[1].replace("<wbr>", ""), re.S)
    assert [re.search(r'href="[^"]*/(\d+)/change/"', row).group(1) for row in rows] == [
        str(second.pk),
        str(first.pk),
    ], "newest first, linked to their pages"
    assert 'value="30.0"' in rows[1] and "3/10" in rows[1] and "web-1:4242:0" in rows[1]
    assert "stopping" in rows[0]

    client.force_login(staff("viewer", "view_job"))
    viewer = client.get(DASHBOARD).content.decode()
    assert 'value="30.0"' in viewer and "4242" not in viewer, "no host or pid without view_worker"

    monkeypatch.setattr(dashboard, "DASHBOARD_RUNNING", 1)
    assert "<caption>Running jobs (newest 1 of 2)</caption>" in operator.get(DASHBOARD).content.decode()
    Job.objects.filter(status="RUNNING").delete()
    assert "No job is running." in operator.get(DASHBOARD).content.decode()


def test_the_dashboards_running_jobs_cost_one_query_however_many(operator):
    running_job(progress=0.1)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert operator.get(DASHBOARD).status_code == 200
        return len(captured)

    one = queries()
    for i in range(20):
        running_job(progress=i / 20, progress_message=f"step {i}")
    assert queries() == one


def test_a_row_written_by_hand_with_nonsense_progress_still_renders(operator):
    target = running_job()
    Job.objects.filter(pk=target.pk).update(progress=7.5, progress_message=HOSTILE, checkpoint=[1, "two"])

    html = page_of(operator, target)

    progress = fieldset(html, "Progress")
    assert "value=" not in re.search(r"<progress [^>]*>", progress).group(0), "out of range: no figure"
    assert HOSTILE not in html and "&quot;two&quot;" in progress
