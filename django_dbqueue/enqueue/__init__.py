"""The enqueue side: what ``DatabaseBackend`` (backend.py, the stable public
path) is made of, from a ``@task`` to a Job row and back.

- tasks.py: DatabaseTask, the task class with the queue's own options.
- decorator.py: ``@django_dbqueue.task``.
- validation.py: the checks of a task's options and of a call's arguments.
- keys.py: unique and concurrency keys of a call.
- metadata.py: a job's metadata, checked, and its limit.
- loading.py: ``load_task()``, a stored task path back to a Task, and the allow-list.
- transitions/inserts.py (re-exported as inserting.py): the INSERT of one job or many,
  shared with the workflow cascade; unique.py: the INSERT with a unique key.
- bulk.py: building and inserting many calls of one task.
- results.py: the row as a django.tasks TaskResult (``get_result()``, ``to_result()``).

Nothing here imports backend.py (only for type hints): the backend sits on top.
"""
