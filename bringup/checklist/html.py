"""The checklist's HTML pages: one host's page, and the rack's page across hosts.

What the person signing off a rack reads.  A host's page opens with the verdict, then what to fix (FAIL, then
WARN lines, each with its fix; the same check failing on several devices of the host is one finding), then
the per-device lines as tables of a row per device (a line's ``subject``: "GPU 00000000:18:00.0") and a column
per check (the line's name less its subject), each cell coloured by its status, then the host's passing lines
folded away and the topology picture.  A line with a measured ``value`` and its ``limit`` is drawn as a bar.
The rack's page lists the hosts failing first, each with its FAIL lines and their fixes, linked to its page.

The pages are self-contained (no external assets) and print whole (folded parts open for printing).  Every
text comes from hosts and inventories, so the templates escape everything (Jinja2 autoescape); only the
topology SVG, which :mod:`bringup.hardware.topology_svg` escapes itself, goes in as it is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import quote

from ..checks import Check, summary_counts, verdict, worst_first

__all__ = ["render_html", "render_group_html", "column_of", "kind_of", "findings", "device_tables"]

#: At most this many checks side by side in one device table; a kind with more is split at its areas.
MAX_COLUMNS = 8
#: A device kind (a subject's words without digits) as a heading says it, plural.
_KIND_NAMES = {"GPU": "GPUs", "NIC": "NICs", "port": "HCA ports"}
_BAR_W, _BAR_H = 120, 9


def column_of(k: Check) -> str:
    """The check a line makes, without the device it is about: "GPU 00000000:18:00.0 PCIe link width" ->
    "PCIe link width"; a name that does not hold its subject is the check as it is."""
    if not k.subject or k.subject not in k.name:
        return k.name
    rest = k.name.replace(k.subject, "", 1).strip(" :·-—")
    return rest or k.name


def kind_of(subject: str) -> str:
    """What kind of device a subject names: its words without digits ("GPU 00000000:18:00.0" -> "GPU",
    "mlx5_0 port 1" -> "port"); the subject itself when every word has a digit."""
    return " ".join(w for w in subject.split() if not any(ch.isdigit() for ch in w)) or subject


def _kind_name(kind: str, n: int = 2) -> str:
    return _KIND_NAMES.get(kind, kind) if n != 1 else kind


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


@dataclass
class Bar:
    """A measured value against its limit, for the SVG: the fill's and the limit mark's x, and the words."""

    fill: float
    mark: float
    text: str
    status: str


def bar_of(k: Check) -> Bar | None:
    """The bar of a line with a finite ``value`` >= 0 and ``limit`` > 0 (same unit); None otherwise."""
    v, lim = k.value, k.limit
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (v, lim)):
        return None
    if v < 0 or lim <= 0:
        return None
    scale = max(v, lim)
    unit = f" {k.unit}" if k.unit else ""
    # The limit's mark stays inside the picture (its stroke is 2 px wide).
    return Bar(round(_BAR_W * v / scale, 1), round(min(_BAR_W * lim / scale, _BAR_W - 1), 1),
               f"{_number(v)} of {_number(lim)}{unit} ({v / lim:.0%})", k.status)


@dataclass
class Item:
    """One line in a finding or a cell: its index in the host's lines (the anchor ``line-N``) and its bar."""

    index: int
    check: Check
    bar: Bar | None


@dataclass
class Finding:
    """One thing to fix: a host line, or one check with the same status and fix on several devices."""

    status: str
    area: str
    title: str
    fix: str
    items: list[Item] = field(default_factory=list)

    @property
    def subjects(self) -> list[str]:
        return [i.check.subject for i in self.items if i.check.subject]

    @property
    def seen_once(self) -> bool:
        """Whether every device saw the same (then it is said once, with the devices named)."""
        return len({i.check.seen for i in self.items}) == 1 and not any(i.bar for i in self.items)

    @property
    def on(self) -> str:
        """"on 3 GPUs", or "" for one line."""
        if len(self.items) < 2:
            return ""
        kinds = {kind_of(s) for s in self.subjects}
        return f"on {len(self.items)} " + (_kind_name(kinds.pop()) if len(kinds) == 1 else "devices")


def findings(checks: list[Check]) -> list[Finding]:
    """The FAIL, then WARN lines as findings: a device line joins the finding of the same status, area, check
    and fix (eight GPUs without persistence mode are one finding naming eight GPUs)."""
    out: list[Finding] = []
    joined: dict[tuple, Finding] = {}
    index = {id(k): i for i, k in enumerate(checks)}
    for k in worst_first(checks):
        if k.status == "PASS":
            break
        item = Item(index[id(k)], k, bar_of(k))
        key = (k.status, k.area, column_of(k), k.fix)
        if k.subject and key in joined:
            joined[key].items.append(item)
            continue
        f = Finding(k.status, k.area, column_of(k) if k.subject else k.name, k.fix, [item])
        out.append(f)
        if k.subject:
            joined[key] = f
    return out


@dataclass
class Cell:
    status: str
    items: list[Item]

    @property
    def title(self) -> str:
        return "\n".join(f"{i.check.name}: {i.check.status}, {i.check.seen}"
                         + (f"\nfix: {i.check.fix}" if i.check.fix else "") for i in self.items)


@dataclass
class Row:
    subject: str
    status: str
    cells: list[Cell | None]


@dataclass
class DeviceTable:
    kind: str
    count: int
    columns: list[str]
    areas: list[tuple[str, int]]  # each area over how many columns, in column order
    rows: list[Row]

    @property
    def title(self) -> str:
        areas = ", ".join(a for a, _ in self.areas)
        return f"{self.count} {_kind_name(self.kind, self.count)} · {areas}"


def device_tables(checks: list[Check]) -> list[DeviceTable]:
    """The lines with a subject as tables: one per kind of device (GPU, NIC, HCA port), a row per device in
    the order the lines name them, a column per check grouped by area; a kind with more than
    :data:`MAX_COLUMNS` checks is split between areas (an area wider than that, into parts)."""
    by_kind: dict[str, list[tuple[int, Check]]] = {}
    for i, k in enumerate(checks):
        if k.subject:
            by_kind.setdefault(kind_of(k.subject), []).append((i, k))
    out = []
    for kind, lines in by_kind.items():
        columns: dict[str, list[str]] = {}  # area -> its checks, in order of first appearance
        for _, k in lines:
            cols = columns.setdefault(k.area, [])
            if column_of(k) not in cols:
                cols.append(column_of(k))
        subjects = list(dict.fromkeys(k.subject for _, k in lines))
        for part in _parts([(a, c) for a, cols in columns.items() for c in cols]):
            out.append(_table(kind, subjects, part, lines))
    return out


def _parts(columns: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Columns (area, check) packed into tables of at most MAX_COLUMNS, breaking between areas."""
    parts: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    for area in dict.fromkeys(a for a, _ in columns):
        cols = [c for c in columns if c[0] == area]
        if current and len(current) + len(cols) > MAX_COLUMNS:
            parts.append(current)
            current = []
        while len(cols) > MAX_COLUMNS:
            parts.append(cols[:MAX_COLUMNS])
            cols = cols[MAX_COLUMNS:]
        current += cols
    return parts + ([current] if current else [])


def _table(kind: str, subjects: list[str], part: list[tuple[str, str]], lines: list[tuple[int, Check]]) -> DeviceTable:
    where = {col: n for n, col in enumerate(part)}
    rows = {s: [None] * len(part) for s in subjects}
    for i, k in lines:
        n = where.get((k.area, column_of(k)))
        if n is None:
            continue
        cell = rows[k.subject][n]
        item = Item(i, k, bar_of(k))
        if cell is None:
            rows[k.subject][n] = Cell(k.status, [item])
        else:  # two lines of one check on one device: both shown, the cell as bad as the worse
            cell.items.append(item)
            cell.status = verdict(i.check for i in cell.items)
    areas: list[tuple[str, int]] = []
    for a, _ in part:
        areas[-1:] = [(a, areas[-1][1] + 1)] if areas and areas[-1][0] == a else areas[-1:] + [(a, 1)]
    kept = [s for s in subjects if any(rows[s])]
    return DeviceTable(kind, len(kept), [c for _, c in part], areas,
                       [Row(s, verdict(i.check for c in rows[s] if c for i in c.items), rows[s]) for s in kept])


def _sentence(checks: list[Check]) -> str:
    c = summary_counts(checks)
    if c["FAIL"]:
        return (f"Not ready for service: {c['FAIL']} check(s) fail. Fix them (below, each with its fix), "
                "then run the checklist again.")
    if c["WARN"]:
        return f"No check fails; {c['WARN']} warning(s) to read before signing off."
    return "Every check passes."


@lru_cache(maxsize=1)
def _env():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("bringup", "data"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.globals.update(bar_w=_BAR_W, bar_h=_BAR_H)
    return env


def render_html(host: str, checks: list[Check], svg: str) -> str:
    """One host's page: verdict, findings with fixes, device tables, passing lines folded, topology."""
    from markupsafe import Markup

    tables = device_tables(checks)
    kinds: dict[str, int] = {}
    for t in tables:
        kinds[t.kind] = max(kinds.get(t.kind, 0), t.count)
    passes = [(i, k) for i, k in enumerate(checks) if k.status == "PASS" and not k.subject]
    return _env().get_template("checklist_host.html.j2").render(
        host=host, verdict=verdict(checks), counts=summary_counts(checks), sentence=_sentence(checks),
        devices=", ".join(f"{n} {_kind_name(kind, n)}" for kind, n in kinds.items()),
        findings=findings(checks), tables=tables, passes=[(i, k, bar_of(k)) for i, k in passes],
        svg=Markup(svg)) + "\n"


@dataclass
class HostSummary:
    name: str
    href: str
    verdict: str
    counts: dict[str, int]
    fails: list[Finding]
    warns: list[Finding]


def render_group_html(group: str, pages: dict[str, list[Check]]) -> str:
    """The rack's page: which hosts pass and which fail and why (their FAIL lines with fixes, linked to each
    host's page), failing hosts first, and the checks that fail on several hosts."""
    rank = {"FAIL": 0, "WARN": 1, "PASS": 2}
    hosts = []
    for name, checks in pages.items():
        found = findings(checks)
        hosts.append(HostSummary(name, quote(name, safe="") + ".html", verdict(checks), summary_counts(checks),
                                 [f for f in found if f.status == "FAIL"], [f for f in found if f.status == "WARN"]))
    hosts.sort(key=lambda h: (rank[h.verdict], -h.counts["FAIL"], h.name))
    failing: dict[str, list[HostSummary]] = {}
    for h in hosts:
        for title in dict.fromkeys(f.title for f in h.fails):
            failing.setdefault(title, []).append(h)
    common = sorted(((t, hs) for t, hs in failing.items() if len(hs) > 1), key=lambda x: (-len(x[1]), x[0]))
    by_verdict = {s: sum(h.verdict == s for h in hosts) for s in rank}
    worst = next((s for s in rank if by_verdict[s]), "PASS")
    return _env().get_template("checklist_rack.html.j2").render(
        group=group, hosts=hosts, by_verdict=by_verdict, verdict=worst, common=common) + "\n"
