"""The checklist's HTML pages (bringup/checklist/html.py): what comes first, the per-device tables, the folded
passes, the bars of measured values, the rack page, and hostile text in every field.

The 8-GPU host is the real capture ``nvsmi-q-8xh100sxm-drv565.txt`` through the parser and the platform rules,
with findings made in its parsed facts (``harness/checklist_pages.py`` says which)."""
from __future__ import annotations

import math
import re
from html.parser import HTMLParser

import pytest

from bringup.checklist.pages import render_group_html, render_html, render_markdown
from bringup.checklist.html import MAX_COLUMNS, column_of, device_tables, findings, kind_of
from bringup.checks import line
from harness.checklist_pages import NARROW, NO_PERSISTENCE, eight_gpu_checks, rack_pages

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent=None):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag=None, cls=None):
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and (cls is None or cls in c.classes):
                    yield c
                yield from c.all(tag, cls)

    def one(self, tag=None, cls=None):
        found = list(self.all(tag, cls))
        assert len(found) == 1, (tag, cls, len(found))
        return found[0]


class Tree(HTMLParser):
    """The page as the browser's parser sees it: elements, their attributes, their text."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.root = self.at = Node("#root", {})
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.at)
        self.at.children.append(node)
        if tag not in VOID and tag not in ("rect", "line"):
            self.at = node

    def handle_startendtag(self, tag, attrs):
        self.at.children.append(Node(tag, attrs, self.at))

    def handle_endtag(self, tag):
        node = self.at
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.at = node.parent

    def handle_data(self, data):
        self.at.children.append(data)


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def host():
    checks = eight_gpu_checks()
    return checks, Tree(render_html("dgx-h100-07", checks, "<svg class='topo'><text>t</text></svg>")).root


def test_the_verdict_comes_first_then_fail_then_warn_findings_each_with_its_fix(host):
    checks, page = host
    body = page.one("body")
    first = next(c for c in body.children if isinstance(c, Node))
    assert first.tag == "header" and first.classes == ["verdict", "FAIL"]
    assert words(first.text()).startswith("FAIL Bring-up checklist: dgx-h100-07 4 fail · 5 warn · 83 pass · 8 GPUs")
    sections = [s for s in body.all("section")]
    assert sections[0].attrs["id"] == "findings"  # before the device tables, the passes and the picture
    cards = list(sections[0].all("li", "finding"))
    statuses = [c.classes[1] for c in cards]
    assert statuses == sorted(statuses, key=["FAIL", "WARN"].index) and statuses.count("FAIL") == 4
    width = next(c for c in cards if "PCIe link width" in c.one("span", "title").text())
    assert words(width.one("span", "title").text()) == f"GPU {NARROW} · PCIe link width"
    fix = "fix reseat the card or move it to a full-width slot; check the riser"
    assert words(width.one("div", "fix").text()) == fix
    # Every FAIL and WARN line has its fix on the page.
    fixes = {words(d.text())[4:] for d in sections[0].all("div", "fix")}
    assert {c.fix for c in checks if c.status != "PASS"} == fixes


def test_one_check_warning_on_two_gpus_is_one_finding_naming_both(host):
    checks, page = host
    (card,) = [c for c in page.all("li", "finding") if "persistence mode" in c.one("span", "title").text()]
    assert card.one("span", "on").text() == "on 2 GPUs"
    assert [s.text() for s in card.all("span", "subject")] == [f"GPU {b}" for b in NO_PERSISTENCE]
    # Each line keeps its own anchor (the rack page links to it).
    ids = {card.attrs["id"]} | {s.attrs["id"] for s in card.all("span") if "id" in s.attrs}
    want = {f"line-{i}" for i, c in enumerate(checks) if c.name.endswith("persistence mode") and c.status == "WARN"}
    assert ids == want


def test_per_gpu_lines_are_one_table_of_a_row_per_gpu_and_a_column_per_check(host):
    checks, page = host
    tables = list(page.all("table", "grid"))
    platform = tables[0]
    heads = [th.text() for th in platform.one("thead").all("th")]
    assert heads == ["GPU", "BAR1 covers GPU memory", "PCIe link width", "PCIe generation", "persistence mode",
                     "ECC", "MIG mode"]
    rows = list(platform.one("tbody").all("tr"))
    gpus = [c.subject for c in checks if c.name.endswith(" ECC")]
    assert [r.one("th").text() for r in rows] == gpus and len(rows) == 8
    # 48 per-GPU platform lines, 8 rows: every line in its cell, coloured by its status, with what was seen.
    assert sum(len(list(r.all("td"))) for r in rows) == 48
    narrow = next(r for r in rows if r.one("th").text() == f"GPU {NARROW}")
    cell = list(narrow.all("td"))[heads.index("PCIe link width") - 1]
    assert cell.classes == ["cell", "FAIL"] and words(cell.text()) == "FAIL x8 of x16"
    assert "fix: reseat the card" in cell.attrs["title"]
    assert narrow.one("th").classes == ["dev", "FAIL"]
    # The badge links to the finding.
    i = next(i for i, c in enumerate(checks) if c.name == f"GPU {NARROW} PCIe link width")
    assert cell.one("a", "badge").attrs["href"] == f"#line-{i}"
    # The acceptance and health lines of the GPUs: a second table with a column per check, grouped by area.
    heads = [th.text() for th in tables[1].one("thead").all("th")]
    assert heads == ["acceptance", "health", "GPU", "host-to-device bandwidth", "device-to-host bandwidth",
                     "device memory copy", "XID events since boot"]
    assert [r.one("th").text() for r in tables[2].one("tbody").all("tr")] == [f"mlx5_{n} port 1" for n in range(4)]


def test_device_tables_split_between_areas_past_the_column_limit():
    lines = [line(area, f"check {area} {n}", "PASS", "ok", subject="GPU 1") for area in ("a", "b")
             for n in range(MAX_COLUMNS - 2)]
    lines += [line("c", f"check c {n}", "PASS", "ok", subject="GPU 1") for n in range(MAX_COLUMNS + 3)]
    tables = device_tables(lines)
    assert [t.areas for t in tables] == [[("a", MAX_COLUMNS - 2)], [("b", MAX_COLUMNS - 2)], [("c", MAX_COLUMNS)],
                                         [("c", 3)]]
    few = device_tables([line("a", "x", "PASS", "", subject="GPU 1"), line("b", "y", "PASS", "", subject="GPU 1")])
    assert [t.areas for t in few] == [[("a", 1), ("b", 1)]]


def test_the_hosts_passing_lines_are_folded_and_all_there(host):
    checks, page = host
    details = page.one("details", "passes")
    assert "open" not in details.attrs
    shown = [words(tr.all("td").__next__().text()) for tr in details.one("tbody").all("tr")]
    host_passes = [c for c in checks if c.status == "PASS" and not c.subject]
    assert shown == ["PASS"] * len(host_passes)
    assert [list(tr.all("td"))[2].text() for tr in details.one("tbody").all("tr")] == [c.name for c in host_passes]
    assert words(details.one("summary").text()) == f"{len(host_passes)} passing line(s): show"
    # Printed, the folded lines are printed too.
    assert "details::details-content{content-visibility:visible" in page.one("style").text()


def test_a_measured_value_is_drawn_against_its_limit(host):
    checks, page = host
    i = next(i for i, c in enumerate(checks) if c.subject == f"GPU {NARROW}" and "host-to-device" in c.name)
    card = next(c for c in page.all("li", "finding") if c.attrs["id"] == f"line-{i}")
    svg = card.one("svg", "bar")
    fill = [r for r in svg.all("rect")][1]
    assert float(fill.attrs["width"]) == pytest.approx(120 * 20.9 / 63.0, abs=0.1) and fill.attrs["fill"] == "#cf222e"
    assert svg.one("line").attrs["x1"] == "119"  # the limit at the right end
    assert card.one("span", "figure").text() == "20.9 of 63 GB/s (33%)"
    # Passing GPUs' bars are in the table's cells.
    # GPUs' three, HCA ports', the latency line's; and the three findings with a value
    assert sum(1 for _ in page.all("svg", "bar")) == 8 * 3 + 4 + 1 + 3


@pytest.mark.parametrize("value,limit,fill,mark", [
    (55.4, 63.0, 105.5, 119), (2089.0, 2089.0, 120.0, 119), (80.0, 40.0, 120.0, 60.0), (0.0, 5.0, 0.0, 119)])
def test_bar_geometry(value, limit, fill, mark):
    page = render_html("h", [line("acceptance", "x", "PASS", "seen", value=value, limit=limit, unit="u")], "")
    svg = Tree(page).root.one("svg", "bar")
    assert float(list(svg.all("rect"))[1].attrs["width"]) == pytest.approx(fill, abs=0.1)
    assert float(svg.one("line").attrs["x1"]) == pytest.approx(mark, abs=0.1)


@pytest.mark.parametrize("value,limit", [(math.nan, 63.0), (55.0, math.inf), (55.0, 0.0), (-1.0, 63.0), (55.0, None),
                                         (True, 63.0)])
def test_a_value_that_cannot_be_drawn_is_written_not_drawn(value, limit):
    page = render_html("h", [line("acceptance", "x", "WARN", "seen it", "fix it", value=value, limit=limit)], "")
    assert "<svg class=\"bar\"" not in page and "seen it" in page and "fix it" in page


HOSTILE = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>&amp;"


@pytest.mark.parametrize("field", ["host", "area", "name", "seen", "fix", "subject", "unit"])
def test_hostile_text_in_any_field_stays_text(field):
    k = {"area": "health", "name": "GPU 1 ECC", "seen": "seen", "fix": "fix", "subject": "GPU 1", "unit": "GB/s"}
    k[field if field != "host" else "seen"] = HOSTILE if field != "host" else "seen"
    if field == "subject":
        k["name"] = f"{HOSTILE} ECC"
    checks = [line(k["area"], k["name"], "FAIL", k["seen"], k["fix"], subject=k["subject"], value=1.0, limit=2.0,
                   unit=k["unit"]),
              line(k["area"], k["name"].replace("ECC", "other"), "PASS", k["seen"], subject=k["subject"]),
              line(k["area"], "host line", "PASS", k["seen"], value=1.0, limit=2.0, unit=k["unit"])]
    host = HOSTILE if field == "host" else "h"
    rack = render_group_html(HOSTILE if field == "host" else "g", {host: checks, "other": checks[1:]})
    for page in (render_html(host, checks, ""), rack):
        tree = Tree(page).root
        assert not list(tree.all("script")) and not list(tree.all("img")), page
        assert not any(k.startswith("on") for n in tree.all() for k in n.attrs), page
        assert "<script>" not in page
        if page is not rack or field not in ("area", "unit"):  # the rack page names no area and no unit
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
            assert "&amp;amp;" in page  # an entity in the text is shown as typed, not decoded
        hrefs = [a.attrs["href"] for a in tree.all("a")]
        assert all(not h.lower().startswith(("javascript:", "http", "//")) for h in hrefs), hrefs


def test_the_pages_need_nothing_from_outside():
    pages = [render_html("dgx-h100-07", eight_gpu_checks(), ""), render_group_html("rack", rack_pages())]
    for page in pages:
        tree = Tree(page).root
        assert not [n for n in tree.all() if "src" in n.attrs or n.tag in ("link", "script", "iframe", "object")]
        assert "url(" not in page and "@import" not in page and "http" not in page


def test_the_rack_page_lists_failing_hosts_first_with_why_and_fixes():
    pages = rack_pages()
    tree = Tree(render_group_html("rack-b12", pages)).root
    rows = list(tree.one("table", "hosts").one("tbody").all("tr"))
    assert [r.classes[0] for r in rows] == ["FAIL", "FAIL", "WARN", "PASS", "PASS"]
    assert [r.one("th").text() for r in rows] == ["dgx-h100-07", "dgx-h100-05", "dgx-h100-02", "dgx-h100-01",
                                                  "dgx-h100-08"]  # more FAIL lines first, then by name
    head = "FAIL Rack checklist: rack-b12 5 host(s): 2 fail · 1 warn · 2 pass"
    assert words(tree.one("header").text()).startswith(head)
    why = rows[1].one("td", "why")
    checks = pages["dgx-h100-05"]
    for f in [c for c in checks if c.status == "FAIL"]:
        assert f.fix in why.text() and f.seen in why.text()
        i = checks.index(f)
        assert f"dgx-h100-05.html#line-{i}" in [a.attrs["href"] for a in why.all("a")]
    # The link lands on the finding of that line in the host's page.
    host_page = render_html("dgx-h100-05", checks, "")
    i = next(i for i, c in enumerate(checks) if c.status == "FAIL")
    assert f'<li class="finding FAIL" id="line-{i}">' in host_page
    assert words(rows[2].one("td", "why").text()) == "WARN role sysctl"
    assert words(rows[3].one("td", "why").text()) == "all 83 checks pass"
    assert rows[3].one("th").one("a").attrs["href"] == "dgx-h100-01.html"
    common = tree.one("ul", "common")
    assert words(common.text()) == "NVSwitch fabric on 2 hosts: dgx-h100-07, dgx-h100-05"


def test_column_and_kind_of_a_subject():
    gpu = line("platform", "GPU 00000000:18:00.0 PCIe link width", "PASS", "x16", subject="GPU 00000000:18:00.0")
    assert column_of(gpu) == "PCIe link width" and kind_of(gpu.subject) == "GPU"
    port = line("health", "port state", "PASS", "ACTIVE", subject="mlx5_0 port 1")
    assert column_of(port) == "port state" and kind_of(port.subject) == "port"
    assert kind_of("0000:17:00.0") == "0000:17:00.0" and column_of(line("a", "C-states", "PASS", "")) == "C-states"


def test_findings_join_devices_only_on_the_same_check_status_and_fix():
    a = [line("platform", f"GPU {n} ECC", "WARN", "False", "turn it on", subject=f"GPU {n}") for n in (1, 2)]
    b = line("platform", "GPU 3 ECC", "WARN", "False", "another fix", subject="GPU 3")
    c = line("platform", "GPU 4 ECC", "FAIL", "False", "turn it on", subject="GPU 4")
    host = [line("platform", "C-states", "WARN", "x", "turn it on"), line("platform", "C-states", "WARN", "y", "z")]
    found = findings([*a, b, c, *host])
    assert [(f.status, f.title, [i.index for i in f.items]) for f in found] == [
        ("FAIL", "ECC", [3]), ("WARN", "ECC", [0, 1]), ("WARN", "ECC", [2]), ("WARN", "C-states", [4]),
        ("WARN", "C-states", [5])]


def test_markdown_lists_fail_and_warn_first_and_keeps_every_line():
    checks = eight_gpu_checks()
    md = render_markdown("dgx-h100-07", checks)
    rows = [l for l in md.splitlines() if re.match(r"\| (PASS|WARN|FAIL) \|", l)]
    statuses = [r.split(" | ")[0][2:] for r in rows]
    assert statuses == ["FAIL"] * 4 + ["WARN"] * 5 + ["PASS"] * 83
    # Each line's name carries its device where the name does not say it already.
    named = [c.name if not c.subject or c.subject in c.name else f"{c.subject} {c.name}" for c in checks]
    assert sorted(rows) == sorted(f"| {c.status} | {c.area} | {n} | {c.seen} | {c.fix} |" for c, n in zip(checks, named))


def test_a_page_without_a_topology_drawing_has_no_empty_topology_heading():
    # Issue 41: the acceptance page (bringup/tasks/accept.py renders it with no drawing) showed "Topology" and nothing.
    lines = [line("acceptance", "GPU memory bandwidth", "PASS", "seen", value=1.0, limit=1.0, unit="TB/s")]
    page = render_html("h200-vm", lines, "")
    assert "<h2>Topology</h2>" not in page and 'class="topology"' not in page
    drawn = render_html("h200-vm", lines, "<svg class='topo'><text>t</text></svg>")
    assert "<h2>Topology</h2>" in drawn and "<svg class='topo'>" in drawn
