"""Users and jobs for the admin tests."""

from django.contrib.auth.models import Permission, User

from django_dbqueue.models import Job

CHANGELIST = "/admin/django_dbqueue/job/"
DASHBOARD = "/admin/django_dbqueue/job/dashboard/"


def staff(username: str, *codenames: str, superuser: bool = False) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True, is_superuser=superuser)
    ours = Permission.objects.filter(content_type__app_label="django_dbqueue")
    user.user_permissions.set(ours.filter(codename__in=codenames))
    return user


def job(**fields) -> Job:
    fields.setdefault("task_path", "demo.tasks.add")
    return Job.objects.create(**fields)


def act(client, action: str, jobs: list[Job], **extra):
    """Post an admin action on the changelist, following the redirect."""
    data = {"action": action, "_selected_action": [str(j.pk) for j in jobs], **extra}
    return client.post(CHANGELIST, data, follow=True)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]
