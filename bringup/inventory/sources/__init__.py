"""Inventory sources, read as Ansible reads them; :mod:`bringup.inventory.hosts` merges what they give.

- :mod:`.ranges`: host ranges (``gpu[01:50]``, ``rack[a:f]``, ``n[0:10:2]``);
- :mod:`.ini`: Ansible's INI format; :mod:`.yamlinv`: its YAML format (:mod:`.yamlfile` reads YAML safely);
- :mod:`.script`: inventory scripts and ``ansible-inventory --list`` output;
- :mod:`.varsdirs`: ``group_vars/`` and ``host_vars/`` beside the inventory;
- :func:`read_source`: one ``--inventory`` path, a file or a folder, detected as Ansible's plugins would.

Detection follows Ansible's plugin order (``script``, ``yaml``, ``ini``) for each file:

1. an executable file starting with ``#!`` (or an ELF binary) is an inventory script (run with ``--list``);
2. a file ending ``.yml``, ``.yaml``, ``.json`` or with no extension is tried as YAML: a mapping is a
   YAML inventory (or ``--list`` output, when it has ``_meta`` or lists of hosts); a ``.yml``/``.yaml``
   with a top-level ``plugin:`` (Ansible's ``auto`` plugin) is refused, naming ``ansible-inventory --list``;
3. otherwise, and when the YAML is not a mapping or not YAML at all, it is read as INI.

A folder is read as Ansible reads one: its entries in sorted order, sub-folders too, skipping hidden
entries, ``group_vars``, ``host_vars``, ``vars_plugins`` and Ansible's ignored extensions
(:data:`IGNORED_EXTENSIONS`).
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ...errors import InventoryError
from ...userfile import kind, read_regular
from ..vault import Vault
from .folders import listed
from .ini import parse_ini
from .model import GroupDef, SourceData, SourceError, Value
from .script import is_list_output, parse_list_output, run_script
from .varsdirs import count_read
from .yamlfile import (YamlSyntaxError, load_yaml_lines, private_doubts, private_mode, read_plain, sealed_doubts,
                       sealed_error, secret_line)
from .yamlinv import MAX_GROUP_DEPTH, parse_yaml_inventory

__all__ = ["IGNORED_EXTENSIONS", "MAX_GROUP_DEPTH", "GroupDef", "SourceData", "SourceError", "Value",
           "read_source", "load_yaml_lines", "base_dir"]

#: Ansible's INVENTORY_IGNORE_EXTS default: REJECT_EXTS + .orig, .cfg, .retry.
IGNORED_EXTENSIONS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry")
_IGNORED = re.compile("|".join([r"^\.", "^host_vars$", "^group_vars$", "^vars_plugins$"]
                               + [re.escape(e) + "$" for e in IGNORED_EXTENSIONS]))
_YAML_EXTENSIONS = (".yml", ".yaml", ".json")
_INI_SECTION = re.compile(r"^\s*\[[^:\]\s]+(?::\w+)?\]\s*(?:[#;].*)?$", re.M)
#: A folder holding more files than this is not an inventory (a home directory given by mistake).
MAX_FILES = 1000


def base_dir(path: Path) -> Path:
    """Where ``group_vars/`` and ``host_vars/`` of the source ``path`` are."""
    return path if path.is_dir() else path.parent


def read_source(path: Path, vault: Vault | None = None, known: set[str] | None = None,
                listings: dict | None = None) -> list[SourceData]:
    """The inventories in ``path`` (a file, or a folder of them), in Ansible's order; ``vault`` opens files
    and values that ansible-vault encrypted (without it they are one line each).  ``known``: the groups the
    sources read before declared (an INI ``[g:children]`` may name them, as in Ansible); the groups read
    here are added to it.  ``listings``: the load's count of bytes read (:func:`.varsdirs.count_read`), which
    the files of a folder add to, as group_vars/ and host_vars/ files do."""
    known = set() if known is None else known
    if kind(path, InventoryError, f"--inventory {path}") == "folder":
        out: list[SourceData] = []
        _read_dir(path, out, vault, known, set(), path, listings)
        if not out:
            raise InventoryError(f"{path}: a folder with no inventory file in it (hidden files, group_vars/, "
                                 "host_vars/ and Ansible's ignored extensions are skipped); pass --inventory PATH "
                                 "of the inventory file or folder")
        return out
    return [_read_file(path, vault, known)]


def _read_dir(folder: Path, out: list[SourceData], vault: Vault | None, known: set[str], seen: set[str],
              top: Path, listings: dict | None = None, depth: int = 0) -> None:
    try:
        entries = listed(folder, top, seen, depth, "an inventory folder",
                         "is it the inventory folder? (pass --inventory PATH)")
    except SourceError as e:
        raise InventoryError(str(e)) from None
    if entries is None:
        return
    for name in entries:
        if _IGNORED.search(name):
            continue
        p = folder / name
        if p.is_dir():
            _read_dir(p, out, vault, known, seen, top, listings, depth + 1)
        else:
            try:
                count_read(listings, p)  # 1,000 files of 16 MiB: bounded together, as vars files are
            except SourceError as e:
                raise InventoryError(str(e)) from None
            out.append(_read_file(p, vault, known))
        if len(out) > MAX_FILES:
            raise InventoryError(f"{folder}: more than {MAX_FILES} inventory files; is it the inventory folder?")


def _read_file(path: Path, vault: Vault | None, known: set[str]) -> SourceData:
    try:
        found = _detect(path, vault, known)
    except SourceError as e:
        raise InventoryError(str(e)) from None
    known.update(found.groups)
    return found


def _is_program(path: Path) -> bool:
    """An executable file that starts as a program does (``#!`` or an ELF header).  An executable text file
    without ``#!`` (a YAML or INI file with the x bit, as copied from some shares) is no script: Ansible's
    attempt to run it fails and it falls back to yaml and ini; bringup goes there directly."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        # Opened without waiting and held to a regular file by what was opened: a FIFO put under the name since the
        # look above (an inventory folder others write in) would have held this open for ever, waiting for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = read_regular(fd, 3)  # (4 bytes at most, non-blocking: a /proc/kmsg there is no program)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.startswith(b"#!") or head == b"\x7fELF"


def _detect(path: Path, vault: Vault | None, known: set[str]) -> SourceData:
    if _is_program(path):
        return run_script(str(path), vault=vault)
    text, sealed = read_plain(path, vault)
    try:
        found = _parse(path, text, vault, known)
    except (InventoryError, SourceError) as e:
        # The messages quote the text: a file encrypted whole, one other users may not read (/etc/shadow), or a line
        # that names a password (a ~/.my.cnf), tells its line and what is wrong only.
        private = None if sealed else private_mode(path) or secret_line(e, path, text)
        if not sealed and private is None:
            raise
        raise sealed_error(e, path, private) from None
    if not sealed:  # a file other users may not read: no warning may quote a key no name holds (/etc/shadow's)
        private_doubts(found.doubts, path)
    else:  # a file encrypted whole holds secrets only: every text of it is one
        sealed_doubts(found.doubts, path)  # a variable name not Ansible's form: no warning may quote it
        hide = (vault or Vault()).hide
        for gd in found.groups.values():
            gd.vars = {k: Value(hide(v.value), v.origin) for k, v in gd.vars.items()}
        for h, hv in found.hosts.items():
            found.hosts[h] = {k: Value(hide(v.value), v.origin) for k, v in hv.items()}
    return found


def _parse(path: Path, text: str, vault: Vault | None, known: set[str]) -> SourceData:
    ext = path.suffix  # as Ansible compares it: case and all
    yaml_error: InventoryError | None = None
    if not ext or ext in _YAML_EXTENSIONS:
        try:
            data, lines = load_yaml_lines(path, text, vault)
        except YamlSyntaxError as e:
            yaml_error = e
        else:
            if isinstance(data, dict):
                if isinstance(data.get("plugin"), str) and ext in (".yml", ".yaml"):
                    raise SourceError(f"{path}: the configuration of Ansible's inventory plugin {data['plugin']!r}, "
                                      "which bringup does not run; write its inventory once with `ansible-inventory "
                                      f"-i {path} --list > inventory.json` and pass that")
                if is_list_output(data):
                    return parse_list_output(data, str(path), vault=vault)
                return parse_yaml_inventory(data, str(path), lines)
            if data is None and not text.strip():
                return SourceData(str(path))
    if text.startswith("\ufeff"):
        # A byte order mark (Windows editors write it): YAML skips it, Ansible's INI reader does not (its first line
        # became the host range '\ufeff[g]', or a YAML error for a file without extension).  Named when it is the
        # only fault; ansible-inventory refuses such a file too.
        try:
            parse_ini(text[1:], str(path), set(known))
        except SourceError:
            pass  # no INI without it either: the errors below, of the file as it is
        else:
            raise SourceError(f"{path}:1: the file starts with a UTF-8 byte order mark (BOM, the bytes EF BB BF), "
                              "which Ansible's INI inventory reader does not take; save it as UTF-8 without a BOM")
    try:
        return parse_ini(text, str(path), known)
    except SourceError:
        # Text that is not YAML and shows no INI section is YAML with a mistake: say the YAML error.
        if yaml_error is not None and not _INI_SECTION.search(text):
            raise SourceError(str(yaml_error), getattr(yaml_error, "kind", None)) from None
        raise
