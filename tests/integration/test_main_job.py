"""The README's first command, `invoke sandbox`: a sandbox host planned, provisioned, re-run with nothing
to do, Triton serving the example model, a short benchmark, and the checklist's latency line.

Acted through the tool (one `invoke sandbox --keep` in a fresh folder); checked through Docker on
the sandbox host (docker exec) and Triton's own statistics, then the host is removed.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from harness.common import NAME_LABEL
from harness.example import cpu_split

from .helpers import invoke, recap

pytestmark = pytest.mark.integration


def _containers() -> set[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={NAME_LABEL}=sandbox-01"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_invoke_sandbox_ends_with_triton_serving_and_a_latency_line(tmp_path):
    before = _containers()
    r = invoke("sandbox", "--keep", cwd=tmp_path, timeout=900)
    kept = _containers() - before
    try:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        (cid,) = kept
        runs = r.stdout.split("sandbox: re-run")
        assert len(runs) == 2 and recap(runs[1])["sandbox-01"]["changed"] == 0, r.stdout[-3000:]
        # Triton serves the example model on the host, on the CPU the guide's split gives it.
        inner = subprocess.run(["docker", "exec", cid, "docker", "inspect", "--format",
                                "{{.State.Status}} {{.HostConfig.CpusetCpus}}", "triton"],
                               capture_output=True, text=True, check=True).stdout.split()
        assert inner[0] == "running" and inner[1:] == ([cpu_split()[0]] if cpu_split()[0] else [])
        # The benchmark counted what Triton counted, and the checklist's latency line reads it.
        (doc_path,) = (tmp_path / "reports" / "bench").glob("sandbox-01-*.json")
        doc = json.loads(doc_path.read_text())
        assert doc["model"] == "classify" and len(doc["points"]) == 4
        assert all(p["counts_agree"] and p["errors"] == 0 for p in doc["points"]), doc["points"]
        page = (tmp_path / "reports" / "checklist" / "sandbox-01.md").read_text()
        (line,) = [ln for ln in page.splitlines() if "latency acceptance (p95)" in ln]
        assert line.startswith("| PASS | latency |"), line
        whole = json.loads((tmp_path / "reports" / "checklist" / "sandbox-01.json").read_text())
        (k,) = [k for k in whole["checks"] if k["name"] == "latency acceptance (p95)"]
        assert k["status"] == "PASS" and doc_path.name in k["seen"], k
        assert r.stdout.rstrip().splitlines()[-1].startswith("sandbox: PASS latency acceptance (p95): p95 ")
        # The README's commands work on the kept host as on a rack's: Triton's ports are published on 127.0.0.1
        # (the inventory's address) under the inventory's numbers; --down removes the host, and only it.
        assert "invoke sandbox --down" in r.stdout and "--inventory .sandbox/hosts" in r.stdout, r.stdout[-2000:]
        b = invoke("bench", "--host", "sandbox-01", "--inventory", ".sandbox/hosts", "--batch", "1",
                   "--concurrency", "1", "--warmup", "0.5", "--duration", "1", "--processes", "1",
                   cwd=tmp_path, timeout=300)
        assert b.returncode == 0, b.stdout[-2000:] + b.stderr[-2000:]
        d = invoke("sandbox", "--down", cwd=tmp_path, timeout=120)
        assert d.returncode == 0 and f"removed sandbox-01 ({cid}" in d.stdout, d.stdout + d.stderr
        assert _containers() == before
    finally:
        for c in kept:
            subprocess.run(["docker", "rm", "-f", "-v", c], capture_output=True)
