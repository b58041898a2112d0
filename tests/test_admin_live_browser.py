"""Pages that update themselves (static/django_dbqueue/live.js) in a real
browser: the dashboard shows a new job's count without a reload, a running
job's page follows it until it has finished and then stops, and a page
whose user lost the right to see it stops fetching. The fetches are the
pages' own, under the same permissions (tests/test_admin_pages.py checks
those); LIVE_SECONDS is shortened here, so no test waits for five."""

import os

import pytest
from django.contrib.auth.models import User

from django_dbqueue.admin import display
from django_dbqueue.models import Job
from tests.test_admin_browser import browser, signed_in  # noqa: F401 (a fixture)

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
DASHBOARD = "/admin/django_dbqueue/job/dashboard/"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.environ.get("DBQUEUE_DATABASE", "sqlite") != "mariadb",
        reason="browser tests run once, on MariaDB, the database this app is for",
    ),
]


@pytest.fixture
def quick(monkeypatch) -> None:
    for module in (
        "django_dbqueue.admin.jobs",
        "django_dbqueue.admin.batches",
        "django_dbqueue.admin.dashboard",
    ):
        monkeypatch.setattr(f"{module}.LIVE_SECONDS", 1)
    monkeypatch.setattr(display, "LIVE_SECONDS", 1)


def test_the_dashboard_shows_a_new_job_without_a_reload(browser, live_server, quick):  # noqa: F811
    User.objects.create_superuser("admin", password="pw")
    Job.objects.create(task_path="demo.tasks.add", queue_name="default")
    context, page = signed_in(
        browser, live_server, "/admin/django_dbqueue/job/dashboard/", 1366, ".dbqueue-queues"
    )
    assert page.locator("[data-dbqueue-live]").inner_text() == "Updates itself every 1 seconds."
    page.evaluate("() => { window.notReloaded = true; }")
    Job.objects.create(task_path="demo.tasks.add", queue_name="a-new-queue")
    page.wait_for_selector("th:has-text('a-new-queue')", timeout=10_000)
    assert page.evaluate("() => window.notReloaded") is True, "the page was not reloaded"
    context.close()


def test_a_running_jobs_page_follows_it_until_it_finishes_then_stops(browser, live_server, quick):  # noqa: F811
    User.objects.create_superuser("admin", password="pw")
    job = Job.objects.create(task_path="demo.tasks.add", status="RUNNING", owner="w", progress=0.25)
    path = f"/admin/django_dbqueue/job/{job.pk}/change/"
    context, page = signed_in(browser, live_server, path, 1366, "[data-dbqueue-live]")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.click("summary:has-text('Earlier runs')")  # a collapsed fieldset the reader opened
    Job.objects.filter(pk=job.pk).update(status="SUCCESSFUL", owner=None, progress=1.0)
    page.wait_for_selector(".dbqueue-badge:has-text('SUCCESSFUL')", timeout=10_000)
    earlier = page.locator("details:has(> summary:has-text('Earlier runs'))")
    assert earlier.get_attribute("open") is not None, "what the reader opened stays open"
    assert page.locator("[data-dbqueue-live]").count() == 0, "a finished job's page is no longer live"
    fetched = len(requests)
    page.wait_for_timeout(2500)
    assert len(requests) == fetched, "it stopped fetching"
    context.close()


def test_a_page_whose_user_lost_the_right_to_see_it_stops(browser, live_server, quick):  # noqa: F811
    admin = User.objects.create_superuser("admin", password="pw")
    context, page = signed_in(
        browser, live_server, "/admin/django_dbqueue/job/dashboard/", 1366, ".dbqueue-queues"
    )
    User.objects.filter(pk=admin.pk).update(is_staff=False, is_superuser=False)
    page.wait_for_selector("text=No longer updating: reload the page.", timeout=10_000)
    context.close()
