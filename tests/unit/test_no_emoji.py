"""Text from a host or the inventory is printed as it is (issue 21): rich read ``:ab:`` in a PCI bus id
``0000:ab:00.0`` as an emoji code and printed ``0000🆎00.0`` (a DGX H100 has a GPU at ``AB:00.0``:
``tests/fixtures/hosts/public/nvsmi-q-8xh100sxm-drv565.txt``)."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from bringup.engine.report import print_host, print_recap, print_rollout_stopped, progress_display
from bringup.engine.results import HostResult, ResourceResult

from .fixture_hosts import h200_facts

REPO = Path(__file__).resolve().parents[2]
BUS = "0000:ab:00.0"


def test_the_run_output_prints_a_bus_id_as_it_is():
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None)
    r = HostResult("gpu:ab:01", status="interrupted", message=f"interrupted while reading GPU {BUS}",
                   resources=[ResourceResult("nvidia_driver", f"gpu:{BUS}", "failed", error=f"GPU {BUS} :ab: lost")])
    print_host(r, console, check=True, diff=False)
    print_recap([r], console)
    print_rollout_stopped(f"GPU {BUS} fell off the bus", ["gpu:ab:02"], console)
    text = out.getvalue()
    assert "🆎" not in text, text
    assert f"GPU {BUS} :ab: lost" in text and "gpu:ab:01 : ok=0" in text and f"interrupted while reading GPU {BUS}" in text
    assert f"GPU {BUS} fell off the bus" in text and "not started: gpu:ab:02" in text, text


def test_the_live_progress_lines_print_host_text_as_it_is():
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system=None)
    with progress_display(console, ["gpu:ab:01"]) as progress:
        progress("gpu:ab:01", f"nvidia_driver: rebooting (GPU {BUS} [needs] a reset)")
        console.print("", end="")  # the live display refreshes on a print
    text = out.getvalue()
    assert "🆎" not in text and "gpu:ab:01" in text, text


def _invoke(*args, cwd):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _bus_ab(x):
    """The H200 VM's facts with its GPU moved to bus ``ab`` (sysfs form) / ``AB`` (nvidia-smi's form)."""
    if isinstance(x, str):
        return x.replace("00000000:00:06.0", "00000000:AB:00.0").replace("0000:00:06.0", BUS)
    if isinstance(x, list):
        return [_bus_ab(v) for v in x]
    if isinstance(x, dict):
        return {k: _bus_ab(v) for k, v in x.items()}
    return x


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "h.json").write_text(json.dumps({"host": "h", "facts": _bus_ab(h200_facts())}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {"ansible_host": "127.0.0.1",
                                                                           "ansible_port": 9}}}}))
    return tmp_path


# The terminal's console is made in bringup/tasks/context.py (console()), with emoji=False.


def test_invoke_topology_prints_the_bus_id_as_it_is(project):
    r = _invoke("topology", "--host", "h", "--facts", "h.json", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "🆎" not in r.stdout and BUS in r.stdout, r.stdout


def test_invoke_checklist_prints_the_bus_id_as_it_is(project):
    r = _invoke("checklist", "--host", "h", "--facts", "h.json", "--out", "pages", cwd=project)
    assert "Traceback" not in r.stderr, r.stderr
    assert "🆎" not in r.stdout and f"1 on the PCI bus: {BUS}" in r.stdout, r.stdout
    assert "GPU 00000000:AB:00.0 ECC" in r.stdout, r.stdout
