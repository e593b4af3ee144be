"""Small helpers shared by the fact parsers (not part of the facts API)."""
from __future__ import annotations

import re

from .base import parse_cpulist

_CPULIST_RE = re.compile(r"^\s*(\d+(-\d+)?)?(\s*,\s*\d+(-\d+)?)*\s*$")


def cpulist(text: str | None) -> list[int]:
    """:func:`parse_cpulist` that gives ``[]`` for text that is not a CPU list."""
    if not text or not _CPULIST_RE.match(text):
        return []
    return parse_cpulist(text)


def to_int(text: str | None) -> int | None:
    """A whole number (``-1`` too) from sysfs/tool text; None for anything else ("Unknown", empty)."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None
