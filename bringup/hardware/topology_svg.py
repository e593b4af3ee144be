"""The topology picture of the checklist: NUMA nodes, CPUs by planned role, GPUs, NICs and storage controllers.

Pure: facts (and the planner's CPU roles, when there is a plan) in, an SVG
string out.  Devices whose NUMA node is unknown (``-1``) hang from a node
drawn with a dashed outline; misplacements are listed in red.
"""
from __future__ import annotations

from html import escape as _html_escape

from ..errors import printable
from .topology_facts import device_kind


def escape(text: str) -> str:
    """Host text (a NIC's name, a device's address, a warning naming them) for the SVG: control characters, bidi
    overrides and bytes that were not UTF-8 written out (:func:`bringup.errors.printable`; an ESC is no XML
    character at all, and a U+202E turned the line around on the page), then XML-escaped."""
    return _html_escape(printable(str(text)).replace("\n", "\\n"))

__all__ = ["topology_svg", "ROLE_COLOURS", "DEVICE_FILLS"]

ROLE_COLOURS = {"irq": "#f28e2b", "triton": "#4e79a7", "other": "#d9d9d9", "reserved": "#b07aa1"}
_LEGEND = [("irq", "IRQ housekeeping"), ("triton", "Triton (per GPU)"), ("other", "other")]

CELL, GAP, PER_ROW = 22, 3, 16
#: The devices drawn, by kind (:func:`bringup.hardware.topology_facts.device_kind`, as the plan reads them), and their fill.
DEVICE_FILLS = {"gpu": "#76b900", "nic": "#59a14f", "nvme": "#9c755f", "storage": "#8c6d31"}


def _nodes(facts: dict) -> tuple[dict[int, list[int]], bool]:
    topo = facts.get("cpu.topology") or {}
    nodes = {int(k): list(v) for k, v in (topo.get("numa_nodes") or {}).items() if v}
    known = bool(topo.get("numa_known", True))
    if not nodes:
        cpus = [c["cpu"] for c in topo.get("cpus") or []]
        nodes = {0: cpus}
        known = False
    return dict(sorted(nodes.items())), known


def topology_svg(facts: dict, cpu_roles: dict[int, str] | None = None, warnings: list[str] | None = None,
                 title: str = "") -> str:
    """Draw the host: one column per NUMA node, CPUs coloured by ``cpu_roles``."""
    cpu_roles = cpu_roles or {}
    nodes, known = _nodes(facts)
    # Storage controllers too: the plan pins their IRQs and warns of their unknown node, so the picture draws them.
    pci = [dict(d, kind=k) for d in facts.get("pci.devices") or [] if (k := device_kind(d)) in DEVICE_FILLS]
    sockets = {c["cpu"]: c.get("socket") for c in (facts.get("cpu.topology") or {}).get("cpus") or []}
    parts: list[str] = []
    x = 10
    width_of: dict[int, tuple[int, int]] = {}
    y0 = 40
    max_h = 0
    for node, cpus in nodes.items():
        rows = max(1, -(-len(cpus) // PER_ROW))
        w = PER_ROW * (CELL + GAP) + 20
        h = rows * (CELL + GAP) + 40
        dashed = "" if known else " stroke-dasharray='6 4'"
        sock = sorted({sockets.get(c) for c in cpus if sockets.get(c) is not None})
        label = f"NUMA node {node}" if known else "NUMA unknown (numa_node -1): planned as one node"
        if sock:
            label += f" · socket {','.join(map(str, sock))}"
        parts.append(f"<rect x='{x}' y='{y0}' width='{w}' height='{h}' rx='6' fill='#fafafa' stroke='#555'{dashed}/>")
        parts.append(f"<text x='{x + 8}' y='{y0 + 16}' font-size='12' font-weight='bold'>{escape(label)}</text>")
        for i, cpu in enumerate(cpus):
            cx = x + 10 + (i % PER_ROW) * (CELL + GAP)
            cy = y0 + 26 + (i // PER_ROW) * (CELL + GAP)
            role = cpu_roles.get(cpu, "other")
            colour = ROLE_COLOURS.get(role.split(":")[0], ROLE_COLOURS["other"])
            parts.append(f"<rect class='cpu cpu-{escape(role.split(':')[0])}' x='{cx}' y='{cy}' width='{CELL}' "
                         f"height='{CELL}' fill='{colour}'><title>CPU {escape(str(cpu))}: {escape(role)}</title></rect>")
            parts.append(f"<text x='{cx + CELL / 2}' y='{cy + 15}' font-size='10' text-anchor='middle'>{escape(str(cpu))}</text>")
        width_of[node] = (x, w)
        max_h = max(max_h, h)
        x += w + 20
    # Devices under their node.
    dy = y0 + max_h + 30
    per_node: dict[int, int] = {}
    first = next(iter(nodes))
    for d in pci:
        n = d.get("numa_node")
        node = n if isinstance(n, int) and n in width_of else first
        unknown = not (isinstance(n, int) and n in width_of)
        nx, nw = width_of[node]
        k = per_node.get(node, 0)
        per_node[node] = k + 1
        bx, by = nx + 10 + (k % 3) * ((nw - 20) // 3), dy + (k // 3) * 46
        bw = (nw - 20) // 3 - 8
        fill = DEVICE_FILLS[d["kind"]]
        stroke = " stroke='#c00' stroke-width='2' stroke-dasharray='4 3'" if unknown and known else " stroke='#333'"
        parts.append(f"<line x1='{bx + bw / 2}' y1='{by}' x2='{bx + bw / 2}' y2='{y0 + max_h}' stroke='#999'/>")
        parts.append(f"<rect class='dev dev-{d['kind']}' x='{bx}' y='{by}' width='{bw}' height='36' rx='4' "
                     f"fill='{fill}'{stroke}><title>{escape(str(d['address']))} numa_node={escape(str(n))}</title></rect>")
        parts.append(f"<text x='{bx + 6}' y='{by + 15}' font-size='11' fill='#fff' font-weight='bold'>"
                     f"{d['kind'].upper()}</text>")
        parts.append(f"<text x='{bx + 6}' y='{by + 29}' font-size='9' fill='#fff'>{escape(str(d['address']))}</text>")
    dev_rows = max([-(-v // 3) for v in per_node.values()] or [0])
    y = dy + dev_rows * 46 + 20
    unknown_devs = [d for d in pci if not (isinstance(d.get("numa_node"), int) and d["numa_node"] in width_of)]
    if unknown_devs and known:
        parts.append(f"<text x='10' y='{y}' font-size='11' fill='#c00'>dashed red: numa_node -1, the firmware "
                     f"does not say which node these {len(unknown_devs)} device(s) hang from "
                     "(planned as one node)</text>")
        y += 22
    elif unknown_devs:
        # No node known at all (numa=off, one-node firmware): the dashed outline is the node's, not the devices'.
        parts.append(f"<text x='10' y='{y}' font-size='11' fill='#c00'>dashed outline: the kernel knows no NUMA "
                     f"node, so these {len(unknown_devs)} device(s) and every CPU are planned as one node</text>")
        y += 22
    legend_x = 10
    for role, text in _LEGEND:
        parts.append(f"<rect x='{legend_x}' y='{y}' width='12' height='12' fill='{ROLE_COLOURS[role]}'/>")
        parts.append(f"<text x='{legend_x + 16}' y='{y + 10}' font-size='11'>{text}</text>")
        legend_x += 150
    y += 28
    for w in warnings or []:
        parts.append(f"<text class='warning' x='10' y='{y}' font-size='12' fill='#c00'>⚠ {escape(w)}</text>")
        y += 18
    # Wide enough for the longest line of text too (about 6.6 px a character at 11-12 px).
    texts = [w for w in warnings or []] + ([" " * 110] if unknown_devs else [])
    width = max([x, 480] + [int(len(t) * 6.6) + 40 for t in texts])
    head = f"<text x='10' y='24' font-size='14' font-weight='bold'>{escape(title)}</text>" if title else ""
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{y + 10}' "
            f"viewBox='0 0 {width} {y + 10}' font-family='sans-serif'>{head}{''.join(parts)}</svg>")
