"""Values of ``nvidia-smi``'s outputs, shared by the parsers of each command (``--query-gpu`` CSV, ``-q``,
``-L``, ``topo -m``, ``nvlink -s``).

Conventions: ``N/A``, ``[N/A]``, ``[Not Supported]`` and other bracketed
notices become None; ``Enabled``/``Disabled`` become True/False; values with a
unit (``143771 MiB``, ``700.00 W``, ``16x``) become numbers and the unit moves
into the key (``memory_total_mib``).
"""
from __future__ import annotations

import re
from typing import Any

from ..untrusted import Unreadable


def _none_if_na(value: str) -> str | None:
    v = value.strip()
    if v in ("", "N/A", "n/a") or (v.startswith("[") and v.endswith("]")):
        return None
    return v


#: A number and its unit, read whole (``143771 MiB``, ``700.00 W``, ``16x``, ``-8 C``, ``5``): plain decimal digits, at
#: most 20 each side of the point; the unit letters only.  Linear: no part can match what another does.
_NUMBER = re.compile(r"\s*(-?[0-9]{1,20}(?:\.[0-9]{1,20})?)(?: ?([A-Za-z%]{1,8}))?\s*")


def _number(text: str, unit: str | None = None) -> int | float | None:
    """A value of nvidia-smi as a number, or None where the whole value is not one number with (at most) one unit.

    Read whole, never a prefix: ``1e308 MiB``, ``0x21 C``, ``1_000 C``, ``nan``, ``inf`` and a 400-digit figure
    (``float()`` would make it Infinity) are no number.  ``unit``: the one unit taken (``33 F`` is no ``C``
    reading); a value without a unit is taken too (``--format=csv,nounits``)."""
    m = _NUMBER.fullmatch(text)
    if not m or unit is not None and m.group(2) not in (None, unit):
        return None
    s = m.group(1)
    return float(s) if "." in s else int(s)


def _mode(value: str | None) -> bool | str | None:
    if value is None:
        return None
    if value == "Enabled":
        return True
    if value == "Disabled":
        return False
    return value

def _get(tree: dict[str, Any], *path: str) -> Any:
    cur: Any = tree
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


def _sval(tree: dict[str, Any], *path: str) -> str | None:
    v = _get(tree, *path)
    return _none_if_na(v) if isinstance(v, str) else None


def _nval(tree: dict[str, Any], *path: str) -> int | float | None:
    v = _sval(tree, *path)
    return _number(v) if v is not None else None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _count(value: Any) -> int | None:
    """A counter leaf (``0``); N/A and anything not a whole number: None."""
    v = _none_if_na(value) if isinstance(value, str) else None
    return int(v) if v is not None and re.fullmatch(r"[0-9]+", v) else None


#: What nvidia-smi prints in place of a counter or flag the part does not have (ECC off, a part before Ampere):
#: no reading, and no damage.  Any other value that is not the value's own form (``NaN``, ``-1``, ``1e3``, ``0x10``,
#: ``Maybe``, empty, a key printed twice) is :class:`bringup.untrusted.Unreadable`: its reading is unknown, never
#: 0 or No; the message is the value as seen, quoted and shortened.
ABSENT = frozenset({"N/A", "n/a", "[N/A]", "Not Supported", "[Not Supported]", "Not Available", "[Not Available]"})
#: NVML's counters are unsigned 64-bit: a longer figure is no count.
COUNT_MAX = 2**64 - 1
#: The flags' words, as every driver seen prints them (``Pending : No``, ``Idle : Not Active``).
FLAG_WORDS = {"Yes": True, "No": False, "Active": True, "Not Active": False, "Enabled": True, "Disabled": False}


def _seen(value: Any) -> str:
    if isinstance(value, list):
        return "printed twice"
    if isinstance(value, dict):
        return "a section, not a value"
    return repr(str(value).strip()[:40])


def read_count(value: Any) -> int | None:
    """A counter leaf strictly: a plain decimal whole number up to :data:`COUNT_MAX`; None where the key is not
    printed or prints an :data:`ABSENT` word; :class:`Unreadable` for anything else."""
    if value is None:
        return None
    v = value.strip() if isinstance(value, str) else None
    if v in ABSENT:
        return None
    if v is None or not re.fullmatch(r"[0-9]{1,20}", v) or int(v) > COUNT_MAX:
        raise Unreadable(_seen(value))
    return int(v)


def read_number(value: Any, unit: str, *, lo: float, hi: float) -> int | float | None:
    """A leaf of a number with its ``unit`` (``33 C``, ``0 us``) strictly, within ``lo``..``hi``; None where not
    printed or :data:`ABSENT`; :class:`Unreadable` for anything else (``NaN C``, ``1e308 C``, ``33 F``, empty)."""
    if value is None:
        return None
    v = value.strip() if isinstance(value, str) else None
    if v in ABSENT:
        return None
    n = _number(v, unit) if v is not None and v.endswith(unit) else None
    if n is None or not lo <= n <= hi:
        raise Unreadable(_seen(value))
    return n


def read_flag(value: Any) -> bool | None:
    """A Yes/No (Active/Not Active, Enabled/Disabled) leaf strictly; None where not printed or :data:`ABSENT`;
    :class:`Unreadable` for any other word (``Maybe``, ``yes``, empty)."""
    if value is None:
        return None
    v = value.strip() if isinstance(value, str) else None
    if v in ABSENT:
        return None
    if v not in FLAG_WORDS:
        raise Unreadable(_seen(value))
    return FLAG_WORDS[v]


#: The PCIe generations a link can run at (Gen1 2.5 GT/s .. Gen6 64 GT/s): ``PCIe Generation`` values outside are no
#: reading.
PCIE_GENERATIONS = range(1, 7)
#: The widths a PCIe link trains to (the spec's x1..x32; nvidia-smi prints ``16x``).
LINK_WIDTHS = (1, 2, 4, 8, 12, 16, 32)
#: A GPU's memory or BAR1 size in MiB, below 16 TiB (the largest parts have some hundred GiB).
MEMORY_MIB_MAX = 16 * 1024 * 1024
#: The words nvidia-smi -q prints for a setting that is on or off (``Persistence Mode``, ``ECC Mode``, ``MIG Mode``);
#: a part without the setting prints an :data:`ABSENT` word (``N/A``: ECC on a GeForce, MIG on an L40S).
MODE_WORDS = {"Enabled": True, "Disabled": False}


def pcie_generation_ok(n: Any) -> bool:
    """Whether ``n`` (a fact's value) is a PCIe generation: a whole number in :data:`PCIE_GENERATIONS`."""
    return type(n) is int and n in PCIE_GENERATIONS


def link_width_ok(n: Any) -> bool:
    """Whether ``n`` (a fact's value) is a PCIe link width: one of :data:`LINK_WIDTHS`."""
    return type(n) is int and n in LINK_WIDTHS


def memory_mib_ok(n: Any, lo: int = 1) -> bool:
    """Whether ``n`` (a fact's value) is a memory size in MiB: a whole number from ``lo`` below :data:`MEMORY_MIB_MAX`."""
    return type(n) is int and lo <= n < MEMORY_MIB_MAX


def _strict(value: Any, pattern: str, ok) -> int | None:
    """A leaf read whole by ``pattern`` (one group: the digits), its number held to ``ok``; None where not printed or
    :data:`ABSENT`; :class:`Unreadable` (the value as seen) for anything else."""
    if value is None:
        return None
    v = value.strip() if isinstance(value, str) else None
    if v in ABSENT:
        return None
    m = re.fullmatch(pattern, v) if v is not None else None
    n = int(m.group(1)) if m else None
    if n is None or not ok(n):
        raise Unreadable(_seen(value))
    return n


def read_pcie_generation(value: Any) -> int | None:
    """A ``PCIe Generation`` leaf (``5``) strictly: a generation of :data:`PCIE_GENERATIONS` (``99``, ``NaN``,
    ``1e308``, empty, 40 digits are :class:`Unreadable`)."""
    return _strict(value, r"([0-9]{1,3})", pcie_generation_ok)


def read_link_width(value: Any) -> int | None:
    """A ``Link Width`` leaf (``16x``) strictly: a width of :data:`LINK_WIDTHS` with its ``x`` (``999x``, ``0x``,
    ``16``, ``NaNx`` are :class:`Unreadable`)."""
    return _strict(value, r"([0-9]{1,3})x", link_width_ok)


def read_memory_mib(value: Any, lo: int = 1) -> int | None:
    """A memory size leaf (``143771 MiB``) strictly: whole MiB from ``lo`` below :data:`MEMORY_MIB_MAX` (``-1 MiB``,
    ``NaN MiB``, ``1e308 MiB``, 30 digits are :class:`Unreadable`)."""
    return _strict(value, r"([0-9]{1,9}) MiB", lambda n: memory_mib_ok(n, lo))


def read_mode(value: Any) -> bool | None:
    """An ``Enabled``/``Disabled`` setting leaf strictly: True/False; None where not printed or :data:`ABSENT`
    (``N/A``: the part has no such setting); :class:`Unreadable` for any other word (``Maybe``, ``1``, empty)."""
    if value is None:
        return None
    v = value.strip() if isinstance(value, str) else None
    if v in ABSENT:
        return None
    if v not in MODE_WORDS:
        raise Unreadable(_seen(value))
    return MODE_WORDS[v]


_LIST_GPU_HEAD = re.compile(r"GPU\s+([0-9]+):(?=\s)")
_UUID_TAIL = re.compile(r"\(UUID:\s*([^)\s]+)\)")


def _gpu_line(line: str) -> tuple[int, str, str] | None:
    """``GPU <n>: <name> (UUID: <uuid>)`` (``nvidia-smi -L``, ``nvlink -s``) as ``(n, name, uuid)``, or None.

    Read in linear time (the line is host output: ``\\s+(.*?)\\s+\\(`` backtracked cubically, 6,000 spaces took
    minutes): the head by a prefix match, the UUID from the last ``(UUID:`` of the line, the name between."""
    head = _LIST_GPU_HEAD.match(line)
    if not head:
        return None
    rest = line[head.end():].rstrip()
    at = rest.rfind("(UUID:")
    tail = _UUID_TAIL.fullmatch(rest, at) if at >= 0 else None
    between = rest[:at]
    if not tail or not between[-1:].isspace() or len(between) < 2 and not between.strip():
        return None
    return int(head.group(1)), between.strip(), tail.group(1)
