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


def pci_reads(folder: str, driver: str, indent: str) -> str:
    """Shell lines (for a fact's command) reading a PCI function's sysfs folder ``folder`` (a shell parameter such
    as ``$d``, quoted here) into ``$numa``, ``$cpus``, ``$msi`` (its MSI IRQs, comma-separated) and the variable ``driver``
    (the bound driver), with the ``read`` builtin: no fork per file, a host has hundreds of functions."""
    lines = (
        f'if [ -r "{folder}/uevent" ]; then',
        f'  while read -r l; do case $l in (DRIVER=*) {driver}=${{l#DRIVER=}};; esac; done < "{folder}/uevent"',
        "fi",
        f'if [ -r "{folder}/numa_node" ]; then read -r numa < "{folder}/numa_node"; fi',
        f'if [ -r "{folder}/local_cpulist" ]; then read -r cpus < "{folder}/local_cpulist"; fi',
        f'for i in "{folder}"/msi_irqs/[0-9]*; do if [ -e "$i" ]; then msi="$msi${{msi:+,}}${{i##*/}}"; fi; done',
    )
    return "".join(f"{indent}{line}\n" for line in lines)
