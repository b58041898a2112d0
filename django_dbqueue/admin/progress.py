"""A batch's progress: its members counted by status, and the bar and
counts the batch list and a batch's page show."""

from __future__ import annotations

from django.db.models import Count
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..models import Job, Status

# The progress bar's segments, in order, and the statuses each counts.
SEGMENTS = (
    ("successful", (Status.SUCCESSFUL,)),
    ("failed", (Status.FAILED,)),
    ("cancelled", (Status.CANCELLED,)),
    ("running", (Status.RUNNING,)),
    ("pending", (Status.READY, Status.WAITING)),
)


def member_counts(database: str, batch_ids: list[int]) -> dict[int, dict[str, int]]:
    """Each batch's members by status: one grouped read of the (batch, status) index."""
    counts: dict[int, dict[str, int]] = {pk: {} for pk in batch_ids}
    rows = Job._base_manager.using(database).filter(batch_id__in=batch_ids).order_by()
    for batch_id, status, n in rows.values_list("batch_id", "status").annotate(n=Count("pk")):
        counts[batch_id][status] = n
    return counts


def progress_html(counts: dict[str, int]) -> SafeString:
    """A bar (SVG, so no inline style) and the counts as text beside it."""
    total = sum(counts.values())
    parts = [(name, sum(counts.get(s, 0) for s in statuses)) for name, statuses in SEGMENTS]
    x, rects = 0.0, []
    for name, n in parts:
        if n and total:
            rects.append((name, f"{x:.2f}", f"{100 * n / total:.2f}", f"{n} {name}"))
            x += 100 * n / total
    bar = format_html(
        '<svg class="dbqueue-progress" viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true">'
        '<rect class="dbqueue-progress-track" x="0" y="0" width="100" height="8"/>{}</svg>',
        format_html_join(
            "",
            '<rect class="dbqueue-progress-{}" x="{}" y="0" width="{}" height="8"><title>{}</title></rect>',
            rects,
        ),
    )
    done, failed, cancelled = (counts.get(s, 0) for s in (Status.SUCCESSFUL, Status.FAILED, Status.CANCELLED))
    text = f"{total} total: {done} succeeded, {failed} failed, "
    text += f"{cancelled} cancelled, " if cancelled else ""
    text += f"{total - done - failed - cancelled} pending"
    return format_html(
        '<div class="dbqueue-progress-box">{}<span class="dbqueue-counts">{}</span></div>', bar, text
    )
