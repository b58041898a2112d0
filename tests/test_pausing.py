"""Pausing and resuming a queue: real workers, the command, the admin."""

import getpass
import signal
from datetime import timedelta

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.core.management import CommandError, call_command

from demo import tasks
from django_dbqueue import bulk_enqueue
from django_dbqueue.clock import read_database_now
from django_dbqueue.models import Job, PausedQueue
from tests.admin_helpers import DASHBOARD, job, staff
from tests.conftest import once_per_run, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

PAUSE_URL = "/admin/django_dbqueue/pausedqueue/pause/"
RESUME_URL = "/admin/django_dbqueue/pausedqueue/resume/"


def status(result) -> str:
    return Job.objects.get(pk=result.id).status


def done(result) -> bool:
    return status(result) == "SUCCESSFUL"


@once_per_run(
    "every worker test reads the paused set (one plain query; the queues are left out in Python), "
    "and the other tests here pause and resume"
)
def test_a_paused_queue_is_not_claimed_its_running_job_finishes_and_resume_needs_no_restart(runqueue):
    worker = runqueue("--queue", "default", "--queue", "email", "--queue", "slow")
    holding = tasks.sleep.enqueue(1.5)
    wait_for(lambda: status(holding) == "RUNNING")
    call_command("pausequeue", "slow", "email")
    # A marker due only once every worker's cached view (at most
    # POLL_INTERVAL_MAX, 2 s, old) must have been read after the pause.
    marker = tasks.add.using(run_after=read_database_now("default") + timedelta(seconds=2.5)).enqueue(1, 1)
    wait_for(lambda: done(marker))
    assert done(holding), "the job in hand when its queue was paused finished"

    waiting = [tasks.send_welcome.enqueue(i) for i in range(3)] + [tasks.sleep.enqueue(0.01)]
    after = tasks.add.enqueue(2, 2)  # the email jobs come first in claim order (priority 10)
    wait_for(lambda: done(after))
    assert {status(r) for r in waiting} == {"READY"}, "nothing is claimed from a paused queue"

    call_command("pausequeue", "email", "slow", "--resume")
    wait_for(lambda: all(done(r) for r in waiting))
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert "restart" not in worker.output().replace("0 worker restarts", "")


@once_per_run("the other tests here pause and resume; every worker test reads the paused set")
def test_pausequeue_returns_once_no_worker_claims_from_the_queue(runqueue):
    """A busy worker (one job per claim) reads the paused set every 2 s; a job
    enqueued the moment the command returns must still wait."""
    worker = runqueue("--queue", "default", "--queue", "email", "--batch", "1")
    backlog = bulk_enqueue(tasks.add, [((i, i), {}) for i in range(2000)])
    wait_for(lambda: done(backlog[0]))
    call_command("pausequeue", "email")
    waiting = tasks.send_welcome.enqueue(1)  # priority 10: ahead of the backlog
    assert not done(backlog[-1]), "the worker was still claiming when the command returned"
    after = tasks.add.using(priority=10).enqueue(2, 2)  # claimed right after it would have been
    wait_for(lambda: done(after), timeout=60)
    assert status(waiting) == "READY", "claims made after the pause held left the paused queue alone"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_a_claim_that_outlasts_its_paused_set_gives_back_what_it_took_from_a_paused_queue():
    """The worker's side of the wait above: a claim made with a paused set
    read before the pause, that ends after the set went stale."""
    from django_dbqueue.operations.pausing import pause
    from django_dbqueue.tasks_api import task_backends
    from django_dbqueue.transitions.shapes import claim_from_queues
    from django_dbqueue.worker.process.loop import Worker

    backend = task_backends["default"]
    worker = Worker(backend, ["default", "email"])
    assert worker.claims.pauses.unpaused(worker.queues) == ["default", "email"]
    email, other = tasks.send_welcome.enqueue(1), tasks.add.enqueue(1, 1)
    pause(backend, "email")
    batch = claim_from_queues(
        Job.objects.all(), worker.claims.pauses.unpaused(worker.queues), worker.name, 10, 60
    )
    assert {job.pk for job in batch} == {int(email.id), int(other.id)}, "the set read before the pause"
    worker.claims.pauses.read_at -= worker.claims.pauses.ttl  # the claim ended after the set went stale
    assert [job.pk for job in worker.claims.drop_paused(batch)] == [int(other.id)]
    given_back = Job.objects.get(pk=email.id)
    assert (given_back.status, given_back.owner, given_back.attempts) == ("READY", None, 0)


def test_pausequeue_checks_every_queue_before_it_pauses_any():
    with pytest.raises(CommandError) as raised:
        call_command("pausequeue", "email", "nope", "sms")
    assert str(raised.value) == (
        "Unknown queue 'nope' for backend 'default'; its QUEUES are default, email, slow. "
        "Unknown queue 'sms' for backend 'default'; its QUEUES are default, email, slow. "
        "Nothing was paused or resumed."
    )
    assert not PausedQueue.objects.exists()


def test_pausequeue_writes_each_pause_and_resume_to_the_admin_log(capsys, monkeypatch):
    from django.contrib.auth.models import User

    # What is logged, not how long a pause takes to hold (tested above).
    monkeypatch.setattr("django_dbqueue.management.commands.pausequeue.settle_seconds", lambda backend: 0)

    User.objects.create_user("operator")
    call_command("pausequeue", "email", "--user", "operator")
    call_command("pausequeue", "email", "--resume", "--user", "operator")
    User.objects.create_user(getpass.getuser())  # the default: the system user's namesake
    call_command("pausequeue", "slow", "--resume")  # not paused: nothing to record
    call_command("pausequeue", "email", "--resume")
    entries = list(
        LogEntry.objects.order_by("pk").values_list("user__username", "action_flag", "change_message")
    )
    assert entries == [
        ("operator", ADDITION, "Paused queue email (manage.py pausequeue)."),
        ("operator", DELETION, "Resumed queue email (manage.py pausequeue)."),
    ]
    assert capsys.readouterr().err == ""

    call_command("pausequeue", "slow")
    call_command("pausequeue", "slow", "--resume")
    assert [entry.object_repr for entry in LogEntry.objects.order_by("pk")][2:] == ["slow", "slow"]
    User.objects.filter(username=getpass.getuser()).delete()
    call_command("pausequeue", "slow")
    assert capsys.readouterr().err == (
        f"Not written to the admin log: there is no Django user {getpass.getuser()!r}; "
        "name one with --user.\n"
    )
    with pytest.raises(
        CommandError, match="There is no Django user 'nobody'; nothing was paused or resumed."
    ):
        call_command("pausequeue", "slow", "--resume", "--user", "nobody")
    assert PausedQueue.objects.filter(queue_name="slow").exists()


def test_the_command_pauses_lists_resumes_and_refuses_unknown_queues(capsys):
    call_command("pausequeue", "email")
    call_command("pausequeue", "email")
    call_command("pausequeue")
    call_command("pausequeue", "email", "--resume")
    call_command("pausequeue", "email", "--resume")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "Paused email.",
        "email was paused already.",
        "email",
        "Resumed email.",
        "email was not paused.",
    ]
    with pytest.raises(CommandError, match=r"Unknown queue 'nope' for backend 'default'; its QUEUES are"):
        call_command("pausequeue", "nope")
    with pytest.raises(CommandError, match="Name the queues to resume"):
        call_command("pausequeue", "--resume")
    assert not PausedQueue.objects.exists()


def test_admin_pause_needs_the_permission_is_logged_and_shows_on_the_dashboard(client):
    viewer = staff("viewer", "view_job")
    client.force_login(viewer)
    assert client.post(PAUSE_URL, {"queue": "email"}).status_code == 403
    assert "Pause</button>" not in client.get(DASHBOARD).content.decode()
    assert not PausedQueue.objects.exists()

    job(queue_name="default")
    operator = staff("operator", "view_job", "pause_queue")
    client.force_login(operator)
    assert client.get(PAUSE_URL).status_code == 405, "POST only"
    response = client.post(PAUSE_URL, {"queue": "email"}, follow=True)
    assert "Paused queue email" in response.content.decode()
    row = PausedQueue.objects.get()
    assert (row.queue_name, row.paused_by) == ("email", "operator")
    page = client.get(DASHBOARD).content.decode()
    assert 'email <span class="dbqueue-paused">paused</span>' in page
    # email, with no job, is listed as it is paused; default, with a job, is not paused.
    assert "Resume</button>" in page and "Pause</button>" in page

    response = client.post(PAUSE_URL, {"queue": "nope"}, follow=True)
    assert "Unknown queue &#x27;nope&#x27;" in response.content.decode()
    client.post(RESUME_URL, {"queue": "email"})
    assert not PausedQueue.objects.exists()
    entries = list(
        LogEntry.objects.order_by("pk").values_list("user__username", "action_flag", "change_message")
    )
    assert entries == [
        ("operator", ADDITION, "Paused queue email."),
        ("operator", DELETION, "Resumed queue email."),
    ]
