"""Small helpers shared by the fact parsers (not part of the facts API)."""
from __future__ import annotations

import json
import re
from typing import Any

from .base import parse_cpulist

_CPULIST_RE = re.compile(r"^\s*(\d+(-\d+)?)?(\s*,\s*\d+(-\d+)?)*\s*$")


def cpulist(text: str | None) -> list[int]:
    """:func:`parse_cpulist` that gives ``[]`` for text that is not a CPU list."""
    if not text or not _CPULIST_RE.match(text):
        return []
    return parse_cpulist(text)


def json_object(output: str) -> tuple[dict[str, Any] | None, str | None]:
    """A file's content read as one JSON object: ``(object, None)``; ``(None, why)`` when it is not JSON
    (the parser's message) or not an object (``"not a JSON object"``).  Empty output is no file: the caller's."""
    try:
        doc = json.loads(output)
    except ValueError as e:
        return None, str(e)
    return (doc, None) if isinstance(doc, dict) else (None, "not a JSON object")


def to_int(text: str | None) -> int | None:
    """A whole number (``-1`` too) from sysfs/tool text; None for anything else ("Unknown", empty)."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None
