"""``{{ ... }}`` in inventory values: what bringup renders, and what it names instead of using.

Ansible leaves templates in inventory values unrendered (``ansible-inventory --list`` prints them as
written) and renders them with Jinja2 when a play reads them.  bringup renders only plain references to
other variables of the same host: a value that is exactly ``{{ name }}`` takes that variable's value (its
type kept), and ``{{ name }}`` inside text is replaced by the variable's text (a number, a boolean or text;
not a list or mapping).  References may chain, up to :data:`MAX_DEPTH`.  Anything else (a filter, an
expression, ``{% ... %}``, a name no variable has, a reference to itself) is not rendered: the variable is
listed in ``unrendered`` with the reason, and bringup refuses it, one line, where it would use it (a
connection variable when the inventory loads, a role's variable before anything connects) — never a silent
literal.  Variables bringup does not use may hold any template (Kubespray's and DeepOps' group_vars do).
"""
from __future__ import annotations

import re
from typing import Any

from ...secrets import Vaulted

__all__ = ["MAX_DEPTH", "MAX_RENDERED", "Unrendered", "render"]

MAX_DEPTH = 16
#: The longest text a template renders to (an inventory file is at most 16 MiB; a value, a few KiB).
MAX_RENDERED = 1024 * 1024
_PLAIN = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_WHOLE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
_TEMPLATE = re.compile(r"\{\{|\{%|\{#")


class Unrendered(Exception):
    """Why a value cannot be rendered by bringup (the message is the reason)."""


def render(variables: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``variables`` with plain references rendered, and ``{name: reason}`` of those left as written."""
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}

    def var(name: str, trail: tuple[str, ...]) -> Any:
        if name in done:
            return done[name]
        if name in failed:
            raise Unrendered(f"{{{{ {name} }}}} is itself not rendered ({failed[name]})")
        if name in trail:
            raise Unrendered(f"{' -> '.join(trail + (name,))} refers to itself")
        if len(trail) > MAX_DEPTH:
            raise Unrendered(f"references nest more than {MAX_DEPTH} deep ({' -> '.join(trail[:4])} ...)")
        if name not in variables:
            raise Unrendered(f"no variable {name!r} is set for this host")
        value = value_of(variables[name], trail + (name,))
        done[name] = value
        return value

    def value_of(value: Any, trail: tuple[str, ...]) -> Any:
        if isinstance(value, str):
            if not _TEMPLATE.search(value):
                return value
            whole = _WHOLE.match(value)
            if whole:
                return var(whole.group(1), trail)

            parts, size, at = [], 0, 0
            secret = isinstance(value, Vaulted)
            for m in _PLAIN.finditer(value):
                got = var(m.group(1), trail)
                if isinstance(got, (dict, list)):
                    raise Unrendered(f"{{{{ {m.group(1)} }}}} is a {type(got).__name__}, not text to put in a string")
                secret = secret or isinstance(got, Vaulted)
                parts += [value[at:m.start()], str(got)]
                at = m.end()
                size += len(parts[-2]) + len(parts[-1])
                if size > MAX_RENDERED:  # references within references multiply: 10 per level, 9 levels: 2 GB
                    raise Unrendered(f"renders to more than {MAX_RENDERED:,} characters (references repeated "
                                     "within references)")
            out = "".join(parts) + value[at:]
            if _TEMPLATE.search(_PLAIN.sub("", value)):
                raise Unrendered(f"{value[:80]!r} is more than plain {{{{ name }}}} references (a filter, an "
                                 "expression or a {% block %}), which bringup does not render")
            # Text holding a vault's value is a secret whole (a jump host's port rendered into -J is not shown).
            return Vaulted(out) if secret else out
        if isinstance(value, dict):
            return {k: value_of(v, trail) for k, v in value.items()}
        if isinstance(value, list):
            return [value_of(v, trail) for v in value]
        return value

    rendered: dict[str, Any] = {}
    for name, value in variables.items():
        try:
            rendered[name] = var(name, ())
        except Unrendered as e:
            failed.setdefault(name, str(e))
            rendered[name] = value
    return rendered, failed
