"""Running a queue in production, beside the worker: what the commands, the
admin and the worker's housekeeping call.

- schedules.py: OPTIONS["SCHEDULES"] parsed; schedule_runs.py: enqueueing a run exactly once.
- pausing.py: paused queues; retention.py: pruning finished jobs.
- stats.py: the queue's figures; metrics.py: them as Prometheus metrics.

sql_contract.py stays in the package root, as fields.py and jsonfield.py do:
migrations import it by that path.
"""
