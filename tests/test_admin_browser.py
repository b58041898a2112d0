"""The admin in a real browser (Debian's Chromium via Playwright) against a
live server on MariaDB. Screenshots land in test-output/screenshots/."""

import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from django_dbqueue.models import Job, Worker
from moderation.models import Post

# Playwright's sync API runs an event loop in this thread; the ORM calls the
# tests make between page steps are ordinary blocking calls all the same.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "test-output" / "screenshots"
IN_CI = os.environ.get("CI") == "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.environ.get("DBQUEUE_DATABASE", "sqlite") != "mariadb",
        reason="browser tests run once, on MariaDB, the database this app is for",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    missing = None
    if not shutil.which(CHROMIUM):
        missing = f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package is missing (pip install playwright)"
    if missing:
        if IN_CI:
            pytest.fail(f"Browser tests cannot run in CI: {missing}.")
        pytest.skip(f"Browser tests skipped: {missing}.")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield chromium
        chromium.close()


def new_page(browser, base: str, username: str):
    context = browser.new_context(viewport={"width": 1500, "height": 900})
    # Fold the admin's navigation sidebar: the job list wants the width.
    context.add_init_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    return page


def shoot(page, name: str, full_page: bool = True) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


def sample_jobs() -> list[Job]:
    now = timezone.now()
    for i in range(40):
        Job.objects.create(
            task_path="demo.tasks.send_welcome",
            queue_name="email",
            priority=10,
            kwargs={"user_id": 1000 + i},
            status="SUCCESSFUL",
            attempts=1,
            return_value=f"welcome mail for user {1000 + i}",
            finished_at=now - timedelta(minutes=i * 1.4),
        )
    trace = 'Traceback (most recent call last):\n  File "demo/tasks.py", line 47, in always_fails\n'
    failed = [
        Job.objects.create(
            task_path="demo.tasks.always_fails",
            queue_name="default",
            args=[f"smtp timeout #{i}"],
            status="FAILED",
            attempts=2,
            max_attempts=2,
            enqueued_at=now - timedelta(minutes=30 - i),
            started_at=now - timedelta(minutes=29 - i),
            last_attempted_at=now - timedelta(minutes=22 - i),
            finished_at=now - timedelta(minutes=20 - i),
            errors=[
                {
                    "exception_class_path": "builtins.ValueError",
                    "traceback": f"{trace}    raise ValueError(reason)\nValueError: smtp timeout #{i}\n",
                    "at": (now - timedelta(minutes=m - i)).isoformat(),
                    "worker": "web-1:4242:0",
                }
                for m in (25, 20)
            ],
        )
        for i in range(3)
    ]
    Job.objects.create(task_path="demo.tasks.add", args=[2, 3], run_after=now + timedelta(hours=1))
    Job.objects.create(task_path="demo.tasks.add", args=[1, 1], run_after=now - timedelta(seconds=95))
    Job.objects.create(
        task_path="demo.tasks.sleep", queue_name="slow", args=[30], status="RUNNING", owner="web-1:4242:0"
    )
    Worker.objects.create(name="web-1:4242:0", host="web-1", pid=4242, queues=["default", "email", "slow"])
    return failed


def test_operator_filters_failed_jobs_requeues_them_and_opens_the_dashboard(browser, live_server):
    User.objects.create_superuser("admin", password="pw")
    failed = sample_jobs()
    page = new_page(browser, live_server.url, "admin")

    page.click("text=Jobs")
    page.wait_for_selector("#result_list")
    shoot(page, "changelist", full_page=False)

    page.goto(f"{live_server.url}/admin/django_dbqueue/job/{failed[0].pk}/change/")
    assert page.locator("text=Attempt 1 failed with ValueError").count() == 1
    assert page.locator("pre.dbqueue-traceback").count() == 2
    shoot(page, "job-detail")

    page.goto(f"{live_server.url}/admin/django_dbqueue/job/")
    page.locator("#changelist-filter").get_by_role("link", name="Failed", exact=True).click()
    page.wait_for_url("**status__exact=FAILED**")
    assert page.locator("#result_list tbody tr").count() == 3
    page.check("#action-toggle")
    page.select_option("select[name=action]", "requeue")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist")
    assert "Requeued 3 jobs." in page.inner_text(".messagelist")
    assert set(Job.objects.filter(pk__in=[j.pk for j in failed]).values_list("status", flat=True)) == {
        "READY"
    }

    page.goto(f"{live_server.url}/admin/")
    page.get_by_role("link", name="Dashboard", exact=True).click()
    page.wait_for_url("**/job/dashboard/")
    assert page.locator("svg.dbqueue-chart").count() == 4  # default, email, slow, all
    default_row = page.locator(".dbqueue-queues tbody tr", has_text="default").inner_text().split()
    assert default_row[:6] == ["default", "5", "0", "0", "0", "0"], "the 3 requeued jobs are READY now"
    assert "web-1" in page.inner_text(".dbqueue-workers")
    shoot(page, "dashboard")


def test_two_moderators_claiming_at_once_get_disjoint_posts(browser, live_server):
    Post.objects.bulk_create([Post(author=f"user{i}", body=f"Is this spam? #{i}") for i in range(30)])
    for name in ("alice", "bob"):
        user = User.objects.create_user(name, password="pw", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(codename__in=["view_post", "change_post"]))
    pages = [new_page(browser, live_server.url, name) for name in ("alice", "bob")]
    for page in pages:
        page.goto(f"{live_server.url}/admin/moderation/post/")

    # Submit both forms before waiting for either, so both requests are in
    # flight on the threaded live server together.
    for page in pages:
        page.evaluate("document.querySelector('form.dbqueue-claim').submit()")
    ids = []
    for page in pages:
        page.wait_for_url("**claimed=mine")
        page.wait_for_selector("#result_list")
        ids.append(
            {int(v) for v in page.locator("input.action-select").evaluate_all("e => e.map(i => i.value)")}
        )
    shoot(pages[0], "moderation")

    alice, bob = ids
    assert len(alice) == len(bob) == 10
    assert not alice & bob
    assert set(Post.objects.filter(claimed_by="alice").values_list("pk", flat=True)) == alice
    assert set(Post.objects.filter(claimed_by="bob").values_list("pk", flat=True)) == bob
