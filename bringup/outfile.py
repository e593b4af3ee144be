"""Files bringup writes for the operator (pages, reports, results, records), and the folders they go in.

A shared leaf, as :mod:`bringup.userfile` is for reading.  :func:`write_atomic` never opens the final
name: the text goes into a temporary file made in the same folder with ``O_CREAT|O_EXCL`` (``mkstemp``:
a planted link or FIFO under any name is never followed or opened), is flushed, then renamed over the
final name, so a link, a FIFO or an old page there is replaced, never written through, and a fault leaves
the old file whole and no temporary one.  :func:`out_folder` checks an output folder before anything runs:
a folder, or one that can be made, writable, and not a symbolic link that leads out of the folder it
sits in (refused, naming the link and where it points).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import InputError, quoted
from .userfile import link_out

__all__ = ["write_atomic", "out_folder", "sub_folder"]


def write_atomic(path: str | Path, data: str | bytes, *, mode: int = 0o644, encoding: str = "utf-8",
                 errors: str = "strict", newline: str | None = None) -> Path:
    """Replace ``path`` with ``data`` whole (see the module's words); the path.  ``mode`` less the umask."""
    path = Path(path)
    body = data if isinstance(data, bytes) else data.encode(encoding, errors) if newline is None else \
        data.replace("\n", newline).encode(encoding, errors)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:80]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fchmod(f.fileno(), mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def out_folder(v: Any, flag: str = "--out") -> Path:
    """A folder to write into: it exists as a folder, or can be made (no file on the way), is writable, and
    is no symbolic link out of its own folder."""
    text = str(v)
    if not text.strip() or "\0" in text or "\n" in text:
        raise InputError(f"{flag} {quoted(text, 120)}: a folder name")
    try:
        return _out_folder(text, flag)
    except OSError as e:  # a name too long for the file system, a loop of links
        raise InputError(f"{flag} {quoted(text, 120)}: {e.strerror or e}; give a folder of your own, like reports/bench"
                         ) from None


def _out_folder(text: str, flag: str) -> Path:
    p = Path(text)
    out = link_out(p, p.parent) if p.is_symlink() else None
    if out is not None:
        raise InputError(f"{flag} {quoted(text, 120)} is a symbolic link to {quoted(out[1], 120)}, outside {p.parent}; name the real folder "
                         "(pages are never written through a link)")
    probe = p
    while True:
        if probe.exists() or probe.is_symlink():
            if not probe.is_dir():
                what = "it" if probe == p else str(probe)
                raise InputError(f"{flag} {quoted(text, 120)}: {what} is not a folder (results are several files: give a "
                                 "folder)")
            if not os.access(probe, os.W_OK | os.X_OK):
                raise InputError(f"{flag} {quoted(text, 120)}: {probe} is not writable")
            _can_write(probe, text, flag)
            return p
        if probe.parent == probe:
            return p
        probe = probe.parent


def sub_folder(parent: Path, name: str) -> Path:
    """``parent/name`` made if missing, for a folder bringup keeps inside an output folder; a link (or a file)
    planted there is refused, naming it."""
    p = parent / name
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        raise InputError(f"{p} is {'a symbolic link' if p.is_symlink() else 'not a folder'}; bringup writes "
                         "only into a folder of its own there: remove it")
    p.mkdir(parents=True, exist_ok=True)
    return p


def _can_write(folder: Path, text: str, flag: str) -> None:
    """A folder made and removed in ``folder``: whether results can be written there, known before measuring
    (os.access says yes to root in /proc and /sys, where nothing can be made).  Nothing is left."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".bringup-probe-", dir=folder))
    except OSError as e:
        raise InputError(f"{flag} {quoted(text, 120)}: cannot write in {folder} ({e.strerror or e}); give a folder of "
                         "your own, like reports/bench") from None
