"""A batch's callback jobs on its page, with real `runqueue` processes:
every completion's, labelled with the callback each one is, after
retry_failed() too."""

import re

import pytest

from demo import workflow_tasks as wt
from django_dbqueue import batch, call, get_batch
from django_dbqueue.models import Job
from tests.admin_helpers import staff

pytestmark = pytest.mark.django_db(transaction=True)


def drain(runqueue) -> None:
    worker = runqueue("--burst")
    assert worker.wait(180) == 0, worker.output()[-3000:]


def listed_callbacks(html: str) -> list[tuple[str, int]]:
    """The callback jobs the page lists: (label, job id), in order."""
    found = re.findall(
        r'<span class="dbqueue-callback">(\w+)</span> <a href="/admin/django_dbqueue/job/(\d+)/', html
    )
    return [(label, int(pk)) for label, pk in found]


def test_a_retried_batch_lists_every_completions_callback_jobs_labelled(runqueue, client):
    hooks = {
        "on_success": call(wt.callback, "ok"),
        "on_failure": call(wt.callback, "bad"),
        "on_finish": call(wt.callback, "fin"),
    }
    with batch("retried", **hooks) as retried:
        wt.fails_once.enqueue("retried-0")
    drain(runqueue)
    assert get_batch(retried.id).status == "FAILED"
    assert retried.retry_failed() == 1
    drain(runqueue)
    done = get_batch(retried.id)
    assert done.status == "SUCCEEDED"

    client.force_login(staff("viewer", "view_batch", "view_job"))
    html = client.get(f"/admin/django_dbqueue/batch/{done.id}/change/").content.decode()

    listed = listed_callbacks(html)
    assert [label for label, _ in listed] == ["on_failure", "on_finish", "on_success", "on_finish"]
    assert [pk for _, pk in listed] == done.callback_job_ids
    jobs = Job.objects.in_bulk(done.callback_job_ids)
    assert [jobs[pk].args[0] for _, pk in listed] == ["bad", "fin", "ok", "fin"]
    assert all(job.status == "SUCCESSFUL" for job in jobs.values()), "each callback ran"
    assert [jobs[pk].metadata for _, pk in listed][0] == {"batch_callback": "on_failure"}
