"""A local child process that outlives neither its bound, nor a stop of the run, nor its parent.

Over 500 lines because it is the one helper every child of bringup goes through (docs/contributing.md): its
group, tag, subreaper and signal rules hold only together, and a second module would share their state.

    ended = run_bounded(argv, timeout=600, stop=run.stop, stdout=log, env=env)
    ended.why   # None: it exited by itself; "timeout"; or the signal's name ("SIGTERM") that stopped the run

The child runs in a process group of its own (a session: the terminal's Ctrl-C reaches the parent only, which
decides), so that ending it ends whatever it started too.  It is ended, group and all, when:

- its bound passes (``timeout`` seconds): SIGINT first, so that it can say what it had done (pytest writes its
  report on KeyboardInterrupt), then SIGKILL :data:`GRACE_S` seconds later if it is still there;
- the run is asked to stop (:class:`bringup.ssh.stop.Stop`): the first signal as the bound, a second one SIGKILL at
  once;
- the parent dies, even by SIGKILL: the child holds the read end of a pipe whose only write end is the
  parent's; :func:`watch_parent`, called by the child (bringup's pytest plugin does), ends its own group when
  that pipe closes.  (``PR_SET_PDEATHSIG`` would fire when the parent's *thread* that started the child ends,
  and needs a ``preexec_fn``, which is unsafe in a threaded parent.)

A SIGINT, SIGTERM or SIGHUP (the last unless ignored: nohup) that bringup has no handler of its own for (a signal while the inventory is still read: the
vault's password program, an inventory script, a ``Match exec`` command; Python's default would end bringup
alone, or raise KeyboardInterrupt, or, SIGINT being ignored in a background job, nothing at all) is bringup's
while :func:`capture` or :func:`run_bounded` waits for a child in the main thread: the child's group is ended at
once and :class:`Signalled` raised, which the tasks end with one line and the signal's exit code (130, 143).  A
program's own handler (a run's :class:`Stop`, ``bringup pull``'s) is left in place: it decides.

What left the group on its way (``setsid``, a daemon's double fork: ``setsid sleep 1000 &`` in a site's test)
is found by the child's tag: every descendant inherits :data:`TAG_ENV` in its environment, and whatever still
carries the child's tag when it has ended is killed too (:func:`end_tagged`), by the parent and, when the parent
died, by :func:`watch_parent`.  What shed the tag as well (``env -i setsid sleep &``) is found as an orphan: while
a bounded child runs, bringup is the subreaper its orphaned descendants are handed to (Linux), and it kills them
when the last bounded child has ended (:func:`run_bounded`).  Only a SIGKILL of bringup itself while such a
process runs leaves it to init.

Every child bringup starts on the control machine is started here (:func:`start`, and :func:`run_bounded` /
:func:`capture` on top of it) and ended here (:meth:`Child.end`: SIGTERM to its group, a grace, then SIGKILL to
the group); every read of a child's output here has a cap (:func:`read_capped`, :class:`Reader`,
:func:`lines`, :func:`capture`).  ``tests/unit/test_child_only.py`` fails when another module of bringup starts
a process or ends a process group itself.

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
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Callable, Iterator, Protocol, Sequence

from .orphans import STARTED, become_subreaper, group_gone, kill_orphans, reaping_begins, reaping_ends


class Stop(Protocol):
    """What a child's bound reads of the run's stop (:class:`bringup.ssh.stop.Stop` is one): named here, not
    imported, so that this leaf imports nothing of bringup."""

    name: str

    @property
    def requested(self) -> bool: ...

    @property
    def abandoned(self) -> bool: ...

__all__ = ["PARENT_FD_ENV", "TAG_ENV", "GRACE_S", "Ended", "run_bounded", "end_group", "end_tagged",
           "watch_parent", "Captured", "capture", "PIPE", "DEVNULL", "STDOUT", "Child", "start", "read_capped",
           "Reader", "lines", "own_group", "end_leader", "Signalled", "how_ended"]

PIPE, DEVNULL, STDOUT = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT

#: The environment variable that tells the child which of its file descriptors is the parent's pipe.
PARENT_FD_ENV = "BRINGUP_PARENT_FD"
#: The environment variable whose value tags every process a bounded child started (inherited: a descendant
#: that left the child's process group still carries it).
TAG_ENV = "BRINGUP_CHILD_RUN"
#: Seconds the child has, after SIGINT, to end by itself before its group is killed.
GRACE_S = 5.0
#: Seconds between two looks at the child, the clock and the run's stop.
_POLL_S = 0.2


class Signalled(BaseException):
    """SIGINT or SIGTERM came while a child ran in the foreground (:func:`capture`, :func:`run_bounded` in the main
    thread, bringup having no handler of its own for it): the child was ended, its process group and all.  A
    BaseException, as KeyboardInterrupt is: no ``except Exception`` of a caller takes it for the child's failure.
    ``what`` names the child (its caller may name it better: the vault's password program)."""

    def __init__(self, signum: int, what: str = "a child process") -> None:
        super().__init__(signum, what)
        self.signum, self.what = signum, what

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def code(self) -> int:
        """The shell's code for a death by this signal: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP."""
        return 128 + self.signum

    def __str__(self) -> str:
        return f"{self.name}: stopped; {self.what} was ended, with everything it started"


#: Handlers that are no program's own: Python's defaults, the default action, ignored (a background job's SIGINT).
_NOT_OWN = (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None)


@contextmanager
def _signals_end_it() -> Iterator[list[int]]:
    """While a child runs in the foreground: SIGINT and SIGTERM, where the program has no handler of its own for
    them, are noted in the list yielded (the caller ends the child and raises :class:`Signalled`); outside the
    main thread (no handler can be set there) or with the program's own handler in place, nothing changes."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    before: dict[int, object] = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            # SIGHUP (the operator's terminal gone: Python's default ended bringup alone, the child ran on), unless
            # the operator's shell ignores it (nohup).
            if signal.getsignal(s) in (_NOT_OWN if s != signal.SIGHUP else (signal.SIG_DFL, None)):
                before[s] = signal.signal(s, lambda signum, _frame: got.append(signum))
        yield got
    finally:
        for s, h in before.items():
            signal.signal(s, h)  # type: ignore[arg-type]


@dataclass
class Ended:
    """How a bounded child ended: its exit code, and why it was ended (None: it exited by itself)."""

    rc: int
    why: str | None = None
    #: Seconds it ran.
    took: float = 0.0


def how_ended(rc: int) -> str:
    """How a child ended, in words for a message: ``exited 3``, ``was killed by SIGKILL`` (a negative return code
    is Python's way of saying a signal ended it: 'exited -9' read as an exit status no program has)."""
    if rc >= 0:
        return f"exited {rc}"
    try:
        return f"was killed by {signal.Signals(-rc).name}"
    except ValueError:
        return f"was killed by signal {-rc}"


def end_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group ``pgid``; a group already gone is what was wanted."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tagged(tag: str, var: str = TAG_ENV) -> list[int]:
    """The pids of this user's processes whose environment holds ``var=tag`` (a zombie has no environment:
    it holds nothing any more), this process left out."""
    want = f"{var}={tag}".encode()
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


def end_tagged(tag: str, within: float = 2.0, *, outside: bool = False, var: str = TAG_ENV) -> list[int]:
    """SIGKILL every process tagged ``tag`` (:func:`tagged`), its process group too, again until none is left
    (one that forks meanwhile) or ``within`` seconds passed; the pids still there then (none, normally).
    ``outside``: only those that left this process's group (its own are ended by their owners)."""
    deadline = time.monotonic() + within
    mine = os.getpgrp()
    while True:
        left = [p for p in tagged(tag, var) if not outside or _group(p) != mine]
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



class Child:
    """A child started by :func:`start`: the leader of a process group (a session) of its own.  ``proc`` is
    its :class:`subprocess.Popen` (its pipes, ``poll``, ``wait``, ``send_signal`` to it alone);
    :meth:`end` ends it group and all.  As a context manager, it is ended on leaving (nothing of its group
    outlives the block)."""

    def __init__(self, proc: subprocess.Popen, tag: str | None = None, tag_var: str = TAG_ENV, group: bool = True):
        self.proc = proc
        self.pid = proc.pid
        #: Whether it leads a group of its own (False: it stays in bringup's, and :meth:`end` signals it alone).
        self.group = group
        #: The tag every process it starts inherits (None: not tagged); :meth:`end` ends those too.
        self.tag = tag
        self.tag_var = tag_var

    def running(self) -> bool:
        """Whether anything of its process group is still there (its leader is reaped on the way, so that a
        group whose processes all ended reads as gone)."""
        if not self.group:
            return self.proc.poll() is None
        self.proc.poll()
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def end(self, grace: float = 2.0, sig: int = signal.SIGTERM, *, tagged: bool = True) -> int:
        """End the child and whatever it started: ``sig`` (SIGTERM: a script's trap can clean up) to its whole
        group, up to ``grace`` seconds for the group to go, then SIGKILL to the group; its leader reaped, and
        (``tagged``) what left the group carrying its tag killed.  Its exit code.  Safe to call again, or from
        another thread while one waits for it; a group already gone is left alone."""
        if self.running():
            signal_ = end_group if self.group else self._signal
            if grace > 0:
                signal_(self.pid, sig)
                if self.group:  # a zombie runs nothing: one that init has yet to reap is no reason to wait
                    group_gone(self.pid, within=grace)
                else:
                    deadline = time.monotonic() + grace
                    while time.monotonic() < deadline and self.running():
                        time.sleep(0.02)
            signal_(self.pid, signal.SIGKILL)  # whatever in the group did not end within the grace
        rc = self.proc.wait()
        if self.group:  # SIGKILL lands as each process is next scheduled: the group gone before this returns
            group_gone(self.pid, within=5.0)
        if self.tag is not None and tagged:
            end_tagged(self.tag, var=self.tag_var)
        return rc

    def _signal(self, _pid: int, sig: int) -> None:
        if self.proc.poll() is None:  # not reaped: its pid is still its own
            try:
                self.proc.send_signal(sig)
            except OSError:
                pass

    def kill(self) -> int:
        """SIGKILL to its whole group at once (no grace), then as :meth:`end`."""
        return self.end(0)

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


def start(argv: Sequence[str], *, stdin: IO | int | None = DEVNULL, stdout: IO | int | None = None,
          stderr: IO | int | None = None, env: dict[str, str] | None = None,
          cwd: str | os.PathLike | None = None, text: bool = False, tag: bool | str = False,
          pass_fds: Sequence[int] = (), bufsize: int = -1, own_group: bool = True) -> Child:
    """Start ``argv`` as the leader of a session (a process group) of its own: a terminal's Ctrl-C reaches
    bringup alone, which decides, and :meth:`Child.end` reaches everything the child started.  stdin is
    /dev/null unless said; ``text``: its pipes are text (UTF-8, bad bytes replaced).  ``tag``: every process
    it starts carries a fresh token in :data:`TAG_ENV` (or in the variable ``tag`` names), so that one that
    leaves the group (``setsid``) is ended with it.  ``own_group=False``: it stays in bringup's process group and
    session (a ProxyCommand's ssh may ask on the terminal, as under ssh), and :meth:`Child.end` signals it
    alone.  OSError when it cannot start."""
    token = secrets.token_hex(12) if tag else None
    var = tag if isinstance(tag, str) else TAG_ENV
    if token is not None:
        env = {**(os.environ if env is None else env), var: token}
    proc = subprocess.Popen(list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
                            start_new_session=own_group, pass_fds=tuple(pass_fds), bufsize=bufsize,
                            **({"text": True, "encoding": "utf-8", "errors": "replace"} if text else {}))
    STARTED.add(proc.pid)
    return Child(proc, token, var, own_group)


def own_group() -> None:
    """In a child bringup started by other means (a ``multiprocessing`` worker): lead a process group of its
    own, so that its parent's :func:`end_leader` ends whatever it starts with it."""
    os.setpgid(0, 0)


def end_leader(pid: int) -> None:
    """SIGKILL child ``pid``'s process group (one it leads: :func:`own_group`) and ``pid`` itself (killed
    before it made its group).  ``pid`` must be a child not yet reaped, so that neither number names
    another process or group."""
    end_group(pid)
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_capped(f: IO, cap: int, over: Callable[[], object] | None = None,
                kept: bytearray | None = None) -> tuple[bytes, bool]:
    """Read the pipe (or SSH channel file) ``f`` to its end, keeping its first ``cap`` bytes; whether more came.  Past the cap,
    ``over()`` is called once (it ends the child: the pipe then closes) and the rest is read and dropped, so
    that a flood costs no memory and no writer is left blocked.  ``kept``: where what is kept goes as it comes
    (another thread may look at it meanwhile: :meth:`Reader.so_far`)."""
    kept = bytearray() if kept is None else kept
    passed = False
    fileno = getattr(f, "fileno", None)
    # A pipe: os.read answers with what is there.  A stream without a descriptor (an SSH channel's file): read.
    read = (lambda fd: lambda: os.read(fd, 65536))(fileno()) if fileno is not None else lambda: f.read(65536)
    while True:
        try:
            chunk = read()
        except (OSError, EOFError, ValueError):  # closed under the read (the caller gave up): what came is all
            break
        if not chunk:
            break
        room = cap - len(kept)
        if len(chunk) > room:
            kept += chunk[:max(room, 0)]
            if not passed:
                passed = True
                if over is not None:
                    over()
        else:
            kept += chunk
    return bytes(kept), passed


class Reader:
    """:func:`read_capped` of ``f`` in a thread of its own (both pipes of a child are read at once, or one
    that fills blocks the child): ``result()`` waits for the pipe's end."""

    def __init__(self, f: IO, cap: int, over: Callable[[], object] | None = None):
        self._got: tuple[bytes, bool] = (b"", False)
        self._kept = bytearray()
        self._thread = threading.Thread(target=self._read, args=(f, cap, over), daemon=True)
        self._thread.start()

    def _read(self, f: IO, cap: int, over: Callable[[], object] | None) -> None:
        self._got = read_capped(f, cap, over, self._kept)

    def so_far(self) -> bytes:
        """What was kept until now (the whole of it once the pipe ended): a pipe that a process the child left
        still holds open (one that left its group and its tag) never ends, and what came is all there is."""
        return self._got[0] if not self._thread.is_alive() else bytes(self._kept)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the pipe's end (at most ``timeout`` seconds); whether it came."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self) -> bytes:
        self._thread.join()
        return self._got[0]

    @property
    def passed(self) -> bool:
        """Whether more than the cap came (after :meth:`result`)."""
        return self._got[1]


def lines(f: IO[str], cap: int = 64 * 1024) -> Iterator[str]:
    """The lines of the text pipe ``f`` as they come, each at most ``cap`` characters: a longer one is cut
    there ("... (cut)" ending it) and the rest of it read and dropped, so that a line without end costs no
    memory."""
    while True:
        line = f.readline(cap)
        if not line:
            return
        if len(line) >= cap and not line.endswith("\n"):
            while True:  # the rest of the line, dropped
                rest = f.readline(cap)
                if not rest or rest.endswith("\n"):
                    break
            line += " ... (cut)\n"
        yield line


def run_bounded(argv: Sequence[str], *, timeout: float, stop: Stop | None = None, stdout: IO | int | None = None,
                env: dict[str, str] | None = None, grace: float = GRACE_S, what: str | None = None) -> Ended:
    """Run ``argv`` (stdin from /dev/null, stderr with stdout) until it exits, its bound passes or the run stops;
    see the module.  Whatever ends it, nothing of its process group is left running on return.  A SIGINT/SIGTERM
    that no handler of the program takes ends it at once and raises :class:`Signalled` (``what`` names it)."""
    with _signals_end_it() as got:  # before the start: a signal from here on ends the child, not bringup alone
        read, write = os.pipe()  # both ends close-on-exec: no other child of this process inherits them
        started = time.monotonic()
        reaping_begins()
        try:
            child = start(argv, stdout=stdout, stderr=STDOUT, env={**(os.environ if env is None else env),
                                                                    PARENT_FD_ENV: str(read)},
                          tag=True, pass_fds=(read,))
            proc, tag = child.proc, child.tag
        except BaseException:
            os.close(write)
            reaping_ends()
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
                if got:  # a signal no handler of the program takes: the child ends at once, then the program
                    end_group(proc.pid)
                    break
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
            STARTED.discard(proc.pid)
            end_tagged(tag)
            # What left the group and shed its tag (``env -i setsid ...``): handed to this process as its orphan.
            reaping_ends()
    if got:
        raise Signalled(got[0], what or f"the program {argv[0]}")
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


def _feed(f: IO[bytes], data: bytes) -> None:
    try:
        f.write(data)
    except OSError:  # it ended, or closed its stdin without reading it all: its exit says what came of it
        pass
    finally:
        try:
            f.close()
        except OSError:
            pass


def capture(argv: Sequence[str], *, timeout: float, cap: int, err_cap: int = 64 * 1024,
            env: dict[str, str] | None = None, stop: Stop | None = None, term_grace: float = 1.0,
            input: bytes | None = None, cwd: str | os.PathLike | None = None, what: str | None = None) -> Captured:
    """Run ``argv`` (stdin /dev/null, or ``input`` written to it by a thread, a session of its own) and read its stdout (at most ``cap`` bytes) and
    stderr (the first ``err_cap`` bytes kept) until it exits, ``timeout`` seconds pass, stdout passes its cap
    or the run is asked to stop.  One thread, no reader left blocked: a child that leaves a process holding
    its stdout open after it exits is answered by what it printed, :data:`DRAIN_S` later, not at the
    deadline.  Whatever ends it, its process group is ended on return (SIGTERM, then SIGKILL
    ``term_grace`` seconds later): nothing it started in its group outlives the call, nor what left the group
    carrying its tag (``setsid``).  A SIGINT/SIGTERM that no
    handler of the program takes ends it so at once and raises :class:`Signalled` (``what`` names the child)."""
    with _signals_end_it() as got:  # before the start: a signal from here on ends the child, not bringup alone
        started = time.monotonic()
        # Tagged: what left its group on the way (setsid) and still holds its output once it exited, or runs on
        # when it is ended (timeout, too large, a stop), is ended with it (Child.end).  A daemon it started that
        # let go of its output (a vault program's gpg-agent, a Match exec's ssh ControlMaster) is not bringup's
        # to end: it runs on.  What shed the tag too (env -i setsid) is not found: no orphan of this process is
        # killed here (capture also runs in a site test's pytest, whose own detached processes are orphans of
        # that process too).
        child = start(argv, stdin=DEVNULL if input is None else PIPE, stdout=PIPE, stderr=PIPE, env=env, cwd=cwd,
                      tag=True)
        proc = child.proc
        if input is not None:
            threading.Thread(target=_feed, args=(proc.stdin, input), daemon=True).start()
        out, err = bytearray(), bytearray()
        why: str | None = None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        exited: float | None = None
        try:
            while sel.get_map() and why is None and not got:
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
                    if got:
                        break
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
            # Ended by bringup, or something it left still holds its output (the drain ran out): its tag's too.
            held = why is not None or bool(got) or bool(sel.get_map())
            if not held and proc.poll() is None:  # both pipes at EOF: the child is ending (its files close first)
                try:
                    proc.wait(timeout=DRAIN_S)
                except subprocess.TimeoutExpired:
                    held = True  # closed its output and runs on: ended as it is, with what it left
            sel.close()
            child.end(term_grace, tagged=held)  # what it left in its group, and itself if it was ended
            for f in (proc.stdout, proc.stderr):
                f.close()
    if got:
        raise Signalled(got[0], what or f"the program {argv[0]}")
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
        kill_orphans()  # what shed the tag too (env -i setsid), handed to this process
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(grace)
        if tag:
            end_tagged(tag)
        kill_orphans()
        pgid = os.getpgrp()
        if pgid == os.getpid():
            end_group(pgid)
        os.kill(os.getpid(), signal.SIGKILL)

    become_subreaper()
    threading.Thread(target=wait, name="bringup-parent-watch", daemon=True).start()
    return True
