"""What a role sees of an audited host (its HostContext), so audits ask the role itself.

The facts are gathered once per host (one round trip) with the engine's own
fact set, and templates render from the project's templates/, exactly as
``invoke provision`` would: the audit's expectations are the role's.
"""
from __future__ import annotations

from types import SimpleNamespace

from bringup.facts import ALL_FACTS
from bringup.facts.gather import gather
from bringup.project import content_root
from bringup.roles import HostContext
from bringup.templates import Templates

_facts: dict[int, dict] = {}


class _Transport:
    """Enough of a Transport for ``gather``: one script over the testinfra host."""

    def __init__(self, host):
        self.host = host

    def run_script(self, script: str):
        r = self.host.run("sh -c %s", script)
        return SimpleNamespace(stdout=r.stdout, stderr=r.stderr, rc=r.rc)


def context(target, role: str) -> HostContext:
    """``role``'s view of ``target``: merged vars, the host's facts, the project's templates."""
    key = id(target)
    if key not in _facts:
        _facts[key], _errors = gather(_Transport(target.host), ALL_FACTS)
    return HostContext(target.name, target.vars[role], _facts[key], Templates(content_root() / "templates").render)


def listening_snippets() -> dict[str, str]:
    """read_many snippets for the host's TCP sockets (IPv4 and IPv6)."""
    return {"@tcp": "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"}


def listening(text: str | None) -> set[int]:
    """TCP ports in LISTEN state, from /proc/net/tcp{,6}."""
    ports = set()
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) > 3 and f[3] == "0A" and ":" in f[1]:
            ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports
