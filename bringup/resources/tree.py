"""A directory tree mirrored from the control machine, by checksum."""
from __future__ import annotations

import hashlib
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import printable
from ..ssh.command import sh
from ..errors import InputError
from ..userfile import read_capped, walk
from .base import Plan, Resource, Upload
from .files import File, _check_path
from .upload import file_sha256

__all__ = ["Tree", "LocalFile", "local_tree", "parse_manifest", "format_manifest"]


@dataclass(frozen=True)
class LocalFile:
    """A file of the control machine to ship, hashed once (streamed) and never held in memory:
    ``root``/``rel`` is its path; the tree streams it to the host (tar over the connection)."""

    root: Path
    rel: str
    sha256: str
    executable: bool

    @property
    def path(self) -> Path:
        return self.root / self.rel

    def read_bytes(self, limit: int = 1 << 20) -> bytes:
        """Its content, for the few readers that need it whole (a config.pbtxt to validate): at most ``limit``
        bytes, else one line of bad input."""
        return read_capped(self.path, limit, InputError, missing=f"{self.path}: gone from models_dir",
                           unreadable=f"{self.path}: cannot be read: ",
                           too_large=f"{self.path}: larger than {limit >> 10} KiB; is it a model's config?",
                           not_regular=f"{self.path}: not a regular file (a pipe, a socket or a device)")

#: Never shipped: caches and editor droppings of the control machine.
IGNORED_DIRS = {"__pycache__", ".git"}


def _unshippable(rel: str) -> str:
    """What keeps ``rel`` (a path as os.walk gives it) from travelling in a script and a tar: '' when nothing."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8, kept by Python as a surrogate escape
        return "a byte that is not UTF-8"
    return "a newline" if "\n" in rel else "a backslash" if "\\" in rel else ""


#: sha256 by (path, size, mtime): a run hashes each model file once, however often it lists the folder.
_HASHED: dict[tuple[str, int, int], str] = {}


def local_tree(source: Path, exclude: set[str] = frozenset()) -> dict[str, LocalFile]:
    """The files under ``source``: ``{relative path: LocalFile}``, sorted; each hashed once, in chunks."""
    source = Path(source)
    if not source.is_dir():
        raise InputError(f"{source}: no such directory (models_dir)")
    out: dict[str, LocalFile] = {}
    for dirpath, dirnames, filenames in walk(source):  # no recursion: a folder 1,000 deep is no traceback
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.startswith(".") or fn.endswith((".pyc", "~")):
                continue
            p = Path(dirpath) / fn
            rel = p.relative_to(source).as_posix()
            bad = _unshippable(rel)
            if bad:
                shown = printable(str(p)).replace("\n", "\\n")
                raise InputError(f"{shown}: a file name in models_dir with {bad} cannot be shipped; rename it")
            if rel in exclude or p.is_symlink():
                continue
            st = p.stat()
            key = (str(p), st.st_size, st.st_mtime_ns)
            if key not in _HASHED:  # validation and the plan read one run's files: hashed once
                _HASHED[key] = file_sha256(p)
            out[rel] = LocalFile(source, rel, _HASHED[key], os.access(p, os.X_OK))
    return out


class Tree(Resource):
    """The files under ``path`` include ``files`` (``{relative path: LocalFile | (content, executable)}``).

    Only files whose sha256 differs are written, atomically.  A :class:`LocalFile`
    (a model file, gigabytes for a TensorRT plan) is streamed: the changed ones
    travel as one tar over the connection into a staging folder beside them,
    are checked against the sha256 planned, and renamed into place; content
    given as bytes (small files) travels inside the script.
    Paths in ``keep`` are left alone (other resources write them); given as
    ``{relative path: sha256}`` they are recorded as shipped too.

    With ``manifest`` (a file outside ``path``) the tree records what it
    shipped (sha256 and path, ``sha256sum``'s format) and only ever removes
    such files: a file it did not ship is never touched, nor is a shipped file
    changed since (both counted in the plan, ``kept``).  With ``holding`` (a
    folder outside ``path``) a shipped file no longer wanted is moved there
    instead of removed, as is a file of someone else's that a shipped one
    replaces (:class:`~bringup.resources.revisions.Revisions` keeps the good
    state of such a tree: it snapshots it, puts it back, and deletes the
    holding folder once the new state is known good).  Without ``manifest``
    the tree owns ``path`` wholly: every file it does not hold is removed.

        Tree("/data/models", local_tree(Path("models")), keep={"resnet_trt/config.pbtxt": sha},
             manifest="/opt/triton/models.manifest", holding="/opt/triton/held/<revision>")
    """

    kind = "tree"
    read_alongside = True

    def __init__(self, path: str, files: dict[str, tuple[bytes, bool]], *,
                 keep: set[str] | dict[str, str] = frozenset(), manifest: str | None = None,
                 holding: str | None = None, notify=()):
        super().__init__(path, notify=notify)
        _check_path(path)
        self.path = path.rstrip("/") or "/"
        self.files = dict(files)
        self.keep = set(keep)
        self.sha = {rel: f.sha256 if isinstance(f, LocalFile) else hashlib.sha256(f[0]).hexdigest()
                    for rel, f in self.files.items()}
        if len({f.root for f in self.files.values() if isinstance(f, LocalFile)}) > 1:
            raise InputError(f"{path}: the files to stream come from several folders; one tree takes one")
        check_outside(self.path, manifest, holding)
        self.manifest = manifest
        self.holding = holding.rstrip("/") if holding else None
        #: What the tree ships, recorded in the manifest: its files and the kept paths with a sha256.
        self.shipped = dict(self.sha)
        if isinstance(keep, dict):
            self.shipped.update({rel: sha for rel, sha in keep.items() if sha})

    def read(self) -> str:
        # sha256sum prefixes a line with "\" when it escaped the name: such
        # files cannot be ours, and are removed by their literal find name below.
        out = sh(
            "d=%s\n"
            "if [ -L \"$d\" ] || { [ -e \"$d\" ] && [ ! -d \"$d\" ]; }; then echo type=other\n"
            "elif [ -d \"$d\" ]; then echo type=dir; cd -- \"$d\" && find . -type f -exec sha256sum -- {} + "
            "| sed 's/^/f=/'; find . -mindepth 1 ! -type f ! -type d | sed 's/^/x=/'\n"
            "else echo type=absent; fi",
            self.path,
        )
        if self.manifest:
            out += "\n" + sh("if [ -f %s ]; then echo manifest=yes; sed 's/^/m=/' -- %s; fi",
                             self.manifest, self.manifest)
        return out

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
        if self.manifest is None:
            return self._plan_owned(kind, have, odd)
        text = "\n".join(l[2:] for l in lines if l.startswith("m="))
        # A manifest written for another folder (the repository moved) says nothing about this one.
        before = parse_manifest(text) if manifest_folder(text) in (None, self.path) else {}
        changes: dict = {}
        cmds: list[str] = []
        aside: list[str] = []  # moved into the holding folder (or removed without one)
        streamed: list[str] = []
        stream_asides: list[str] = []
        for rel, f in sorted(self.files.items()):
            if have.get(rel) != self.sha[rel]:
                old = have[rel][:12] if rel in have else "absent"
                held = None
                if rel in have and before.get(rel) != have[rel] and self.holding:
                    # Someone else's file where ours goes: held until the new state is known good.
                    old += " (not shipped by bringup: held)"
                    held = self._aside(rel)
                changes[rel] = (old, self.sha[rel][:12])
                if isinstance(f, LocalFile):
                    streamed.append(rel)
                    stream_asides += [held] if held else []
                    continue
                cmds += [held] if held else []
                w = File(posixpath.join(self.path, rel), content=f[0], mode="0755" if f[1] else "0644", backup=False)
                cmds.append(w._write())
        stale = sorted(rel for rel, sha in before.items()
                       if rel not in self.files and rel not in self.keep and have.get(rel) == sha)
        for rel in stale:
            changes[rel] = (have[rel][:12], f"absent (held in {self.holding} until ready)" if self.holding
                            else "absent")
            cmds.append(self._aside(rel) if self.holding else sh("rm -f -- %s", posixpath.join(self.path, rel)))
            aside.append(rel)
        if aside:
            cmds.append(self._prune(aside))
        mine = set(self.files) | self.keep
        edited = sorted(rel for rel, sha in before.items() if rel not in mine and rel in have and have[rel] != sha)
        others = sorted(r for r in set(have) | set(odd) if r not in mine and r not in before)
        kept = []
        if others:
            kept.append(f"{len(others)} file(s) bringup did not ship (e.g. {others[0]})")
        if edited:
            kept.append(f"{len(edited)} file(s) changed since bringup shipped them (e.g. {edited[0]})")
        if before != self.shipped:
            changes[self.manifest] = (f"{len(before)} file(s) shipped" if before else "absent",
                                      f"{len(self.shipped)} file(s) shipped")
            cmds.append(self._write_manifest())
        if not cmds and not streamed:
            return Plan.noop(f"{self.path}: all {len(self.files)} files have the same sha256"
                             + (f"; left as they are: {'; '.join(kept)}" if kept else ""))
        if kept:
            changes["kept"] = "; ".join(kept)
        if kind == "absent":
            cmds.insert(0, sh("mkdir -p -- %s", self.path))
        return Plan(commands=cmds, changes=changes,
                    upload=self._stream(streamed, stream_asides) if streamed else None)

    def _stream(self, rels: list[str], asides: list[str]) -> Upload:
        """The changed local files as one tar, received beside their place, checked, renamed in."""
        root = next(f.root for f in self.files.values() if isinstance(f, LocalFile))
        receive = [
            "set -e",
            sh("d=%s", self.path),
            'mkdir -p -- "$d"',
            # Beside the files (one filesystem: the renames are atomic), hidden, gone whatever happens.
            'st=$(mktemp -d -- "$d/.bringup-incoming.XXXXXX")',
            "trap 'rm -rf -- \"$st\"' EXIT",
            'tar -xf - -C "$st" --no-same-owner --no-same-permissions',
            'check() { got=$(sha256sum < "$st/$1" | cut -c1-64); [ "$got" = "$2" ] || '
            '{ echo "received $1 with sha256 $got, not $2: it changed on the control machine while it was sent"; '
            'exit 1; }; }',
            *[sh("check %s %s", rel, self.sha[rel]) for rel in rels],
            *asides,
        ]
        for rel in rels:
            mode = "0755" if self.files[rel].executable else "0644"
            receive.append(sh('mkdir -p -- "$d/$(dirname -- %s)" && chmod %s -- "$st/"%s && mv -f -- "$st/"%s "$d/"%s',
                              rel, mode, rel, rel, rel))
        size = sum(self.files[r].path.stat().st_size for r in rels)
        return Upload(["tar", "-C", str(root), "-cf", "-", "--", *rels], "\n".join(receive),
                      what=f"{len(rels)} file(s), {size / 1e6:.1f} MB, streamed from {root}")

    def _plan_owned(self, kind: str, have: dict[str, str], odd: list[str]) -> Plan:
        changes: dict = {}
        cmds: list[str] = []
        streamed = []
        for rel, f in sorted(self.files.items()):
            if have.get(rel) != self.sha[rel]:
                changes[rel] = (have[rel][:12] if rel in have else "absent", self.sha[rel][:12])
                if isinstance(f, LocalFile):
                    streamed.append(rel)
                    continue
                w = File(posixpath.join(self.path, rel), content=f[0], mode="0755" if f[1] else "0644", backup=False)
                cmds.append(w._write())
        extra = sorted(r for r in set(have) | set(odd) if r not in self.files and r not in self.keep)
        for rel in extra:
            changes[rel] = (have.get(rel, "?")[:12], "absent")
            cmds.append(sh("rm -f -- %s", posixpath.join(self.path, rel)))
        if extra:
            cmds.append(sh("find %s -mindepth 1 -type d -empty -delete", self.path))
        if not cmds and not streamed:
            return Plan.noop(f"{self.path}: all {len(self.files)} files have the same sha256")
        if kind == "absent":
            cmds.insert(0, sh("mkdir -p -- %s", self.path))
        return Plan(commands=cmds, changes=changes, upload=self._stream(streamed, []) if streamed else None)

    def _aside(self, rel: str) -> str:
        src, dst = posixpath.join(self.path, rel), posixpath.join(self.holding, rel)
        return sh("mkdir -p -- %s && mv -f -- %s %s", posixpath.dirname(dst), src, dst)

    def _prune(self, rels: list[str]) -> str:
        """Remove the folders that moving ``rels`` away left empty (never ``path`` itself, nor others)."""
        dirs = sorted({posixpath.dirname(r) for r in rels if posixpath.dirname(r)}, key=lambda d: -d.count("/"))
        return "\n".join([sh("d=%s", self.path), PRUNE] + [sh("prune %s", d) for d in dirs])

    def _write_manifest(self) -> str:
        text = format_manifest(self.shipped, self.path)
        d = posixpath.dirname(self.manifest) or "/"
        return "\n".join([
            "set -e", sh("m=%s", self.manifest), sh("mkdir -p -- %s", d),
            sh('printf %%s %s > "$m.tmp"', text), 'mv -f -- "$m.tmp" "$m"'])


#: prune DIR: remove DIR (relative to $d) and its parents while empty, never $d itself.
PRUNE = ('prune() { p=$1; while [ -n "$p" ] && [ "$p" != . ] && [ "$p" != / ]; do '
          'rmdir -- "$d/$p" 2>/dev/null || break; p=$(dirname -- "$p"); done; }')


def check_outside(path: str, *others: str | None) -> None:
    """Each of ``others`` given (a tree's manifest, its holding folder) is a valid path outside ``path``."""
    for p in others:
        if p is not None:
            _check_path(p)
            if _inside(p, path):
                raise InputError(f"{p} is inside {path}: the tree's manifest and holding folder "
                                 "must lie outside it")


def _inside(p: str, root: str) -> bool:
    p, root = posixpath.normpath(p), posixpath.normpath(root)
    return p == root or p.startswith(root.rstrip("/") + "/")


def format_manifest(shipped: dict[str, str], path: str) -> str:
    """The manifest's text: a comment, then ``sha256  relative path`` per file, sorted."""
    head = f"# bringup: the files it shipped into {path} (sha256, path); it removes no other file there\n"
    return head + "".join(f"{sha}  {rel}\n" for rel, sha in sorted(shipped.items()))


def manifest_folder(text: str) -> str | None:
    """The folder a manifest's comment names (None without one)."""
    m = re.match(r"^# bringup: the files it shipped into (/.*?) \(sha256, path\)", text)
    return m.group(1) if m else None


def parse_manifest(text: str) -> dict[str, str]:
    """``{relative path: sha256}`` from a manifest's text (comments and malformed lines skipped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        sha, sep, rel = line.partition("  ")
        if sep and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha) and rel and not rel.startswith("/"):
            rel = posixpath.normpath(rel)
            if not rel.startswith("../") and rel != "..":
                out[rel] = sha
    return out
