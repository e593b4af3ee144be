"""Plan a role offline on the real H200 VM: its facts from ``invoke facts --raw``'s bundle
(tests/fixtures/hosts/h200-vm/facts-raw.json, unedited), its resources built by the role, each planned from
the state the bundle shows (what the resource's read would print on that host)."""
from __future__ import annotations

from pathlib import Path

from bringup.facts.gather import load_facts
from bringup.engine.roles import HostContext, Role
from bringup.engine.templates import Templates

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "hosts" / "h200-vm" / "facts-raw.json"


def facts() -> dict:
    got, errors = load_facts(BUNDLE, "h200-vm")
    assert not errors, errors
    return got


def declare(name: str, *, facts_over: dict | None = None, **vars) -> tuple[Role, list]:
    """The role's resources for the H200 from its declared facts (``facts_over`` replacing some, made by the
    test), with ``vars`` over the role's defaults."""
    import importlib

    role = Role(name, importlib.import_module(f"roles.{name}"))
    merged = {**role.defaults, **vars}
    role.validate(merged)
    have = {**facts(), **(facts_over or {})}
    ctx = HostContext("h200-vm", merged, {k: have.get(k) for k in role.facts}, Templates(REPO / "templates").render)
    return role, role.resources(ctx)


def declare_raw(name: str, raw_over: dict, tmp_path, **vars) -> tuple[Role, HostContext, list]:
    """``name``'s context and resources on the H200 VM from its raw bundle with ``raw_over`` replacing some outputs
    (``{fact: {rc, output[, cut]}}``, made by the test), as a run gives them to the role: each fact through its
    parser, and the errors of those that could not be read (``host.facts.unread``)."""
    import importlib
    import json

    from bringup.engine.roles import FactView

    doc = json.loads(BUNDLE.read_text())
    doc["raw"].update(raw_over)
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(doc))
    got, errors = load_facts(path, "h200-vm")
    role = Role(name, importlib.import_module(f"roles.{name}"))
    merged = {**role.defaults, **vars}
    role.validate(merged)
    ctx = HostContext("h200-vm", merged, FactView(got, role.facts, role.name, errors),
                      Templates(REPO / "templates").render)
    return role, ctx, role.resources(ctx)


def raw(name: str) -> str:
    import json

    return json.loads(BUNDLE.read_text())["raw"][name]["output"]


def h200_read(r) -> str:
    """What ``r``'s read prints on the H200 VM, from the bundle: PID 1 is not systemd (no /run/systemd/system),
    no cpufreq, THP ``madvise``, the IRQs' affinity lists as read; bringup's files and packages not there yet."""
    kind = r.kind
    if kind == "irq":
        lists = {int(w[0]): w[1] for w in (line.split() for line in raw("irq.affinity").splitlines()) if len(w) >= 2}
        return f"value={lists[r.irq]}\n" if r.irq in lists else "state=absent\n"
    if kind == "service":
        return "systemd=no\n"  # Service.read's answer where /run/systemd/system is missing
    if kind in ("file", "directory"):
        return "type=absent\n"
    if kind == "sysfs":
        return "rw " + raw("system.thp")
    if kind == "sysctl":
        from bringup.facts.system import parse_sysctl

        return f"value={parse_sysctl(raw('system.sysctl'))[r.key]}\n"
    if kind in ("packages", "cpufreq", "skip", "unused"):
        return ""  # not installed; no cpufreq on this VM; a Skip reads nothing
    raise AssertionError(f"no H200 read for {r.id}")


def check_plan(role, resources) -> list:
    """The role planned in check mode on the H200 as a run plans it (bringup.engine.rolerun): its resources' results."""
    from bringup.engine.pending import PendingHandlers
    from bringup.engine.results import HostResult
    from bringup.engine.rolerun import RoleRun

    result = HostResult("h200-vm")
    RoleRun(role, None, resources, None, result, PendingHandlers(), check=True).run([h200_read(r) for r in resources])
    return result.resources
