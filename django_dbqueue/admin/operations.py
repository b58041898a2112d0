"""What the admin says when an action starts a big operation as a job
(operations/big.py): at once, with a link to the operation job's page,
where its progress shows while it runs."""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..operations.big import Started
from .workflow import job_url

# What an operation does, as the message names it.
DOING = {
    "cancel": "Cancelling %s",
    "requeue": "Requeuing %s",
    "run_now": "Making %s due now",
    "cancel_batch": "Cancelled the batch; cancelling its %s",
    "retry_batch": "Opened the batch again; requeuing its %s",
}


def operation_message(model_admin: Any, started: Started, what: str) -> SafeString:
    """ "Cancelling 100,000 jobs in the background, … see the operation job #7." """
    rows = f"{int(started):,} job{'' if started == 1 else 's'}"
    assert started.job_id is not None, "a started operation job"
    url = job_url(model_admin.admin_site.name, started.job_id)
    return format_html(
        '{} in the background, a chunk at a time: the operation job <a href="{}">#{}</a> shows its progress.',
        DOING[what] % rows,
        url,
        started.job_id,
    )
