"""Housekeeping for running jobs, every CONTROL_INTERVAL: tell each worker
of a cancel request for the job it runs, and write its task's latest
progress report to the job's row.

The task itself never queries for either. It reads a cancel request from
shared memory, and reports progress there (a few stores: a tight loop costs
nothing). This side turns the two into one indexed read and at most one
UPDATE per worker per interval, both conditional on the worker's lease, so
a worker that lost its job changes nothing.
"""

from __future__ import annotations

from ...clock import elapsed
from ...status import Status
from ..shared import SharedState


class CancelRelay:
    def __init__(self, database: str, state: SharedState) -> None:
        self.database = database
        self.state = state
        # slot: the sequence number of the last report written (or found
        # stale), so an unchanged report costs no write.
        self.written: dict[int, int] = {}

    def run_once(self, live: dict[int, str]) -> None:
        """``live``: the owner name of each live worker, by slot."""
        self.post_cancels(live)
        self.write_progress(live)

    def post_cancels(self, live: dict[int, str]) -> None:
        """Post a cancel request into the slot of the worker running its job."""
        from ...models import Job

        running = {name: index for index, name in live.items() if self.state.slot(index).job_id}
        if not running:
            return  # no worker is on a job: no query at all
        # Served by the index on cancel_requested_at, which holds only the
        # pending requests (a finished job's is cleared): a handful of rows.
        rows = Job.objects.using(self.database).filter(
            cancel_requested_at__isnull=False, status=Status.RUNNING, owner__in=list(running)
        )
        asked: dict[str, set[int]] = {}
        for owner, pk in rows.values_list("owner", "pk"):
            asked.setdefault(owner, set()).add(pk)
        now = elapsed()
        posts = []
        for owner, pks in asked.items():
            slot = self.state.slot(running[owner])
            job_id = slot.job_id
            # Only the job in hand: a batch-mate's request is posted when it
            # starts, so that its grace counts from then. A job the worker
            # finished meanwhile is harmless: it compares the id with its own.
            if slot.name == owner and job_id in pks and slot.cancel_posted()[0] != job_id:
                posts.append((slot, job_id))
        if posts:
            # A request written by SQL with a time Python cannot read counts
            # as asked now: the worker, its supervisor and lease recovery
            # read that time once the job is stopped.
            Job.objects.using(self.database).mend_cancel_times([job_id for _, job_id in posts])
        for slot, job_id in posts:
            slot.post_cancel(job_id, now)

    def write_progress(self, live: dict[int, str]) -> None:
        from ...models import Job

        jobs = Job.objects.using(self.database)
        for index, owner in live.items():
            seq, job_id, fraction, message = self.state.slot(index).progress_report()
            if not job_id or self.written.get(index) == seq:
                continue
            # An empty message was never reported: leave the column alone.
            jobs.save_progress(owner, job_id, fraction, message or None)
            self.written[index] = seq
