"""A directory tree mirrored from the control machine, by checksum."""
from __future__ import annotations

import hashlib
import os
import posixpath
from pathlib import Path

from ..command import sh
from ..errors import InputError
from .base import Plan, Resource
from .files import File, _check_path

__all__ = ["Tree", "local_tree"]

#: Never shipped: caches and editor droppings of the control machine.
IGNORED_DIRS = {"__pycache__", ".git"}


def local_tree(source: Path, exclude: set[str] = frozenset()) -> dict[str, tuple[bytes, bool]]:
    """The files under ``source``: ``{relative path: (content, executable)}``, sorted."""
    source = Path(source)
    if not source.is_dir():
        raise InputError(f"{source}: no such directory (models_dir)")
    out: dict[str, tuple[bytes, bool]] = {}
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.startswith(".") or fn.endswith((".pyc", "~")):
                continue
            p = Path(dirpath) / fn
            rel = p.relative_to(source).as_posix()
            if "\n" in rel or "\\" in rel:
                raise InputError(f"{p}: file names with newlines or backslashes cannot be shipped")
            if rel in exclude or p.is_symlink():
                continue
            out[rel] = (p.read_bytes(), os.access(p, os.X_OK))
    return out


class Tree(Resource):
    """The files under ``path`` are exactly ``files`` (``{relative path: (content, executable)}``).

    Only files whose sha256 differs are written (atomically, one by one);
    files the tree does not hold are removed, then empty folders.  Paths in
    ``keep`` are left alone (other resources manage them).

        Tree("/data/models", local_tree(Path("models")), keep={"resnet_trt/config.pbtxt"})
    """

    kind = "tree"

    def __init__(self, path: str, files: dict[str, tuple[bytes, bool]], *, keep: set[str] = frozenset(),
                 notify=()):
        super().__init__(path, notify=notify)
        _check_path(path)
        self.path = path.rstrip("/") or "/"
        self.files = dict(files)
        self.keep = set(keep)
        self.sha = {rel: hashlib.sha256(c).hexdigest() for rel, (c, _x) in self.files.items()}

    def read(self) -> str:
        # sha256sum prefixes a line with "\" when it escaped the name: such
        # files cannot be ours, and are removed by their literal find name below.
        return sh(
            "d=%s\n"
            "if [ -L \"$d\" ] || { [ -e \"$d\" ] && [ ! -d \"$d\" ]; }; then echo type=other\n"
            "elif [ -d \"$d\" ]; then echo type=dir; cd -- \"$d\" && find . -type f -exec sha256sum -- {} + "
            "| sed 's/^/f=/'; find . -mindepth 1 ! -type f ! -type d | sed 's/^/x=/'\n"
            "else echo type=absent; fi",
            self.path,
        )

    def plan(self, current: str) -> Plan:
        lines = current.splitlines()
        kind = next((l[5:] for l in lines if l.startswith("type=")), "absent")
        if kind == "other":
            return Plan.fail(f"{self.path} exists and is not a directory")
        have: dict[str, str] = {}
        odd: list[str] = []
        for line in lines:
            if line.startswith("f="):
                sha, _, name = line[2:].partition("  ")
                if sha.startswith("\\"):
                    odd.append(name)
                else:
                    have[posixpath.normpath(name)] = sha
            elif line.startswith("x="):
                odd.append(posixpath.normpath(line[2:]))
        changes: dict = {}
        cmds: list[str] = []
        for rel, (content, executable) in sorted(self.files.items()):
            if have.get(rel) != self.sha[rel]:
                changes[rel] = (have[rel][:12] if rel in have else "absent", self.sha[rel][:12])
                f = File(posixpath.join(self.path, rel), content=content, mode="0755" if executable else "0644",
                         backup=False)
                cmds.append(f._write())
        extra = sorted(r for r in set(have) | set(odd) if r not in self.files and r not in self.keep)
        for rel in extra:
            changes[rel] = (have.get(rel, "?")[:12], "absent")
            cmds.append(sh("rm -f -- %s", posixpath.join(self.path, rel)))
        if extra:
            cmds.append(sh("find %s -mindepth 1 -type d -empty -delete", self.path))
        if not cmds:
            return Plan.noop(f"{self.path}: all {len(self.files)} files have the same sha256")
        if kind == "absent":
            cmds.insert(0, sh("mkdir -p -- %s", self.path))
        return Plan(commands=cmds, changes=changes)
