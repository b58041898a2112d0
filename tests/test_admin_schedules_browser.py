"""The scheduled runs page in a real browser (Debian's Chromium via
Playwright, as in test_admin_browser.py) on a laptop and a phone: eight
columns on the one, a card per schedule on the other, and nothing wider
than the screen. Screenshots land in test-output/screenshots/."""

import copy
import os

import pytest

from tests.test_admin_browser import SCREENSHOTS, browser, signed_in_page  # noqa: F401 (a fixture)

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.environ.get("DBQUEUE_DATABASE", "sqlite") != "mariadb",
        reason="browser tests run once, on MariaDB, the database this app is for",
    ),
]


@pytest.mark.parametrize("width", [1366, 390])
def test_the_schedules_page_fits_a_laptop_and_a_phone(browser, live_server, settings, width):  # noqa: F811
    tasks = copy.deepcopy(settings.TASKS)
    tasks["default"]["OPTIONS"]["SCHEDULES"] = {
        "nightly-catalogue-import-for-every-warehouse": {
            "task": "demo.tasks.add",
            "cron": "30 3 * * 1-5",
            "timezone": "America/Argentina/ComodRivadavia",
            "args": [1, 2],
        },
        "hourly": {"task": "demo.tasks.noop", "cron": "0 * * * *"},
    }
    settings.TASKS = tasks
    path = "/admin/django_dbqueue/scheduledrun/"
    context, page = signed_in_page(browser, live_server, path, width, "table.dbqueue-schedules")
    assert page.locator("table.dbqueue-schedules tbody tr").count() == 2
    sizes = page.evaluate("() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth})")
    assert sizes["page"] <= sizes["viewport"] == width, sizes
    # Every cell's text within the screen, and the one "Run now" button per schedule there too.
    beyond = page.evaluate(
        "() => [...document.querySelectorAll('table.dbqueue-schedules td, table.dbqueue-schedules th')]"
        ".filter(e => e.offsetParent && e.getBoundingClientRect().right > window.innerWidth + 1)"
        ".map(e => e.textContent.trim().slice(0, 40))"
    )
    assert beyond == [], beyond
    assert page.locator("table.dbqueue-schedules input[value='Run now']").count() == 2
    cells = page.evaluate(
        "() => [...document.querySelector('table.dbqueue-schedules tbody tr').cells].map(c => ({"
        "top: c.getBoundingClientRect().top, label: getComputedStyle(c, '::before').content}))"
    )
    tops = [cell["top"] for cell in cells]
    if width == 390:
        # A card: each value on its own line under its label, the header row hidden.
        assert tops == sorted(tops) and len(set(tops)) == len(tops), tops
        assert "Cron" in cells[2]["label"] and "Time zone" in cells[3]["label"], cells
        assert not page.locator("table.dbqueue-schedules thead").is_visible()
        caption = page.locator("table.dbqueue-schedules caption").bounding_box()
        assert caption and caption["width"] > width / 2, caption  # one line across, not a column
    else:
        assert len(set(tops)) == 1, tops
        assert page.locator("table.dbqueue-schedules thead").is_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"schedules-{width}.png"), full_page=True)
    context.close()
