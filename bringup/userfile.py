"""A file the operator names (an inventory, a retry file), read whole but bounded, its refusal one line; what a
path the operator names is (:func:`kind`: a name the system refuses to look at is one line too); and whether a
path leads out of its folder through a symlink (:func:`link_out`); :func:`walk`, a folder tree listed without
recursion.  :func:`home` expands a leading ``~`` for every
reader of a path the operator or an inventory names, never raising."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Callable

__all__ = ["home", "kind", "read_capped", "read_regular", "link_out", "walk", "OUT_OF_FOLDER",
           "fd_path", "within", "opened_within"]


def home(path: str | Path) -> str:
    """``path`` with a leading ``~`` or ``~user`` expanded as ssh and Ansible do, never raising: a user this
    machine does not know (``~nouser/key``), no home to be found, or a NUL byte in the name leave the text as it
    was, so the caller's look at the path says what is wrong in one line (pathlib's ``expanduser()`` raised
    RuntimeError there, ``os.path.expanduser`` ValueError for a NUL byte: tracebacks)."""
    text = os.fspath(path)
    if not isinstance(text, str) or not text.startswith("~"):
        return text
    try:
        return os.path.expanduser(text)
    except (KeyError, ValueError, RuntimeError, OSError):
        return text


def _not_a_file(path: Path) -> bool:
    return not path.is_file() and path.exists()


def kind(path: str | Path, error: Callable[[str], Exception], where: str) -> str:
    """What ``path`` is, its links followed: ``"missing"`` (nothing there, or a link to nothing or to itself),
    ``"file"`` (a regular file), ``"folder"`` or ``"special"`` (a pipe, a socket, a device).  A path the system
    will not look at (a name too long, a folder it may not enter) is ``error("<where>: <reason>")``, raised from
    None: pathlib's ``exists()`` and ``is_file()`` raise there, and a flag's value became a traceback."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "missing"
        raise error(f"{where}: {e.strerror or e}; give a path this user can look at") from None
    except ValueError:  # a NUL byte in the name
        raise error(f"{where}: a path holding a NUL byte") from None
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "special"


def read_regular(fd: int, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of the regular file open at ``fd`` (opened ``O_NONBLOCK``, and left so): the read of
    a file that waits for data although it calls itself regular (``/proc/kmsg``, whose read blocks until the kernel
    logs and takes what it reads from the system log) raises OSError(EAGAIN) in words, where a blocking read hung the
    run for ever; a file on a disk reads as it did (the flag does not apply to it).  Every reader of a file an
    operator or an inventory names that must be regular reads it here."""
    chunks: list[bytes] = []
    got = 0
    while got <= limit:
        try:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
        except BlockingIOError:
            raise OSError(errno.EAGAIN, "it waits for data (a kernel file such as /proc/kmsg), no file to read") \
                from None
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_capped(path: str | Path, limit: int, error: Callable[[str], Exception], *, missing: str,
                unreadable: str, too_large: str, not_regular: str | None = None,
                refuse: Callable[[Path], bool] = _not_a_file, follow: bool = True,
                inside: str | Path | None = None, out_of_folder: str = "") -> bytes:
    """At most ``limit`` bytes of the file at ``path``, else ``error(line)`` (raised ``from None``).

    The line is ``missing`` when there is no such file, ``unreadable`` followed by the system's reason
    when it cannot be read (``a path holding a NUL byte`` for a name no system call takes: ``os.open`` raises
    ValueError there, which was a traceback), ``too_large`` when it holds more than ``limit`` bytes; with ``not_regular``,
    that when ``refuse`` says the path is no file to read, before it is opened (by default: whatever
    exists and is not a regular file: a folder, a device, a pipe whose read waits for a writer).
    ``follow=False``: a file bringup itself writes there (a regular file, put by a rename), never read through a
    symbolic link (``O_NOFOLLOW``): a link is ``not_regular`` (``unreadable`` + "a symbolic link" without it).
    ``inside``: a saved file of bringup's in that folder (an accept or bench result), which may be a link only
    within it: a file that leads out of ``inside`` (its own link, or a folder's on the way) is
    ``error(out_of_folder or OUT_OF_FOLDER)``.  Judged by what was opened (the descriptor's own path), so a link
    swapped in between a look and the open is caught too.
    """
    p = Path(path)
    if "\x00" in str(p):  # said before any look: pathlib's looks call it no file, os.open raises ValueError
        raise error(unreadable + "a path holding a NUL byte")
    try:
        if not_regular is not None and refuse(p):
            raise error(not_regular)
        # Opened without waiting (a FIFO put there after the look above opens at once), then held to what
        # the look said: a regular file, unless the caller takes others.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
        with os.fdopen(fd, "rb") as f:
            if inside is not None and not opened_within(fd, p, inside):
                raise error(out_of_folder or OUT_OF_FOLDER)
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            if not_regular is not None and not regular and refuse is _not_a_file:
                raise error(not_regular)
            if regular:
                data = read_regular(fd, limit)
            else:  # what the caller takes besides regular files
                os.set_blocking(fd, True)
                data = f.read(limit + 1)
    except FileNotFoundError:
        raise error(missing) from None
    except OSError as e:
        if e.errno == errno.ELOOP and not follow and os.path.islink(p):
            raise error(not_regular if not_regular is not None else unreadable + "a symbolic link") from None
        raise error(unreadable + str(e.strerror or e)) from None
    if len(data) > limit:
        raise error(too_large)
    return data


#: The refusal of :func:`read_capped` with ``inside`` for a saved file that leads out of its folder.
OUT_OF_FOLDER = "a symbolic link out of its folder"


def fd_path(fd: int, path: str | Path) -> str:
    """Where the file or folder open at ``fd`` (opened as ``path``) is: the descriptor's own path where the system
    tells it (/proc/self/fd: what a link swapped in after the open does not change), else ``path`` resolved now."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def within(real: str, root: str) -> bool:
    """Whether the resolved path ``real`` is the resolved folder ``root`` or lies under it."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def opened_within(fd: int, path: str | Path, folder: str | Path) -> bool:
    """Whether the file open at ``fd`` (opened as ``path``) lies within ``folder`` (resolved)."""
    return within(fd_path(fd, path), os.path.realpath(folder))


def link_out(path: str | Path, folder: str | Path) -> tuple[Path, str, Path] | None:
    """Whether ``path`` leads outside ``folder`` through a symlink (its own, or a folder's on the way).

    None when ``path``, every link resolved, stays inside ``folder`` (resolved too: a link that stays
    inside is fine).  Else ``(link, points_to, resolved)``: the first symlink on the way from ``folder``
    (the path itself when none is found on the way), the text it holds, and where ``path`` really leads.
    """
    p, root = Path(path), Path(os.path.realpath(folder))
    real = Path(os.path.realpath(p))
    if real == root or root in real.parents:
        return None
    try:
        parts = p.relative_to(folder).parts
    except ValueError:
        parts = ()
    cur = Path(folder)
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            return cur, _readlink(cur), real
    return p, _readlink(p), real


def _readlink(p: Path) -> str:
    try:
        return os.readlink(p)
    except OSError:
        return str(os.path.realpath(p))


def walk(top: str | Path, as_entries: bool = False):
    """``os.walk(top)`` (top-down, links never followed, ``dirs`` pruned in place by the caller), with a stack of
    its own instead of recursion: Python 3.11's ``os.walk`` recurses once a level, so a tree 1,000 folders deep
    (a signed revision, a models folder: Git checks out 1,500 levels) ended in RecursionError, a traceback.
    A folder that cannot be listed is skipped, as ``os.walk`` does.  ``as_entries``: the files come as their
    :class:`os.DirEntry` (their type known from the listing, without a stat each), not their names."""
    stack = [os.fspath(top)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        dirs, files = [], []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                dirs.append(entry.name)
            else:
                files.append(entry if as_entries else entry.name)
        yield folder, dirs, files
        stack.extend(os.path.join(folder, d) for d in reversed(dirs))
