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
        assert line.startswith("| PASS | latency |") and doc_path.name in line, line
        assert r.stdout.rstrip().splitlines()[-1].startswith("sandbox: PASS latency acceptance (p95): p95 ")
    finally:
        for c in kept:
            subprocess.run(["docker", "rm", "-f", "-v", c], capture_output=True)
