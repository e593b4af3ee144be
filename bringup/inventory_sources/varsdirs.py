"""``group_vars/`` and ``host_vars/`` beside an inventory, as Ansible's ``host_group_vars`` plugin finds them.

For a group or host NAME, in the folder of the inventory file (or the inventory folder itself): the first
of ``NAME``, ``NAME.yml``, ``NAME.yaml``, ``NAME.json`` that exists; when it is a folder, every file in it
(and in its sub-folders) with one of those extensions or none, in sorted order, hidden files and ``~``
backups skipped, later files overriding earlier ones.  Each file must be a YAML (or JSON) mapping.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .model import SourceError, Value, unsafe_name

__all__ = ["EXTENSIONS", "vars_files", "load_vars"]

EXTENSIONS = (".yml", ".yaml", ".json")


def vars_files(folder: Path, name: str) -> list[Path]:
    """The files holding ``name``'s variables in ``folder`` (``.../group_vars``), in Ansible's order."""
    why = unsafe_name(name)
    if why is not None:  # the sources refuse these first; never a path outside the folder, whoever calls
        raise SourceError(f"{folder}: the name {name[:80]!r} {why}: it is not looked up as a vars file there")
    for ext in ("",) + EXTENSIONS:
        p = folder / f"{name}{ext}"
        try:
            found = p.exists()
        except OSError:  # a name too long for a file name (ENAMETOOLONG): it has no vars file
            return []
        if found:
            return _dir_files(p) if p.is_dir() else [p]
    return []


def _dir_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(".") or entry.endswith("~"):
            continue
        p = folder / entry
        ext = os.path.splitext(entry)[1]
        if p.is_dir() and not ext:
            found.extend(_dir_files(p))
        elif p.is_file() and (not ext or ext in EXTENSIONS):
            found.append(p)
    return found


def load_vars(folder: Path, name: str, load: Callable[[Path], Any]) -> list[dict[str, Value]]:
    """``name``'s variables from ``folder``, one mapping per file in order; ``load`` reads one YAML file
    (:func:`~.yamlfile.load_yaml_lines` with the run's vault: the data and where its keys are)."""
    out: list[dict[str, Value]] = []
    for f in vars_files(folder, name):
        data, lines = load(f)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise SourceError(f"{f}: a vars file must be a mapping of variable: value, got "
                              f"{type(data).__name__}; write `name: value` lines")
        where = lines.of(data)
        out.append({str(k): Value(v, f"{f}:{where[k]}" if k in where else str(f)) for k, v in data.items()})
    return out
