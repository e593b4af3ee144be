"""`invoke audit`: the testinfra suite under tests/audit, parametrized from the inventory.

The expected state comes from the same roles and inventory as provisioning:
each audit module asks its role for what it wants (``roles.sysctl.table``),
so there is no second list of expected values to drift.  Hosts are reached
through testinfra's OpenSSH backend with strict host-key checking against the
inventory's ``ssh_known_hosts`` and a shared control connection (ControlPersist).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .command import quote
from .inventory import Host
from .project import content_root
from .roles import load_roles, select_roles
from .runner import prepare
from .script import batch, split

__all__ = ["AuditTarget", "run_audit"]


@dataclass
class AuditTarget:
    """One host under audit: its testinfra host and each role's merged variables."""

    name: str
    host: Any  # testinfra.host.Host
    vars: dict[str, dict[str, Any]]
    inventory: Host = field(repr=False)

    def read_many(self, snippets: dict[str, str]) -> dict[str, str | None]:
        """Run many read snippets in one command (one round trip); output by key."""
        keys = list(snippets)
        script, token = batch([(k, snippets[k]) for k in keys])
        res = self.host.run("sh -c %s", script)
        return {s.key: (s.output if s.rc is not None else None) for s in split(res.stdout, token, keys)}


def testinfra_host(h: Host, workdir: Path):
    """A testinfra host with the inventory's connection settings, host keys checked."""
    import testinfra

    c = h.connection
    sudo = {"sudo": True, "sudo_user": c.ansible_become_user} if c.ansible_become else {}
    if c.ansible_connection == "local":
        return testinfra.get_host("local://", **sudo)
    cfg = workdir / f"{h.name}.ssh_config"
    known = os.path.expanduser(c.ssh_known_hosts)
    cfg.write_text(
        "Host *\n"
        "  StrictHostKeyChecking yes\n"
        f"  UserKnownHostsFile {quote(known)}\n"
        "  BatchMode yes\n"
        "  IdentitiesOnly yes\n"
        f"  ControlPath {workdir}/cm-%C\n"
    )
    spec = f"ssh://{c.ansible_user or 'root'}@{h.address}:{c.ansible_port}"
    kw: dict[str, Any] = {"ssh_config": str(cfg), "timeout": int(c.ssh_connect_timeout), "controlpersist": 60}
    if c.ansible_ssh_private_key_file:
        kw["ssh_identity_file"] = os.path.expanduser(c.ansible_ssh_private_key_file)
    return testinfra.get_host(spec, **kw, **sudo)


class _Plugin:
    """Gives the audit suite its ``target`` parameter and records outcomes."""

    def __init__(self, targets: list[AuditTarget], roles: list[str]):
        self.targets = targets
        self.roles = roles
        self.results: list[dict[str, Any]] = []

    def pytest_generate_tests(self, metafunc):
        if "target" in metafunc.fixturenames:
            metafunc.parametrize("target", self.targets, ids=[t.name for t in self.targets], scope="module")

    def pytest_collection_modifyitems(self, config, items):
        # Audit only the roles asked for: tests/audit/test_<role>.py.
        keep = [i for i in items if Path(str(i.fspath)).stem.removeprefix("test_") in self.roles]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.results.append({"test": report.nodeid, "outcome": report.outcome, "when": report.when,
                                 "message": str(report.longrepr.reprcrash.message)
                                 if report.failed and hasattr(report.longrepr, "reprcrash") else None})


def run_audit(hosts: list[Host], roles_wanted: str | None, reports: Path, extra_args: list[str] = ()) -> int:
    """Run tests/audit against ``hosts``; JUnit XML and a JSON summary land in ``reports``."""
    root = content_root()
    order, all_roles = load_roles(root)
    selected = select_roles(order, all_roles, roles_wanted)
    role_vars = prepare(hosts, selected, [all_roles[r] for r in order])
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    with tempfile.TemporaryDirectory(prefix="bringup-audit-") as tmp:
        targets = [AuditTarget(h.name, testinfra_host(h, Path(tmp)), role_vars[h.name], h) for h in hosts]
        plugin = _Plugin(targets, [r.name for r in selected])
        junit = reports / f"{stamp}-audit.xml"
        args = [str(root / "tests" / "audit"), "-q", "-p", "no:cacheprovider", "-p", "no:testinfra",
                f"--junitxml={junit}", f"--rootdir={root}", "-o", "junit_family=xunit2", *extra_args]
        code = pytest.main(args, plugins=[plugin])
    summary = {
        "hosts": [h.name for h in hosts], "roles": [r.name for r in selected], "exit": int(code),
        "passed": sum(r["outcome"] == "passed" for r in plugin.results),
        "failed": sum(r["outcome"] == "failed" for r in plugin.results),
        "skipped": sum(r["outcome"] == "skipped" for r in plugin.results),
        "results": plugin.results, "junit": str(junit),
    }
    (reports / f"{stamp}-audit.json").write_text(json.dumps(summary, indent=2) + "\n")
    return int(code)
