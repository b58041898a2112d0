"""The schedules page: last and next run, "run now" for the permitted."""

import copy
import re
from datetime import datetime
from datetime import timezone as dt_timezone

import pytest
from django.contrib.admin.models import LogEntry
from django.utils import timezone

from django_dbqueue.clock import as_stored
from django_dbqueue.models import Job, ScheduledRun
from tests.admin_helpers import staff

UTC = dt_timezone.utc  # datetime.UTC is Python 3.11+

pytestmark = pytest.mark.django_db
PAGE = "/admin/django_dbqueue/scheduledrun/"


@pytest.fixture
def scheduled(settings):
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"]["SCHEDULES"] = {
        "nightly": {
            "task": "demo.tasks.add",
            "cron": "30 3 * * *",
            "timezone": "Europe/Riga",
            "args": [1, 2],
        },
    }
    settings.TASKS = tasks


def test_the_page_lists_each_schedule_with_its_last_and_next_run(client, scheduled):
    last = as_stored(datetime(2026, 1, 1, 1, 30, tzinfo=UTC))  # naive local time with USE_TZ = False
    ScheduledRun.objects.create(schedule="nightly", scheduled_at=last, job_id=7)
    ScheduledRun.objects.create(schedule="gone", scheduled_at=as_stored(datetime(2026, 1, 2, tzinfo=UTC)))
    client.force_login(staff("viewer", "view_job"))
    page = client.get(PAGE)
    assert page.status_code == 200
    [nightly, gone] = page.context["rows"]
    assert (nightly.name, nightly.last.job_id, nightly.schedule.cron) == ("nightly", 7, "30 3 * * *")
    # 03:30 in Riga is 01:30 UTC in winter and 00:30 UTC in summer.
    assert nightly.next_run.astimezone(UTC).minute == 30 and nightly.next_run.astimezone(UTC).hour in (0, 1)
    assert (gone.name, gone.schedule, gone.next_run) == ("gone", None, None)
    text = page.content.decode()
    shown = timezone.localtime(last) if timezone.is_aware(last) else last
    assert f"{shown:%Y-%m-%d %H:%M:%S}" in text and "(removed)" in text
    assert "Run now" not in text, "only for whoever may run schedules"


def test_run_now_enqueues_a_job_without_moving_the_schedule_on(client, scheduled):
    client.force_login(staff("runner", "view_job", "run_schedule_now"))
    assert "Run now" in client.get(PAGE).content.decode()
    page = client.post(PAGE + "run/default/nightly/", follow=True)
    [job] = Job.objects.all()
    assert (job.task_path, job.args) == ("demo.tasks.add", [1, 2])
    [run] = ScheduledRun.objects.all()
    assert (run.job_id, run.manual) == (job.pk, True)
    assert f"enqueued as job {job.pk}" in page.content.decode()
    assert LogEntry.objects.get().change_message == f"Ran schedule 'nightly' now as job {job.pk}."
    assert page.context["rows"][0].last is None, "a run now is not the schedule's last run"


def test_run_now_needs_its_permission_and_a_post(client, scheduled):
    client.force_login(staff("viewer", "view_job"))
    assert client.post(PAGE + "run/default/nightly/").status_code == 403
    client.force_login(staff("runner", "view_job", "run_schedule_now"))
    assert client.get(PAGE + "run/default/nightly/").status_code == 405
    assert client.post(PAGE + "run/default/nope/").status_code == 404
    assert Job.objects.count() == 0


def test_the_page_has_the_name_the_app_list_gives_it(client, scheduled):
    client.force_login(staff("viewer", "view_job", "view_schedule"))

    index = client.get("/admin/").content.decode()
    page = client.get(PAGE).content.decode()

    assert f'<a href="{PAGE}">All schedules</a>' in index
    assert "<h1>All schedules</h1>" in page
    assert '<li aria-current="page">All schedules</li>' in page
    assert "<h1>Schedules" not in page, "one name for one page"
    # The database's schedules, edited on their own page, under a name of their own.
    stored = "/admin/django_dbqueue/schedule/"
    assert f'<a href="{stored}">Stored schedules</a>' in index
    names = re.findall(r'<th scope="row"[^>]*>\s*<a href="[^"]+">([^<]+)</a>', index)
    assert [name for name in names if "chedule" in name] == ["All schedules", "Stored schedules"], names
