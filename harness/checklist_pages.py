"""Checklist pages of an 8-GPU host and of a rack, and Chromium to look at them (the headless-browser test,
``scripts/checklist-examples.py``).

The 8-GPU host's lines come from a real capture (``tests/fixtures/hosts/public/nvsmi-q-8xh100sxm-drv565.txt``:
8x H100 SXM on one HGX board) through the parser and :func:`bringup.hardware.platform.checks`; the capture is healthy,
so the sample changes the PARSED facts (never the file) to make findings: one GPU's link trained at x8 (a FAIL
through the real rule), two GPUs without persistence mode (WARN), and adds lines the health and acceptance
work writes (subject, value, limit, unit), with figures of the scale measured on the real H200 (pinned
host-to-device 55.4 GB/s against PCIe Gen5 x16's 63 GB/s per direction).
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from bringup.checks import Check, line

REPO = Path(__file__).resolve().parents[1]
EIGHT_GPU = REPO / "tests" / "fixtures" / "hosts" / "public" / "nvsmi-q-8xh100sxm-drv565.txt"
#: The GPU whose link the sample trains at x8, and the two without persistence mode.
NARROW, NO_PERSISTENCE = "00000000:AB:00.0", ("00000000:18:00.0", "00000000:DB:00.0")


def eight_gpu_facts() -> dict:
    from bringup.facts.nvidia_q import parse_nvidia_smi_q

    q = parse_nvidia_smi_q(EIGHT_GPU.read_text())
    for g in q["gpus"]:
        if g["bus_id"] == NARROW:
            g["pcie_width_current"] = 8
        if g["bus_id"] in NO_PERSISTENCE:
            g["persistence_mode"] = False
    smi = [{"index": i, "name": g["product_name"], "memory_total_mib": g["fb_total_mib"],
            "pci_address": g["pci_address"], "driver_version": q["driver_version"]} for i, g in enumerate(q["gpus"])]
    return {"nvidia.query": q, "nvidia.smi": smi}


def eight_gpu_checks() -> list[Check]:
    """The 8-GPU host's lines: platform and GPU lines from the capture, then health, acceptance, tuning."""
    from bringup.checklist.pages import gpu_checks
    from bringup.hardware.platform import checks

    facts = eight_gpu_facts()
    gpus = [g["bus_id"] for g in facts["nvidia.query"]["gpus"]]
    out = list(checks(facts, {"gpu_profile": "auto"})) + gpu_checks(facts, {"gpu_profile": "auto", "gpu_count": 8})
    out.append(line("health", "NVSwitch fabric", "FAIL", "Fabric State In Progress on 8 of 8 GPUs "
                    "(nvidia-fabricmanager not running): CUDA cannot start on this board",
                    "invoke provision --roles nvidia_driver (installs nvidia-fabricmanager of driver 565.57.01)"))
    for bus in gpus:
        gpu = f"GPU {bus}"
        h2d = 20.9 if bus == NARROW else 55.4
        out.append(line("acceptance", f"{gpu} host-to-device bandwidth", "FAIL" if bus == NARROW else "PASS",
                        f"{h2d} GB/s pinned, PCIe Gen5 x{8 if bus == NARROW else 16} allows 63.0 GB/s",
                        "reseat the card or move it to a full-width slot" if bus == NARROW else "",
                        subject=gpu, value=h2d, limit=63.0, unit="GB/s"))
        out.append(line("acceptance", "device-to-host bandwidth", "PASS", "55.2 GB/s pinned", subject=gpu,
                        value=55.2, limit=63.0, unit="GB/s"))
        d2d = 1100.0 if bus == gpus[3] else 1450.0  # copy GB/s; read plus write is twice that
        out.append(line("acceptance", "device memory copy", "WARN" if d2d < 1300 else "PASS",
                        f"{d2d:g} GB/s copy (read plus write {2 * d2d:g} GB/s) of H100 SXM's 3,350 GB/s",
                        "re-run invoke accept; if it holds, check clocks and ECC" if d2d < 1300 else "",
                        subject=gpu, value=2 * d2d, limit=3350.0, unit="GB/s"))
        out.append(line("health", "XID events since boot", "PASS", "none", subject=gpu))
    for n in range(4):
        port = f"mlx5_{n} port 1"
        rate = 200 if n == 2 else 400
        out.append(line("health", f"{port} state and rate", "FAIL" if n == 2 else "PASS",
                        f"ACTIVE, LinkUp, {rate} Gb/sec (4X NDR)" if rate == 400 else
                        "ACTIVE, LinkUp, 200 Gb/sec (4X HDR) of 400", "check the cable and the switch port's speed"
                        if n == 2 else "", subject=port, value=float(rate), limit=400.0, unit="Gb/s"))
    out.append(line("tuning", "role sysctl", "WARN", "14 pending change(s): net.core.rmem_max, net.core.wmem_max, "
                    "net.ipv4.tcp_slow_start_after_idle, vm.swappiness, kernel.numa_balancing…",
                    "invoke provision --roles sysctl"))
    out.append(line("latency", "latency acceptance (p95)", "PASS", "p95 3.1 ms at 400 QPS against the SLO of 5 ms",
                    value=3.1, limit=5.0, unit="ms"))
    return out


def eight_gpu_svg() -> str:
    from bringup.hardware.topology_svg import topology_svg

    return topology_svg(eight_gpu_facts(), title="dgx-h100-07")


def rack_pages() -> dict[str, list[Check]]:
    """A rack of five hosts: the 8-GPU host above, one whose NIC trained narrow, one with warnings only, two
    that pass."""
    good = [c for c in eight_gpu_checks() if c.status == "PASS"]
    nic = good + [line("platform", "NIC 0000:17:00.1 PCIe link", "FAIL", "x8 of x16, 16 of 16 GT/s",
                       "reseat the NIC or move it to a full-width slot", subject="NIC 0000:17:00.1"),
                  line("health", "NVSwitch fabric", "FAIL", "Fabric State In Progress on 8 of 8 GPUs",
                       "invoke provision --roles nvidia_driver (installs nvidia-fabricmanager)")]
    warn = good + [line("tuning", "role sysctl", "WARN", "3 pending change(s)", "invoke provision --roles sysctl")]
    return {"dgx-h100-01": good, "dgx-h100-02": warn, "dgx-h100-05": nic, "dgx-h100-07": eight_gpu_checks(),
            "dgx-h100-08": good}


def flat_page(host: str, checks: list[Check], svg: str) -> str:
    """The page as it was before (issue 31): one table row per line, in the lines' order, and the picture:
    what the new page's height is held against."""
    from html import escape

    rows = "".join(f"<tr><td>{c.status}</td><td>{escape(c.area)}</td><td>{escape(c.name)}</td>"
                   f"<td>{escape(c.seen)}</td><td>{escape(c.fix)}</td></tr>" for c in checks)
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>body{{font:14px/1.4 system-ui,sans-serif;"
            f"margin:24px}} table{{border-collapse:collapse;width:100%}} td{{border:1px solid #ccc;padding:4px 8px;"
            f"vertical-align:top}}</style></head><body><h1>{escape(host)}</h1>{svg}<table>{rows}</table></body></html>")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is installed by scripts/ci-setup.sh"
    return found


def _run(args: list[str], profile: Path, width: int, height: int) -> str:
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
                        f"--window-size={width},{height}", *args],
                       check=True, capture_output=True, text=True, timeout=180)
    return r.stdout


#: Appended to a copy of a page: measures the layout Chromium gave it and writes the figures into the DOM,
#: which --dump-dom then prints.  A word broken across lines is a word whose text has more than one box.
MEASURE = r"""
<script>
(function () {
  var lh = parseFloat(getComputedStyle(document.body).lineHeight);
  var doc = document.documentElement;
  var out = {line_height: lh, height: doc.scrollHeight, width: doc.scrollWidth,
             broken: [], wrapped: [], grid_rows: [], hidden_lines: 0, shown_lines: 0};
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  var node;
  while ((node = walker.nextNode())) {
    if (node.parentElement.closest("svg,script,style")) continue;
    var re = /[^\s\-\/]+[\-\/]?/g, m;
    while ((m = re.exec(node.data))) {
      var r = document.createRange();
      r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
      var boxes = Array.prototype.filter.call(r.getClientRects(), function (b) { return b.width > 0; });
      if (boxes.length > 1) out.broken.push(m[0]);
    }
  }
  // Labels that must stay on one line: an inline element on two lines has two boxes, an inline-block grows.
  document.querySelectorAll(".badge, .area, .subject, .figure, .on").forEach(function (e) {
    if (!e.checkVisibility()) return;
    var lh = parseFloat(getComputedStyle(e).lineHeight) || 20;
    if (e.getClientRects().length > 1 || e.getBoundingClientRect().height > 1.6 * lh) out.wrapped.push(e.textContent);
  });
  document.querySelectorAll("table.grid").forEach(function (t) { out.grid_rows.push(t.tBodies[0].rows.length); });
  document.querySelectorAll("details.passes tr[id]").forEach(function (tr) {
    if (tr.checkVisibility()) out.shown_lines++; else out.hidden_lines++;
  });
  var pre = document.createElement("pre"); pre.id = "measured"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def measure(page: Path, work: Path, width: int = 1400) -> dict:
    """Chromium's layout of ``page`` at ``width`` px: page height and width, words broken across lines,
    status/area/device labels that wrapped, rows of each device table, passing lines hidden and shown."""
    probe = work / f"measure-{page.name}"
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = _run(["--dump-dom", probe.as_uri()], work / "profile-measure", width, 900)
    m = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    return json.loads(html.unescape(m.group(1)))


def screenshot(page: Path, png: Path, work: Path, width: int = 1400, height: int | None = None) -> Path:
    """A PNG of the whole page at ``width`` px (the height measured first unless given)."""
    height = height or measure(page, work, width)["height"]
    _run([f"--screenshot={png}", page.as_uri()], work / "profile-shot", width, height)
    return png
