"""Host ranges in inventory host names, as Ansible expands them: ``gpu[01:50]``, ``rack[a:f]``, ``n[0:10:2]``.

Ansible's rule (``ansible.plugins.inventory.expand_hostname_range``): the first ``[...]`` of a name holds
``begin:end`` or ``begin:end:step``, both ends included; a begin written with a leading zero pads every
number to its width (and the end must have the same width); single letters count through ASCII letters
(``[a:f]``, ``[x:Z]``); several ranges in one name multiply (``r[1:2]n[01:04]``).  Unlike Ansible, a range
that gives no host at all, or more than :data:`MAX_HOSTS`, or a bound or step of more than :data:`MAX_DIGITS`
digits (``[0:99999999999999999999]``), is refused in one line before anything is counted: typing mistakes.
"""
from __future__ import annotations

import string

__all__ = ["MAX_HOSTS", "RangeError", "has_range", "expand"]

#: More hosts than this from one name is a typo (``[1:100000]``), not a rack.
MAX_HOSTS = 10_000
#: Digits a range's start, end or step may have (a bigger one is a typo: ``[0:99999999999999999999]``).
MAX_DIGITS = 18


def _shown(text: str) -> str:
    """``text`` quoted for a message, at most 80 characters of it (a name may be 100,000 digits)."""
    return repr(text) if len(text) <= 80 else repr(text[:80]) + "..."


class RangeError(ValueError):
    """The range is malformed, empty or too large; the message says which and how to fix it."""


def has_range(name: str) -> bool:
    """Ansible's ``detect_range``: any ``[`` makes a name a range."""
    return "[" in name


def expand(name: str) -> list[str]:
    """The host names ``name`` stands for (itself when it holds no range)."""
    if not has_range(name):
        return [name]
    out: list[str] = []
    _expand(name, out)
    if not out:
        raise RangeError(f"host range {_shown(name)} gives no host (is the end below the start?); "
                         "write it begin:end with begin <= end, e.g. gpu[01:08]")
    return out


def _expand(name: str, out: list[str]) -> None:
    shown = _shown(name)
    head, sep, rest = name.partition("[")
    body, sep2, tail = rest.partition("]")
    if not sep2:
        raise RangeError(f"host range {shown} has '[' without ']'; write e.g. gpu[01:08]")
    bounds = body.split(":")
    body = body if len(body) <= 60 else body[:60] + "..."
    if any(len(b) > MAX_DIGITS for b in bounds):
        raise RangeError(f"host range {shown}: a bound or step of [{body}] has more than {MAX_DIGITS} digits; "
                         "is it a typo? (e.g. gpu[01:08])")
    if len(bounds) not in (2, 3):
        raise RangeError(f"host range {shown}: [{body}] must be [begin:end] or [begin:end:step], e.g. gpu[01:08]")
    beg, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise RangeError(f"host range {shown}: [{body}] has no end; write e.g. gpu[01:08]")
    try:
        step = int(step_text)
    except ValueError:
        raise RangeError(f"host range {shown}: step {step_text!r} is not a whole number") from None
    if step < 1:
        raise RangeError(f"host range {shown}: step {step} must be 1 or more")
    width = 0
    if beg[0] == "0" and len(beg) > 1:
        width = len(beg)
        if len(end) != width:
            raise RangeError(f"host range {shown}: [{body}] pads the start to {width} digits, so the end must "
                             f"have {width} too (e.g. [{beg}:{end.zfill(width)}])")
    letters = string.ascii_letters
    if beg in letters and end in letters and len(beg) == len(end) == 1:
        i, j = letters.index(beg), letters.index(end)
        if i > j:
            raise RangeError(f"host range {shown}: [{body}] starts after it ends; write [{end}:{beg}]")
        seq: list[str] | range = list(letters[i:j + 1:step])
    else:
        try:
            seq = range(int(beg), int(end) + 1, step)
        except ValueError:
            raise RangeError(f"host range {shown}: [{body}] is neither numbers nor single letters; "
                             "write e.g. gpu[01:08] or rack[a:f]") from None
    if len(out) + len(seq) > MAX_HOSTS:  # len() of a range is computed, not counted: bounds are <= 18 digits
        raise RangeError(f"host range {shown} gives more than {MAX_HOSTS:,} hosts; is [{body}] a typo?")
    for item in seq:
        part = str(item).zfill(width) if width else str(item)
        hname = f"{head}{part}{tail}"
        if has_range(hname):
            _expand(hname, out)
        else:
            out.append(hname)
        if len(out) > MAX_HOSTS:
            raise RangeError(f"host range {shown} gives more than {MAX_HOSTS:,} hosts; is [{body}] a typo?")
