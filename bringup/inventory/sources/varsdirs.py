"""``group_vars/`` and ``host_vars/`` beside an inventory, as Ansible's ``host_group_vars`` plugin finds them.

For a group or host NAME, in the folder of the inventory file (or the inventory folder itself): the first
of ``NAME``, ``NAME.yml``, ``NAME.yaml``, ``NAME.json`` that exists; when it is a folder, every file in it
(and in its sub-folders) with one of those extensions or none, in sorted order, hidden files and ``~``
backups skipped, later files overriding earlier ones.  Each file must be a YAML (or JSON) mapping.

Stricter than Ansible, since an inventory may come from someone else: ``group_vars/`` (or ``host_vars/``)
and everything read in it stay inside their own folder (``group_vars/`` inside the inventory's folder, a
vars file or folder inside ``group_vars/``): a symlink that leads out is refused, naming the link and where
it points (one that stays inside is followed).  A vars file must be a regular file of at most
:data:`~.yamlfile.MAX_BYTES` bytes (a pipe, a device such as ``/dev/zero`` or a socket is refused before it
is opened), a vars folder holds at most :data:`MAX_FILES` files, and one load reads at most
:data:`MAX_LOAD_BYTES` of vars files and inventory files in all (:func:`count_read`).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Callable

from ...userfile import link_out
from .folders import MAX_DIR_DEPTH, MAX_DIRS, listed
from .model import SourceError, Value, unsafe_name, var_name
from ...errors import InventoryError
from ..vault import VaultError
from .yamlfile import MAX_BYTES, private_doubts, private_mode, sealed_doubts, sealed_error

__all__ = ["EXTENSIONS", "MAX_FILES", "MAX_DIR_DEPTH", "MAX_DIRS", "vars_files", "load_vars", "count_read",
           "MAX_LOAD_BYTES"]

EXTENSIONS = (".yml", ".yaml", ".json")
#: More files than this in one group's or host's vars folder is not a vars folder (a home directory linked in).
MAX_FILES = 1000
#: The most bytes of inventory files (of an inventory folder) and vars files one inventory load reads, all
#: together (each file at most :data:`~.yamlfile.MAX_BYTES`): 1,000 files of 16 MiB in group_vars/all/ were 16 GB
#: of YAML held in memory.  ansible-inventory sets no bound; this one is far above a real fleet's (3,000 hosts of
#: 45 KiB of host_vars are 132 MiB; a file vaulted whole is about 4 times its text: 11,000 hosts of 3 KiB vaulted
#: host_vars are 135 MiB), and well below what a host running bringup holds in memory.
MAX_LOAD_BYTES = 1 << 30
#: The key of ``listings`` (kept by the caller for one load) under which the bytes read so far are counted.
_READ = ("bytes read",)


def vars_files(folder: Path, name: str, listings: dict | None = None) -> list[Path]:
    """The files holding ``name``'s variables in ``folder`` (``.../group_vars``), in Ansible's order.
    ``listings``: a dict the caller keeps for one load, holding each folder's entries once read (40,000 hosts
    were 40,000 stat() calls per extension and two realpath() each)."""
    why = unsafe_name(name)
    if why is not None:  # the sources refuse these first; never a path outside the folder, whoever calls
        raise SourceError(f"{folder}: the name {name[:80]!r} {why}: it is not looked up as a vars file there")
    key = str(folder)
    if listings is None or key not in listings:
        listing = _listing(folder)
        if listings is not None:
            listings[key] = listing
    else:
        listing = listings[key]
    if listing is None:
        return []
    for ext in ("",) + EXTENSIONS:
        entry = f"{name}{ext}"
        if entry not in listing:  # (a name too long for a file name is in no listing either)
            continue
        p = folder / entry
        if p.exists():  # a dangling link is skipped, as Ansible does
            _inside(p, folder)
            if p.is_dir():
                out: list[Path] = []
                _dir_files(p, folder, out, set())
                return out
            _regular(p)
            return [p]
    return []


def _listing(folder: Path) -> frozenset[str] | None:
    """The names in ``folder`` (checked not to lead out of its parent folder), None when it is no folder."""
    if not folder.is_dir():
        return None
    _inside(folder, folder.parent)
    try:
        return frozenset(os.listdir(folder))
    except OSError as e:
        raise SourceError(f"{folder}: cannot list the vars folder: {e.strerror or e}") from None


def _inside(p: Path, folder: Path) -> None:
    out = link_out(p, folder)
    if out is not None:
        link, target, real = out
        raise SourceError(f"{link}: a symlink to {target!r} (that is {real}), outside {folder}; vars files and "
                          f"folders must stay in their folder: copy the file in, or link within {folder}")


def _regular(p: Path) -> None:
    try:
        st = p.stat()
    except OSError as e:
        raise SourceError(f"{p}: cannot read the vars file: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SourceError(f"{p}: not a regular file (a pipe, a socket or a device); a vars file must be a YAML "
                          "file: remove it or replace it with one")
    if st.st_size > MAX_BYTES:
        raise SourceError(f"{p}: vars file larger than {MAX_BYTES // 2**20} MiB ({st.st_size:,} bytes); "
                          "is it a vars file? Keep group_vars/ and host_vars/ to YAML files of variables")


def _dir_files(folder: Path, root: Path, found: list[Path], seen: set[str], depth: int = 0) -> None:
    entries = listed(folder, root, seen, depth, "a vars folder",
                     "is it a vars folder? Keep its files a level or two deep")
    if entries is None:
        return
    for entry in entries:
        if entry.startswith(".") or entry.endswith("~"):
            continue
        p = folder / entry
        ext = os.path.splitext(entry)[1]
        if ext and ext not in EXTENSIONS:
            continue
        if not p.exists():
            continue  # a dangling link (or an entry gone meanwhile): nothing to read, as Ansible skips it
        _inside(p, root)
        if p.is_dir():
            if not ext:
                _dir_files(p, root, found, seen, depth + 1)
            continue
        _regular(p)
        found.append(p)
        if len(found) > MAX_FILES:
            raise SourceError(f"{folder}: more than {MAX_FILES} vars files; is it a vars folder?")


def count_read(listings: dict | None, f: Path) -> None:
    """One more file this load reads (a file of an inventory folder, a group_vars/ or host_vars/ file): its size
    added to the load's count, kept in ``listings`` (None: not counted); past :data:`MAX_LOAD_BYTES`, one line
    naming the file that went past it, and what to do."""
    if listings is None:
        return
    try:
        size = f.stat().st_size
    except OSError:
        size = 0  # gone since it was listed: its read says so
    listings[_READ] = listings.get(_READ, 0) + size
    if listings[_READ] > MAX_LOAD_BYTES:
        raise SourceError(f"{f}: the inventory, group_vars/ and host_vars/ files read for this inventory hold more "
                          f"than {MAX_LOAD_BYTES >> 20:,} MiB together (bringup's bound on one load); is it an "
                          "inventory? Keep vars files to variables (data and models belong elsewhere), encrypt single "
                          "values (!vault) rather than whole files (about 4 times the text), or split the fleet into "
                          "several inventories, one run each")


def load_vars(folder: Path, name: str, load: Callable[[Path, Path], Any], listings: dict | None = None,
              doubts: list[tuple[str, str]] | None = None) -> list[dict[str, Value]]:
    """``name``'s variables from ``folder``, one mapping per file in order; ``load`` reads one YAML file
    (:func:`~.yamlfile.load_yaml_lines` with the run's vault: the data and where its keys are); ``listings``
    as :func:`vars_files` takes it; ``doubts`` gathers the variable names taken that are not Ansible's form
    (:func:`~.model.var_name`), for one warning each.  A file ansible-vault encrypted whole is told by its line
    and what is wrong only (:func:`~.yamlfile.sealed_error`): a key in it that is no variable name, or one not
    Ansible's form, may be a secret pasted there, and is never quoted.  So is a file other users may not read
    (:func:`~.yamlfile.private_mode`: a copy of, or a hard link to, ``/etc/shadow`` read as ``root:$6$...::`` keys),
    told as the inventory file itself is: its line and what is wrong, never its text."""
    out: list[dict[str, Value]] = []
    for f in vars_files(folder, name, listings):
        count_read(listings, f)
        try:
            data, lines = load(f, folder)
        except (InventoryError, SourceError) as e:
            # Only an error that may quote the file's text (it has a ``kind``: what is wrong, in words quoting
            # nothing) is retold; a vault password missing or wrong, or a read that failed, quote none of it and
            # keep their own line, which says how to fix them.
            private = None if isinstance(e, VaultError) or getattr(e, "kind", None) is None else private_mode(f)
            if private is None:
                raise
            raise sealed_error(e, f, private) from None
        if data is None:
            continue
        if not isinstance(data, dict):
            raise SourceError(f"{f}: a vars file must be a mapping of variable: value, got "
                              f"{type(data).__name__}; write `name: value` lines")
        where = lines.of(data)
        sealed = getattr(lines, "sealed", False)
        mine: list[tuple[str, str]] = []
        try:
            out.append({var_name(k, f"{f}:{where[k]}" if k in where else str(f), mine):
                        Value(v, f"{f}:{where[k]}" if k in where else str(f)) for k, v in data.items()})
        except SourceError as e:
            private = None if sealed else private_mode(f)  # (a stat only for a file that has something to say)
            if not sealed and private is None:
                raise
            raise sealed_error(e, f, private) from None
        if sealed:
            sealed_doubts(mine, f)
        else:
            private_doubts(mine, f)  # a copy of /etc/shadow here: its lines as names, refused by line only
        if doubts is not None:
            doubts.extend(mine)
    return out
