"""Checklist rules on the real fixture hosts, and the rendered report."""
from __future__ import annotations

import re

import pytest

from bringup.checklist.pages import Check, collect, gpu_checks, render_html, render_markdown, role_checks, verdict
from bringup.project import content_root
from bringup.engine.roles import load_roles
from bringup.hardware.topology import plan_topology
from bringup.hardware.topology_svg import topology_svg

from .fixture_hosts import h200_facts, l40s_pair_facts


IMAGE = "nvcr.io/nvidia/tritonserver:24.06-py3"
ROLES = load_roles(content_root())[1]


def software_checks(facts, vars):
    """The driver and Triton lines, as the nvidia_driver and triton roles contribute them."""
    return role_checks([ROLES["nvidia_driver"], ROLES["triton"]], "h", facts, vars)


def by_name(checks):
    return {c.name: c for c in checks}


def test_h200_gpu_and_driver_lines():
    facts = h200_facts()
    checks = by_name(gpu_checks(facts, {"gpu_profile": "h200", "gpu_count": 1}) +
                     software_checks(facts, {"gpu_profile": "h200", "triton_image": IMAGE}))
    assert checks["GPU count"].status == "PASS" and "0000:00:06.0" in checks["GPU count"].seen
    assert checks["driver sees the GPUs"].seen == "1 × NVIDIA H200"
    # 580 is newer than the guide's 535/550 and nothing pins a branch: kept, a pass (issue 21).
    newer = checks["driver branch newer than the guide's"]
    assert newer.status == "PASS", newer
    assert newer.seen == "580.159.04 (no pin: kept; the guide ran 535/550); Triton 24.06 (CUDA 12.5.0) needs R545+"
    assert not any(c.name.startswith("driver branch") and c is not newer for c in checks.values())
    assert checks["Triton container vs driver"].status == "PASS"  # 24.06 needs R545+


def test_missing_gpu_fails_on_a_gpu_profile():
    facts = h200_facts()
    c = by_name(gpu_checks(facts, {"gpu_profile": "l40s", "gpu_count": 2}))
    assert c["GPU count"].status == "FAIL" and "gpu_count=2" in c["GPU count"].seen
    assert c["GPU class matches gpu_profile l40s"].status == "WARN"
    no_gpu = dict(facts, **{"pci.devices": [d for d in facts["pci.devices"] if d["kind"] != "gpu"]})
    assert gpu_checks(no_gpu, {"gpu_profile": "l40s"})[0].status == "FAIL"
    assert gpu_checks(no_gpu, {"gpu_profile": "cpu"})[0].status == "PASS"


def test_l40s_pair_matches_its_profile():
    c = by_name(gpu_checks(l40s_pair_facts(), {"gpu_profile": "l40s", "gpu_count": 2}))
    assert c["GPU count"].status == "PASS" and c["GPU class matches gpu_profile l40s"].status == "PASS"


@pytest.mark.parametrize("driver,image,status", [
    ("535.161.08", "nvcr.io/nvidia/tritonserver:24.06-py3", "PASS"),   # data-center forward compatibility
    ("535.54.03", "nvcr.io/nvidia/tritonserver:24.06-py3", "FAIL"),    # below R535.86
    ("550.90.07", "nvcr.io/nvidia/tritonserver:24.10-py3", "FAIL"),    # 24.10 needs R560; R550 has no compat
    ("575.51.03", "nvcr.io/nvidia/tritonserver:25.06-py3", "PASS"),
    ("550.90.07", "nvcr.io/nvidia/tritonserver:23.01-py3", "WARN"),    # not in the matrix
])
def test_triton_container_against_driver(driver, image, status):
    facts = {"nvidia.smi": [{"driver_version": driver, "name": "NVIDIA L40S"}]}
    c = by_name(software_checks(facts, {"gpu_profile": "l40s", "triton_image": image}))
    assert c["Triton container vs driver"].status == status


def test_pinned_branch_mismatch_fails():
    facts = {"nvidia.smi": [{"driver_version": "535.161.08"}]}
    c = by_name(software_checks(facts, {"gpu_profile": "a10", "nvidia_driver_branch": 550}))
    assert c["driver branch pinned"].status == "FAIL" and "pins 550" in c["driver branch pinned"].seen
    assert "allow_downgrade" not in c["driver branch pinned"].fix  # 550 over 535 is an upgrade


@pytest.mark.parametrize("driver,vars,name,status", [
    # No pin: the loaded branch is judged against the Triton image's minimum only.
    ("580.159.04", {}, "driver branch newer than the guide's", "PASS"),
    ("550.90.07", {}, "driver branch in the guide's matrix", "PASS"),
    ("535.161.08", {}, "driver branch in the guide's matrix", "PASS"),     # R535 ≥ 535.86: forward compatibility
    ("535.54.03", {}, "driver branch for the Triton image", "FAIL"),       # below 24.06's minimum
    ("525.147.05", {}, "driver branch in the guide's matrix", "WARN"),     # runs 24.06, older than the guide
    ("550.90.07", {"triton_image": "nvcr.io/nvidia/tritonserver:24.10-py3"}, "driver branch for the Triton image",
     "FAIL"),
    ("580.159.04", {"triton_image": "nvcr.io/nvidia/tritonserver:23.01-py3"}, "driver branch newer than the guide's",
     "PASS"),                                                               # image unknown to the matrix
    # A pin: the loaded branch must be it.
    ("580.159.04", {"nvidia_driver_branch": 580}, "driver branch newer than the guide's", "PASS"),
    ("580.159.04", {"nvidia_driver_branch": "550"}, "driver branch pinned", "FAIL"),
    ("580.159.04", {"nvidia_driver_version": "550.144.03-*"}, "driver branch pinned", "FAIL"),
])
def test_driver_line_fails_only_below_the_image_or_against_a_pin(driver, vars, name, status):
    facts = {"nvidia.smi": [{"driver_version": driver, "name": "NVIDIA H200"}]}
    defaults = ROLES["nvidia_driver"].defaults
    lines = [c for c in role_checks([ROLES["nvidia_driver"]], "h", facts,
                                    {**defaults, "gpu_profile": "h200", "triton_image": IMAGE, **vars})]
    assert [(c.name, c.status) for c in lines] == [(name, status)], lines


def test_a_pin_below_the_loaded_driver_names_the_downgrade_variable():
    c = by_name(software_checks({"nvidia.smi": [{"driver_version": "580.159.04"}]},
                                {"gpu_profile": "h200", "nvidia_driver_branch": 550}))["driver branch pinned"]
    assert c.seen == "580.159.04, inventory pins 550"
    assert c.fix == ("invoke provision --roles nvidia_driver (branch 550) with nvidia_driver_allow_downgrade: true, "
                     "or unpin (nvidia_driver_branch: auto) to keep 580")


def test_reports_render_every_line():
    checks = collect(h200_facts(), {"gpu_profile": "h200", "gpu_count": 1})
    md = render_markdown("h200", checks)
    assert md.splitlines()[0] == f"# Bring-up checklist: h200 — {verdict(checks)}"
    assert len([l for l in md.splitlines() if re.match(r"\| (PASS|WARN|FAIL) \|", l)]) == len(checks)
    svg = topology_svg(h200_facts(), {0: "irq", 1: "irq", 4: "triton:0"}, ["GPU 0 and its NIC on different nodes"])
    page = render_html("h200", checks, svg)
    # Each line is on the page once, under its own anchor (a finding, a device table's cell, a passing line).
    assert sorted(int(n) for n in re.findall(r'id="line-(\d+)"', page)) == list(range(len(checks)))
    assert "numa_node -1, the firmware does not say" in svg and svg.count("class='cpu ") == 16
    assert svg.count("class='cpu cpu-irq'") == 2 and svg.count("class='cpu cpu-triton'") == 1
    assert "class='dev dev-gpu'" in svg and "⚠ GPU 0 and its NIC on different nodes" in svg


def test_two_node_topology_draws_two_nodes():
    svg = topology_svg(l40s_pair_facts())
    assert "NUMA node 0" in svg and "NUMA node 1" in svg and svg.count("class='cpu ") == 128


def test_check_refuses_unknown_status():
    with pytest.raises(ValueError):
        Check("y", "OK", "")


def _result(*resources):
    from bringup.engine.results import HostResult, ResourceResult
    return HostResult("h", resources=[ResourceResult(*r[:3], reason=r[3] if len(r) > 3 else None) for r in resources])


def test_a_role_not_applicable_here_is_not_a_pass():
    from bringup.checklist.pages import tuning_checks

    # The real H200 run: one exporter resource converged, the exporter itself skipped (no systemd as PID 1).
    c = by_name(tuning_checks(_result(("dcgm_exporter", "dir:/etc/dcgm-exporter", "ok"),
                                      ("dcgm_exporter", "dcgm-exporter", "skipped", "systemd is not PID 1"))))
    line = c["role dcgm_exporter"]
    assert line.status == "WARN", line
    assert "1 resource(s) converged, 1 not applied here: systemd is not PID 1" == line.seen
    assert by_name(tuning_checks(_result(("sysctl", "a", "ok"), ("sysctl", "b", "ok"))))["role sysctl"].status == "PASS"


def test_a_role_the_inventory_asks_nothing_of_passes_and_says_so():
    from bringup.checklist.pages import tuning_checks
    from bringup.resources.guard import Skip, Unused

    unused = Unused("trt_engines", "no engines declared: trt_engines is empty")
    c = by_name(tuning_checks(_result(("trt_engines", unused.id, "skipped", unused.reason))))["role trt_engines"]
    assert (c.status, c.seen) == ("PASS", "not asked for: no engines declared: trt_engines is empty")
    # The host lacking what the role needs stays a WARN, even beside an unused resource.
    gap = Skip("trt_engines", "no NVIDIA GPU")
    c = by_name(tuning_checks(_result(("trt_engines", unused.id, "skipped", unused.reason),
                                      ("trt_engines", gap.id, "skipped", gap.reason))))["role trt_engines"]
    assert c.status == "WARN" and "no NVIDIA GPU" in c.seen


@pytest.mark.reliability(item=4, fault='host names as checklist page names (../../x, a/b, .., .hidden, newline, empty)', variants=6)
def test_page_names_cannot_leave_the_output_folder():
    from bringup.checklist.pages import page_name
    from bringup.errors import InputError

    assert page_name("trt-l40s-01") == "trt-l40s-01"
    for bad in ("../../x", "a/b", "..", ".hidden", "x\ny", ""):
        with pytest.raises(InputError, match="cannot name a checklist page"):
            page_name(bad)


def _invoke(*args, cwd):
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(repo), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_offline_checklist_sees_the_role_defaults(tmp_path):
    """--facts: no connection; the driver role's defaults (no branch pinned) and the triton role's image, as
    provision merges them: the H200's loaded 580 passes, a pin of 550 (a downgrade) fails naming the variable."""
    import json

    import yaml

    (tmp_path / "h200.json").write_text(json.dumps({"host": "h200", "facts": h200_facts()}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "l40s", "gpu_count": 1}}}}))
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", cwd=tmp_path)
    md = (tmp_path / "pages" / "h200.md").read_text()
    assert "| PASS | software | driver branch newer than the guide's | 580.159.04 (no pin: kept; the guide ran " \
           "535/550); Triton 24.06 (CUDA 12.5.0) needs R545+ |" in md, md
    assert "| FAIL | software | driver" not in md, md
    assert "| WARN | tuning | roles converged | not checked: planned offline from h200.json |" in md
    assert "| PASS | software | Triton container vs driver |" in md  # the triton role's image default
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages",
                "--set", "nvidia_driver_branch=550", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr  # FAIL lines: exit 2
    md = (tmp_path / "pages" / "h200.md").read_text()
    assert "| FAIL | software | driver branch pinned | 580.159.04, inventory pins 550 | invoke provision --roles " \
           "nvidia_driver (branch 550) with nvidia_driver_allow_downgrade: true, or unpin " \
           "(nvidia_driver_branch: auto) to keep 580 |" in md, md


def test_checklist_lines_come_from_the_selected_roles(tmp_path):
    """Issue 9, defect 3: the engine names no role; each role contributes its own lines (``checks``).

    A project of its own with one made-up role: its line appears; the shipped roles' driver and Triton
    lines do not, because those roles are not in this project."""
    import json
    import shutil

    import yaml

    (tmp_path / "h200.json").write_text(json.dumps({"host": "h200", "facts": h200_facts()}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "cpu"}}}}))
    shutil.copytree(content_root() / "templates", tmp_path / "templates")
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "__init__.py").write_text('ORDER = ["fans"]\n')
    (tmp_path / "roles" / "fans.py").write_text(
        'from bringup.checks import line\n'
        'FACTS = ("nvidia.smi",)\n'
        'DEFAULTS = {"fans_min_gpus": 2}\n'
        'def resources(host):\n    return []\n'
        'def checks(host):\n'
        '    n = len(host.facts.get("nvidia.smi") or [])\n'
        '    ok = n >= host.vars["fans_min_gpus"]\n'
        '    return [line("gpu", "enough GPUs for the fans", "PASS" if ok else "WARN", f"{n} GPU(s)")]\n')
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", cwd=tmp_path)
    md = (tmp_path / "pages" / "h200.md").read_text()
    assert "| WARN | gpu | enough GPUs for the fans | 1 GPU(s) |" in md, r.stdout + r.stderr
    assert "driver branch" not in md and "Triton container" not in md
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", "--set", "fans_min_gpus=1",
                cwd=tmp_path)
    assert "| PASS | gpu | enough GPUs for the fans | 1 GPU(s) |" in (tmp_path / "pages" / "h200.md").read_text()


@pytest.mark.reliability(item=4, fault='a host named ../../escaped through invoke checklist',
                         checks=('exit code', 'nothing touched'))
def test_checklist_refuses_a_host_name_that_leaves_out(tmp_path):
    import yaml

    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"../../escaped": {
        "ansible_host": "127.0.0.1", "ansible_port": 9}}}}))
    (tmp_path / "f.json").write_text('{"facts": {}}')
    r = _invoke("checklist", "--host", "../../escaped", "--facts", "f.json", "--out", "a/b", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    # Refused where the inventory is read now (issue 40 item 1), before a page name is ever made of it.
    assert "host name '../../escaped' holds '/'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "escaped.md").exists() and not (tmp_path / "a").exists()


def test_offline_checklist_bad_facts_file_is_one_line(tmp_path):
    import yaml

    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {"ansible_host": "127.0.0.1", "ansible_port": 9}}}}))
    (tmp_path / "f.json").write_text("not json")
    r = _invoke("checklist", "--host", "h", "--facts", "f.json", cwd=tmp_path)
    assert r.returncode == 1 and "--facts f.json: not JSON" in r.stderr and "Traceback" not in r.stderr


def test_offline_topology_from_saved_facts(tmp_path):
    import json

    import yaml

    (tmp_path / "h200.json").write_text(json.dumps({"host": "h200", "facts": h200_facts()}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200": {"ansible_host": "127.0.0.1", "ansible_port": 9}}}}))
    r = _invoke("topology", "--host", "h200", "--facts", "h200.json", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["plan"]
    assert plan["gpus"][0]["cpus"] == [2, 3, 4, 5] and plan["nodes"][0]["irq_cpus"] == [0, 1], plan


@pytest.mark.reliability(item=25, fault="long checklist texts cut mid-word at a fixed length", checks=("report written",))
def test_long_texts_are_whole_in_html_and_json_and_cut_at_a_word_in_markdown():
    import json

    from bringup.checklist.pages import MD_CELL_MAX, line, render_html, render_json, render_markdown

    reasons = "; ".join(f"net.core.reason{i}: this kernel has no such key in its network namespace" for i in range(9))
    checks = [line("tuning", "role sysctl", "WARN", f"5 not applied here: {reasons}", "fix what the reason names")]
    md = render_markdown("h", checks)
    row = next(l for l in md.splitlines() if "role sysctl" in l)
    seen = row.split(" | ")[3]
    assert seen.endswith(" …") and len(seen) <= MD_CELL_MAX + 2, seen
    full, shown = f"5 not applied here: {reasons}", seen[:-2].rstrip()
    assert full.startswith(shown) and not full[len(shown)].isalnum(), seen  # cut between words, never inside one
    page = render_html("h", checks, "")
    assert "net.core.reason8: this kernel has no such key in its network namespace" in page
    doc = json.loads(render_json("h", checks))
    assert doc["verdict"] == "WARN" and doc["checks"][0]["seen"] == f"5 not applied here: {reasons}"


@pytest.mark.reliability(item=25, fault="the topology picture with triton_cpuset pinned (Triton drawn on no CPU)",
                         checks=("report written",))
def test_the_picture_shows_triton_where_the_inventory_pins_it():
    from bringup.checklist.pages import cpu_plan

    facts = h200_facts()
    roles, _ = cpu_plan(facts, {"triton_cpuset": "1", "gpu_profile": "cpu"})
    assert [c for c, r in roles.items() if r.startswith("triton")] == [1], roles
    svg = topology_svg(facts, roles)
    assert "class='cpu cpu-triton'" in svg and "CPU 1: triton:triton_cpuset" in svg
    assert "font-size='8'" not in svg  # CPU numbers readable
    roles0, _ = cpu_plan(facts, {"triton_cpuset": 0, "gpu_profile": "cpu"})  # CPU 0 is a pin too
    assert [c for c, r in roles0.items() if r.startswith("triton")] == [0], roles0


def _two_node(known=True):
    cpus = {0: [0, 1], 1: [2, 3]} if known else {0: [0, 1, 2, 3]}
    return {"numa_nodes": {str(n): c for n, c in cpus.items()}, "numa_known": known,
            "cpus": [{"cpu": c, "socket": n} for n, cs in cpus.items() for c in cs]}


@pytest.mark.parametrize("devices,known", [
    ([("nic", -1), ("other", -1, "0x010000")], True),  # issue 25: a NIC and a virtio-blk/SAS controller
    ([("gpu", -1), ("nic", -1)], True),        # two kinds, both -1
    ([("gpu", None), ("nic", -1)], True),      # numa_node absent (a saved file) beside -1
    ([("gpu", -1), ("gpu", -1)], False),       # numa=off: one node planned
    ([("nvme", 7), ("nic", -1)], True),        # a node with no CPUs drawn is unknown too
])
def test_every_device_of_an_unknown_node_is_drawn_and_counted(devices, known):
    # Issue 25: of a NIC and a storage controller with an unknown node, only the NIC was drawn and the caption
    # counted one, while the plan pinned both devices' IRQs and the checklist warned of both: the picture drew
    # gpu/nic/nvme only, the plan reads storage controllers (class 0x01) too.
    pci = [{"address": f"0000:0{i}:00.0", "kind": k, "class": (c or [None])[0]} | ({} if n is None else {"numa_node": n})
           for i, (k, n, *c) in enumerate(devices)]
    svg = topology_svg({"cpu.topology": _two_node(known), "pci.devices": pci})
    drawn = re.findall(r"class='dev dev-\w+' x='(\d+)' y='(\d+)'", svg)
    assert len(drawn) == len(set(drawn)) == 2, svg
    assert all(f"<title>{d['address']} " in svg for d in pci)
    assert "these 2 device(s)" in svg


@pytest.mark.parametrize("known", [True, False])
def test_the_caption_names_the_dashes_the_picture_draws(known):
    # Issue 25: on a host whose kernel knows no node (numa=off) the caption spoke of "dashed red" devices while
    # the devices were drawn plain and only the node's outline was dashed.
    pci = [{"address": "0000:01:00.0", "kind": "gpu", "numa_node": -1}]
    svg = topology_svg({"cpu.topology": _two_node(known), "pci.devices": pci})
    device = re.search(r"<rect class='dev dev-gpu'[^>]*>", svg).group(0)
    assert ("stroke='#c00'" in device) is known
    assert ("dashed red" in svg) is known
    assert ("the kernel knows no NUMA node" in svg) is not known
    assert "these 1 device(s)" in svg


def test_the_picture_draws_the_devices_the_plan_warns_of():
    # The H200 VM: a GPU, a virtio NIC and two virtio storage controllers, all numa_node -1; the plan names each.
    facts = h200_facts()
    svg = topology_svg(facts)
    warned = [w for w in plan_topology(facts, {}).warnings if w.kind == "numa_unknown"]
    assert len(warned) == 4 and f"these {len(warned)} device(s)" in svg
    assert sorted(re.findall(r"class='dev dev-(\w+)'", svg)) == ["gpu", "nic", "storage", "storage"]


def test_a_gpu_name_of_markdown_syntax_is_no_link_image_or_emphasis_in_the_page():
    from bringup.checklist.pages import line, render_markdown

    name = "[md](javascript:alert(4)) ![px](http://evil.example/p.png) *bold* _it_ `code` ~~gone~~ \\"
    md = render_markdown("h", [line("gpu", "GPU model", "PASS", f"8x {name}")])
    row = next(l for l in md.splitlines() if "GPU model" in l)
    assert row.split(" | ")[3] == ("8x [md\\](javascript:alert(4)) ![px\\](http://evil.example/p.png) \\*bold\\* "
                                   "\\_it\\_ \\`code\\` \\~\\~gone\\~\\~ \\\\")
    assert "](" not in row.replace("\\](", "")  # every "](" escaped: no link text closes
    # The terminal renders no Markdown: the console's table shows the text as the host wrote it (a review found
    # "ACPI \\_PXM" on every VM's console), "|" still kept from splitting the row.
    term = render_markdown("h", [line("gpu", "GPU model", "PASS", f"8x {name} a|b ACPI _PXM")], terminal=True)
    row = next(l for l in term.splitlines() if "GPU model" in l)
    assert row.split(" | ")[3] == f"8x {name} a\\|b ACPI _PXM"


@pytest.mark.parametrize("ch", ["\u202e", "\u200e", "\u200f", "\u202a", "\u202d", "\u2066", "\u2069", "\u200b",
                                "\ufeff"])
def test_unicode_format_characters_of_a_host_are_written_out_not_acting(ch):
    from bringup.checklist.pages import line, render_html, render_markdown

    k = line("gpu", "GPU model", "PASS", f"8x NVIDIA H200{ch}gpj.exe")
    shown = f"\\u{ord(ch):04x}"
    assert k.seen == f"8x NVIDIA H200{shown}gpj.exe"
    for page in (render_markdown("h", [k]), render_html("h", [k], "")):
        assert ch not in page and shown in page


@pytest.mark.reliability(item=40, fault="a host's NIC named with ESC/OSC sequences, a bidi override or a tag, drawn in "
                         "the checklist's topology picture", variants=3, checks=("data shown as data",))
@pytest.mark.parametrize("name", ["eth0\x1b[31mZZ\x1b]8;;http://evil\x07L", "eth0\u202egpj.exe\u2066", "eth0<b>\nx"])
def test_host_text_in_the_topology_picture_is_written_out_not_acting(name):
    # Before, the picture's warnings and device labels were XML-escaped only: the ESC (no XML character at all:
    # the SVG did not parse) and U+202E reached the HTML page as they were.
    from xml.dom.minidom import parseString

    pci = [{"address": "0000:03:00.0", "kind": "nic", "class": "0x020000", "numa_node": -1, "name": name}]
    svg = topology_svg({"cpu.topology": _two_node(True), "pci.devices": pci}, None,
                       [f"nic {name}: numa_node -1 (unknown)"], title=name)
    assert not any(c in svg for c in ("\x1b", "\x07", "\u202e", "\u2066")) and "<b>" not in svg, svg
    assert svg.count("eth0") >= 2   # the title and the warning, written out
    parseString(svg)   # well-formed: no character XML forbids
