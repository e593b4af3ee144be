"""Orphans of bringup's children: what left a child's process group AND shed its tag (``env -i setsid sleep &``
in a site test), found because bringup is, while a bounded child runs, the subreaper Linux hands orphaned
descendants to (``PR_SET_CHILD_SUBREAPER``).  :mod:`bringup.child` registers what it starts (:data:`STARTED`) and
calls :func:`reaping_begins` / :func:`reaping_ends` around a bounded child; the last to end kills and reaps what was
handed here; :func:`group_gone` waits for a child's group to be gone.  Standard library only; nothing
happens on import.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

__all__ = ["STARTED", "processes", "group_gone", "reaping_begins", "reaping_ends", "kill_orphans", "become_subreaper"]

#: Children this process started through :func:`bringup.child.start`: never taken for an orphan.
STARTED: set[int] = set()
_PR_SET_CHILD_SUBREAPER = 36
_reapers = 0
_reaper_lock = threading.Lock()


def _subreaper(on: bool) -> bool:
    """Make this process the one orphaned descendants are handed to (Linux's PR_SET_CHILD_SUBREAPER), or stop
    being it; False where the kernel has no such thing."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def processes() -> Iterator[tuple[int, list[bytes]]]:
    """Each process of this machine (as this process's /proc shows them): its pid and the fields of its
    ``/proc/PID/stat`` after ``pid (comm)``: state, ppid, pgrp, session, ...  One gone meanwhile is passed over."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read(4096).rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3:
            yield int(name), fields


def group_gone(pgid: int, within: float) -> bool:
    """Wait, at most ``within`` seconds, until no process of the group ``pgid`` runs (a zombie runs nothing: it
    waits for its parent, or init, to reap it); whether none does."""
    group, deadline = str(pgid).encode(), time.monotonic() + within
    while any(fields[2] == group and fields[0] not in (b"Z", b"X") for _, fields in processes()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _orphans() -> list[int]:
    """This process's children that it did not start: descendants of a child whose parent died, handed here
    while it is a subreaper.  A child a library started directly stays in this process's session: spared."""
    me, mine = os.getpid(), os.getsid(0)
    return [pid for pid, fields in processes()
            if pid not in STARTED and int(fields[1]) == me and int(fields[3]) != mine]


def reaping_begins() -> None:
    global _reapers
    with _reaper_lock:
        if _reapers == 0:
            _subreaper(True)
        _reapers += 1


def reaping_ends() -> None:
    """The last bounded child ended: kill what was handed here (and what each of those left: handed here too,
    the next round), reap it, and stop being a subreaper."""
    global _reapers
    with _reaper_lock:
        _reapers -= 1
        if _reapers:
            return
        kill_orphans()
        _subreaper(False)


def kill_orphans() -> None:
    """Kill and reap what was handed to this process (and, round by round, what each of those left)."""
    for _ in range(8):
        left = _orphans()
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass


def become_subreaper() -> bool:
    """In a bounded child (bringup's pytest): orphans of what it runs are handed to it, so that, when bringup
    dies, it still finds them (:func:`kill_orphans`); on its own exit they pass on to bringup."""
    return _subreaper(True)

