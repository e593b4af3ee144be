"""Plan a role offline on the real H200 VM: its facts from ``invoke facts --raw``'s bundle
(tests/fixtures/hosts/h200-vm/facts-raw.json, unedited), its resources built by the role, each planned from
the state the bundle shows (what the resource's read would print on that host)."""
from __future__ import annotations

from pathlib import Path

from bringup.facts.gather import load_facts
from bringup.roles import HostContext, Role
from bringup.templates import Templates

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
