"""The testinfra peer of bench/compare.py's part (d): the audit's checks as testinfra tests
(bench/peers/audit_testinfra.py) over its paramiko backend (best configured and as shipped) and over bringup's,
each run verified item for item against the audit before it is timed.  Cut from bench/compare.py (issue 43
item 2): one module per peer.
"""
from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from compare_run import BENCH, BRINGUP_ENV, PYTHON, Tool

import harness  # noqa: E402 - compare_run puts the checkout (harness/) on sys.path


#: The testinfra peer's tools: over testinfra's paramiko backend in its best configuration (TCP_NODELAY set by the
#: peer's fixture), the same backend as shipped (no TCP_NODELAY), and over bringup's backend (bringup.testinfra).
TESTINFRA = "testinfra"
TESTINFRA_SHIPPED = "testinfra (paramiko as shipped)"
TESTINFRA_BRINGUP = "testinfra (bringup://)"
#: part (d)'s peers by backend: (tool name, key of the part's results)
PEERS = {"paramiko": (TESTINFRA, "testinfra"), "shipped": (TESTINFRA_SHIPPED, "testinfra_shipped"),
         "bringup": (TESTINFRA_BRINGUP, "testinfra_bringup")}


def audit_spec(host: harness.SandboxHost, sd: Path, binv: Path) -> Path:
    """What the audit of ``host`` checks (bench/peers/audit_spec.py), from the resources bringup's roles declare
    for the host and the newest audit report under ``sd/reports`` (the run just before this)."""
    report = sorted((sd / "reports").glob("*-audit.json"))[-1]
    spec = sd / "audit_spec.json"
    subprocess.run([PYTHON, str(BENCH / "peers" / "audit_spec.py"), str(binv), host.name, str(report), str(spec)],
                   cwd=sd, env={**os.environ, **BRINGUP_ENV}, check=True)
    return spec


def testinfra_peer(host: harness.SandboxHost, sd: Path, venv: Path, binv: Path, spec: Path,
                   backend: str = "paramiko") -> tuple[Tool, dict]:
    """testinfra doing the audit's checks (bench/peers/audit_testinfra.py) over its paramiko backend (in the
    peers' venv; ``backend="shipped"``: without the TCP_NODELAY its fixture sets), or over bringup's
    (``backend="bringup"``: bringup's Python, the plugin, the inventory ``binv``), and how its verifying run went:
    every test passed or skipped exactly where the audit's item did (else the peer file has a bug, and the run
    stops here)."""
    (sd / "pytest.ini").write_text("[pytest]\n")  # its own, empty: not the checkout's (testpaths, addopts)
    common = ["-q", "-p", "no:cacheprovider", "-c", str(sd / "pytest.ini"), "--rootdir", str(sd)]
    peer = str(BENCH / "peers" / "audit_testinfra.py")
    if backend == "bringup":
        tool = Tool(TESTINFRA_BRINGUP, [PYTHON, "-m", "pytest", *common, "-p", "bringup.testinfra.plugin", peer,
                                        f"--hosts=bringup://{host.name}", f"--bringup-inventory={binv}"], sd,
                    {**BRINGUP_ENV, "BENCH_AUDIT_JSON": str(spec)})
    else:
        tool = Tool(PEERS[backend][0], [str(venv / "pytest"), *common, peer,
                                        f"--hosts=paramiko://root@127.0.0.1:{host.port}",
                                        f"--ssh-identity-file={host.key_file}"], sd,
                    {"BENCH_AUDIT_JSON": str(spec), "BENCH_TESTINFRA_NODELAY": "0" if backend == "shipped" else "1"})
    junit = sd / f"testinfra-{backend}.xml"
    Tool(tool.name, tool.argv + [f"--junitxml={junit}"], sd, tool.env).run()
    got = {}
    for case in ET.parse(junit).iter("testcase"):
        tag = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        got[case.get("name")] = tag
    items = json.loads(spec.read_text())["items"]
    differ = []
    for i in items:
        names = [n for n in got if n.endswith(f"-{i['id']}]")]
        outcome = got[names[0]] if len(names) == 1 else f"{len(names)} tests"
        if outcome != i["outcome"]:
            differ.append(f"{i['id']}: audit {i['outcome']}, testinfra {outcome}")
    if differ or len(got) != len(items):
        raise SystemExit(f"bench: testinfra's run ({backend} backend) differs from the audit's ({len(got)} tests, "
                         f"{len(items)} items):\n" + "\n".join(differ))
    return tool, {"tests": len(got), **{k: sum(v == k for v in got.values()) for k in ("passed", "skipped")}}
