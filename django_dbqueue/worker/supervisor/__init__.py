"""The supervisor: runqueue's parent process, over the worker processes.

supervisor.py        Supervisor: starts N workers and the heartbeat process,
                     restarts the ones that crash, relays stop requests
group.py             SupervisorGroup: one Supervisor per backend in one process
stuck.py             kills a worker whose job outlived its hard limit, a
                     cancel's grace or a stop's timeout
status_line.py       the log's status line and the summary at the end
runqueue_metrics.py  the metrics only this runqueue sees (--metrics-port)
"""
