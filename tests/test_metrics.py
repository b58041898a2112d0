"""Prometheus metrics from `runqueue --metrics-port` and the Django view."""

import os
import signal
import socket
import urllib.request
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from demo import progress_tasks, tasks
from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job, PausedQueue, Worker
from tests.conftest import once_per_run, wait_for

prometheus = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(text: str) -> dict[tuple, float]:
    """Every sample as {(name, (label pairs...)): value}."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(port: int) -> dict[tuple, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return samples(response.read().decode())


def test_runqueue_serves_queue_and_process_metrics_summed_over_its_workers(runqueue):
    due = read_database_now("default") - timedelta(seconds=100)
    Job.objects.create(task_path="demo.tasks.send_welcome", queue_name="email", run_after=due)
    PausedQueue.objects.create(queue_name="email")
    port = free_port()
    worker = runqueue(
        "--queue", "default", "--processes", "2", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1"
    )
    for i in range(20):
        tasks.add.enqueue(i, i)
    tasks.always_fails.enqueue("on purpose")  # two runs, then FAILED
    wait_for(
        lambda: Job.objects.filter(queue_name="default", status__in=["SUCCESSFUL", "FAILED"]).count() == 21
    )
    wait_for(lambda: scrape(port).get(("dbqueue_jobs_processed_total", ())) == 22)
    m = scrape(port)
    assert m[("dbqueue_jobs_failed_total", ())] == 1
    assert m[("dbqueue_job_run_seconds_count", ())] == 22
    assert m[("dbqueue_job_run_seconds_bucket", (("le", "+Inf"),))] == 22
    assert m[("dbqueue_claim_seconds_count", ())] >= 2
    assert m[("dbqueue_worker_processes", ())] == 2
    assert m[("dbqueue_database_up", ())] == 1
    assert m[("dbqueue_jobs", (("queue", "default"), ("status", "SUCCESSFUL")))] == 20
    assert m[("dbqueue_jobs", (("queue", "default"), ("status", "FAILED")))] == 1
    assert m[("dbqueue_jobs_due", (("queue", "email"),))] == 1
    assert 100 <= m[("dbqueue_queue_lag_seconds", (("queue", "email"),))] < 160
    assert m[("dbqueue_queue_lag_seconds", (("queue", "default"),))] == 0
    assert m[("dbqueue_queue_paused", (("queue", "email"),))] == 1
    assert m[("dbqueue_queue_paused", (("queue", "default"),))] == 0
    assert m[("dbqueue_jobs_cancelled_total", ())] == 0
    assert m[("dbqueue_jobs_interrupted_total", ())] == 0
    assert m[("dbqueue_cancel_requests_pending", (("queue", "default"),))] == 0
    wait_for(lambda: scrape(port).get(("dbqueue_workers_alive", ())) == 2)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert f"Serving Prometheus metrics on 127.0.0.1:{port}/metrics." in worker.output()


@once_per_run("test_pending_cancel_requests_are_counted_per_queue_until_honoured counts the requests")
def test_a_running_job_cancelled_shows_in_the_pending_gauge_then_in_the_cancelled_counter(runqueue):
    port = free_port()
    worker = runqueue("--queue", "default", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
    result = progress_tasks.counts_until_stopped.enqueue(60)
    # Its progress, written by the heartbeat, is read from this other process.
    wait_for(lambda: (result.refresh(), result.progress)[1])
    assert result.status == "RUNNING" and result.progress_message.startswith("step ")

    # Paused, the worker cannot honour the request before the scrape.
    [process] = Worker.objects.values_list("pid", flat=True)
    os.kill(process, signal.SIGSTOP)
    try:
        assert Job.objects.filter(pk=result.id).cancel() == 1
        pending = ("dbqueue_cancel_requests_pending", (("queue", "default"),))
        assert scrape(port)[pending] == 1, "asked, not yet stopped"
    finally:
        os.kill(process, signal.SIGCONT)
    wait_for(lambda: Job.objects.get(pk=result.id).status == "CANCELLED")

    m = scrape(port)
    assert m[pending] == 0
    assert m[("dbqueue_jobs_cancelled_total", ())] == 1
    assert m[("dbqueue_jobs_interrupted_total", ())] == 0
    assert m[("dbqueue_jobs_processed_total", ())] == 1
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_the_django_view_serves_the_queue_metrics(client):
    Job.objects.create(task_path="demo.tasks.add", status="FAILED")
    response = client.get("/metrics/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    m = samples(response.content.decode())
    assert m[("dbqueue_jobs", (("queue", "default"), ("status", "FAILED")))] == 1
    assert ("dbqueue_jobs_processed_total", ()) not in m, "a web process runs no jobs"


def test_pending_cancel_requests_are_counted_per_queue_until_honoured(client):
    now = read_database_now("default")
    for queue in ("default", "default", "email", "typo"):
        Job.objects.create(
            task_path="demo.tasks.add", queue_name=queue, status="RUNNING", owner="w", cancel_requested_at=now
        )
    # Asked by SQL before any worker claimed it: pending too, until a claim cancels it.
    Job.objects.create(task_path="demo.tasks.add", queue_name="email", cancel_requested_at=now)
    Job.objects.create(task_path="demo.tasks.add", status="RUNNING", owner="w")  # nobody asked

    def pending() -> dict[str, float]:
        m = samples(client.get("/metrics/").content.decode())
        return {
            dict(labels)["queue"]: value
            for (name, labels), value in m.items()
            if name == "dbqueue_cancel_requests_pending"
        }

    assert pending() == {"default": 2, "email": 2, "slow": 0, "(other)": 1}
    Job.objects.filter(queue_name="default").update(status="CANCELLED", cancel_requested_at=None)
    assert pending()["default"] == 0


def test_made_up_queue_names_share_one_label(client):
    # Rows may name any queue (a typo, a plain INSERT): a series per name
    # would grow without bound. Only configured and paused queues get theirs.
    Job.objects.bulk_create([Job(task_path="demo.tasks.add", queue_name=f"typo-{i}") for i in range(300)])
    Job.objects.create(task_path="demo.tasks.add", queue_name="held", status="FAILED")
    PausedQueue.objects.create(queue_name="held")
    Job.objects.create(task_path="demo.tasks.add", queue_name="email")
    # A live worker's queues count as known: QUEUES may be empty (any queue).
    Worker.objects.create(
        name="w", host="h", pid=1, queues=["side", 7], last_seen_at=read_database_now("default")
    )

    m = samples(client.get("/metrics/").content.decode())
    labels = {dict(labels)["queue"] for _, labels in m if "queue" in dict(labels)}
    assert labels == {"default", "email", "slow", "held", "side", "(other)"}
    assert len(m) == 2 + 10 * len(labels), "10 series per label (six statuses), plus up and alive"
    assert m[("dbqueue_jobs", (("queue", "(other)"), ("status", "READY")))] == 300
    assert m[("dbqueue_jobs_due", (("queue", "(other)"),))] == 300
    assert m[("dbqueue_queue_lag_seconds", (("queue", "(other)"),))] >= 0
    assert m[("dbqueue_jobs", (("queue", "held"), ("status", "FAILED")))] == 1
    assert m[("dbqueue_queue_paused", (("queue", "held"),))] == 1
    assert m[("dbqueue_jobs", (("queue", "email"), ("status", "READY")))] == 1


def test_a_bad_metrics_port_is_refused():
    with pytest.raises(CommandError, match="--metrics-port must be between 1 and 65535, not 0"):
        call_command("runqueue", "--metrics-port", "0")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"Cannot serve metrics on 127.0.0.1:{port}"):
            call_command("runqueue", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")


def test_per_task_figures_have_a_bounded_task_label(client):
    end = read_database_now("default")
    for i in range(52):  # more tasks than get a label of their own
        for _ in range(2 if i == 0 else 1):
            Job.objects.create(
                task_path=f"demo.tasks.t{i:02}",
                status="SUCCESSFUL",
                run_after=end - timedelta(seconds=3),
                last_attempted_at=end - timedelta(seconds=2),
                finished_at=end,
            )
    m = samples(client.get("/metrics/").content.decode())
    finished = {
        dict(labels)["task"]: v
        for (name, labels), v in m.items()
        if name == "dbqueue_task_jobs_finished" and dict(labels)["status"] == "SUCCESSFUL"
    }
    assert len(finished) == 51 and finished["demo.tasks.t00"] == 2 and finished["(other)"] == 2
    assert m[("dbqueue_task_run_seconds", (("quantile", "0.5"), ("task", "demo.tasks.t00")))] == 2.0
    assert m[("dbqueue_task_wait_seconds", (("quantile", "0.95"), ("task", "demo.tasks.t00")))] == 1.0
