"""A real H100 planned offline from its own raw bundle: what the device tool lent on 2026-12-07 when an H200 was asked
for (one H100 80GB HBM3 SXM, PCIe Gen5 x16, driver 580.159.04 from outside the package manager, in a KVM
pass-through VM, no systemd, no DCGM, no InfiniBand).

``tests/fixtures/hosts/h100-vm/facts-raw-2026-12-07.json`` is what ``invoke facts --raw`` wrote there through
``ansible_connection: local`` (``scripts/h200-health.sh``, which names the host ``h200-vm`` whatever its GPU);
nothing in it was edited.  ``invoke checklist --facts`` reads it through the same parsers as a live run: the live
checklist that day (``docs/examples/h100-vm-health/checklist.txt``) and this offline one must say the same of its GPU.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "hosts" / "h100-vm" / "facts-raw-2026-12-07.json"


def checklist(tmp_path: Path, bundle: Path) -> subprocess.CompletedProcess:
    # Port 9 on 127.0.0.1: a run that tried to reach the host would say "unreachable", never plan.
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200-vm": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "auto"}}}}))
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "checklist", "--host", "h200-vm",
                           "--inventory", "hosts", "--facts", str(bundle), "--out", "pages"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "220"})


def test_the_real_h100_is_read_as_an_h100_with_every_health_line_passing(tmp_path):
    r = checklist(tmp_path, BUNDLE)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    page = (tmp_path / "pages" / "h200-vm.md").read_text() if (tmp_path / "pages" / "h200-vm.md").exists() else r.stdout
    for line in ("| PASS | gpu | GPU count | 1 on the PCI bus: 0000:00:06.0 |",
                 "| PASS | gpu | driver sees the GPUs | 1 × NVIDIA H100 80GB HBM3 |",
                 "| PASS | gpu | GPU class matches gpu_profile h100 | NVIDIA H100 80GB HBM3 (gpu_profile auto) |",
                 "| PASS | health | GPU 00000000:00:06.0 ECC errors | since boot 0 uncorrectable, 0 corrected; lifetime 0 "
                 "uncorrectable |",
                 "| PASS | health | GPU 00000000:00:06.0 memory repair | remapped rows: 0 uncorrectable, 0 correctable |",
                 "| PASS | platform | GPU 00000000:00:06.0 PCIe generation | Gen5 of Gen5 |",
                 "| PASS | health | Xid events | none since boot (dmesg, the whole boot) |"):
        assert line in page, page
    assert "| FAIL |" not in page and "fabric" not in page.lower(), page
    # The same lines as the live run that day on the host itself.
    live = (REPO / "docs" / "examples" / "h100-vm-health" / "checklist.txt").read_text()
    for line in page.splitlines():
        if line.startswith("| PASS | gpu |") or line.startswith("| PASS | health | GPU"):
            assert line in live, line


def test_the_real_h100s_query_cut_short_is_named_never_passed(tmp_path):
    """The bundle's nvidia-smi -q cut in the middle of its GPU section: its health lines are not checked, never PASS."""
    raw = json.loads(BUNDLE.read_text())
    q = raw["raw"]["nvidia.query"]["output"]
    cut = q.index("Remapped Rows")
    raw["raw"]["nvidia.query"]["output"] = q[:cut]
    damaged = tmp_path / "cut.json"
    damaged.write_text(json.dumps(raw))
    r = checklist(tmp_path, damaged)
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    assert "| PASS | health | GPU 00000000:00:06.0 memory repair" not in out, out
    assert "| FAIL | facts | fact nvidia.query | nvidia-smi -q: the section of GPU 00000000:00:06.0 ends before" in out, out
    assert "| WARN | health | GPU health (ECC, memory repair, clocks, temperature, fabric) | not checked" in out, out
