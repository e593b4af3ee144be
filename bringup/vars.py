"""Checks that roles' ``validate(vars)`` share: strict booleans and mappings with known keys only.

A boolean variable is truth-tested by the role: the string ``"false"`` is true in Python, so a quoted
``irq_affinity_in_containers: "false"`` would do what it says not to.  Only real booleans pass (YAML's
own words ``true/false, yes/no, on/off`` load as booleans; so does ``--set k=no``).  A misspelt key in a
mapping (``max_batch_sise``) would be silently ignored; it is refused, naming the closest known key.
"""
from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

from .errors import InputError

__all__ = ["check_bools", "check_bool", "check_keys"]


def check_bool(value: Any, name: str) -> None:
    """``value`` of variable ``name`` is a real boolean, or one line saying how to write one."""
    if not isinstance(value, bool):
        raise InputError(f"{name} {value!r}: must be true or false (unquoted; YAML's yes/no, on/off too)")


def check_bools(vars: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """Every variable whose role default is a boolean holds a boolean (a role calls it with its DEFAULTS)."""
    for name, default in defaults.items():
        if isinstance(default, bool):
            check_bool(vars.get(name), name)


def check_keys(value: Mapping, known: Iterable[str], where: str) -> None:
    """No key of ``value`` outside ``known``; an unknown one is named with the closest known key."""
    known = list(known)
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(known))}"
            raise InputError(f"{where}: unknown key {key!r}{hint}")
