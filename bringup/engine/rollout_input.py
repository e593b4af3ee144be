"""What a rolling run is given, checked before anything connects: ``--serial`` batches, ``--max-fail-percentage``,
and the inventory's drain/undrain hooks (:mod:`bringup.engine.rollout` runs them).

Kept apart from the rollout itself so that a task checks its flags and its hosts' hooks without importing the
run's engine (the runner, the resources): a run connects to its hosts as soon as the inventory named them, and
the engine loads while the hosts log in (:mod:`bringup.engine.ahead`).
"""
from __future__ import annotations

import math
import shutil
from typing import TYPE_CHECKING, Any

from ..errors import InputError, printable, quoted

if TYPE_CHECKING:
    from ..inventory.hosts import Host

__all__ = ["parse_serial", "batch_sizes", "parse_max_fail", "exceeds", "hook_timeout", "drains_first",
           "validate_hooks", "HOOKS", "HOOK_TIMEOUT", "DEFAULT_HOOK_TIMEOUT"]

#: The inventory variables naming the hooks, and their timeout.
HOOKS = ("drain_command", "undrain_command")
HOOK_TIMEOUT = "hook_timeout"
DEFAULT_HOOK_TIMEOUT = 120.0


def parse_serial(spec: str | int | None) -> list[int | str] | None:
    """``'1,25%'`` -> ``[1, '25%']``; None or empty: no batching.  Bad items are one line."""
    if spec is None or str(spec).strip() == "":
        return None
    items: list[int | str] = []
    for raw in str(spec).split(","):
        item = raw.strip()
        pct = item.endswith("%")
        digits = item[:-1].strip() if pct else item
        # ASCII digits, at most 9 ('²' is a digit to isdigit(), not to int(); 5000 digits are int()'s ValueError)
        if (not (digits.isascii() and digits.isdigit()) or len(digits.lstrip("0")) > 9 or int(digits) < 1
                or (pct and int(digits) > 100)):
            raise InputError(f"--serial {quoted(printable(str(spec)))}: {quoted(printable(item))} is not a batch "
                             "size; give counts >= 1 (at most 9 digits) or percentages 1%-100%, comma separated "
                             "(e.g. --serial 1,25%)")
        items.append(f"{int(digits)}%" if pct else int(digits))
    return items


def batch_sizes(serial: list[int | str] | None, n: int) -> list[int]:
    """The sizes of the batches over ``n`` hosts: each item in turn, the last repeating, the rest last.

    A percentage is of all ``n`` hosts, rounded down but at least 1 (Ansible's
    ``pct_to_int``): ``[1, '25%']`` over 10 hosts gives 1, 2, 2, 2, 2, 1.
    """
    if not serial:
        return [n] if n else []
    sizes: list[int] = []
    left, i = n, 0
    while left > 0:
        item = serial[min(i, len(serial) - 1)]
        size = max(1, n * int(item[:-1]) // 100) if isinstance(item, str) else item
        sizes.append(min(size, left))
        left -= sizes[-1]
        i += 1
    return sizes


def parse_max_fail(value: Any) -> float | None:
    """``--max-fail-percentage N`` (0-100); None when not given."""
    if value is None or str(value).strip() == "":
        return None
    try:
        pct = float(value)
    except (TypeError, ValueError):
        pct = -1.0
    if not 0 <= pct <= 100:
        raise InputError(f"--max-fail-percentage {value!r}: give a number from 0 to 100 (0: stop at the first "
                         "failed host)")
    return pct


def exceeds(failed: int, size: int, max_fail_percentage: float | None) -> bool:
    """Whether a batch of ``size`` hosts with ``failed`` failures stops the rollout (Ansible's rule)."""
    if size <= 0 or failed <= 0:
        return False
    if max_fail_percentage is None:
        return failed == size
    return failed / size > max_fail_percentage / 100.0


def hook_timeout(host: Host) -> float:
    v = host.vars.get(HOOK_TIMEOUT, DEFAULT_HOOK_TIMEOUT)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise InputError(f"host {host.name}: {HOOK_TIMEOUT} must be a finite number of seconds > 0 (got {v!r})")
    return float(v)


def drains_first(host: Host, check: bool) -> bool:
    """Whether ``host``'s ``drain_command`` must run before anything touches it (a run that writes)."""
    return not check and host.vars.get("drain_command") is not None


def validate_hooks(hosts: list[Host]) -> None:
    """Each host's hooks: absent, or a non-empty list of strings whose program exists; else one line."""
    for h in hosts:
        for var in HOOKS:
            argv = h.vars.get(var)
            if argv is None:
                continue
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
                raise InputError(f"host {h.name}: {var} must be a list of strings (program and arguments, no shell), "
                                 f"e.g. [/usr/local/bin/lb, drain]; got {argv!r}")
            if shutil.which(argv[0]) is None:
                raise InputError(f"host {h.name}: {var}: program {argv[0]!r} is not found or not executable on "
                                 "this machine; give its path")
        if any(h.vars.get(v) is not None for v in HOOKS):
            hook_timeout(h)
