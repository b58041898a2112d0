"""A small workflow drawn as inline SVG: jobs as boxes in layers, parents
to the left of their dependants, an arrow per dependency. The layout is
computed here (each node's layer is its longest path from a node with no
parent), the colours come from the admin's CSS variables and the status
badges' classes; no script, no library."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

# A node's box, and the space between layers and between rows.
NODE_WIDTH, NODE_HEIGHT, LAYER_GAP, ROW_GAP, MARGIN = 150, 34, 40, 12, 4
# Past this many characters a label is cut; its tooltip has it whole.
LABEL_CHARS = 22


@dataclass(frozen=True)
class Node:
    key: str  # unique in the picture: "job:12", "batch:3"
    label: str
    detail: str  # the second line: a status, or a count
    status: str  # the badge class: READY, FAILED, ... or BATCH
    url: str | None = None
    current: bool = False  # the page's own job: drawn with a thicker border


def layers(keys: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Each node's layer: the length of the longest path that reaches it.
    Kahn's order, so a long chain costs no recursion; a node left in a cycle
    (which dependencies cannot make, but a hand-written row might) goes last."""
    parents: dict[str, list[str]] = defaultdict(list)
    children: dict[str, list[str]] = defaultdict(list)
    for parent, child in edges:
        parents[child].append(parent)
        children[parent].append(child)
    waiting = {key: len(parents[key]) for key in keys}
    layer = dict.fromkeys(keys, 0)
    ready = [key for key in keys if not waiting[key]]
    while ready:
        key = ready.pop()
        for child in children[key]:
            layer[child] = max(layer[child], layer[key] + 1)
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    deepest = max(layer.values(), default=0)
    return {key: (deepest + 1 if waiting[key] else layer[key]) for key in keys}


def positions(nodes: list[Node], edges: list[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Each node's top-left corner. Within a layer nodes are ordered by the
    mean row of their parents, so arrows cross less."""
    keys = [node.key for node in nodes]
    layer_of = layers(keys, edges)
    parents: dict[str, list[str]] = defaultdict(list)
    for parent, child in edges:
        parents[child].append(parent)
    row: dict[str, float] = {}
    for layer in range(max(layer_of.values(), default=-1) + 1):
        members = [key for key in keys if layer_of[key] == layer]

        def mean_parent_row(key: str) -> float:
            known = [row[p] for p in parents[key] if p in row]
            return sum(known) / len(known) if known else float("inf")

        for index, key in enumerate(sorted(members, key=mean_parent_row)):
            row[key] = index
    return {
        key: (MARGIN + layer_of[key] * (NODE_WIDTH + LAYER_GAP), MARGIN + row[key] * (NODE_HEIGHT + ROW_GAP))
        for key in keys
    }


def workflow_svg(nodes: list[Node], edges: list[tuple[str, str]], title: str) -> SafeString:
    """The picture, sized to its content; it shrinks with a narrow page (viewBox)."""
    shown = {node.key for node in nodes}
    edges = [(p, c) for p, c in edges if p in shown and c in shown and p != c]
    at = positions(nodes, edges)
    routes = {edge: route(*ends, at) for edge, ends in ports(edges, at).items()}
    width = max((x for x, _ in at.values()), default=0) + NODE_WIDTH + 2 * MARGIN
    lowest = max((y for points in routes.values() for _, y in points), default=0)
    height = max(max((y for _, y in at.values()), default=0) + NODE_HEIGHT, lowest) + 2 * MARGIN
    return format_html(
        '<svg class="dbqueue-dag" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}">'
        "<title>{title}</title>"
        '<defs><marker id="dbqueue-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker></defs>'
        '<g class="dbqueue-dag-edges">{edges}</g><g class="dbqueue-dag-nodes">{nodes}</g></svg>',
        w=f"{width:.0f}",
        h=f"{height:.0f}",
        title=title,
        edges=format_html_join("", "{}", ((edge_path(points, p, c),) for (p, c), points in routes.items())),
        nodes=format_html_join("", "{}", ((node_box(node, at[node.key]),) for node in nodes)),
    )


Point = tuple[float, float]


def ports(edges: list[tuple[str, str]], at: dict[str, Point]) -> dict[tuple[str, str], tuple[Point, Point]]:
    """Where each arrow leaves its parent's right edge and reaches its
    child's left edge: a node's arrows spread over its height in the order
    of the nodes at their other ends, so a fan-in's arrows stay apart."""
    outgoing: dict[str, list[str]] = defaultdict(list)
    incoming: dict[str, list[str]] = defaultdict(list)
    for parent, child in edges:
        outgoing[parent].append(child)
        incoming[child].append(parent)

    def spread(node: str, others: list[str], other: str) -> float:
        ordered = sorted(others, key=lambda key: (at[key][1], key))
        return at[node][1] + NODE_HEIGHT * (ordered.index(other) + 1) / (len(ordered) + 1)

    return {
        (p, c): ((at[p][0] + NODE_WIDTH, spread(p, outgoing[p], c)), (at[c][0], spread(c, incoming[c], p)))
        for p, c in edges
    }


def route(start: Point, end: Point, at: dict[str, Point]) -> list[Point]:
    """The points an arrow passes from ``start`` to ``end``. An arrow that
    skips layers crosses each one between its boxes, in the gap (or below
    the layer's last box) nearest to the straight line; drawn straight, it
    went through the boxes on its way, so a job seemed to have parents it
    has not."""
    (x1, y1), (x2, y2) = start, end
    points = [start]
    step = NODE_WIDTH + LAYER_GAP
    layer = round((x1 - NODE_WIDTH - MARGIN) / step)  # the parent's: start is on its right edge
    last = round((x2 - MARGIN) / step)
    for between in range(layer + 1, last):
        left = MARGIN + between * step
        tops = sorted(y for x, y in at.values() if abs(x - left) < 1)
        wanted = y1 + (y2 - y1) * (left + NODE_WIDTH / 2 - x1) / (x2 - x1)
        lanes = [top - ROW_GAP / 2 for top in tops[1:]] + [tops[-1] + NODE_HEIGHT + ROW_GAP / 2]
        if any(top - ROW_GAP / 2 < wanted < top + NODE_HEIGHT + ROW_GAP / 2 for top in tops):
            wanted = min(lanes, key=lambda lane: abs(lane - wanted))
        points += [(left, wanted), (left + NODE_WIDTH, wanted)]
    return [*points, end]


def edge_path(points: list[Point], parent: str, child: str) -> SafeString:
    """Curves from the parent's right edge to the child's left edge, through
    ``points``: each leg leaves and arrives level, and the legs across a
    layer it skips are straight."""
    (x, y), *rest = points
    parts = [f"M{x:.1f},{y:.1f}"]
    for index, (x2, y2) in enumerate(rest):
        if index % 2:  # across a layer's boxes, in its lane
            parts.append(f"L{x2:.1f},{y2:.1f}")
        else:
            bend = max((x2 - x) / 2, LAYER_GAP / 2)
            parts.append(f"C{x + bend:.1f},{y:.1f} {x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}")
        x, y = x2, y2
    return format_html(
        '<path class="dbqueue-dag-edge" data-from="{}" data-to="{}" d="{}" '
        'marker-end="url(#dbqueue-arrow)"/>',
        parent,
        child,
        " ".join(parts),
    )


def node_box(node: Node, at: tuple[float, float]) -> SafeString:
    x, y = at
    label = node.label if len(node.label) <= LABEL_CHARS else node.label[: LABEL_CHARS - 1] + "…"
    classes = f"dbqueue-dag-node dbqueue-{node.status.lower()}" + (
        " dbqueue-dag-current" if node.current else ""
    )
    box = format_html(
        '<g class="{}" data-key="{}"><title>{}: {}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="5"/>'
        '<text x="{}" y="{}">{}</text>'
        '<text class="dbqueue-dag-detail" x="{}" y="{}">{}</text></g>',
        classes,
        node.key,
        node.label,
        node.detail,
        f"{x:.1f}",
        f"{y:.1f}",
        NODE_WIDTH,
        NODE_HEIGHT,
        f"{x + 8:.1f}",
        f"{y + 14:.1f}",
        label,
        f"{x + 8:.1f}",
        f"{y + 27:.1f}",
        node.detail,
    )
    return format_html('<a href="{}">{}</a>', node.url, box) if node.url else box
