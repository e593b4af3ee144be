"""What the selected roles of a run need together: their defaults merged into one mapping (two roles that give
one variable two defaults are refused), the fact classes to gather for them, and which facts may be read in part.
Cut from bringup/engine/roles.py (issue 43 item 2): questions about a set of loaded roles, apart from loading them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:
    from .role_contract import Role

__all__ = ["merged_defaults", "wanted_facts", "fact_keys"]


def merged_defaults(roles: list[Role]) -> dict[str, Any]:
    """Every role's defaults in one mapping; two roles giving one variable two defaults is refused.

    A variable several roles read (``apt_lock_timeout``, the planner's) is
    declared once, in the module that owns it, and each role includes it.
    """
    out: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for role in roles:
        for k, v in role.defaults.items():
            if k in out and out[k] != v:
                raise InputError(f"roles {owner[k]} and {role.name} give {k} different defaults "
                                 f"({out[k]!r}, {v!r}); declare it once and include it in both")
            out.setdefault(k, v)
            owner.setdefault(k, role.name)
    return out


def wanted_facts(roles: list[Role], extra: tuple[str, ...] = ()) -> list:
    """The fact classes to gather for ``roles`` (and ``extra`` names), in gathering order."""
    from .. import facts

    names: set[str] = set(extra)
    known = facts.known()
    for role in roles:
        if role.facts is None:
            return list(facts.ALL_FACTS)
        unknown = [f for f in role.facts if f not in known]
        if unknown:
            raise InputError(f"role {role.name}: FACTS names unknown fact(s) {', '.join(unknown)}; "
                             f"known: {', '.join(known)}")
        names.update(role.facts)
    unknown = sorted(n for n in extra if n not in known)
    if unknown:
        raise InputError(f"unknown fact(s) {', '.join(unknown)}")
    # Only the modules of these facts are imported (bringup.facts.named).
    return facts.named(names)


def fact_keys(roles: list[Role], vars: dict[str, Any], extra: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """``{fact: keys}``: the facts that one host's run reads only in part, and those parts.  A fact is narrowed
    when every selected role that reads it said which of its keys (``fact_keys``), nothing else wants it (the
    checklist's ``extra``, a role reading every fact) and the fact can be read in part (``Fact.command_for``);
    its keys are then all those roles' keys together.  Any other fact is read whole, as before."""
    from .. import facts

    if any(role.facts is None for role in roles):
        return {}
    readers: dict[str, list[Role]] = {}
    for role in roles:
        for name in role.facts or ():
            readers.setdefault(name, []).append(role)
    said = {role.name: role.fact_keys(vars) for role in roles if role.facts}
    out: dict[str, list[str]] = {}
    for name, who in readers.items():
        if name in extra or not all(name in said[r.name] for r in who):
            continue
        keys = sorted({k for r in who for k in said[r.name][name]})
        cls = facts.named([name])[0]
        if keys and cls.command_for(keys) is not None:
            out[name] = keys
    return out
