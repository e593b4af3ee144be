"""Files bringup writes for the operator (pages, reports, results, records), and the folders they go in.

A shared leaf, as :mod:`bringup.userfile` is for reading.  :func:`write_atomic` never opens the final
name: the text goes into a temporary file made in the same folder with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (a
planted link or FIFO under any name is never followed or opened), is flushed, then renamed over the final name,
so a link, a FIFO or an old page there is replaced, never written through, and a fault leaves the old file whole
and no temporary one; a folder under the final name is one line naming it.  Every step goes through one
descriptor of the folder, opened once (a link swapped in on the way meanwhile redirects nothing), and a folder
:func:`out_folder` checked must still be the one it checked (a swap between the check and the write, minutes
apart, is one line, nothing written).  An existing file's mode, where an operator tightened it, is kept.
:func:`write_set` writes files that go together (a host's pages) all or none.  :func:`out_folder` checks an
output folder before anything runs: a folder, or one that can be made, writable, and no symbolic link on its
way that leads out of the folder it sits in (refused, naming the link and where it points); :func:`reports_folder`
checks ``reports/`` of the working folder so.
"""
from __future__ import annotations

import errno
import os
import secrets
import signal
import stat
import tempfile
import threading
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import BringupError, InputError, quoted
from .userfile import fd_path, link_out, within

__all__ = ["write_atomic", "write_set", "NotWritten", "append_text", "NOT_REGULAR", "out_folder", "sub_folder",
           "not_own_folder", "reports_folder", "REPORTS"]

#: The folder of the working folder where provision, plan, engines, audit and drift keep their reports.
REPORTS = "reports"


def write_atomic(path: str | Path, data: str | bytes, *, mode: int = 0o644, encoding: str = "utf-8",
                 errors: str = "strict", newline: str | None = None, umask: bool = True) -> Path:
    """Replace ``path`` with ``data`` whole (see the module's words); the path.  ``mode`` less the umask, and less
    what a replaced file of this user's denied, its group kept (:func:`_kept_mode`) (the whole ``mode`` with
    ``umask=False``: a file another user's service reads), set on the open descriptor
    (``fchmod``: never a chmod by name, which a link planted there would lead elsewhere), synced to disk before
    the rename.  A folder at ``path`` is an :class:`InputError` naming it (one line), and nothing is written."""
    return write_set([(path, data)], mode=mode, encoding=encoding, errors=errors, newline=newline, umask=umask)[0]


def write_set(files: Sequence[tuple[str | Path, str | bytes]], *, mode: int = 0o644, encoding: str = "utf-8",
              errors: str = "strict", newline: str | None = None, umask: bool = True) -> list[Path]:
    """Write several files that belong together (a host's .md, .html and .json pages; a bench's JSON and CSV)
    as :func:`write_atomic` writes one, all or none: every name is checked first (a folder there is one line
    naming it, and nothing of the set is written), each text goes into its temporary file, and only once all
    are written are they renamed into place, one after the other.  Called from the main thread, SIGINT, SIGTERM,
    SIGHUP and SIGQUIT are held back during those renames (a Ctrl-C or a service stop there is taken once the last
    rename is done: never a set of two runs, as an .md of this run beside the .html of the last).  Called from
    another thread (checklist writes its pages from a worker), nothing is held, as Python lets no other thread
    change a handler: there the task's own handlers of SIGINT, SIGTERM and SIGHUP only ask the run to stop, which
    it does after the set, while a SIGQUIT (the operator's quit-now, with a core dump) ends the process at once.
    A SIGKILL or a power cut within those few renames (or a SIGQUIT in a worker) can split a set, each file of it
    still whole.  A fault before the renames leaves no file of the set and no temporary one.  The paths, in
    order."""
    paths = [Path(p) for p, _ in files]
    for path in paths:
        _no_folder_at(path, len(paths))
    perm = mode & ~_umask() if umask else mode
    made: list[tuple[int, str, Path]] = []  # (its folder's descriptor, the temporary name, the final path)
    folders: dict[Path, int] = {}
    done = 0
    at = paths[0] if paths else Path(".")  # the file being written or renamed: the one a failure names
    try:
        for path, (_, data) in zip(paths, files):
            at = path
            body = data if isinstance(data, bytes) else data.encode(encoding, errors) if newline is None else \
                data.replace("\n", newline).encode(encoding, errors)
            if path.parent not in folders:
                folders[path.parent] = _held_folder(path.parent)
            dfd = folders[path.parent]
            fd, tmp = _temporary(dfd, path.name)
            made.append((dfd, tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(body)
                f.flush()
                os.fchmod(f.fileno(), _kept_mode(dfd, path.name, perm, f.fileno()) if umask else perm)
                os.fsync(f.fileno())
        held = _hold_signals()  # a Ctrl-C or SIGTERM between two renames would leave a set of two runs
        try:
            while made:
                dfd, tmp, path = made[0]
                at = path
                try:
                    os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
                except IsADirectoryError:  # a folder made there since the check
                    _no_folder_at(path, len(paths))
                    raise
                made.pop(0)
                done += 1
        finally:
            _release_signals(held)  # a signal that came meanwhile is taken here, the set whole
    except BaseException as e:
        for dfd, tmp, _ in made:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        if isinstance(e, OSError) and not isinstance(e, NotWritten):
            raise NotWritten.of(e, at, paths, done) from None
        raise
    finally:
        for dfd in folders.values():
            os.close(dfd)
    return paths


#: A folder opened only to be gone through (``O_PATH``: a folder this user may write in but not list, a drop
#: folder of mode 1733, is still one), where the system has it.
_FOLDER_OPEN = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


def _held_folder(folder: Path) -> int:
    """A descriptor of ``folder``, which every step of a write then goes through (the temporary file made, its
    rename, its removal): a link swapped in on the way after this open leads nowhere else.  Where ``folder`` is
    (within) a folder :func:`out_folder` checked, the folder opened must still be (within) where it led then, or
    within the folder it sat in then (a ``current`` link re-pointed from day1 to day2 beside it, as out_folder's own
    rule allows): one swapped for a link out since (a long bench, a run of hours) is an :class:`InputError` naming
    it, nothing written."""
    dfd = os.open(folder, _FOLDER_OPEN)
    try:
        here = os.path.abspath(folder)
        pins = [k for k in _CHECKED if within(here, k)]
        if pins:
            checked = max(pins, key=len)
            real, beside = _CHECKED[checked]
            now = fd_path(dfd, folder)
            if not within(now, real) and not within(now, beside):
                raise InputError(f"{checked} leads to {quoted(now, 120)} now, not to {quoted(real, 120)} as when it "
                                 "was checked (a symbolic link swapped in since): nothing was written there; find who "
                                 "changed it, then run again")
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def _temporary(dfd: int, name: str) -> tuple[int, str]:
    """A new file ``.<name>.<random>.tmp`` made in the folder open at ``dfd`` (``O_CREAT|O_EXCL|O_NOFOLLOW``, mode
    0600 until its own is set: a link or FIFO planted under any name is never opened); its descriptor and name."""
    for _ in range(100):
        tmp = f".{name[:80]}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                           dir_fd=dfd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name")


def _kept_mode(dfd: int, name: str, perm: int, fd: int) -> int:
    """``perm``, less what the file bringup replaces (a regular file of this user, not a link) denies: a mode an
    operator tightened (a 0600 last.retry, a 0640 page) is kept on the new file (open at ``fd``), never loosened
    back, and so is its group (a 0640 page of group adm stays adm's to read) where this user may give it (root, or
    one of the group); where not, the mode is still kept, the group bringup's own.  A file of another user's
    (whose own mode would lock its owner out of a file now this user's) does not count.  Not for a file another
    user's service reads (``umask=False``: a metrics textfile), whose mode is the writer's whole."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return perm
    if not (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()):
        return perm
    if os.fstat(fd).st_gid != st.st_gid:
        try:
            os.fchown(fd, -1, st.st_gid)
        except OSError:
            pass  # its group cannot be kept (this user is not of it): its mode still is (0600 never becomes 0644)
    return perm & stat.S_IMODE(st.st_mode)


#: The signals a person or a service manager stops a run with: held back while a set's files are renamed.
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _hold_signals() -> tuple[dict, list[int]] | None:
    """Put a recorder in place of the handlers of :data:`_HELD` (those not ignored), in the main thread (the only
    one where Python runs handlers, so the only one a signal can raise in between two renames; a mask would not
    do: a signal sent to the process is taken by whichever thread does not block it, a transport's thread too);
    what to give :func:`_release_signals`, or None.  A handler that raises between two swaps (a signal not yet
    held, its handler a task's own: pull's, accept's) leaves no recorder in place: those swapped are put back
    (and what they recorded raised again) before its exception goes on."""
    if threading.current_thread() is not threading.main_thread():
        return None
    got: list[int] = []
    before: dict = {}

    def record(signum: int, _frame: Any) -> None:
        got.append(signum)

    try:
        for sig in _HELD:
            handler = signal.getsignal(sig)
            if handler is not signal.SIG_IGN and handler is not None:
                before[sig] = handler  # known before the swap: a handler raising just after it still finds it
                signal.signal(sig, record)
    except BaseException:
        _release_signals((before, got))
        raise
    return before, got


def _release_signals(held: tuple[dict, list[int]] | None) -> None:
    """The handlers back, then each signal that came meanwhile raised again, once: its own handler (or its
    default action) takes it now, the set whole.  Every step is taken even where one raises (a try/finally
    chain): a handler raising as its signal comes back (a Ctrl-C) never leaves another signal's recorder in place,
    and a raised KeyboardInterrupt never drops a SIGTERM that came with it (its default action still ends the
    process); the last exception goes on, the one before it its context."""
    if held is None:
        return
    before, got = held
    try:
        _each([partial(signal.signal, sig, handler) for sig, handler in before.items()])
    finally:
        _each([partial(signal.raise_signal, sig) for sig in dict.fromkeys(got)])


def _each(steps: list[Callable[[], Any]]) -> None:
    """Run every step, in order, each one even where one before it raised (a try/finally chain)."""
    if steps:
        try:
            steps[0]()
        finally:
            _each(steps[1:])


class NotWritten(BringupError, OSError):
    """A file bringup writes that the system would not take (the disk or the quota full, a read-only or
    vanished folder): one line naming the file, the system's reason and the room left (a BringupError: the
    task's one ``error:`` line, exit 1), and still the OSError it was (``errno`` kept: pull records a full disk
    as its ``disk-full`` failure)."""

    @classmethod
    def of(cls, e: OSError, path: Path, paths: list[Path], done: int, kept: str = "") -> "NotWritten":
        try:
            st = os.statvfs(path.parent)
            room = f"{st.f_bavail * st.f_frsize // 1024} KiB free in {path.parent}"
        except OSError:
            room = "free space unknown"
        full = " (the disk is full: free some room, or give another folder)" if e.errno in (
            errno.ENOSPC, errno.EDQUOT) else ""
        n = len(paths)
        kept = kept or ("nothing was written" if n == 1 else f"none of the {n} files that go together was written"
                        if not done else f"{done} of the {n} files that go together were written, the rest not"
                        ) + ", no temporary file left"
        err = cls(e.errno, e.strerror or str(e), str(path))  # the system's reason as OSError keeps it
        err.line = f"{path}: could not be written: {e.strerror or e}; {room}{full}; {kept}"
        return err

    def __str__(self) -> str:  # the line (OSError's own form is "[Errno 28] No space left on device: 'path'")
        return getattr(self, "line", None) or super().__str__()


def _no_folder_at(path: Path, n: int) -> None:
    """A folder (not a link) at a file's name: one line naming it (``os.replace`` would raise IsADirectoryError
    after the files before it were written)."""
    if path.is_dir() and not path.is_symlink():
        raise InputError(f"{path} is a folder: bringup writes a file under that name; move the folder away or remove "
                         "it, then run again" + (f" (none of the {n} files that go together was written)"
                                                 if n > 1 else " (nothing was written)"))


#: The words :func:`append_text` gives its ``refused`` for a FIFO, a device or a folder at the name.
NOT_REGULAR = "not a regular file"


def append_text(path: str | Path, text: str, *, follow: bool = False, mode: int = 0o644,
                refused: Callable[[str], BaseException] | None = None) -> None:
    """Add ``text`` at the end of the log ``path`` (made if missing, ``mode`` less the umask): never through a
    symbolic link planted there (``O_NOFOLLOW``; with ``follow``, a link is followed, as ssh follows a dotfile
    manager's link at known_hosts), never into a FIFO or a device (opened without waiting, then refused unless a
    regular file).  A log is appended to, not replaced: a line is written whole in one ``write`` (two runs appending
    to one log leave each line whole, never interleaved); a line the disk cuts short is taken back only while it is
    still the log's end, never with another run's line after it or inside it.  The one open-and-check of every
    file bringup appends to (its logs, pull's state, accept-new's known_hosts).

    A file not to append to is ``refused(why)`` raised, ``why`` being ``a symbolic link``, :data:`NOT_REGULAR` or
    (only with ``refused``) the system's reason for a failed open, lower case; without ``refused``, an
    :class:`InputError` saying to remove it.  A full disk is :class:`NotWritten` (one line)."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)

    def no(why: str) -> BaseException:
        if refused is not None:
            return refused(why)
        return InputError(f"{path} is {'a symbolic link' if why == 'a symbolic link' else 'no regular file'}; "
                          "bringup appends only to a log file of its own there: remove it")

    try:
        fd = os.open(path, flags, mode)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow and path.is_symlink():
            raise no("a symbolic link") from None
        if e.errno in (errno.ENXIO, errno.EISDIR, errno.ELOOP):  # a FIFO nobody reads, a socket; a folder
            raise no(NOT_REGULAR) from None
        if refused is not None:
            raise refused((e.strerror or str(e)).lower()) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise no(NOT_REGULAR)
        body = text.encode("utf-8")
        pieces: list[tuple[int, int]] = []  # (the log's end just after it, bytes) of each write of this line
        try:
            wrote = os.write(fd, body)
            if wrote != len(body):  # a line cut short (the disk filled, a file size limit): say why
                pieces.append((os.lseek(fd, 0, os.SEEK_CUR), wrote))  # O_APPEND: just past the bytes it put
                more = os.write(fd, body[wrote:])  # raises the system's own reason
                pieces.append((os.lseek(fd, 0, os.SEEK_CUR), more))
                if more == len(body) - wrote and pieces[0][0] == pieces[1][0] - more:
                    return  # the rest went right after the first part: the line is whole
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # (a second short write: the disk filled)
        except OSError as e:  # a full disk, a quota: one line, as every file bringup writes (NotWritten)
            raise NotWritten.of(e, path, [path], 0, kept=_take_back(fd, pieces)) from None
    finally:
        os.close(fd)


def _take_back(fd: int, pieces: list[tuple[int, int]]) -> str:
    """Remove the pieces of a cut line this descriptor appended (no half line for the next one to be glued to), the
    last first, each only while it is still the log's end: where another run appended after a piece, or between
    two pieces (two runs share a log), nothing of it or before it is cut, as that run's line is not bringup's to
    remove.  ``pieces``: (the log's end just after it, bytes) of each write.  Words for :class:`NotWritten`'s line."""
    try:
        while pieces:
            end, wrote = pieces[-1]
            if os.fstat(fd).st_size != end:
                break
            os.ftruncate(fd, end - wrote)
            pieces.pop()
    except OSError:
        pass
    return "the line was not added whole" if pieces else "the line was not added (the log is as it was)"


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def out_folder(v: Any, flag: str = "--out", fix: str | None = None) -> Path:
    """A folder to write into: it exists as a folder, or can be made (no file on the way), is writable, and
    is no symbolic link out of its own folder.  ``fix``: the advice of a refused link or file (the flag's own
    otherwise: name the real folder, give a folder)."""
    text = str(v)
    if not text.strip() or "\0" in text or "\n" in text:
        raise InputError(f"{flag} {quoted(text, 120)}: a folder name")
    try:
        checked = _out_folder(text, flag, fix)
        _CHECKED[os.path.abspath(checked)] = (os.path.realpath(checked), os.path.realpath(checked.parent))
        return checked
    except OSError as e:  # a name too long for the file system, a loop of links
        raise InputError(f"{flag} {quoted(text, 120)}: {e.strerror or e}; give a path this user can look at"
                         ) from None


#: The folders :func:`out_folder` checked in this process (as named, made absolute), where each led then and where the
#: folder it sat in led: a write into one (:func:`write_set`) goes there only while it still leads within either.
_CHECKED: dict[str, tuple[str, str]] = {}


def reports_folder() -> Path:
    """``reports/`` of the working folder, checked as :func:`out_folder` checks ``--out``, before anything
    connects: a link (out of the working folder), a file, a FIFO or a dangling link there is one line, never
    written through nor a ``FileExistsError`` after the run."""
    return out_folder(REPORTS, "reports folder", fix="move it away or remove it (bringup keeps its JSON reports and "
                                                     "retry files in a folder reports/ of its own here, never "
                                                     "written through a link)")


def _out_folder(text: str, flag: str, fix: str | None = None) -> Path:
    p = Path(text)
    for link in _named_links(p):
        out = link_out(link, link.parent)
        if out is not None:
            what = "is" if link == p else f"goes through {link}, which is"
            raise InputError(f"{flag} {quoted(text, 120)} {what} a symbolic link to {quoted(out[1], 120)}, outside "
                             f"{'the working folder' if str(link.parent) == '.' else link.parent}; "
                             + (fix or "name the real folder (pages are never written through a link)"))
    probe = p
    while True:
        if probe.exists() or probe.is_symlink():
            if not probe.is_dir():
                what = "it" if probe == p else str(probe)
                raise InputError(f"{flag} {quoted(text, 120)}: {what} is not a folder"
                                 + (f"; {fix}" if fix else " (results are several files: give a folder)"))
            if not os.access(probe, os.W_OK | os.X_OK):
                raise InputError(f"{flag} {quoted(text, 120)}: {probe} is not writable")
            _can_write(probe, text, flag)
            return p
        if probe.parent == probe:
            return p
        probe = probe.parent


def _named_links(p: Path) -> list[Path]:
    """The symbolic links among the folders ``p`` names on its way, each of which must stay inside the folder it
    sits in: every component of a path named from the working folder (``lnk/sub``, where a checkout may have
    planted ``lnk``), and the last one of an absolute path elsewhere (the operator spelled that out; a system's
    own links above it, like macOS's /tmp, are not the tool's to judge)."""
    cwd = Path.cwd()
    if not p.is_absolute():
        base, parts = Path(), p.parts
    elif cwd in p.parents:
        base, parts = cwd, p.relative_to(cwd).parts
    else:
        return [p] if p.is_symlink() else []
    links, cur = [], base
    for part in parts:
        cur = cur / part
        if cur.is_symlink():
            links.append(cur)
    return links


def sub_folder(parent: Path, name: str) -> Path:
    """``parent/name`` made if missing, for a folder bringup keeps inside an output folder; a link (or a file)
    planted there is refused, naming it."""
    p = parent / name
    why = not_own_folder(p)
    if why:
        raise InputError(f"{p} {why}; bringup writes only into a folder of its own there: remove it")
    p.mkdir(parents=True, exist_ok=True)
    return p


def not_own_folder(p: Path) -> str | None:
    """Why ``p`` is no folder bringup may keep its files in (and prune), or None (a real folder, or nothing
    there yet): a symbolic link, wherever it points (its files would be written, rotated and removed in the
    folder it leads to), or something other than a folder.  Words to follow the path in a line."""
    if os.path.islink(p):
        try:
            target = os.readlink(p)
        except OSError:
            target = "?"
        return f"is a symbolic link (to {quoted(target, 120)})"
    if os.path.lexists(p) and not os.path.isdir(p):
        return "is not a folder"
    return None


def _can_write(folder: Path, text: str, flag: str) -> None:
    """A folder made and removed in ``folder``: whether results can be written there, known before measuring
    (os.access says yes to root in /proc and /sys, where nothing can be made).  Nothing is left."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".bringup-probe-", dir=folder))
    except OSError as e:
        raise InputError(f"{flag} {quoted(text, 120)}: cannot write in {folder} ({e.strerror or e}); give a folder of "
                         "your own, like reports/bench") from None
