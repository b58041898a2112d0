"""One-by-one enqueue's shortcuts (enqueue/plan.py): a task checked once per
task object, a new job built without Model.__init__, and an INSERT that
leaves the columns an enqueue does not decide to their database defaults.
Each shortcut must change nothing a reader of the row or the result sees."""

import dataclasses
import inspect
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.db.models.signals import pre_init
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from demo import tasks
from django_dbqueue import batch, bulk_enqueue
from django_dbqueue.enqueue.inserting import insert_job, job_fields
from django_dbqueue.enqueue.plan import KEPT
from django_dbqueue.enqueue.validation import CallShape
from django_dbqueue.models import Job
from django_dbqueue.tasks_api import InvalidTask, default_task_backend

pytestmark = pytest.mark.django_db


def stored_and_built(task, *args, **kwargs) -> tuple[Job, Job]:
    """A job built and written as enqueue() writes it, and its row read back."""
    backend = default_task_backend
    plan = backend.plan(task)
    job = plan.job(args, kwargs, backend.now())
    insert_job(job, backend.database, plan.statement(job))
    return Job.objects.get(pk=job.pk), job


@pytest.mark.parametrize(
    ("make", "args"),
    [
        (lambda: tasks.noop, ()),
        (lambda: tasks.send_welcome.using(run_after=timezone.now() + timedelta(hours=1), priority=-3), (7,)),
        (lambda: tasks.add.using(concurrency_key="k", concurrency_limit=2, unique_key="u"), (1, 2)),
    ],
    ids=["plain", "run_after and priority", "keys"],
)
def test_every_column_left_to_its_default_holds_the_models_default(make, args):
    row, job = stored_and_built(make(), *args)

    sql, _ = default_task_backend.plan(make()).statement(job)
    written = sql[sql.index("(") + 1 : sql.index(")")].split(", ")
    assert len(written) < len(job_fields()) / 2, "most columns are left to their database default"
    for field in job_fields():
        assert getattr(row, field.attname) == getattr(job, field.attname), field.attname
    assert row.status == "READY" and row.errors == [] and row.attempts == 0


@pytest.mark.parametrize(
    ("make", "args"),
    [
        (lambda: tasks.noop, ()),
        (lambda: tasks.add, (1, 2)),
        (lambda: tasks.send_welcome.using(run_after=timezone.now() + timedelta(hours=1), priority=-3), (7,)),
        (lambda: tasks.add.using(concurrency_key="k", concurrency_limit=2), (1, 2)),
    ],
    ids=["plain", "arguments", "run_after and priority", "keys"],
)
def test_the_enqueues_own_result_is_what_to_result_makes_of_the_new_row(make, args):
    task, backend = make(), default_task_backend
    row, job = stored_and_built(task, *args)
    fresh = backend.plan(task).result(backend, job)
    for stored in (job, row):
        expected = backend.to_result(stored, task)
        assert type(fresh) is type(expected)
        for field in dataclasses.fields(expected):
            assert getattr(fresh, field.name) == getattr(expected, field.name), field.name
        assert fresh._return_value is None is expected._return_value
    assert fresh.task is task


def test_a_job_in_a_batch_block_is_written_with_its_batch():
    with batch() as handle:
        row, job = stored_and_built(tasks.noop)
    assert row.batch_id == int(handle.id) == job.batch_id


def test_new_jobs_do_not_share_their_lists():
    backend = default_task_backend
    plan = backend.plan(tasks.noop)
    first, second = (plan.job((), {}, backend.now()) for _ in range(2))
    first.errors.append("x")
    assert second.errors == [] and first.worker_ids is not second.worker_ids
    pre_init.connect(no_op, sender=Job)  # then each job is built by Model.__init__
    try:
        third, fourth = (plan.job((), {}, backend.now()) for _ in range(2))
    finally:
        pre_init.disconnect(no_op, sender=Job)
    assert third.errors is not fourth.errors and third.history is not fourth.history


def no_op(**kwargs):
    pass


def test_a_receiver_of_pre_init_hears_each_enqueued_job():
    heard: list[dict] = []

    def receiver(sender, args, kwargs, **extra):
        heard.append(dict(kwargs))  # __init__ empties the dict it was sent

    pre_init.connect(receiver, sender=Job)
    try:
        result = tasks.add.enqueue(2, 3)
    finally:
        pre_init.disconnect(receiver, sender=Job)
    # (The task's plan, when made here, builds one job without arguments.)
    assert [kwargs["args"] for kwargs in heard if "args" in kwargs] == [[2, 3]]
    assert Job.objects.get(pk=int(result.id)).args == [2, 3]


def test_a_setting_change_checks_the_task_again():
    """Django's own check of run_after reads USE_TZ: a task accepted once
    under USE_TZ = False is refused after the setting changes."""
    with override_settings(USE_TZ=False):
        naive = tasks.noop.using(run_after=datetime(2030, 1, 1, 12, 0))
        naive.enqueue()
        naive.enqueue()  # the second time from the task's plan
    with (
        override_settings(USE_TZ=True),
        pytest.raises(InvalidTask, match="run_after must be an aware datetime"),
    ):
        naive.enqueue()


def test_tasks_made_per_call_do_not_grow_the_plans_without_bound():
    backend = default_task_backend
    for priority in range(KEPT + 50):
        backend.check_enqueue(tasks.noop.using(priority=priority % 100))
    assert 0 < len(backend._plans.kept) <= KEPT


def _none() -> None: ...
def _one(a): ...
def _default(a, b=1): ...
def _keyword_only(a, *, k): ...
def _star(*args): ...
def _positional_only(a, /, b): ...
def _star_star(a, **kw): ...


@pytest.mark.parametrize("func", [_none, _one, _default, _keyword_only, _star, _positional_only, _star_star])
def test_the_quick_arity_check_answers_as_bind_does(func):
    shape = CallShape(inspect.signature(func))
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in inspect.signature(func).parameters.values())
    for args in [(), (1,), (1, 2), (1, 2, 3)]:
        for kwargs in [{}, {"a": 1}, {"b": 2}, {"k": 3}, {"c": 4}, {"a": 1, "b": 2}, {"b": 2, "k": 3}]:
            try:
                shape.signature.bind(*args, **kwargs)
                binds = True
            except TypeError:
                binds = False
            fits = shape.fits(args, kwargs)
            assert binds or not fits, (args, kwargs)
            if plain:
                assert fits == binds, (args, kwargs)
            else:
                assert not fits, "any other shape is left to bind"


def test_the_tasks_constant_columns_are_literals_and_the_calls_values_parameters():
    backend = default_task_backend
    plan = backend.plan(tasks.noop)
    sql, params = plan.statement(plan.job((), {}, backend.now()))
    assert f"'{tasks.noop.module_path}'" in sql
    assert "'default'" in sql
    assert tasks.noop.module_path not in params and "default" not in params
    if connections[backend.database].vendor != "postgresql":
        assert len(params) == 2, "the two times"
    # (On PostgreSQL, the integers and the empty JSON are prepared as
    # psycopg's typed wrappers, and stay parameters.)


# Quotes, backslashes and every driver's parameter markers, in a queue name
# that QUEUES allows: written as a parameter, escaped by the driver.
ODD_QUEUE = 'o\'brien "%s" 100% \\ ? %(x)s :x $1'


@pytest.mark.parametrize(
    ("make", "args", "kwargs"),
    [
        (lambda: tasks.noop, (), {}),
        (lambda: tasks.record, (ODD_QUEUE,), {}),
        (lambda: tasks.record, (), {"key": ODD_QUEUE}),
    ],
    ids=["no arguments", "the name as an argument too", "and as a keyword argument"],
)
def test_a_queue_name_with_quotes_and_parameter_markers_round_trips(make, args, kwargs):
    setting = {"default": {**settings.TASKS["default"], "QUEUES": ["default", ODD_QUEUE]}}
    with override_settings(TASKS=setting):
        task = make().using(queue_name=ODD_QUEUE)
        plan = task.get_backend().plan(task)
        assert "%s" in plan.marks, "the name is a parameter"
        results = [task.enqueue(*args, **kwargs) for _ in range(2)]  # the second from the plan
        results += bulk_enqueue(task, [(args, kwargs)] * 3, batch_size=2)  # its rows from the plan too
        for result in results:
            row = Job.objects.get(pk=result.id)
            assert (row.queue_name, row.task_path) == (ODD_QUEUE, task.module_path)
            assert (row.args, row.kwargs) == (list(args), kwargs)
            assert result.task.queue_name == ODD_QUEUE and result.args == list(args)


def test_execute_wrappers_and_the_query_log_see_the_insert():
    seen: list[tuple[str, tuple]] = []

    def wrapper(execute, sql, params, many, context):
        seen.append((sql, tuple(params or ())))
        return execute(sql, params, many, context)

    connection = connections[default_task_backend.database]
    tasks.noop.enqueue()  # the plan made and the clock read outside
    with connection.execute_wrapper(wrapper), CaptureQueriesContext(connection) as logged:
        result = tasks.add.enqueue(2, 3)
    inserts = [sql for sql, _ in seen if sql.startswith("INSERT INTO")]
    assert len(inserts) == 1 and Job._meta.db_table in inserts[0]
    assert [query["sql"] for query in logged.captured_queries if query["sql"].startswith("INSERT")]
    assert Job.objects.get(pk=result.id).args == [2, 3]
