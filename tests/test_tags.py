"""Tags (enqueue/tags.py): a task's or a call's labels, written with the job
in its transaction, found by the admin's search ``tag:NAME`` through the
(tag, job) index, shown on the job's page, pruned with the job."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from demo import tasks
from django_dbqueue import bulk_enqueue, task
from django_dbqueue.models import Job, JobTag
from django_dbqueue.tasks_api import InvalidTask
from tests.admin_helpers import CHANGELIST, staff
from tests.conftest import drain_in_bursts as drain

pytestmark = pytest.mark.django_db(transaction=True)

billing = task(tags=["billing", "nightly"])(tasks.record.func)


def tags() -> set[tuple[int, str]]:
    return set(JobTag.objects.values_list("job_id", "tag"))


def test_a_tasks_tags_and_a_calls_own_are_written_with_the_job():
    first = int(billing.enqueue("a").id)
    second = int(billing.using(tags="vip").enqueue("b").id)
    plain = int(tasks.record.enqueue("c").id)
    made = bulk_enqueue(billing, [(["d"], {}), (["e"], {})])
    assert tags() == {
        (first, "billing"),
        (first, "nightly"),
        (second, "vip"),
        *((int(r.id), t) for r in made for t in ("billing", "nightly")),
    }
    assert not JobTag.objects.filter(job_id=plain).exists()


def test_a_job_that_is_not_written_writes_no_tags():
    keyed = task(unique_key="once", tags=["x"])(tasks.record.func)
    first = keyed.enqueue("a")
    assert keyed.enqueue("b").id == first.id
    assert tags() == {(int(first.id), "x")}, "the holder came back: no tag for the call"


def test_the_admin_finds_jobs_by_tag_through_the_index_and_shows_them(client):
    wanted = int(billing.enqueue("a").id)
    vip = int(billing.using(tags=["billing", "vip"]).enqueue("b").id)
    tasks.record.enqueue("billing")  # the word alone, in the arguments
    client.force_login(staff("viewer", "view_job"))
    found = client.get(CHANGELIST, {"q": "tag:billing"}).context["cl"].result_list
    assert {job.pk for job in found} == {wanted, vip}
    both = client.get(CHANGELIST, {"q": "tag:billing tag:vip"}).context["cl"].result_list
    assert [job.pk for job in both] == [vip]
    with CaptureQueriesContext(connection) as queries:
        client.get(CHANGELIST, {"q": "tag:billing"})
    listing = [q["sql"] for q in queries.captured_queries if "django_dbqueue_jobtag" in q["sql"]]
    assert listing and all("args" not in sql for sql in listing), "the tag is looked up, no argument read"
    page = client.get(f"{CHANGELIST}{vip}/change/").content.decode()
    assert "billing vip" in page and "tag:NAME" in page


def test_pruning_a_job_takes_its_tags():
    pk = int(billing.enqueue("a").id)
    drain()
    assert Job.objects.filter(pk=pk).prune(older_than=timedelta(0)) == 1
    assert not JobTag.objects.exists()


@pytest.mark.parametrize(
    ("tags_given", "message"),
    [
        (["with space"], "without spaces"),
        ([""], "1 to 64 characters"),
        (["x" * 65], "1 to 64 characters"),
        ([str(n) for n in range(17)], "at most 16 tags"),
        ([7], "A tag must be a string"),
        (7, "tags must be a string or a list"),
    ],
)
def test_bad_tags_are_refused_where_they_are_given(tags_given, message):
    with pytest.raises(InvalidTask, match=message):
        task(tags=tags_given)(tasks.record.func)
    with pytest.raises(InvalidTask, match=message):
        tasks.record.using(tags=tags_given)
    assert not Job.objects.exists()


def test_a_tags_function_labels_each_call_by_its_arguments_and_the_search_finds_them(client):
    by_customer = task(tags=lambda customer, amount: [f"customer:{customer}", "invoice"])(tasks.add.func)
    first = int(by_customer.enqueue(42, 10).id)
    int(by_customer.enqueue(7, 10).id)
    untagged = task(tags=lambda customer, amount: None)(tasks.add.func)
    none = int(untagged.enqueue(42, 1).id)
    assert not JobTag.objects.filter(job_id=none).exists()
    client.force_login(staff("viewer", "view_job"))
    found = client.get(CHANGELIST, {"q": "customer:42"}).context["cl"].result_list
    assert [job.pk for job in found] == [first]
    with pytest.raises(InvalidTask, match="without spaces"):
        task(tags=lambda customer, amount: "a b")(tasks.add.func).enqueue(1, 2)
    assert Job.objects.count() == 3, "the refused call wrote nothing"
