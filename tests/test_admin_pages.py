"""The changelist, the job detail page and the dashboard, through the test client."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbqueue.admin import display as show
from django_dbqueue.admin.dashboard import queue_stats
from django_dbqueue.admin.display import timestamp
from django_dbqueue.admin.timeline import errors_html, timeline
from django_dbqueue.models import Job, Worker
from django_dbqueue.operations.stats import snapshot
from tests.admin_helpers import CHANGELIST, DASHBOARD, job

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_changelist_columns_badges_and_newest_first(admin_client):
    old = job(status="FAILED", attempts=2, max_attempts=3, queue_name="email")
    new = job(task_path="demo.tasks.noop", priority=7)

    page = admin_client.get(CHANGELIST)

    assert [j.pk for j in page.context["cl"].result_list] == [new.pk, old.pk]
    html = page.content.decode()
    assert '<span class="dbqueue-badge dbqueue-failed">FAILED</span>' in html
    assert '<span class="dbqueue-badge dbqueue-ready">READY</span>' in html
    assert '<span class="dbqueue-attempts" title="attempts">2 / 3</span>' in html
    headers = [str(h["text"]).lower() for h in page.context["result_headers"][1:]]  # [0]: the checkbox
    assert headers == [
        *("id", "task path", "queue", "status, attempts", "progress"),
        *("priority", "run after", "owner", "age"),
    ]


def test_changelist_filters_by_status_queue_and_task(admin_client):
    failed = job(status="FAILED", queue_name="email")
    job(status="FAILED", queue_name="default", task_path="demo.tasks.noop")
    job(queue_name="email")

    def listed(query: str) -> set[int]:
        return {j.pk for j in admin_client.get(CHANGELIST + query).context["cl"].result_list}

    assert listed("?status__exact=FAILED&queue_name=email") == {failed.pk}
    assert len(listed("?task_path=demo.tasks.noop")) == 1
    filters = admin_client.get(CHANGELIST).context["cl"].filter_specs
    assert [f.title for f in filters] == ["status", "queue name", "task path"]


def test_search_finds_by_id_task_path_and_argument_text(admin_client):
    by_args = job(args=["needle-in-args"])
    by_kwargs = job(kwargs={"email": "Someone@Example.org"})
    by_path = job(task_path="demo.tasks.send_welcome")
    job(args=[1, 2])

    def found(term: str) -> set[int]:
        return {j.pk for j in admin_client.get(CHANGELIST, {"q": term}).context["cl"].result_list}

    assert found("needle-in") == {by_args.pk}
    assert found("someone@example") == {by_kwargs.pk}
    assert found("send_welcome") == {by_path.pk}
    assert found(str(by_path.pk)) == {by_path.pk}, "a number is an id"


def test_changelist_never_counts_the_whole_table(admin_client):
    job(status="FAILED")

    with CaptureQueriesContext(connection) as queries:
        admin_client.get(CHANGELIST)
        admin_client.get(CHANGELIST + "?status__exact=FAILED")

    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    # One capped count per page: COUNT over a sub-select with a LIMIT.
    assert len(counts) == 2
    assert all("LIMIT" in sql.upper() for sql in counts), counts


def selected_columns(sql: str) -> set[str]:
    """The job columns a SELECT reads, by name, whatever the quoting."""
    head = sql[: sql.upper().index(" FROM ")]
    return set(re.findall(r'django_dbqueue_job["`]?\.["`]?(\w+)', head))


def test_the_job_list_reads_only_the_columns_it_shows(admin_client):
    big = "x" * 100_000
    for i in range(30):
        job(args=[big], kwargs={"k": big}, return_value=big, errors=[{"traceback": big}], worker_ids=[i])

    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(CHANGELIST)

    assert len(page.context["cl"].result_list) == 30
    [listing] = [q["sql"] for q in queries if "task_path" in q["sql"] and "DISTINCT" not in q["sql"]]
    assert selected_columns(listing) == {
        *("id", "task_path", "queue_name", "status", "priority"),
        *("attempts", "max_attempts", "suspect", "run_after", "owner", "enqueued_at"),
        # A running job's progress cell (the message is at most 255 characters).
        *("progress", "progress_message", "cancel_requested_at"),
    }
    assert len(page.content) < 60_000
    # No column is fetched row by row later: one job or thirty, same queries.
    Job.objects.exclude(pk=Job.objects.order_by("pk").first().pk).delete()
    with CaptureQueriesContext(connection) as one:
        admin_client.get(CHANGELIST)
    assert len(one) == len(queries)


def test_detail_page_shows_pretty_arguments_errors_and_timeline(admin_client):
    now = timezone.now()
    failed = job(
        args=[1, {"nested": [2, 3]}],
        kwargs={"who": "ada"},
        status="FAILED",
        attempts=2,
        enqueued_at=now - timedelta(minutes=5),
        started_at=now - timedelta(minutes=4),
        last_attempted_at=now - timedelta(minutes=2),
        finished_at=now - timedelta(minutes=1),
        errors=[
            error("builtins.ValueError", "Traceback: first", now - timedelta(minutes=3), "w1"),
            error("builtins.KeyError", "Traceback: second", now - timedelta(minutes=1), "w2"),
        ],
    )

    page = admin_client.get(f"{CHANGELIST}{failed.pk}/change/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "&quot;nested&quot;: [\n      2," in html, "arguments are indented JSON"
    assert "builtins.ValueError" in html and "Traceback: second" in html and "on w2" in html
    events = [event.what for event in timeline(failed)]
    assert events == [
        "Enqueued",
        "Started (first attempt)",
        "Attempt 1 failed with ValueError",
        "Attempt 2 started",
        "Attempt 2 failed with KeyError",
        "Finished: FAILED",
    ]
    for what in events:
        assert what in html
    assert 'name="_save"' not in html, "the detail page is read-only"


def error(path: str, traceback: str, at, worker: str) -> dict:
    return {"exception_class_path": path, "traceback": traceback, "at": at.isoformat(), "worker": worker}


def test_the_timeline_keeps_each_attempt_in_order_when_the_clocks_disagree(admin_client):
    # The worker stamps an error by its estimate of the database's clock; the
    # database stamps the starts and the end. A few milliseconds apart, the
    # last failure must still come before the end, and a failure before the
    # next attempt's start.
    now = timezone.now()
    ms = timedelta(milliseconds=5)
    failed = job(
        status="FAILED",
        attempts=2,
        enqueued_at=now - timedelta(minutes=5),
        started_at=now - timedelta(minutes=4),
        last_attempted_at=now - timedelta(minutes=3) - ms,
        finished_at=now - ms,
        worker_ids=["web-1:42:0", "web-1:42:0"],
        errors=[
            error("builtins.ValueError", "Traceback: first", now - timedelta(minutes=3), "web-1:42:0"),
            error("builtins.KeyError", "Traceback: second", now, "web-1:42:0"),
        ],
    )
    expected = [
        "Enqueued",
        "Started (first attempt)",
        "Attempt 1 failed with ValueError",
        "Attempt 2 started",
        "Attempt 2 failed with KeyError",
        "Finished: FAILED",
    ]

    assert [event.what for event in timeline(failed)] == expected
    html = admin_client.get(f"{CHANGELIST}{failed.pk}/change/").content.decode()
    shown = html.split('class="dbqueue-timeline"')[1].split("</ol>")[0]
    assert re.findall(r"</time> ([^<]+)</li>", shown) == expected

    # The worker's estimate of the database's clock may also put a start a
    # little before the claim the database stamped: the claim is still the
    # last run's. A claim after the last run that never started it (a cancel
    # before the start) is told by its entry instead.
    succeeded = job(
        status="SUCCESSFUL",
        attempts=2,
        enqueued_at=now - timedelta(minutes=5),
        started_at=now - timedelta(minutes=4),
        claimed_at=now - timedelta(minutes=3) + ms,
        last_attempted_at=now - timedelta(minutes=3),
        finished_at=now - timedelta(minutes=2),
        worker_ids=["web-1:42:0", "web-2:43:0"],
        errors=[error("builtins.ValueError", "Traceback", now - timedelta(minutes=4) + ms, "web-1:42:0")],
    )
    assert [event.what for event in timeline(succeeded)] == [
        "Enqueued",
        "Started (first attempt)",
        "Attempt 1 failed with ValueError",
        "Attempt 2 claimed by web-2:43:0",
        "Attempt 2 started",
        "Finished: SUCCESSFUL",
    ]
    cancelled = {
        **error("django_dbqueue.exceptions.JobCancelled", "", now - timedelta(minutes=2), "web-2:43:0")
    }
    cancelled.update(attempt=2, spent=False)
    Job.objects.filter(pk=succeeded.pk).update(
        status="CANCELLED",
        attempts=1,
        last_attempted_at=succeeded.started_at,
        errors=[*succeeded.errors, cancelled],
    )
    succeeded.refresh_from_db()
    assert [event.what for event in timeline(succeeded)] == [
        "Enqueued",
        "Started (first attempt)",
        "Attempt 1 failed with ValueError",
        "Cancelled before attempt 2 started",
        "Finished: CANCELLED",
    ]

    retrying = job(
        attempts=1,
        enqueued_at=now - timedelta(minutes=2),
        started_at=now - timedelta(minutes=1),
        run_after=now - timedelta(minutes=1),
        errors=[error("builtins.ValueError", "Traceback", now - timedelta(seconds=50), "w")],
    )
    Job.objects.filter(pk=retrying.pk).update(run_after=now - timedelta(minutes=1, seconds=1))
    retrying.refresh_from_db()
    assert [event.what for event in timeline(retrying)] == [
        "Enqueued",
        "Started (first attempt)",
        "Attempt 1 failed with ValueError",
        "Due",
    ]


def test_the_job_page_names_each_worker_once_with_its_attempts(admin_client):
    ran = job(
        status="FAILED",
        attempts=4,
        worker_ids=["web-1:42:0", "web-2:7:1", "web-1:42:0", "web-1:42:0"],
        history=[{"status": "FAILED", "attempts": 1}, {"status": "FAILED", "attempts": 3}],
    )

    text = visible_text(admin_client.get(f"{CHANGELIST}{ran.pk}/change/").content.decode())

    assert "Workers: web-1:42:0 (3 attempts), web-2:7:1 Call" in text
    assert "FAILED after 1 attempt, started" in text and "FAILED after 3 attempts, started" in text


def test_everything_a_job_carries_is_escaped(admin_client):
    hostile = job(
        task_path=HOSTILE,
        queue_name="<b>q</b>",
        args=[HOSTILE],
        kwargs={HOSTILE: HOSTILE},
        owner=HOSTILE,
        return_value=HOSTILE,
        status="FAILED",
        errors=[{"exception_class_path": HOSTILE, "traceback": HOSTILE, "at": HOSTILE, "worker": HOSTILE}],
    )

    for url in [CHANGELIST, f"{CHANGELIST}{hostile.pk}/change/", DASHBOARD, f"{CHANGELIST}?q=script"]:
        html = admin_client.get(url).content.decode()
        assert "<script>alert" not in html, url
        assert "<img src=x" not in html, url
        assert "<b>q</b>" not in html, url
    detail = admin_client.get(f"{CHANGELIST}{hostile.pk}/change/").content.decode()
    assert "&lt;script&gt;alert(" in detail


def test_dashboard_counts_lag_throughput_and_live_workers(admin_client):
    now = timezone.now()
    for _ in range(3):
        job(queue_name="email", run_after=now - timedelta(minutes=10))
    job(queue_name="email", run_after=now + timedelta(hours=1))  # not due: no lag
    job(queue_name="email", status="RUNNING", owner="w1")
    for minutes_ago in (0, 0, 5, 90):
        job(status="SUCCESSFUL", finished_at=now - timedelta(minutes=minutes_ago, seconds=1))
    job(status="FAILED", finished_at=now - timedelta(minutes=5, seconds=1))
    Worker.objects.create(name="alive-1", host="web-7", pid=4242, queues=["email"])
    Worker.objects.create(name="gone-1", host="old", pid=1, last_seen_at=now - timedelta(hours=1))

    page = admin_client.get(DASHBOARD)

    assert page.status_code == 200
    assert [q.name for q in page.context["queues"]] == ["default", "email"]
    stats = {q.name: q for q in page.context["queues"]}
    assert stats["email"].counts == {"READY": 4, "RUNNING": 1}
    assert stats["default"].counts == {"SUCCESSFUL": 4, "FAILED": 1}
    assert timedelta(minutes=10) <= stats["email"].lag < timedelta(minutes=11)
    assert stats["default"].lag is None
    assert stats["default"].finished_last_hour == 4, "the job finished 90 minutes ago is outside the hour"
    # Bars are whole UTC minutes, so "now" may fall in the next one: look for
    # two bars of 2, five minutes apart, ending in the last one or two minutes.
    bars = {i: n for i, n in enumerate(stats["default"].per_minute) if n}
    last = max(bars)
    assert bars == {last - 5: 2, last: 2} and last >= 58
    assert page.context["total"].counts["READY"] == 4
    assert [w.name for w in page.context["workers"]] == ["alive-1"]
    html = page.content.decode()
    assert "web-7" in html and "4242" in html and "gone-1" not in html
    assert html.count('<svg class="dbqueue-chart"') == 3, "one chart per queue and one for the total"
    assert f"<title>2 finished {59 - last} min ago</title>" in html
    # Nothing is loaded from another host: every src and href is local.
    external = re.findall(r'(?:src|href)="((?:https?:)?//[^"]*)"', html)
    assert external == []


@pytest.mark.parametrize(("lease", "shown"), [(60, ["alive-1"]), (1200, ["alive-1", "quiet-1"])])
def test_the_dashboard_counts_a_worker_alive_for_one_lease_after_its_last_heartbeat(
    admin_client, settings, lease, shown
):
    # A worker heartbeats four times a lease: with a long lease, five
    # minutes of quiet is normal, and the worker is still alive.
    options = {**settings.TASKS["default"].get("OPTIONS", {}), "LEASE_SECONDS": lease}
    settings.TASKS = {**settings.TASKS, "default": {**settings.TASKS["default"], "OPTIONS": options}}
    now = timezone.now()
    Worker.objects.create(name="alive-1", host="web-7", pid=4242, queues=["email"])
    Worker.objects.create(name="quiet-1", host="web-8", pid=7, last_seen_at=now - timedelta(minutes=5))

    page = admin_client.get(DASHBOARD)

    assert [w.name for w in page.context["workers"]] == shown


def test_dashboard_is_linked_from_the_admin_index_and_the_changelist(admin_client, client):
    index = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/django_dbqueue/dashboard/"' in index
    assert admin_client.get("/admin/django_dbqueue/dashboard/")["Location"] == DASHBOARD
    assert f'href="{DASHBOARD}"' in admin_client.get(CHANGELIST).content.decode()


def test_queue_stats_are_the_snapshots_figures():
    job(queue_name="a")
    job(queue_name="b", status="SUCCESSFUL", finished_at=timezone.now())

    rows = queue_stats(snapshot("default", queues=["b"], chart_minutes=60))

    assert [(q.name, q.counts, q.finished_last_hour) for q in rows] == [("b", {"SUCCESSFUL": 1}, 1)]


def test_past_the_cap_the_count_is_the_databases_estimate_and_says_so(admin_client, monkeypatch):
    from django_dbqueue.admin import paginator

    monkeypatch.setattr(paginator, "CAP", 3)
    Job.objects.bulk_create([Job(task_path="demo.tasks.noop", status="FAILED") for _ in range(8)])
    job()

    few = admin_client.get(CHANGELIST + "?status__exact=READY")
    many = admin_client.get(CHANGELIST + "?status__exact=FAILED")

    assert (few.context["cl"].result_count, few.context["cl"].paginator.estimated) == (1, False)
    assert many.context["cl"].paginator.estimated is True
    assert many.context["cl"].result_count >= 4
    assert b"about " in many.content and b"about " not in few.content


@pytest.mark.parametrize("term", ["²", "٣", "①", "12³", "99999999999999999999999999"])
def test_search_with_digits_that_are_not_an_id_is_a_text_search(admin_client, term):
    by_args = job(args=[f"power {term}"])
    job(args=["something else"])

    page = admin_client.get(CHANGELIST, {"q": term})

    assert page.status_code == 200
    found = {j.pk for j in page.context["cl"].result_list}
    assert found == ({by_args.pk} if not term.isascii() else set())


def visible_text(html: str) -> str:
    """What a reader sees: tags (and so attributes) removed, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html.replace("<wbr>", "")).split())


ONE_FORMAT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def assert_one_date_format(text: str) -> list[str]:
    assert not re.search(r"\d{4}-\d\d-\d\dT\d", text), "no raw ISO dates"
    assert not re.search(
        r"\b(a\.m\.|p\.m\.|midnight|noon|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b", text
    )
    return re.findall(ONE_FORMAT, text)


def test_the_job_page_shows_every_date_in_one_format_and_worker_ids_as_text(admin_client):
    now = timezone.now()
    failed = job(
        status="RUNNING",
        owner="web-2:7:1",
        attempts=2,
        enqueued_at=now - timedelta(minutes=5),
        started_at=now - timedelta(minutes=4),
        run_after=now - timedelta(minutes=5),
        lease_expires_at=now + timedelta(minutes=1),
        worker_ids=["web-1:4242:0", "web-2:7:1"],
        errors=[error("builtins.ValueError", "Traceback: first", now - timedelta(minutes=3), "web-1:4242:0")],
    )

    text = visible_text(admin_client.get(f"{CHANGELIST}{failed.pk}/change/").content.decode())

    dates = assert_one_date_format(text)
    # Enqueued, started, the failure (timeline and error), run after, lease.
    assert len(dates) == 6, dates
    assert "Run after: " + timestamp(failed.run_after) in text
    assert "Lease expires at: " + timestamp(failed.lease_expires_at) in text
    assert "Workers: web-1:4242:0, web-2:7:1" in text
    assert "[" not in text.split("Workers:")[1].split("Call")[0], "not shown as JSON"


def test_the_job_list_dashboard_and_worker_list_use_the_same_date_format(admin_client):
    job(run_after=timezone.now() + timedelta(hours=1))
    Worker.objects.create(name="web-1:4242:0", host="web-1", pid=4242, queues=["default", "email"])

    listing = visible_text(admin_client.get(CHANGELIST).content.decode())
    dashboard = visible_text(admin_client.get(DASHBOARD).content.decode())
    workers = visible_text(admin_client.get("/admin/django_dbqueue/worker/").content.decode())

    assert len(assert_one_date_format(listing)) == 1
    assert len(assert_one_date_format(dashboard)) == 2, "started and last seen"
    assert len(assert_one_date_format(workers)) == 2
    assert "default, email" in workers and '["default"' not in workers
    assert "default, email" in dashboard


def bar_heights(svg: str) -> list[float]:
    return [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', svg)]


def test_every_chart_shares_one_scale_and_has_an_axis(admin_client):
    finished = timezone.now() - timedelta(minutes=3)
    Job.objects.bulk_create(
        [
            Job(task_path="demo.tasks.add", queue_name="busy", status="SUCCESSFUL", finished_at=finished)
            for _ in range(543)
        ]
    )
    job(queue_name="quiet", status="SUCCESSFUL", finished_at=finished)

    page = admin_client.get(DASHBOARD)

    stats = {q.name: q for q in page.context["queues"]}
    busy, quiet, total = str(stats["busy"].chart), str(stats["quiet"].chart), str(page.context["total"].chart)
    assert {stats["busy"].scale, stats["quiet"].scale, page.context["total"].scale} == {600}
    [tall], [short], [all_of_them] = bar_heights(busy), bar_heights(quiet), bar_heights(total)
    assert short == pytest.approx(tall / 543, abs=0.05), "1 job is 1/543 as tall as 543 jobs"
    assert all_of_them == pytest.approx(tall * 544 / 543, abs=0.05)
    for svg in (busy, quiet, total):
        labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
        assert labels == ["600", "0", "60 min ago", "30 min", "now"]
        assert svg.count("<line") == 3, "a y axis, a time axis and a gridline at the top"


@pytest.mark.parametrize(
    ("peak", "top"), [(0, 1), (1, 1), (3, 3), (7, 8), (9, 10), (11, 20), (250, 300), (543, 600), (4001, 5000)]
)
def test_the_axis_ends_at_a_round_number_at_or_above_the_peak(peak, top):
    from django_dbqueue.admin.chart import round_up

    assert round_up(peak) == top


def test_a_lone_surrogate_in_a_row_is_shown_escaped_not_a_500(admin_client):
    lone = "bad \ud800 text"
    hostile = Job(
        task_path="demo.tasks.add",
        args=[lone],
        kwargs={lone: lone},
        return_value=lone,
        status="FAILED",
        errors=[
            {"exception_class_path": "builtins.ValueError", "traceback": lone, "at": "x", "worker": lone}
        ],
    )
    for shown in (show.pretty_json(hostile.args), errors_html(hostile), show.breakable(lone)):
        assert "bad \\ud800 text" in shown
        shown.encode("utf-8")
    if connection.vendor != "sqlite":
        return  # MariaDB and PostgreSQL refuse to store one; SQLite's JSON keeps it
    hostile.save()
    page = admin_client.get(f"{CHANGELIST}{hostile.pk}/change/")
    assert page.status_code == 200
    assert page.content.decode().count("bad \\ud800 text") >= 4


def test_the_job_page_numbers_kept_errors_by_attempt_and_shows_earlier_runs(admin_client):
    now = timezone.now()

    def error(n: int) -> dict:
        at = (now - timedelta(minutes=20 - n)).isoformat()
        return {"exception_class_path": "builtins.ValueError", "traceback": f"run {n}", "at": at}

    # 12 attempts failed; the row keeps the latest 10 errors (payload.MAX_ERRORS).
    failed = job(
        status="FAILED",
        attempts=12,
        max_attempts=12,
        errors=[error(n) for n in range(3, 13)],
        started_at=now - timedelta(minutes=30),
        finished_at=now,
    )
    failed.history = [
        {"status": "FAILED", "attempts": 3, "started_at": None, "finished_at": None, "requeued_at": None}
    ]
    failed.save()

    html = admin_client.get(f"{CHANGELIST}{failed.pk}/change/").content.decode()

    assert "Attempt 3: builtins.ValueError" in html and "Attempt 12: builtins.ValueError" in html
    assert "<strong>Attempt 1: builtins.ValueError" not in html
    assert "Attempt 12 failed with ValueError" in html and "Attempt 2 failed" not in html
    assert "Earlier runs" in html and "FAILED after 3 attempts" in html


def test_the_job_page_shows_the_keys_a_job_has_escaped(admin_client):
    from demo.tasks import add, per_tenant, rated

    rate_limited = rated.enqueue("<b>acme</b>", 1)
    fair = per_tenant.enqueue("t1", 1)
    plain = add.enqueue(1, 2)

    def keys(result) -> str:
        page = admin_client.get(f"/admin/django_dbqueue/job/{result.id}/change/").content.decode()
        return page.split("field-job_keys", 1)[1].split("field-", 1)[0]  # up to the next field

    assert "rate key: <code>customer:&lt;b&gt;acme&lt;/b&gt;</code> at most 60/m" in keys(rate_limited)
    assert "fairness key: <code>tenant:t1</code>" in keys(fair)
    assert '<div class="readonly">none</div>' in keys(plain)


def test_only_pages_of_unfinished_work_update_themselves(admin_client):
    from django_dbqueue.workflows.models import Batch

    live = 'data-dbqueue-live="5"'
    running, done = job(status="RUNNING", owner="w"), job(status="SUCCESSFUL")
    assert live in admin_client.get(f"{CHANGELIST}{running.pk}/change/").content.decode()
    assert live not in admin_client.get(f"{CHANGELIST}{done.pk}/change/").content.decode()
    assert "live.js" not in admin_client.get(f"{CHANGELIST}{done.pk}/change/").content.decode()
    assert live in admin_client.get(DASHBOARD).content.decode()
    batches = "/admin/django_dbqueue/batch/"
    open_batch, closed = (
        Batch.objects.create(),
        Batch.objects.create(status="SUCCEEDED", finished_at=timezone.now()),
    )
    assert live in admin_client.get(f"{batches}{open_batch.pk}/change/").content.decode()
    assert live not in admin_client.get(f"{batches}{closed.pk}/change/").content.decode()
