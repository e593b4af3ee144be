"""A local child process that outlives neither its bound, nor a stop of the run, nor its parent.

    ended = run_bounded(argv, timeout=600, stop=run.stop, stdout=log, env=env)
    ended.why   # None: it exited by itself; "timeout"; or the signal's name ("SIGTERM") that stopped the run

The child runs in a process group of its own (a session: the terminal's Ctrl-C reaches the parent only, which
decides), so that ending it ends whatever it started too.  It is ended, group and all, when:

- its bound passes (``timeout`` seconds): SIGINT first, so that it can say what it had done (pytest writes its
  report on KeyboardInterrupt), then SIGKILL :data:`GRACE_S` seconds later if it is still there;
- the run is asked to stop (:class:`bringup.stop.Stop`): the first signal as the bound, a second one SIGKILL at
  once;
- the parent dies, even by SIGKILL: the child holds the read end of a pipe whose only write end is the
  parent's; :func:`watch_parent`, called by the child (bringup's pytest plugin does), ends its own group when
  that pipe closes.  (``PR_SET_PDEATHSIG`` would fire when the parent's *thread* that started the child ends,
  and needs a ``preexec_fn``, which is unsafe in a threaded parent.)

What left the group on its way (``setsid``, a daemon's double fork: ``setsid sleep 1000 &`` in a site's test)
is found by the child's tag: every descendant inherits :data:`TAG_ENV` in its environment, and whatever still
carries the child's tag when it has ended is killed too (:func:`end_tagged`), by the parent and, when the parent
died, by :func:`watch_parent`.

Standard library only; nothing happens on import.
"""
from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Protocol, Sequence


class Stop(Protocol):
    """What a child's bound reads of the run's stop (:class:`bringup.stop.Stop` is one): named here, not
    imported, so that this leaf imports nothing of bringup."""

    name: str

    @property
    def requested(self) -> bool: ...

    @property
    def abandoned(self) -> bool: ...

__all__ = ["PARENT_FD_ENV", "TAG_ENV", "GRACE_S", "Ended", "run_bounded", "end_group", "end_tagged",
           "watch_parent", "Captured", "capture"]

#: The environment variable that tells the child which of its file descriptors is the parent's pipe.
PARENT_FD_ENV = "BRINGUP_PARENT_FD"
#: The environment variable whose value tags every process a bounded child started (inherited: a descendant
#: that left the child's process group still carries it).
TAG_ENV = "BRINGUP_CHILD_RUN"
#: Seconds the child has, after SIGINT, to end by itself before its group is killed.
GRACE_S = 5.0
#: Seconds between two looks at the child, the clock and the run's stop.
_POLL_S = 0.2


@dataclass
class Ended:
    """How a bounded child ended: its exit code, and why it was ended (None: it exited by itself)."""

    rc: int
    why: str | None = None
    #: Seconds it ran.
    took: float = 0.0


def end_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group ``pgid``; a group already gone is what was wanted."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tagged(tag: str) -> list[int]:
    """The pids of this user's processes whose environment holds ``TAG_ENV=tag`` (a zombie has no environment:
    it holds nothing any more), this process left out."""
    want = f"{TAG_ENV}={tag}".encode()
    me, found = os.getpid(), []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read(1 << 20)
        except OSError:  # gone meanwhile, or another user's
            continue
        if want in env.split(b"\0"):
            found.append(int(name))
    return found


def _group(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return 0


def end_tagged(tag: str, within: float = 2.0, *, outside: bool = False) -> list[int]:
    """SIGKILL every process tagged ``tag`` (:func:`tagged`), its process group too, again until none is left
    (one that forks meanwhile) or ``within`` seconds passed; the pids still there then (none, normally).
    ``outside``: only those that left this process's group (its own are ended by their owners)."""
    deadline = time.monotonic() + within
    mine = os.getpgrp()
    while True:
        left = [p for p in tagged(tag) if not outside or _group(p) != mine]
        if not left or time.monotonic() >= deadline:
            return left
        for pid in left:
            pgid = _group(pid)
            if pgid > 1 and pgid != mine:
                end_group(pgid)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def run_bounded(argv: Sequence[str], *, timeout: float, stop: Stop | None = None, stdout: IO | int | None = None,
                env: dict[str, str] | None = None, grace: float = GRACE_S) -> Ended:
    """Run ``argv`` (stdin from /dev/null, stderr with stdout) until it exits, its bound passes or the run stops;
    see the module.  Whatever ends it, nothing of its process group is left running on return."""
    read, write = os.pipe()  # both ends close-on-exec: no other child of this process inherits them
    started = time.monotonic()
    tag = secrets.token_hex(12)
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
                                env={**(os.environ if env is None else env), PARENT_FD_ENV: str(read),
                                     TAG_ENV: tag},
                                start_new_session=True, pass_fds=(read,))
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    why: str | None = None
    kill_at: float | None = None
    try:
        while True:
            try:
                rc = proc.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if stop is not None and stop.abandoned:
                why = why or stop.name
                end_group(proc.pid)
                kill_at = now
            elif why is None and (now - started >= timeout or (stop is not None and stop.requested)):
                why = "timeout" if now - started >= timeout else stop.name  # type: ignore[union-attr]
                end_group(proc.pid, signal.SIGINT)
                kill_at = now + grace
            elif kill_at is not None and now >= kill_at:
                end_group(proc.pid)
    finally:
        # Whatever the child started and left (a test's background process), and the child itself when this
        # thread is leaving by an exception; then what left the group (setsid), by its tag.
        end_group(proc.pid)
        os.close(write)
        if proc.returncode is None:
            proc.wait()
        end_tagged(tag)
    return Ended(proc.returncode if proc.returncode is not None else -signal.SIGKILL, why,
                 time.monotonic() - started)


@dataclass
class Captured:
    """What a captured child printed, and how it ended."""

    #: Its exit code; None when it was ended (``why`` says why) before it exited by itself.
    rc: int | None
    out: bytes
    err: bytes
    #: None: it exited by itself; "timeout"; "too large" (stdout passed its cap); or the run's signal name.
    why: str | None = None
    took: float = 0.0


#: Seconds a child's output is still read after it exited: what it wrote is in the pipe already; a process
#: it left behind that holds the pipe open (a daemon, ``sleep &``) is not waited for.
DRAIN_S = 0.3


def capture(argv: Sequence[str], *, timeout: float, cap: int, err_cap: int = 64 * 1024,
            env: dict[str, str] | None = None, stop: Stop | None = None, term_grace: float = 1.0) -> Captured:
    """Run ``argv`` (stdin /dev/null, a session of its own) and read its stdout (at most ``cap`` bytes) and
    stderr (the first ``err_cap`` bytes kept) until it exits, ``timeout`` seconds pass, stdout passes its cap
    or the run is asked to stop.  One thread, no reader left blocked: a child that leaves a process holding
    its stdout open after it exits is answered by what it printed, :data:`DRAIN_S` later, not at the
    deadline.  Whatever ends it, its process group is ended on return (SIGTERM, then SIGKILL
    ``term_grace`` seconds later): nothing it started in its group outlives the call."""
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    out, err = bytearray(), bytearray()
    why: str | None = None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    exited: float | None = None
    try:
        while sel.get_map() and why is None:
            now = time.monotonic()
            if exited is None and proc.poll() is not None:
                exited = now
            if exited is not None:
                wait = exited + DRAIN_S - now
                if wait <= 0:
                    break
            else:
                wait = started + timeout - now
                if wait <= 0:
                    why = "timeout"
                    break
            if stop is not None and stop.requested:
                why = stop.name
                break
            for key, _ in sel.select(min(wait, _POLL_S)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf: bytearray = key.data
                room = (cap if buf is out else err_cap) - len(buf)
                if buf is out and len(chunk) > room:
                    why = "too large"
                    break
                buf += chunk[:max(room, 0)]
    finally:
        sel.close()
        if proc.poll() is None:
            end_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(term_grace)
            except subprocess.TimeoutExpired:
                pass
        end_group(proc.pid)  # what it left in its group, and itself if SIGTERM was not enough
        for f in (proc.stdout, proc.stderr):
            f.close()
        if proc.returncode is None:
            proc.wait()
    return Captured(None if why else proc.returncode, bytes(out), bytes(err), why, time.monotonic() - started)


def watch_parent(grace: float = GRACE_S) -> bool:
    """In a child started by :func:`run_bounded`: end this process as soon as the parent's pipe closes, the
    parent having died: SIGINT first (Python's KeyboardInterrupt: what the child runs in process groups of their
    own is ended by their owners, as on Ctrl-C), then, ``grace`` seconds later, SIGKILL to its whole group.
    Returns False where there is no such pipe (not started that way)."""
    fd = os.environ.pop(PARENT_FD_ENV, None)
    if fd is None or not fd.isdigit():
        return False
    fd_ = int(fd)
    try:
        os.set_inheritable(fd_, False)  # this process's own children do not hold it
    except OSError:
        return False

    def wait() -> None:
        try:
            while os.read(fd_, 1):  # the parent never writes: only EOF (or an error) returns
                pass
        except OSError:
            pass
        tag = os.environ.get(TAG_ENV, "")
        if tag:
            end_tagged(tag, outside=True)  # what left this process's group (setsid): no owner ends it
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(grace)
        if tag:
            end_tagged(tag)
        pgid = os.getpgrp()
        if pgid == os.getpid():
            end_group(pgid)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait, name="bringup-parent-watch", daemon=True).start()
    return True
