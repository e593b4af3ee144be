"""Helpers for audit modules: a role's own declared state, read and planned on the audited host.

An audit module asks the role what it wants (``declared``) instead of keeping
a second list of expected values: the role's ``resources()`` are built from the
target's merged variables and freshly gathered facts, every resource's read
snippet runs in one round trip, and each resource plans against what it read.
A plan with commands is drift; a skipped plan carries the role's reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .facts import ALL_FACTS
from .facts.gather import gather
from .project import content_root
from .resources.base import Plan, Resource
from .roles import HostContext, load_roles
from .templates import Templates

__all__ = ["Declared", "facts", "context", "declared", "find", "listening", "listening_snippets"]

_facts: dict[int, dict[str, Any]] = {}


class _Transport:
    """What :func:`bringup.facts.gather.gather` needs: one script, one round trip."""

    def __init__(self, target):
        self.target = target

    def run_script(self, script: str):
        return self.target.host.run("sh -c %s", script)


def facts(target) -> dict[str, Any]:
    """Every fact of the target, gathered once per audit run (one round trip)."""
    key = id(target)
    if key not in _facts:
        _facts[key], _errors = gather(_Transport(target), ALL_FACTS)
    return _facts[key]


@dataclass
class Declared:
    """One resource of the role and its plan against the host's current state."""

    resource: Resource
    plan: Plan

    @property
    def drift(self) -> str | None:
        """What differs, in words; None when the resource is as the role wants it (or skipped)."""
        p = self.plan
        if p.error:
            return f"{self.resource.id}: {p.error}"
        if p.skipped or not p.changed:
            return None
        if p.diff and "content" in p.changes:
            lines = p.diff.splitlines()[2:]
            lacks = [l[1:] for l in lines if l.startswith("+") and l[1:].strip()]
            extra = [l[1:] for l in lines if l.startswith("-") and l[1:].strip()]
            if p.changes["content"][0] == "absent":
                return f"{self.resource.name} is missing"
            words = [f"lacks {l}" for l in lacks[:3]] + [f"has {l}, which the role does not write" for l in extra[:3]]
            return f"{self.resource.name} " + ("; ".join(words) or "differs from what the role writes")
        what = "; ".join(f"{k} is {old}, want {new}" for k, (old, new) in p.changes.items())
        return f"{self.resource.id}: {what or p.reason or 'not as the role wants it'}"


def context(target, role: str) -> HostContext:
    """``role``'s view of ``target``: merged vars, the host's facts, the project's templates,
    exactly as ``invoke provision`` builds it."""
    return HostContext(target.name, target.vars, facts(target), Templates(content_root() / "templates").render)


def declared(target, role: str) -> list[Declared]:
    """The role's resources on this host, each planned against what one batched read found."""
    _order, roles = load_roles(content_root())
    res = roles[role].module.resources(context(target, role))
    outs = target.read_many({f"{i}": r.read() for i, r in enumerate(res)}) if res else {}
    out = []
    for i, r in enumerate(res):
        got = outs.get(f"{i}")
        try:
            plan = Plan.fail("its state could not be read") if got is None else r.plan(got)
        except Exception as e:  # noqa: BLE001 - a plan that cannot be made is a finding
            plan = Plan.fail(str(e))
        out.append(Declared(r, plan))
    return out


def listening_snippets() -> dict[str, str]:
    """read_many snippets for the host's TCP sockets (IPv4 and IPv6)."""
    return {"@tcp": "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"}


def listening(text: str | None) -> set[int]:
    """TCP ports in LISTEN state (``0A``), from /proc/net/tcp{,6}."""
    ports = set()
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) > 3 and f[3] == "0A" and ":" in f[1]:
            ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def find(items: list[Declared], kind: str, name: str | None = None) -> list[Declared]:
    """The declared resources of ``kind`` (and ``name``, when given)."""
    return [d for d in items if d.resource.kind == kind and (name is None or d.resource.name == name)]
