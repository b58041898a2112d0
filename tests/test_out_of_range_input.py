"""Values past what a database column or Python's JSON can hold, from a
person in the admin or from code: each is a clear message, never a 500 or
an OverflowError."""

import pytest
from django.db import connection

from demo import workflow_tasks as wt
from django_dbqueue.jsonfield import Undecodable
from django_dbqueue.models import Schedule
from tests.admin_helpers import CHANGELIST, staff
from tests.json_texts import stored_instead

pytestmark = pytest.mark.django_db
SCHEDULES = "/admin/django_dbqueue/schedule/"
HUGE_ID = "9" * 25  # past a 64-bit integer: SQLite's driver refuses to bind it


def test_a_batch_id_past_64_bits_in_the_job_list_filter_finds_nothing(client):
    client.force_login(staff("viewer", "view_job"))
    page = client.get(CHANGELIST, {"batch_id": HUGE_ID})
    assert page.status_code == 200
    assert page.context["cl"].result_count == 0


def test_a_job_id_past_64_bits_in_depends_on_is_a_lookup_error():
    with pytest.raises(LookupError, match=rf"job #{HUGE_ID}, which does not exist"):
        wt.member.using(depends_on=[int(HUGE_ID)]).enqueue("orphan")
    with pytest.raises(LookupError, match=rf"job #{HUGE_ID}, which does not exist"):
        wt.member.using(depends_on=[HUGE_ID]).enqueue("orphan")


def schedule_form(args: str) -> dict:
    return {
        "name": "adder",
        "task": "demo.tasks.add",
        "cron": "*/10 * * * *",
        "timezone": "UTC",
        "args": args,
        "kwargs": "{}",
        "catch_up": "latest",
        "backend": "default",
        "enabled": "on",
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            "[" + "9" * 5001 + ", 1]",
            "The args hold an integer of 5,001 digits, more than Python's limit of 4,300.",
        ),
        (
            "[" * 100_000 + "]" * 100_000,
            "The args are nested more than 31 lists or objects deep, the queue's limit.",
        ),
        ("[1e400, 1]", "The args hold the number 1e400, beyond a float's range."),
        ("[NaN, 1]", "The args hold NaN, which is not a JSON number."),
    ],
    ids=["long-integer", "deep", "1e400", "nan"],
)
def test_schedule_arguments_json_cannot_hold_are_a_form_error(client, args, says):
    client.force_login(staff("editor", "view_schedule", "add_schedule"))
    page = client.post(SCHEDULES + "add/", schedule_form(args))
    assert page.status_code == 200
    form = page.context["adminform"].form
    # Only this error: not also the signature's, judged from arguments the form could not read.
    assert form.errors["args"] == [says]
    assert form["args"].value() == args, "the text is shown again, to be corrected"
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        f"{CHANGELIST}{HUGE_ID}/change/",
        f"/admin/django_dbqueue/batch/{HUGE_ID}/change/",
        f"{CHANGELIST}?q={HUGE_ID}",
        f"{CHANGELIST}?q=={HUGE_ID}",
        f"{CHANGELIST}?batch_id={'9' * 5000}",
    ],
    ids=["job-page", "batch-page", "search", "search-exact", "filter-5000-digits"],
)
def test_ids_past_64_bits_in_admin_urls_are_not_found(client, url):
    client.force_login(staff("viewer", "view_job", "view_batch"))
    page = client.get(url, follow=True)
    assert page.status_code in (200, 404), page.status_code


def test_a_schedule_whose_arguments_sql_wrote_past_pythons_reach_opens_to_be_corrected(client):
    Schedule.objects.create(name="adder", task="demo.tasks.add", cron="*/10 * * * *", args=[1, 2])
    table = connection.ops.quote_name(Schedule._meta.db_table)
    with connection.cursor() as cursor:

        def write(text: str) -> None:
            cursor.execute(f"UPDATE {table} SET args = %s", [f"[{text}, 2]"])

        write(stored_instead("9" * 5000, write))
    client.force_login(staff("editor", "view_schedule", "change_schedule"))
    schedule = Schedule.objects.get()
    page = client.get(f"{SCHEDULES}{schedule.pk}/change/")
    assert page.status_code == 200
    stored = schedule.args
    assert isinstance(stored, Undecodable)
    assert page.context["adminform"].form["args"].value() == stored.raw
    fixed = client.post(f"{SCHEDULES}{schedule.pk}/change/", schedule_form("[3, 4]"), follow=True)
    assert fixed.status_code == 200
    schedule.refresh_from_db()
    assert schedule.args == [3, 4]
