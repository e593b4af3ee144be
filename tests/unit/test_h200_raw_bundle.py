"""The real H200 host planned offline from its own raw bundle (issue 21: "a rack vendor's captured outputs can be
planned before the servers arrive").

``tests/fixtures/hosts/h200-vm/facts-raw.json`` is what ``invoke facts --raw`` wrote on the device tool's H200 VM
(every fact's command output, the MIG list after ``nvidia-smi -q`` included); nothing in it was edited.  Through
``invoke checklist --facts`` and ``invoke topology --facts`` it goes through the same parsers as a live run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "hosts" / "h200-vm" / "facts-raw.json"


def invoke(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180)


def project(tmp_path: Path) -> Path:
    # Port 9 on 127.0.0.1: a run that tried to reach the host would say "unreachable", never plan.
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200-vm": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "auto"}}}}))
    return tmp_path


def test_the_bundle_is_the_real_hosts_whole_read():
    doc = json.loads(BUNDLE.read_text())
    assert doc["host"] == "h200-vm"
    assert all(entry["rc"] == 0 for name, entry in doc["raw"].items() if name.startswith("nvidia.")), doc["raw"]
    assert "--- nvidia-smi -L\nGPU 0: NVIDIA H200 (UUID: GPU-" in doc["raw"]["nvidia.query"]["output"]


def test_the_checklist_from_the_h200s_raw_bundle(tmp_path):
    r = invoke("checklist", "--host", "h200-vm", "--facts", str(BUNDLE), "--out", "pages", cwd=project(tmp_path))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    md = (tmp_path / "pages" / "h200-vm.md").read_text()
    assert "| PASS | gpu | GPU class matches gpu_profile h200 | NVIDIA H200 (gpu_profile auto) |" in md, md
    assert "| PASS | platform | GPU 00000000:00:06.0 MIG mode | False |" in md, md
    assert "MIG instances" not in md  # MIG off: no instance line
    assert "580.159.04 (no pin: kept" in md  # the loaded driver is kept, never downgraded
    assert "unreachable" not in r.stdout + r.stderr


def test_the_topology_from_the_h200s_raw_bundle(tmp_path):
    r = invoke("topology", "--host", "h200-vm", "--facts", str(BUNDLE), "--json", cwd=project(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout)["plan"]
    (gpu,) = plan["gpus"]
    assert gpu["pci_address"] == "0000:00:06.0" and gpu["cpus"] == [2, 3, 4, 5], plan
    # The NIC and the two virtio storage controllers have numa_node -1: each is placed, and its IRQs known.
    assert sorted(d["kind"] for d in plan["devices"]) == ["nic", "storage", "storage"], plan["devices"]
    assert all(d["irqs"] for d in plan["devices"]), plan["devices"]
