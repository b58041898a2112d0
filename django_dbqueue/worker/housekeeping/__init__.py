"""The heartbeat and its chores: what keeps a queue's rows honest while
workers run. One heartbeat per runqueue (in the supervisor's heartbeat
process) or per lone Worker (in a thread); each chore is a service of its
own, with a ``run_once()`` (or a start and a stop), and heartbeat.py is the
one place that starts them and says how often each runs.

  heartbeat.py     the starter: Heartbeat, its thread, its process
  leases.py        extends the live workers' leases and vouches for them
  roster.py        the Worker rows (and a worker's owner name)
  rescuer.py       returns dead workers' jobs, after a grace past an outage
  pruning.py       OPTIONS RETENTION, a little per beat
  cancel_relay.py  cancel requests to the workers, progress to the rows
  scheduler.py     enqueues the backend's schedules as they come due (a thread)
"""
