"""Running a queue in production, beside the worker: what the commands, the
admin and the worker's housekeeping call.

- pausing.py: paused queues; retention.py: pruning finished jobs.
- stats.py: the queue's figures; metrics.py: them as Prometheus metrics.
- schedules.py, schedule_runs.py: old paths, re-exporting; recurring jobs live in schedules/.

sql_contract.py stays in the package root, as fields.py and jsonfield.py do:
migrations import it by that path.
"""
