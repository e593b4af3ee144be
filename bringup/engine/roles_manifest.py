"""The roles' manifest: every role's defaults and the files they came from, written beside the roles' bytecode
after a run that imported every role, so that a later run imports only the roles it selected (issue 42: a sysctl
no-op no longer imports the twelve roles for their defaults).  A manifest is trusted only when every file it
names is the very file it was made from.  Cut from bringup/engine/roles.py (issue 43 item 2): the cache apart from the
role contract and the loader that consults it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BringupError
from .roles_selected import merged_defaults

if TYPE_CHECKING:
    from .role_contract import Role

__all__ = ["manifest_path", "read_manifest", "write_manifest"]


#: The largest roles manifest read: a project's defaults are a few KiB.
_MANIFEST_MAX = 1 << 20
_MANIFEST_FORMAT = 1


def manifest_path(rdir: Path) -> Path | None:
    """Where the roles' manifest lives: beside their bytecode (``roles/__pycache__``, or under
    ``PYTHONPYCACHEPREFIX``), one per interpreter, as a ``.pyc`` is."""
    try:
        return Path(importlib.util.cache_from_source(str(rdir / "__init__.py"))).with_name(
            f"bringup-roles.{sys.implementation.cache_tag}.json")
    except (NotImplementedError, ValueError):  # pragma: no cover - an interpreter without a bytecode cache
        return None


def _stamps(files: list[str]) -> dict[str, list[int] | None]:
    """Each file's (modification time, size, inode): what says it is the file the manifest was made from."""
    out: dict[str, list[int] | None] = {}
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            out[f] = None
            continue
        out[f] = [st.st_mtime_ns, st.st_size, st.st_ino]
    return out


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` comes back from JSON as it is (mappings of text, lists, text, whole and finite numbers,
    true/false, null): a default that would not (a tuple, a set, an object) keeps the roles imported."""
    if depth > 32:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def read_manifest(path: Path | None, found: dict[str, tuple[Path, Path | None]]) -> dict[str, dict] | None:
    """The defaults of every role by name, from a manifest made from exactly these role files (and the modules
    they imported), or None: no manifest, another bringup, a file changed, or anything unexpected in it."""
    from .. import __version__

    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(_MANIFEST_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MANIFEST_MAX:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not (isinstance(doc, dict) and doc.get("format") == _MANIFEST_FORMAT and doc.get("bringup") == __version__
            and isinstance(doc.get("files"), dict) and isinstance(doc.get("roles"), dict)):
        return None
    roles = doc["roles"]
    if sorted(roles) != sorted(found) or any(
            not isinstance(roles[n], dict) or roles[n].get("path") != str(where[0])
            or not isinstance(roles[n].get("defaults"), dict) or not _plain(roles[n]["defaults"])
            for n, where in found.items()):
        return None
    files = doc["files"]
    if not all(isinstance(k, str) for k in files) or _stamps(list(files)) != files:
        return None
    return {n: roles[n]["defaults"] for n in found}


def _role_sources(rdir: Path) -> list[str]:
    """The ``*.py`` files under ``rdir`` (``__pycache__`` left out), listed without recursion
    (:func:`bringup.userfile.walk`: pathlib's ``rglob`` recursed once a level, so a roles folder 1,000 deep, as a
    signed pull revision may hold, was a RecursionError traceback)."""
    from ..userfile import walk

    found = []
    for folder, dirs, names in walk(rdir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return found


def write_manifest(path: Path | None, rdir: Path, found: dict[str, tuple[Path, Path | None]],
                    roles: dict[str, Role], imported: list[str]) -> None:
    """After every role loaded and was held to the contract: record their defaults and the files they came from
    (the role files, bringup's modules, whatever the roles imported first), when the process writes bytecode
    and every default comes back from JSON as it is.  Best effort: a folder that cannot be written keeps the
    next run importing every role, as before."""
    from .. import __version__

    if path is None or sys.dont_write_bytecode:
        return
    try:
        defaults = {n: r.defaults for n, r in roles.items()}
        merged_defaults(list(roles.values()))  # two roles' defaults that disagree: refused at each run, never cached
    except BringupError:
        return
    if not all(_plain(d) for d in defaults.values()):
        return
    files = sorted({*_role_sources(rdir), *imported,
                    *(str(m.__file__) for n, m in list(sys.modules.items())
                      if (n == "bringup" or n.startswith("bringup.")) and getattr(m, "__file__", None))})
    doc = {"format": _MANIFEST_FORMAT, "bringup": __version__, "files": _stamps(files),
           "roles": {n: {"path": str(found[n][0]), "defaults": defaults[n]} for n in roles}}
    try:
        from ..outfile import write_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(doc, sort_keys=True))
    except (OSError, ValueError):
        pass
