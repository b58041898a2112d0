"""The queue console in Django's admin, one concern per module:

jobs.py        the Job changelist and job page (JobAdmin)
actions.py     requeue, cancel, run now and delete, as list actions and page buttons
changes.py     what requeue, cancel and run now do, applied chunk by chunk with rows locked
batches.py     the batches (workflows): their list, progress and page
batch_actions.py  cancel a batch and retry its failed jobs, as list actions and page buttons
workflow.py    a job's parents and dependants, and the workflow pictures
dag.py         a workflow drawn as inline SVG, in layers
progress.py    a batch's members counted by status, and its progress bar
display.py     how a job's fields are shown: badges, JSON, dates
timeline.py    a job's story: its timeline and errors, each event with its attempt
running.py     a running job's progress, cancel request, checkpoint and interruptions
dashboard.py   the queue dashboard: its view, its numbers and its link in the app list
chart.py       the dashboard's chart of jobs finished per minute, as inline SVG
workers.py     the list of worker processes
schedules.py   the recurring schedules with their last and next run, and "run now"
stored_schedules.py  the schedules in the database: add, change, delete, pause, resume
schedule_form.py  the tasks and time zones that form offers to pick from
pauses.py      pausing and resuming queues, and the list of paused ones
paginator.py   a changelist paginator that never counts a big table row by row
database.py    which database the admin uses: the queue backend's OPTIONS["DATABASE"]
readonly.py    the read-only permissions of the dashboard, schedules and pauses pages
archive.py     the archive of jobs that retention deleted (OPTIONS ARCHIVE), read only
moderation.py  claim-for-review in any model's admin (ModerationAdminMixin)

Importing this package registers the model admins with ``admin.site``, as
Django's admin autodiscovery does.
"""

from .archive import ArchivedJobAdmin
from .batches import BatchAdmin
from .dashboard import DashboardAdmin
from .jobs import JobAdmin
from .moderation import ModerationAdminMixin
from .pauses import PausedQueueAdmin
from .schedules import ScheduleAdmin
from .stored_schedules import StoredScheduleAdmin
from .workers import WorkerAdmin

__all__ = [
    "ArchivedJobAdmin",
    "BatchAdmin",
    "DashboardAdmin",
    "JobAdmin",
    "ModerationAdminMixin",
    "PausedQueueAdmin",
    "ScheduleAdmin",
    "StoredScheduleAdmin",
    "WorkerAdmin",
]
