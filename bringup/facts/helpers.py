"""Helpers for fact modules: the shell lines that read sysfs with builtins, and parsers of the small values
tools and sysfs print."""
from __future__ import annotations

import re
from typing import Any

from .base import UntrustedOutput, ascii_whole, parse_cpulist
from ..untrusted import Unreadable, loads

#: Matched against the stripped text: a \s* at each end beside the list's own let spaces split two ways
#: (quadratic: 60,000 spaces took 18 s).
_CPULIST_RE = re.compile(r"([0-9]+(-[0-9]+)?)?(\s*,\s*[0-9]+(-[0-9]+)?)*")


def cpulist(text: str | None) -> list[int]:
    """:func:`parse_cpulist`; no text (an empty file) is ``[]``.  Text that is no CPU list the kernel prints (a
    garbled character, ``0-1x``) raises :class:`UntrustedOutput` as a range running backwards does: never read
    as no CPUs."""
    if not text or not text.strip():
        return []
    if not _CPULIST_RE.fullmatch(text.strip()):
        shown = text.strip().encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UntrustedOutput(f"CPU list {shown[:60]!r} is garbled (not a CPU list the kernel prints)")
    return parse_cpulist(text)


def key_values(tokens: list[str]) -> dict[str, str]:
    """``key=value`` words (as a fact's command echoes them) as a dict; a word without ``=`` is skipped."""
    return {k: v for k, sep, v in (t.partition("=") for t in tokens) if sep}


def local_cpus(text: str | None) -> tuple[list[int], str | None]:
    """A device's ``local_cpulist`` as ``(cpus, None)``; ``([], why)`` when the kernel could not have printed it
    (a range that runs backwards: cut or garbled output), so the caller refuses that device alone."""
    try:
        return cpulist(text), None
    except UntrustedOutput as e:
        return [], f"local_cpulist: {e}"


def json_object(output: str) -> tuple[dict[str, Any] | None, str | None]:
    """A file's content read as one JSON object: ``(object, None)``; ``(None, why)`` when it is not JSON
    (the parser's message; NaN, a 100,000-digit number, deep nesting or a key given twice are not read either) or
    not an object (``"not a JSON object"``).  Empty output is no file: the caller's."""
    try:
        doc = loads(output, what="the file", unique=True)
    except Unreadable as e:
        return None, str(e).removeprefix("the file: ")
    return (doc, None) if isinstance(doc, dict) else (None, "not a JSON object")


def to_int(text: str | None) -> int | None:
    """A whole number (``-1`` too) from sysfs/tool text, ASCII digits, at most 18 of them; None for anything else
    ("Unknown", empty, ``٣``, 5,000 digits: past Python's conversion limit, a ValueError named the fact)."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if ascii_whole(text.removeprefix("-")) else None


def sysfs_each(var: str, entries: str, having: str) -> str:
    """The head of a shell loop (for a fact's command) over the sysfs entries matching the glob ``entries`` that
    have the file ``having``, each in ``$var``; the command closes it with ``done``."""
    return f'for {var} in {entries}; do\n  [ -e "${var}/{having}" ] || continue\n'


def sysfs_reads(folder: str, files: dict[str, str], indent: str, *, if_readable: bool = False) -> str:
    """Shell lines (for a fact's command) reading each file of the sysfs folder ``folder`` (a shell parameter such
    as ``$d``, quoted here) into shell variables with the ``read`` builtin, no fork per file.  ``files`` maps the
    ``read`` targets (``"speed"``, or ``"lsc _"`` for the first word) to file names; ``if_readable`` skips a file
    that is absent or unreadable instead of letting ``read`` complain on stderr."""
    lines = []
    for target, name in files.items():
        read = f'read -r {target} < "{folder}/{name}"'
        lines.append(f'if [ -r "{folder}/{name}" ]; then {read}; fi' if if_readable else read)
    return "".join(f"{indent}{line}\n" for line in lines)


def sysfs_names(entries: str, var: str, indent: str) -> str:
    """A shell line collecting the names of the sysfs entries matching ``entries`` (a glob such as
    ``"$d"/net/*``) into ``$var``, comma-separated, with builtins only."""
    return f'{indent}for i in {entries}; do if [ -e "$i" ]; then {var}="${var}${{{var}:+,}}${{i##*/}}"; fi; done\n'


def uevent_driver(folder: str, var: str, indent: str) -> str:
    """Shell lines setting ``$var`` to the driver a sysfs device folder's ``uevent`` names (empty: none bound)."""
    return (f'{indent}if [ -r "{folder}/uevent" ]; then\n'
            f'{indent}  while read -r l; do case $l in (DRIVER=*) {var}=${{l#DRIVER=}};; esac; done < "{folder}/uevent"\n'
            f'{indent}fi\n')


def pci_reads(folder: str, driver: str, indent: str) -> str:
    """Shell lines (for a fact's command) reading a PCI function's sysfs folder ``folder`` (a shell parameter such
    as ``$d``, quoted here) into ``$numa``, ``$cpus``, ``$msi`` (its MSI IRQs, comma-separated) and the variable ``driver``
    (the bound driver), with the ``read`` builtin: no fork per file, a host has hundreds of functions."""
    return (uevent_driver(folder, driver, indent)
            + sysfs_reads(folder, {"numa": "numa_node", "cpus": "local_cpulist"}, indent, if_readable=True)
            + sysfs_names(f'"{folder}"/msi_irqs/[0-9]*', "msi", indent))
