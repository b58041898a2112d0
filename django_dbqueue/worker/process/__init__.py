"""One worker process: claim a batch, run it, record, stop cleanly.

loop.py         Worker: the loop, from start to a clean exit
claims.py       what to claim (the policy; the claims are transitions/'s)
hand.py         the batch in hand and the proof that it is still held
giveback.py     giving back unstarted claims, their attempts unspent
outage.py       riding out a database outage
execution.py    running one job (JobRunner); resolving.py: its task and
                call; undeployed.py: a task this code lacks
outcomes.py     successes recorded together; unstored.py: an outcome the
                database refuses; contract.py: what they need of the runner
atomic.py       a task's writes and its success in one transaction;
                groups.py, savepoints.py: atomic jobs sharing one
failures.py     how a failed attempt is logged; snoozing.py: a task's Snooze
                (the retry policy itself: django_dbqueue/retries.py)
stops.py        a job stopped on purpose (cancelled, interrupted);
                softstop.py: the task's side of it; timeouts.py: time limits
signals.py      how the process hears that it must stop
"""
