"""What the admin shows of a workflow: a job's parents and dependants, and
the pictures (dag.py) of a batch's members and of a job's neighbours.
Read-only; every read goes by an index (Dependency's child and parent
indexes, Job's primary key and (batch, status))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..models import Job
from ..workflows.models import Batch, Dependency
from .dag import Node, workflow_svg

# At most this many jobs in a picture: past it boxes get too small to read.
MAX_NODES = 30
# How many levels of parents and of dependants a job's picture reaches.
JOB_DEPTH = 2
# How many parents or dependants a job's page lists.
MAX_LISTED = 50


@dataclass(frozen=True)
class Related:
    """A parent or dependant as the job page lists it."""

    kind: str  # "job" or "batch"
    pk: int
    label: str
    status: str
    url: str
    resolved: bool | None = None  # parents only: has it finished for this job?


def job_url(site: str, pk: int) -> str:
    return reverse(f"{site}:django_dbqueue_job_change", args=[pk])


def batch_url(site: str, pk: int) -> str:
    return reverse(f"{site}:django_dbqueue_batch_change", args=[pk])


def short_task(task_path: str) -> str:
    return task_path.rsplit(".", 1)[-1]


def job_node(job: Job, site: str, current: bool = False) -> Node:
    return Node(
        f"job:{job.pk}",
        f"#{job.pk} {short_task(job.task_path)}",
        job.status,
        job.status,
        job_url(site, job.pk),
        current,
    )


def _jobs(database: str, ids: Any) -> QuerySet:
    return Job._base_manager.using(database).filter(pk__in=list(ids)).only("pk", "task_path", "status")


def parents_of(job: Job, site: str) -> list[Related]:
    database = job._state.db or "default"
    rows = list(Dependency.objects.using(database).filter(child_id=job.pk).order_by("pk")[:MAX_LISTED])
    jobs = {j.pk: j for j in _jobs(database, [r.parent_id for r in rows if r.parent_id])}
    batches = {
        b.pk: b
        for b in Batch.objects.using(database).filter(
            pk__in=[r.parent_batch_id for r in rows if r.parent_batch_id]
        )
    }
    related = []
    for row in rows:
        if row.parent_batch_id:
            found_batch = batches.get(row.parent_batch_id)
            status = found_batch.status if found_batch else "DELETED"
            related.append(
                Related(
                    "batch",
                    row.parent_batch_id,
                    f"batch #{row.parent_batch_id}",
                    status,
                    batch_url(site, row.parent_batch_id),
                    row.resolved,
                )
            )
        elif row.parent_id:
            found = jobs.get(row.parent_id)
            related.append(
                Related(
                    "job",
                    row.parent_id,
                    f"#{row.parent_id} {found.task_path if found else ''}",
                    found.status if found else "DELETED",
                    job_url(site, row.parent_id),
                    row.resolved,
                )
            )
    return related


def dependants_of(job: Job, site: str) -> list[Related]:
    database = job._state.db or "default"
    ids = Dependency.objects.using(database).filter(parent_id=job.pk).order_by("child_id")
    children = _jobs(database, ids.values_list("child_id", flat=True)[:MAX_LISTED]).order_by("pk")
    return [Related("job", c.pk, f"#{c.pk} {c.task_path}", c.status, job_url(site, c.pk)) for c in children]


def batch_dependants(batch: Batch, site: str) -> list[Related]:
    """The jobs that wait for the whole batch (``depends_on=[batch]``)."""
    database = batch._state.db or "default"
    ids = Dependency.objects.using(database).filter(parent_batch_id=batch.pk).order_by("child_id")
    children = _jobs(database, ids.values_list("child_id", flat=True)[:MAX_LISTED]).order_by("pk")
    return [Related("job", c.pk, f"#{c.pk} {c.task_path}", c.status, job_url(site, c.pk)) for c in children]


def related_html(related: list[Related], none: str) -> SafeString:
    from . import display as show

    if not related:
        return format_html("<p>{}</p>", none)
    items = format_html_join(
        "",
        '<li><a href="{}">{}</a> {}{}</li>',
        (
            (r.url, show.breakable(r.label), show.status_badge(r.status), " (resolved)" if r.resolved else "")
            for r in related
        ),
    )
    more = f"Only the first {MAX_LISTED} are listed." if len(related) >= MAX_LISTED else ""
    return format_html(
        '<ul class="dbqueue-related">{}</ul>{}',
        items,
        format_html('<p class="help">{}</p>', more) if more else "",
    )


def batch_picture(batch: Batch, site: str, total: int) -> SafeString:
    """The batch's first MAX_NODES members (by id) and the dependencies between them."""
    database = batch._state.db or "default"
    members = list(
        Job._base_manager.using(database)
        .filter(batch_id=batch.pk)
        .order_by("pk")
        .only("pk", "task_path", "status")[:MAX_NODES]
    )
    if not members:
        return format_html("<p>{}</p>", "No members.")
    ids = [m.pk for m in members]
    links = Dependency.objects.using(database).filter(child_id__in=ids, parent_id__in=ids)
    edges = [(f"job:{p}", f"job:{c}") for p, c in links.values_list("parent_id", "child_id")]
    svg = workflow_svg([job_node(m, site) for m in members], edges, f"The members of batch #{batch.pk}")
    return with_note(svg, total - len(members))


def job_picture(job: Job, site: str) -> SafeString:
    """The job, its parents and dependants, up to JOB_DEPTH levels each way."""
    database = job._state.db or "default"
    deps = Dependency.objects.using(database)
    edges: set[tuple[str, str]] = set()
    batch_parents: set[int] = set()
    seen = {job.pk}
    up, down = {job.pk}, {job.pk}
    for _ in range(JOB_DEPTH):
        if len(seen) >= MAX_NODES:
            break
        next_up, next_down = set(), set()
        for parent, batch_parent, child in deps.filter(child_id__in=up).values_list(
            "parent_id", "parent_batch_id", "child_id"
        )[:MAX_NODES]:
            if batch_parent:
                batch_parents.add(batch_parent)
                edges.add((f"batch:{batch_parent}", f"job:{child}"))
            elif parent:
                edges.add((f"job:{parent}", f"job:{child}"))
                next_up.add(parent)
        for parent, child in deps.filter(parent_id__in=down).values_list("parent_id", "child_id")[:MAX_NODES]:
            edges.add((f"job:{parent}", f"job:{child}"))
            next_down.add(child)
        up, down = next_up - seen, next_down - seen
        seen |= up | down
    shown = sorted(seen, key=lambda pk: (pk != job.pk, pk))[:MAX_NODES]
    nodes = [job_node(j, site, j.pk == job.pk) for j in _jobs(database, shown).order_by("pk")]
    for pk in sorted(batch_parents):
        nodes.append(Node(f"batch:{pk}", f"batch #{pk}", "batch", "BATCH", batch_url(site, pk)))
    svg = workflow_svg(nodes, sorted(edges), f"Job #{job.pk}, its parents and its dependants")
    return with_note(svg, len(seen) - len(shown))


def with_note(svg: SafeString, hidden: int) -> SafeString:
    if hidden <= 0:
        return format_html('<div class="dbqueue-dag-box">{}</div>', svg)
    return format_html(
        '<div class="dbqueue-dag-box">{}</div><p class="help">{}</p>',
        svg,
        f"… and {hidden} more not drawn (the picture shows at most {MAX_NODES} jobs).",
    )
