"""The admin in a real browser (Debian's Chromium via Playwright) against a
live server on MariaDB. Screenshots land in test-output/screenshots/."""

import base64
import os
import re
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
# The pictures the documentation shows: the tests that take them keep them current.
DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
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


def signed_in_page(browser, live_server, path: str, width: int, wait_for: str) -> tuple[object, object]:
    """A new superuser's page at ``path`` in a ``width`` px window, once
    ``wait_for`` shows; (the browser context, the page)."""
    User.objects.create_superuser("admin", password="pw")
    return signed_in(browser, live_server, path, width, wait_for)


def signed_in(
    browser, live_server, path: str, width: int, wait_for: str, height: int = 900
) -> tuple[object, object]:
    """The page at ``path`` of the superuser "admin" (made by the test), signed in
    through the login form in a window of ``width`` by ``height`` px, once
    ``wait_for`` shows; (the browser context, the page)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/admin/login/?next={path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector(wait_for)
    return context, page


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
        task_path="demo.tasks.sleep",
        queue_name="slow",
        args=[30],
        status="RUNNING",
        owner="web-1:4242:0",
        progress=0.42,
        progress_message="Slept 12.6 of 30 seconds",
        progress_at=now - timedelta(seconds=1),
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
    content = page.inner_text("#content")
    assert not re.search(r"\d{4}-\d\d-\d\dT\d|a\.m\.|p\.m\.", content), "one date format"
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", content)) == 9, "6 events, run after, 2 errors"
    buttons = page.locator(".object-tools button")
    assert buttons.all_inner_texts() == ["REQUEUE"], "a failed job can be requeued, not cancelled"
    shoot(page, "job-detail")
    page.locator(".object-tools").screenshot(path=str(SCREENSHOTS / "job-buttons.png"))
    buttons.first.click()
    page.wait_for_selector(".messagelist")
    assert page.inner_text(".messagelist") == "Requeued 1 job."
    assert "READY" in page.inner_text(".field-status_badge")
    assert page.locator(".object-tools button").all_inner_texts() == ["CANCEL"]
    page.click("text=History")
    assert "Requeued (was FAILED)." in page.inner_text("#change-history")
    shoot(page, "job-history", full_page=False)

    page.goto(f"{live_server.url}/admin/django_dbqueue/job/")
    page.locator("#changelist-filter").get_by_role("link", name="Failed", exact=True).click()
    page.wait_for_url("**status__exact=FAILED**")
    assert page.locator("#result_list tbody tr").count() == 2, "one was requeued from its page"
    page.check("#action-toggle")
    page.select_option("select[name=action]", "requeue")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist")
    assert "Requeued 2 jobs." in page.inner_text(".messagelist")
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
    # One scale: the busiest minute of "email" and of all queues reach the same height.
    heights = page.locator("svg.dbqueue-chart").evaluate_all(
        "charts => charts.map(c => Math.max(0, ...[...c.querySelectorAll('rect')]"
        ".map(r => r.getBBox().height)))"
    )
    assert heights[0] == 0 and heights[1] == heights[3] > 0, heights
    assert page.locator("svg.dbqueue-chart").first.locator("text").all_text_contents()[-1] == "now"
    shoot(page, "dashboard")

    page.goto(f"{live_server.url}/admin/django_dbqueue/worker/")
    row = page.inner_text("#result_list tbody tr")
    assert "default, email, slow" in row and "[" not in row, "queues as text, not JSON"
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row)) == 2
    shoot(page, "workers", full_page=False)


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


def test_the_job_list_fits_a_1366_px_screen_with_the_sidebar_open(browser, live_server):
    User.objects.create_superuser("admin", password="pw")
    sample_jobs()
    Job.objects.create(
        task_path="demo.tasks.a_rather_long_module_name.with_a_long_task_function_name",
        queue_name="notifications-high-priority",
        status="RUNNING",
        owner="worker-host-0042.eu-west-1.compute.internal:123456:3",
    )
    context, page = signed_in(
        browser, live_server, "/admin/django_dbqueue/job/", 1366, "#result_list", height=768
    )
    assert page.locator("#nav-sidebar").is_visible(), "the navigation sidebar is open, as for a new user"
    shoot(page, "changelist-1366", full_page=False)

    # Django's changelist scrolls the table inside its .results box rather
    # than the page: that box must not need to scroll.
    overflow = page.evaluate(
        """() => {
            const box = document.querySelector('#changelist .results');
            return {results: box.scrollWidth - box.clientWidth,
                    page: document.documentElement.scrollWidth - window.innerWidth};
        }"""
    )
    assert overflow == {"results": 0, "page": 0}, overflow
    spilling = page.evaluate(
        "() => [...document.querySelectorAll('#result_list td, #result_list th')]"
        ".filter(cell => cell.scrollWidth > cell.clientWidth + 1).map(cell => cell.className)"
    )
    assert spilling == [], "no cell's text runs into the next one"
    right = page.evaluate(
        "() => document.querySelector('#changelist .results').getBoundingClientRect().right"
    )
    for column in ("task", "queue", "status_and_attempts", "priority", "due", "held_by", "age"):
        cell = page.locator(f"#result_list td.field-{column}").first.bounding_box()
        assert cell["x"] + cell["width"] <= right + 0.5, column
    context.close()


def test_a_moderator_claims_n_posts_and_cannot_change_anothers(browser, live_server):
    Post.objects.bulk_create([Post(author=f"user{i}", body=f"Is this spam? #{i}") for i in range(12)])
    for name in ("alice", "bob"):
        user = User.objects.create_user(name, password="pw", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(codename__in=["view_post", "change_post"]))
    alice = new_page(browser, live_server.url, "alice")
    alice.goto(f"{live_server.url}/admin/moderation/post/")
    button = alice.locator("form.dbqueue-claim button")
    assert button.inner_text() == "CLAIM NEXT 10 FOR ME"

    alice.fill("#dbqueue-claim-n", "3")
    assert button.inner_text() == "CLAIM NEXT 3 FOR ME"
    alice.fill("#dbqueue-claim-n", "250")
    assert button.inner_text() == "CLAIM NEXT 100 FOR ME", "the server claims at most 100"
    alice.fill("#dbqueue-claim-n", "3")
    shoot(alice, "moderation-claim-n", full_page=False)
    button.click()
    alice.wait_for_url("**claimed=mine")
    assert alice.locator("#result_list tbody tr").count() == 3
    assert "Claimed 3 posts for you" in alice.inner_text(".messagelist")
    held = Post.objects.filter(claimed_by="alice").order_by("pk").first()

    bob = new_page(browser, live_server.url, "bob")
    bob.goto(f"{live_server.url}/admin/moderation/post/{held.pk}/change/")
    assert "is being reviewed by alice until" in bob.inner_text(".messagelist")
    assert bob.locator("input[name=_save]").count() == 0
    assert bob.locator("textarea[name=body]").count() == 0, "read-only for bob"
    shoot(bob, "moderation-held-by-another", full_page=False)

    alice.goto(f"{live_server.url}/admin/moderation/post/{held.pk}/change/")
    assert alice.locator("textarea[name=body]").count() == 1, "alice may edit what she holds"
    assert alice.locator("input[name=claimed_by]").count() == 0, "but not the claim itself"
    assert "alice" in alice.inner_text(".field-claimed_by")
    shoot(alice, "moderation-own-claim", full_page=False)


def test_staff_who_may_only_view_jobs_see_the_dashboard_without_workers(browser, live_server):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_job"))
    sample_jobs()
    page = new_page(browser, live_server.url, "viewer")

    page.goto(f"{live_server.url}/admin/django_dbqueue/job/dashboard/")
    assert page.locator(".dbqueue-queues tbody tr").count() == 3
    assert page.locator(".dbqueue-workers").count() == 0
    body = page.inner_text("#content")
    assert "web-1" not in body and "4242" not in body
    assert "Workers are shown to users who may view workers." in body
    shoot(page, "dashboard-view-only", full_page=False)
    assert page.goto(f"{live_server.url}/admin/django_dbqueue/worker/").status == 403


def test_the_dashboards_running_jobs_show_progress_bars_that_fit_a_phone(browser, live_server):
    User.objects.create_superuser("admin", password="pw")
    sample_jobs()
    now = timezone.now()
    long_message = "Re-indexed catalogue entries for the spring-summer collection " * 3
    reindex = Job.objects.create(
        task_path="demo.tasks.a_rather_long_module_name.reindex_the_whole_catalogue",
        queue_name="notifications-high-priority",
        status="RUNNING",
        owner="worker-host-0042.eu-west-1.compute.internal:123456:3",
        progress=0.875,
        progress_message=long_message[:255],
        progress_at=now,
    )
    Job.objects.create(
        task_path="demo.tasks.sleep",
        status="RUNNING",
        owner="web-1:4242:0",
        progress_message="Waiting for the mail server",  # no fraction: an indeterminate bar
        progress_at=now,
        cancel_requested_at=now,
    )
    context, page = signed_in(
        browser, live_server, "/admin/django_dbqueue/job/dashboard/", 420, ".dbqueue-running"
    )

    # Each running job is a card; its bar is a progress bar to assistive technology.
    assert page.locator(".dbqueue-running tbody tr").count() == 3
    bar = page.get_by_role("progressbar", name=f"Progress of job {reindex.pk}")
    assert bar.evaluate("e => [e.value, e.max, e.position]") == [87.5, 100, 0.875]
    assert page.locator(".dbqueue-running progress.dbqueue-bar:indeterminate").count() == 1
    card = page.locator(".dbqueue-running tbody tr", has=bar)
    assert "88%" in card.inner_text() and "Re-indexed catalogue entries" in card.inner_text()
    assert "stopping" in page.inner_text(".dbqueue-running")
    # Drawn: a visible track with the fill in the running badge's colour,
    # at least a few ems wide, and nothing beyond the screen's edge.
    box = bar.bounding_box()
    assert box["width"] >= 48 and box["x"] + box["width"] <= 420, box
    filled, track = pixels(page, bar.screenshot(), [0.1, 0.95])
    assert near(filled, (217, 119, 6)), f"87.5% filled in the running colour: {filled}"
    assert not near(track, (217, 119, 6)), f"the rest is the track: {track}"
    sizes = page.evaluate("() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth})")
    assert sizes["page"] <= sizes["viewport"] == 420, sizes
    outside = page.evaluate(
        "() => [...document.querySelectorAll('.dbqueue-running *')]"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)"
        ".map(e => e.tagName + ' ' + e.textContent.slice(0, 30))"
    )
    assert outside == [], outside
    card.screenshot(path=str(SCREENSHOTS / "dashboard-running-420.png"))
    shoot(page, "dashboard-running-420-full")

    # Its page, on the same phone: the Progress section, whole and within the screen.
    card.get_by_role("link", name=f"#{reindex.pk}").click()
    page.wait_for_selector(".field-progress_bar")
    section = page.inner_text(".field-progress_bar")
    assert "88%" in section and "spring-summer" in section and "reported" in section
    assert page.get_by_role("progressbar").count() == 1
    shoot(page, "job-running-420")
    wide = page.evaluate(
        "() => [...document.querySelectorAll('body *')]"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)"
        ".map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"
    )
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 420, wide
    context.close()


def pixels(page, png: bytes, where: list[float]) -> list[tuple[int, ...]]:
    """The colours of a screenshot's middle row at fractions of its width,
    read by the browser itself (a canvas), so no image library is needed."""
    return [
        tuple(colour)
        for colour in page.evaluate(
            """async ([data, where]) => {
                const img = new Image();
                img.src = 'data:image/png;base64,' + data;
                await img.decode();
                const canvas = document.createElement('canvas');
                canvas.width = img.width;
                canvas.height = img.height;
                const context = canvas.getContext('2d');
                context.drawImage(img, 0, 0);
                const y = Math.floor(img.height / 2);
                return where.map(f => Array.from(
                    context.getImageData(Math.floor(img.width * f), y, 1, 1).data.slice(0, 3)));
            }""",
            [base64.b64encode(png).decode(), where],
        )
    ]


def near(colour: tuple[int, ...], expected: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 12 for a, b in zip(colour, expected, strict=True))


# A phone; a tablet beside the navigation sidebar; a laptop.
@pytest.mark.parametrize("width", [420, 800, 1024, 1366])
def test_the_dashboard_fits_a_phone_a_tablet_and_a_laptop_screen(browser, live_server, width):
    User.objects.create_superuser("admin", password="pw")
    sample_jobs()
    Job.objects.create(task_path="demo.tasks.add", queue_name="notifications-high-priority")
    Worker.objects.create(
        name="worker-host-0042.eu-west-1.compute.internal:123456:3",
        host="worker-host-0042.eu-west-1.compute.internal",
        pid=123456,
        queues=["default", "email", "notifications-high-priority"],
    )
    context, page = signed_in(
        browser, live_server, "/admin/django_dbqueue/job/dashboard/", width, ".dbqueue-workers"
    )

    sizes = page.evaluate("() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth})")
    assert sizes["page"] <= sizes["viewport"] == width, sizes
    # Nothing is cut off instead: no box scrolls sideways (but the 1 px ones
    # that hide text for screen readers), and every chart, count and button
    # lies within the viewport.
    scrolling = page.evaluate(
        "() => [...document.querySelectorAll('#content *')].filter(e => e.clientWidth > 1"
        " && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')"
        ".map(e => e.tagName + '.' + e.className)"
    )
    assert scrolling == [], scrolling
    outside = page.evaluate(
        "() => [...document.querySelectorAll('#content svg, #content td, #content th, #content button')]"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)"
        ".map(e => e.tagName + ' ' + e.textContent.slice(0, 30))"
    )
    assert outside == [], outside
    assert page.locator("svg.dbqueue-chart").count() == 5  # default, email, notifications, slow, all
    shoot(page, f"dashboard-{width}-full")
    if width in (420, 1366) and os.environ.get("DBQUEUE_UPDATE_DOC_IMAGES") == "1":
        # The documentation shows the whole page at 1366 px, a phone's screenful at
        # 420; refreshed on request only, so that a test run leaves the checkout clean.
        page.screenshot(path=str(DOCS_IMAGES / f"dashboard-{width}.png"), full_page=width > 420)
    context.close()


def test_a_long_traceback_is_shown_whole_on_the_job_page(browser, live_server):
    User.objects.create_superuser("admin", password="pw")
    frames = "".join(
        f'  File "/srv/app/.venv/lib/python3.13/site-packages/{"very/deep/package/" * 8}m{i}.py", '
        f"line {i}, in f{i}\n    return f{i + 1}(x)\n"
        for i in range(40)
    )
    last = f"ValueError: {'x' * 300} and then some words that go on {'and on ' * 30}"
    failed = Job.objects.create(
        task_path="demo.tasks.always_fails",
        status="FAILED",
        attempts=1,
        errors=[
            {
                "exception_class_path": "builtins.ValueError",
                "traceback": f"Traceback (most recent call last):\n{frames}{last}\n",
                "at": "x",
                "worker": "w",
            }
        ],
    )
    for width in (1366, 420):
        path = f"/admin/django_dbqueue/job/{failed.pk}/change/"
        context, page = signed_in(browser, live_server, path, width, "pre.dbqueue-traceback")
        # Lines wrap, and the box grows to the traceback's end (the error
        # itself, its most useful line): nothing hides inside a scroll box,
        # nor beyond an edge that clips it.
        box = page.evaluate(
            """() => {
                const pre = document.querySelector('pre.dbqueue-traceback');
                const right = pre.getBoundingClientRect().right;
                let clip = window.innerWidth;
                for (let e = pre.parentElement; e; e = e.parentElement) {
                    if (getComputedStyle(e).overflowX !== 'visible') {
                        clip = Math.min(clip, e.getBoundingClientRect().right);
                    }
                }
                return {sideways: pre.scrollWidth - pre.clientWidth,
                        hidden: pre.scrollHeight - pre.clientHeight,
                        outside: Math.max(right - clip, 0),
                        page: document.documentElement.scrollWidth - window.innerWidth};
            }"""
        )
        shoot(page, f"job-long-traceback-{width}")
        assert box == {"sideways": 0, "hidden": 0, "outside": 0, "page": 0}, box
        assert page.locator("pre.dbqueue-traceback", has_text="and then some words").is_visible()
        context.close()
