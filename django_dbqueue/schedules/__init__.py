"""Recurring jobs, in one wing, from the lowest floor up:

- spec.py: a schedule as the scheduler reads it (cron expression, time zone,
  arguments, catch-up policy), its due times, and the checks of its fields;
  OPTIONS["SCHEDULES"] parsed. Low enough for options.py: it imports nothing
  of the models, enqueue/ or operations/.
- table.py: ``Schedule``, the schedules kept in the database (the public
  path is ``django_dbqueue.models.Schedule``). A model module: it imports
  nothing of enqueue/ either; whether its task can run is asked of runs.py,
  which apps.py plugs in.
- runs.py: enqueueing one run exactly once, the record of the runs, and
  whether a schedule's task can be enqueued at all.

The scheduler thread (worker/housekeeping/scheduler.py) and the admin pages
(admin/schedules.py, admin/stored_schedules.py) read from here. This file
imports nothing, so that importing spec.py loads spec.py alone.
"""
