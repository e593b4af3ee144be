"""What the audit of one host checks, as data for its testinfra peer (bench/peers/audit_testinfra.py).

    PYTHONPATH=REPO python bench/peers/audit_spec.py INVENTORY HOST AUDIT_REPORT.json OUT.json

Run by bench/compare.py, untimed, after ``bringup audit`` of HOST passed: the resources every role declares
for HOST (facts gathered over one connection, as the audit does; nothing written), each with the values its
role wants (a file's sha256, mode and owner, a key's value, a unit's wanted state, a package's pin) and the
outcome and message that audit report gave the same item.  The peer reads only this file, never bringup.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bringup.checklist.audit import AuditedRole
from bringup.engine.runner import HostRun, Options
from bringup.tasks.context import prepared
from bringup.engine.templates import Templates
# What the audit compares each item against (a file's sha256, mode and owner, a key's value, ...): the same
# values `invoke audit --export-testinfra` writes into its modules.
from bringup.testinfra.declared import values


def main(inventory: str, name: str, report: str, out: str) -> None:
    _, chosen, root, selected, role_vars = prepared(inventory, None, name, None, None, None)
    roles = [AuditedRole(r.name, r.module) for r in selected]
    host_vars = role_vars[chosen[0].name]
    run = HostRun(chosen[0], roles, host_vars, Options(check=True), Templates(root / "templates"))
    try:
        run.gather()
        declared = [(role.name, r) for role in roles for r in run.declare(role)[2]]
    finally:
        run.close()
    results = json.loads(Path(report).read_text())["results"]
    audited = {(i["role"], i["item"]): i for i in results}  # two roles may declare one item (/etc/bringup)
    items = []
    for role, r in declared:
        seen = audited.get((role, r.id))
        if seen is None:
            raise SystemExit(f"audit_spec: {r.id} ({role}) is declared but not in {report}")
        items.append({"id": f"{role}/{r.id}", "item": r.id, "role": role, "kind": r.kind, "name": r.name,
                      "outcome": seen["outcome"], "message": seen["message"], **values(r)})
    if len(items) != len(results):
        raise SystemExit(f"audit_spec: {len(results)} items in {report}, {len(items)} declared now")
    # The one role variable an Expect's judge reads here (cpu_tuning's PM QoS cap).
    for i in items:
        if i["kind"] == "expect" and i["name"] == "PM QoS request":
            i["limit_us"] = host_vars["cpu_dma_latency_us"]
    Path(out).write_text(json.dumps({"host": name, "items": items}, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:5])
