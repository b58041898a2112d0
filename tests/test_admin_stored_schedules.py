"""Schedules in the database, edited in the admin: add, change, pause,
resume and delete with Django's permissions and admin log; clear form
errors; the settings schedules beside them, read-only."""

import copy
import json
import re

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry

from django_dbqueue.admin.stored_schedules import next_run
from django_dbqueue.models import Job, Schedule, ScheduledRun
from tests.admin_helpers import messages_of, staff

pytestmark = pytest.mark.django_db
LIST = "/admin/django_dbqueue/schedule/"
RUNS = "/admin/django_dbqueue/scheduledrun/"


@pytest.fixture
def from_settings(settings):
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"]["SCHEDULES"] = {"nightly": {"task": "demo.tasks.noop", "cron": "30 3 * * *"}}
    settings.TASKS = tasks


def form(**fields) -> dict:
    data = {
        "name": "adder",
        "task": "demo.tasks.add",
        "cron": "*/10 * * * *",
        "timezone": "UTC",
        "args": json.dumps([1, 2]),
        "kwargs": "{}",
        "catch_up": "latest",
        "backend": "default",
        "enabled": "on",
        **fields,
    }
    return {key: value for key, value in data.items() if value is not None}


def editor():
    return staff("editor", *(f"{verb}_schedule" for verb in ("view", "add", "change", "delete")))


def test_add_change_and_delete_are_validated_and_logged(client):
    client.force_login(editor())
    page = client.post(LIST + "add/", form(), follow=True)
    schedule = Schedule.objects.get()
    assert (schedule.task, schedule.args, schedule.enabled) == ("demo.tasks.add", [1, 2], True)
    text = page.content.decode()
    assert "adder" in text and "active" in text

    client.post(f"{LIST}{schedule.pk}/change/", form(cron="0 * * * *", args="[3, 4]"), follow=True)
    schedule.refresh_from_db()
    assert (schedule.cron, schedule.args) == ("0 * * * *", [3, 4])

    client.post(f"{LIST}{schedule.pk}/delete/", {"post": "yes"}, follow=True)
    assert not Schedule.objects.exists()
    assert list(LogEntry.objects.order_by("pk").values_list("action_flag", flat=True)) == [
        ADDITION,
        CHANGE,
        DELETION,
    ]


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"task": "demo.tasks.nope"}, "task", "does not import"),
        ({"cron": "61 * * * *"}, "cron", "is not a cron expression"),
        ({"timezone": "Mars/Olympus"}, "timezone", "not a time zone"),
        ({"args": "[1]"}, "args", "The arguments do not fit the task demo.tasks.add"),
        ({"args": '{"a": 1}'}, "args", "'args' must be a list"),
        ({"name": "nightly"}, "name", "The settings schedule 'nightly' has this name"),
        ({"backend": "nope"}, "backend", "is not a django_dbqueue task backend"),
    ],
    ids=["task", "cron", "timezone", "signature", "not-a-list", "settings-name", "backend"],
)
def test_a_bad_schedule_is_a_clear_form_error(client, from_settings, fields, field, says):
    client.force_login(editor())
    page = client.post(LIST + "add/", form(**fields))
    assert page.status_code == 200, "the form again, with its errors"
    errors = page.context["adminform"].form.errors
    assert says in " ".join(errors[field]), errors
    assert not Schedule.objects.exists() and not LogEntry.objects.exists()


def test_pause_and_resume_need_the_change_permission_and_are_logged(client):
    schedule = Schedule.objects.create(name="s", task="demo.tasks.noop", cron="* * * * *")
    act = {"_selected_action": [schedule.pk]}
    client.force_login(staff("viewer", "view_schedule"))
    assert client.get(LIST).context["action_form"] is None, "no actions offered"
    client.post(LIST, {"action": "pause", **act}, follow=True)
    assert Schedule.objects.get().enabled is True
    client.force_login(editor())
    page = client.post(LIST, {"action": "pause", **act}, follow=True)
    assert messages_of(page) == ["Paused s."] and "paused" in page.content.decode()
    assert Schedule.objects.get().enabled is False
    page = client.post(LIST, {"action": "pause", **act}, follow=True)
    assert messages_of(page) == ["The selected schedules were paused already."]
    client.post(LIST, {"action": "resume", **act}, follow=True)
    assert Schedule.objects.get().enabled is True
    assert [e.change_message for e in LogEntry.objects.order_by("pk")] == ["Paused.", "Resumed."]


def test_settings_schedules_are_shown_beside_read_only_and_broken_rows_as_broken(client, from_settings):
    Schedule.objects.bulk_create([Schedule(name="gone", task="demo.tasks.removed", cron="* * * * *")])
    client.force_login(staff("viewer", "view_schedule", "view_job"))
    text = client.get(LIST).content.decode()
    assert "nightly <em>(from settings)</em>" in text and "read-only" in text
    assert "broken: task: The task path &#x27;demo.tasks.removed&#x27; does not import" in text
    runs = client.get(RUNS).content.decode()
    assert "(in the database)" in runs and "nightly <em>(from settings)</em>" in runs


def test_the_list_shows_the_last_run_and_the_next_one(client):
    schedule = Schedule.objects.create(name="s", task="demo.tasks.noop", cron="0 0 1 1 *", timezone="UTC")
    client.force_login(staff("viewer", "view_schedule"))
    [row] = client.get(LIST).context["cl"].result_list
    assert row.last_run_at is None
    run = ScheduledRun.objects.create(schedule="s", scheduled_at=row.database_now, job_id=5)
    [row] = client.get(LIST).context["cl"].result_list
    assert row.last_run_at == run.scheduled_at
    upcoming = next_run(row)
    assert (upcoming.month, upcoming.day, upcoming.hour, upcoming.minute) == (1, 1, 0, 0)
    schedule.pause()
    [row] = client.get(LIST).context["cl"].result_list
    assert next_run(row) is None


def test_run_now_enqueues_a_database_schedule_and_is_not_offered_for_a_broken_one(client):
    Schedule.objects.create(name="s", task="demo.tasks.add", cron="0 0 1 1 *", args=[1, 2])
    Schedule.objects.bulk_create([Schedule(name="gone", task="demo.tasks.removed", cron="* * * * *")])
    client.force_login(staff("runner", "view_job", "run_schedule_now"))
    rows = {row.name: row for row in client.get(RUNS).context["rows"]}
    assert rows["s"].run_url == RUNS + "run/default/s/" and rows["gone"].run_url is None
    client.post(rows["s"].run_url)
    [run] = ScheduledRun.objects.all()
    assert run.manual and Job.objects.get(pk=run.job_id).args == [1, 2]
    page = client.post(RUNS + "run/default/gone/", follow=True)
    assert "Fix it in the database's schedules." in messages_of(page)[-1]


def test_the_form_offers_the_apps_tasks_and_the_time_zones_to_pick_from(client):
    client.force_login(editor())
    page = client.get(LIST + "add/").content.decode()
    for field, offered, left_out in [
        ("task", ["demo.tasks.add", "demo.tasks.noop"], "demo.tasks.Execution"),
        ("timezone", ["Europe/Riga", "UTC"], "Mars/Olympus"),
    ]:
        assert f'list="id_{field}_options"' in page, field
        [options] = re.findall(rf'<datalist id="id_{field}_options">(.*?)</datalist>', page, re.S)
        values = re.findall(r'<option value="([^"]+)">', options)
        assert set(offered) <= set(values) and left_out not in values, (field, values[:20])
    # Still text: a path in another allowed module may be typed, and is judged as before.
    page = client.post(LIST + "add/", form(timezone="Mars/Olympus"))
    assert page.context["adminform"].form.errors == {
        "timezone": [
            "'Mars/Olympus' is not a time zone this system knows (an IANA name such as 'Europe/Riga' "
            "or 'UTC')."
        ]
    }
