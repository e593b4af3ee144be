"""Issue 34 item 8 on a sandbox host: a hung ``nvidia-smi`` that prints without end.

The stand-in ``/usr/local/bin/nvidia-smi`` prints one ``nvidia-smi -L`` line forever.  Before, the cap on a
read lane ended every fact of that lane: ``facts`` lost ``system.container``, ``system.cmdline`` and
``system.sysctl`` without a word (exit 0), and ``plan`` moved the machine's IRQs from inside this container.
Now each nvidia-smi fact is cut at its own bound and named, the others are read, and the container rule holds.
"""
from __future__ import annotations

import json

import pytest

from harness import SANDBOX_VARS, write_inventory

from .helpers import invoke

pytestmark = pytest.mark.integration

SMI = "/usr/local/bin/nvidia-smi"
LINE = "GPU 0: NVIDIA H200 (UUID: GPU-flood-34-8)"


@pytest.fixture
def flooding(sandbox_host):
    sandbox_host.exec(["sh", "-c", f"cat > {SMI} && chmod 755 {SMI}"], input=f"#!/bin/sh\nexec yes '{LINE}'\n")
    try:
        yield sandbox_host
    finally:
        sandbox_host.exec(["rm", "-f", SMI])


def _left(host) -> str:
    """What the reads left on the host: a stand-in still printing, a lane's folder."""
    procs = host.exec(["sh", "-c", f"pgrep -af 'yes {LINE}' || true"]).stdout.strip()
    dirs = host.exec(["sh", "-c", "ls -d /tmp/bringup-read.* 2>/dev/null || true"]).stdout.strip()
    return procs + dirs


@pytest.mark.reliability(item=34, fault="a hung nvidia-smi streaming without end on a sandbox host (facts, plan)",
                         checks=("machine left alone", "no leftovers", "no hang"))
def test_a_streaming_nvidia_smi_fails_alone_and_the_container_rule_holds(flooding, tmp_path):
    host = flooding
    write_inventory(tmp_path / "hosts", [host], extra_vars=SANDBOX_VARS)
    r = invoke("facts", "--host", host.name, "--inventory", "hosts", cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    doc = json.loads(r.stdout)
    facts, errors = doc["facts"], doc.get("errors", {})
    cut = sorted(n for n, e in errors.items() if e.startswith("output cut at 16 MiB"))
    assert "nvidia.smi" in cut and all(n.startswith("nvidia.") for n in cut), errors
    assert not [n for n in errors if not n.startswith("nvidia.")], errors
    assert facts["system.container"] and "docker" in facts["system.container"]
    assert facts["system.cmdline"] is not None and facts["system.sysctl"]
    assert _left(host) == ""

    r = invoke("plan", "--host", host.name, "--inventory", "hosts", "--roles", "irq_affinity", "--verbose",
               cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "this host is a container" in r.stdout
    assert not any(l.strip().startswith("would change  irq:") for l in r.stdout.splitlines()), r.stdout[-3000:]
    assert _left(host) == ""
