"""A batch's page in a real browser (Debian's Chromium via Playwright, as in
test_admin_browser.py) on a laptop and a phone: the progress, the members'
links and the workflow's picture, and nothing wider than the screen.
Screenshots land in test-output/screenshots/."""

import os

import pytest
from django.utils import timezone

from django_dbqueue.models import Job
from django_dbqueue.workflows.models import Batch, Dependency
from tests.test_admin_browser import DOCS_IMAGES, SCREENSHOTS, browser, signed_in_page  # noqa: F401 (a fixture)

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.environ.get("DBQUEUE_DATABASE", "sqlite") != "mariadb",
        reason="browser tests run once, on MariaDB, the database this app is for",
    ),
]


def nightly_import() -> Batch:
    """fetch → four transforms (one failed) → merge (waiting) → publish (waiting)."""
    batch = Batch.objects.create(
        description="Nightly import of the product catalogue",
        metadata={"source": "s3://catalogue/2026-11-23.csv", "rows": 48210, "requested_by": "ops"},
        on_success={"task": "catalogue.tasks.announce", "args": ["catalogue updated"], "kwargs": {}},
        on_failure={"task": "catalogue.tasks.page_on_call", "args": [], "kwargs": {"team": "data"}},
        sealed=True,
    )
    now = timezone.now()

    def member(task: str, status: str, *parents: Job, **fields) -> Job:
        finished = now if status in ("SUCCESSFUL", "FAILED", "CANCELLED") else None
        job = Job.objects.create(
            task_path=f"catalogue.tasks.{task}", batch=batch, status=status, finished_at=finished, **fields
        )
        for parent in parents:
            Dependency.objects.create(
                parent_id=parent.pk, child_id=job.pk, resolved=parent.finished_at is not None
            )
            Job.objects.filter(pk=parent.pk).update(has_dependants=True)
        return job

    fetch = member("fetch_csv", "SUCCESSFUL")
    parts = [
        member("transform_part", status, fetch, args=[i])
        for i, status in enumerate(["SUCCESSFUL", "SUCCESSFUL", "FAILED", "RUNNING"])
    ]
    merge = member("merge_parts", "WAITING", *parts, on_parent_failure="run", pass_result=True)
    member("publish", "WAITING", merge)
    return batch


@pytest.mark.parametrize("width", [1366, 390])
def test_a_batch_page_fits_a_laptop_and_a_phone(browser, live_server, width):  # noqa: F811
    batch = nightly_import()
    path = f"/admin/django_dbqueue/batch/{batch.pk}/change/"
    context, page = signed_in_page(browser, live_server, path, width, "svg.dbqueue-dag")

    assert "7 total: 3 succeeded, 1 failed, 3 pending" in page.inner_text(".field-progress")
    assert page.locator("svg.dbqueue-dag .dbqueue-dag-node").count() == 7
    assert page.locator("svg.dbqueue-dag .dbqueue-dag-edge").count() == 9  # 4 out, 4 in, 1
    underline = "() => getComputedStyle(document.querySelector('svg.dbqueue-dag a')).textDecorationLine"
    assert page.evaluate(underline) == "none", "a box's label is not underlined as a link in text is"
    assert page.locator(".object-tools button").all_inner_texts() == ["CANCEL BATCH", "RETRY FAILED JOBS"]
    # The page never scrolls sideways; only the picture may, inside its own box.
    sizes = page.evaluate("() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth})")
    assert sizes["page"] <= sizes["viewport"] == width, sizes
    scrolling = page.evaluate(
        "() => [...document.querySelectorAll('#content *')].filter(e => e.clientWidth > 1"
        " && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')"
        ".map(e => e.tagName + '.' + e.className)"
    )
    assert set(scrolling) <= {"DIV.dbqueue-dag-box"}, scrolling
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"batch-{width}.png"), full_page=True)
    if width == 1366 and os.environ.get("DBQUEUE_UPDATE_DOC_IMAGES") == "1":
        # Refreshed on request only, so that a test run leaves the checkout clean.
        page.screenshot(path=str(DOCS_IMAGES / "batch.png"), full_page=True)

    # The members' link opens the job list filtered to this batch.
    page.locator(".field-members a").first.click()
    page.wait_for_url(f"**batch_id={batch.pk}")
    assert page.locator("#result_list tbody tr").count() == 7

    # The fan-in's page: its four parents and its dependant, linked, with the policy.
    page.locator("#result_list a", has_text="merge_parts").first.click()
    page.wait_for_selector("svg.dbqueue-dag")
    assert page.locator("svg.dbqueue-dag .dbqueue-dag-node").count() == 7  # two levels up: fetch too
    assert page.locator(".field-parents li").count() == 4
    assert page.locator(".field-dependants li").count() == 1
    assert "on_parent_failure=run" in page.inner_text(".field-policy")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(SCREENSHOTS / f"batch-job-{width}.png"), full_page=True)

    # The batch list: one row with its bar and counts, within the page
    # (Django's own list scrolls in its .results box on a phone).
    page.goto(f"{live_server.url}/admin/django_dbqueue/batch/")
    assert "7 total: 3 succeeded, 1 failed, 3 pending" in page.inner_text("#result_list tbody tr")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    if width == 1366:
        overflow = page.evaluate(
            "() => { const b = document.querySelector('#changelist .results');"
            " return b.scrollWidth - b.clientWidth; }"
        )
        assert overflow == 0, overflow
    page.screenshot(path=str(SCREENSHOTS / f"batch-list-{width}.png"), full_page=False)
    context.close()


def skipping_workflow() -> Batch:
    """A chain a → b → c → d with a → d beside it, and two more jobs in each
    of b's and c's layers: drawn straight, a → d crossed b's and c's
    neighbours' boxes."""
    batch = Batch.objects.create(description="Arrows that skip layers", sealed=True)
    made: dict[str, Job] = {}
    for name, parents in [
        ("a", []),
        ("x1", ["a"]),
        ("b", ["a"]),
        ("x2", ["a"]),
        ("y1", ["x1"]),
        ("c", ["b"]),
        ("y2", ["x2"]),
        ("d", ["c", "a"]),
        ("e", ["a", "y1", "y2"]),
    ]:
        job = Job.objects.create(
            task_path=f"demo.tasks.{name}", batch=batch, status="WAITING" if parents else "READY"
        )
        for parent in parents:
            Dependency.objects.create(parent_id=made[parent].pk, child_id=job.pk)
            Job.objects.filter(pk=made[parent].pk).update(has_dependants=True)
        made[name] = job
    return batch


# Each arrow sampled every 2 px: the boxes whose inside (2 px in from the
# edge) one of its points falls in, other than its own two ends'.
CROSSED = """() => {
  const boxes = [...document.querySelectorAll('svg.dbqueue-dag .dbqueue-dag-node')].map(g => {
    const r = g.querySelector('rect');
    const [x, y, w, h] = ['x', 'y', 'width', 'height'].map(a => parseFloat(r.getAttribute(a)));
    return {key: g.dataset.key, x, y, w, h};
  });
  const crossed = [];
  for (const edge of document.querySelectorAll('svg.dbqueue-dag .dbqueue-dag-edge')) {
    const length = edge.getTotalLength();
    for (let at = 0; at <= length; at += 2) {
      const p = edge.getPointAtLength(at);
      for (const b of boxes) {
        if (b.key === edge.dataset.from || b.key === edge.dataset.to) continue;
        if (p.x > b.x + 2 && p.x < b.x + b.w - 2 && p.y > b.y + 2 && p.y < b.y + b.h - 2) {
          crossed.push(edge.dataset.from + ' -> ' + edge.dataset.to + ' crosses ' + b.key);
        }
      }
    }
  }
  return [...new Set(crossed)];
}"""


@pytest.mark.parametrize("width", [1366, 390])
def test_arrows_that_skip_layers_go_around_the_boxes_between(browser, live_server, width):  # noqa: F811
    batch = skipping_workflow()
    path = f"/admin/django_dbqueue/batch/{batch.pk}/change/"
    context, page = signed_in_page(browser, live_server, path, width, "svg.dbqueue-dag")
    assert page.locator("svg.dbqueue-dag .dbqueue-dag-node").count() == 9
    assert page.locator("svg.dbqueue-dag .dbqueue-dag-edge").count() == 11
    assert page.evaluate(CROSSED) == []
    # The arrow from a to d, three layers on, runs level through the two between.
    a, d = (Job.objects.get(task_path=f"demo.tasks.{name}").pk for name in "ad")
    path = page.get_attribute(
        f"svg.dbqueue-dag .dbqueue-dag-edge[data-from='job:{a}'][data-to='job:{d}']", "d"
    )
    assert path.count("L") == 2, path
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"batch-skipping-{width}.png"), full_page=True)
    context.close()
