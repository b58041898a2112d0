"""The dashboard's chart of jobs finished per minute, drawn as inline SVG:
no script, no external library, nothing loaded from another host."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

# The plot area, and the margins its axis labels take.
PLOT_WIDTH, PLOT_HEIGHT, BAR_GAP = 300, 48, 1
LEFT, TOP, BOTTOM = 34, 6, 14
BASE = TOP + PLOT_HEIGHT


def round_up(n: int) -> int:
    """The smallest of 1, 2, 3, 4, 5, 6, 8 times a power of ten that is at least ``n``."""
    power = 1
    while True:
        for step in (1, 2, 3, 4, 5, 6, 8):
            if step * power >= n:
                return step * power
        power *= 10


def throughput_svg(per_minute: list[int], scale: int) -> SafeString:
    """A bar per minute, oldest on the left, against an axis from 0 to
    ``scale`` (shared by every chart on the page)."""
    scale = max(scale, max(per_minute, default=0), 1)
    width, height = LEFT + PLOT_WIDTH + 2, BASE + BOTTOM
    summary = (
        f"Jobs finished per minute over the last hour: peak {max(per_minute, default=0)}, "
        f"axis from 0 to {scale}"
    )
    return format_html(
        '<svg class="dbqueue-chart" role="img" viewBox="0 0 {} {}" width="{}" height="{}">'
        "<title>{}</title>{}{}</svg>",
        width,
        height,
        width,
        height,
        summary,
        axis(scale),
        bars(per_minute, scale),
    )


def bars(per_minute: list[int], scale: int) -> SafeString:
    """One <rect> per minute that saw a job finish; its tooltip gives the count."""
    step = PLOT_WIDTH / len(per_minute)

    def bar(i: int, n: int) -> tuple[str, ...]:
        tall = PLOT_HEIGHT * n / scale
        ago = len(per_minute) - 1 - i
        x, y, wide = LEFT + i * step, BASE - tall, step - BAR_GAP
        return (f"{x:.1f}", f"{y:.1f}", f"{wide:.1f}", f"{tall:.1f}", f"{n} finished {ago} min ago")

    return format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        (bar(i, n) for i, n in enumerate(per_minute) if n),
    )


def axis(scale: int) -> SafeString:
    """Both axes, a dotted line at the top of the scale, and their labels."""
    right, label_y = LEFT + PLOT_WIDTH, BASE + BOTTOM - 3
    return format_html(
        '<g class="dbqueue-axis">'
        '<line x1="{left}" y1="{top}" x2="{left}" y2="{base}"/>'
        '<line x1="{left}" y1="{base}" x2="{right}" y2="{base}"/>'
        '<line class="dbqueue-grid" x1="{left}" y1="{top}" x2="{right}" y2="{top}"/>'
        '<text x="{tick}" y="{top_label}" text-anchor="end">{scale}</text>'
        '<text x="{tick}" y="{base}" text-anchor="end">0</text>'
        '<text x="{left}" y="{label_y}">60 min ago</text>'
        '<text x="{middle}" y="{label_y}" text-anchor="middle">30 min</text>'
        '<text x="{right}" y="{label_y}" text-anchor="end">now</text>'
        "</g>",
        left=LEFT,
        top=TOP,
        base=BASE,
        right=right,
        tick=LEFT - 3,
        top_label=TOP + 7,
        scale=scale,
        label_y=label_y,
        middle=LEFT + PLOT_WIDTH / 2,
    )
