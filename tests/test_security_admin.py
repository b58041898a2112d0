"""The admin side of the security review: actions need permissions and a
CSRF token, and what a job row holds is shown escaped."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_dbqueue.models import Job

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_dbqueue/job/"


def staff(*codenames: str) -> User:
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


def requeue(client: Client, job: Job, **extra):
    return client.post(CHANGELIST, {"action": "requeue", "_selected_action": [job.pk]}, **extra)


def test_requeue_needs_its_own_permission():
    job = Job.objects.create(task_path="demo.tasks.noop", status="FAILED")
    client = Client()
    client.force_login(staff("view_job"))
    requeue(client, job)
    job.refresh_from_db()
    assert job.status == "FAILED"

    client.force_login(staff_with_change := User.objects.create_user("boss", password="pw", is_staff=True))
    may_requeue = Permission.objects.filter(codename__in=["view_job", "requeue_job"])
    staff_with_change.user_permissions.set(may_requeue)
    requeue(client, job)
    job.refresh_from_db()
    assert job.status == "READY"


def test_actions_are_refused_without_a_csrf_token():
    job = Job.objects.create(task_path="demo.tasks.noop", status="FAILED")
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert requeue(client, job).status_code == 403
    job.refresh_from_db()
    assert job.status == "FAILED"


def test_row_contents_are_rendered_escaped():
    Job.objects.create(task_path="<script>alert(1)</script>", queue_name="<b>q</b>", owner="<img src=x>")
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get(CHANGELIST).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x>" not in page


def test_job_page_buttons_are_refused_without_a_csrf_token():
    job = Job.objects.create(task_path="demo.tasks.noop", status="FAILED")
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.post(f"{CHANGELIST}{job.pk}/actions/requeue/").status_code == 403
    job.refresh_from_db()
    assert job.status == "FAILED"
