"""Stopping a run in order: the first SIGINT/SIGTERM starts no new host or role, the second abandons the steps
in flight.  One :class:`Stop` is shared by every host of a run; :mod:`bringup.tasks.context` installs the
signal handlers that call :meth:`Stop.request`.

After the first signal a watchdog probes each connection in flight (:meth:`Transport.silent
<bringup.ssh.connection.Transport.silent>`): one whose host answers nothing within :data:`SILENT_GRACE_S` (the
network gone, the host frozen) is closed, as a second signal would close it, instead of being waited for up to
``command_timeout``; the hosts that answer finish their role.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, TimeoutError as FutureTimeout, wait
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, TypeVar

if TYPE_CHECKING:
    from .connection import Transport

T = TypeVar("T")

__all__ = ["Stop", "Interrupted", "Closable", "closes", "SILENT_GRACE_S", "AWAKE_S", "as_completed_awake",
           "result_awake", "tell"]

#: Seconds a host in flight has, after the first signal, to answer a probe of its connection before the
#: connection is closed.  Long enough for a busy host's sshd, short against a 1800 s command_timeout.
SILENT_GRACE_S = 10.0
#: Seconds at most that the main thread waits in one go while hosts run.  A SIGINT/SIGTERM the kernel hands to
#: another thread of the process (any may take it) only marks Python's handler as due; the handler runs when the
#: main thread next wakes, so an unbounded wait there delays it until that wait ends.
AWAKE_S = 0.2
#: Seconds between two probes of a connection whose host answered the last one (and between two looks of the
#: watchdog for connections opened since the signal).
PROBE_EVERY_S = 1.0


def tell(line: str) -> None:
    """``line`` straight to fd 2: safe in a signal handler and beside a thread writing a buffered stream (a
    buffered write there would raise a reentrant call)."""
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass


def as_completed_awake(futures: "Iterable[Future[T]]") -> "Iterator[Future[T]]":
    """:func:`concurrent.futures.as_completed` waited for in steps of :data:`AWAKE_S`, so that a signal's
    handler runs on time; futures that end in the same step come in the order given."""
    order = {f: i for i, f in enumerate(futures)}
    pending = set(order)
    while pending:
        done, pending = wait(pending, timeout=AWAKE_S, return_when=FIRST_COMPLETED)
        yield from sorted(done, key=order.__getitem__)


def result_awake(future: "Future[T]") -> T:
    """``future.result()`` waited for in steps of :data:`AWAKE_S`, so that a signal's handler runs on time."""
    while True:
        try:
            return future.result(timeout=AWAKE_S)
        except FutureTimeout:
            continue


class Interrupted(Exception):
    """The run was asked to stop (a signal) before this host's next step."""


class Closable:
    """What a second signal closes beside the hosts' connections (:meth:`Stop.track`): a client of a
    server on the control machine's side (a Triton client) whose call in flight only closing it ends.
    Never probed: it has no host to answer."""

    probed = False

    def __init__(self, close: Callable[[], None]) -> None:
        self.close = close


def closes(stop: "Stop | None", close: Callable[[], None]) -> Callable[[], None]:
    """Hand ``close`` to ``stop``, whose second signal calls it (closing a client ends the call in flight on a
    server that answers nothing, as a second signal ends a host's round trip); returns the function that
    takes it back and calls it, for the caller's own end."""
    handle = Closable(close)
    if stop is not None:
        stop.track(handle)

    def done() -> None:
        if stop is not None:
            stop.untrack(handle)
        close()

    return done


class Stop:
    """A run asked to stop by a signal, shared by every host of the run.

    After the first :meth:`request` no host starts and no role starts (the
    role in progress finishes: its writes, handlers and checks), and a
    connection whose host answers no probe within ``grace`` seconds is closed
    (:attr:`silent` says whose, in the words of its result; ``say`` tells the
    console at once); after a second, the connections are closed, which wakes
    every round trip in flight, and the hosts end at once (:attr:`abandoned`).
    Handlers a cut-off role owed stay recorded on the host for the next run.
    """

    def __init__(self, grace: float = SILENT_GRACE_S, say: Callable[[str], None] = tell, at_once: bool = False) -> None:
        self.signum: int | None = None
        self.grace = grace
        #: A run that only reads (facts, checklist, audit, drift): its first signal closes the connections in flight
        #: at once, as a second does elsewhere (nothing is half written by ending a read; a hung ``nvidia-smi`` held
        #: the stop up to the read's 180 s limit per fact in its lane).  Not :attr:`abandoned`: a local child (an
        #: audit's site tests) still gets its SIGINT first, and its grace, as after any first signal.
        self.at_once = at_once
        #: ``{host: why}`` of the hosts whose connection the watchdog closed, ``why`` their result's message.
        self.silent: dict[str, str] = {}
        #: The hosts whose connections were open when the steps in flight were abandoned (closed under them).
        self.closed: set[str] = set()
        self._say = say
        self._lock = threading.Lock()
        self._open: set[Transport] = set()
        self._watched: set[Transport] = set()
        self._watchdog: threading.Thread | None = None
        self._asked = threading.Event()  # set by the first request
        self._abandon = threading.Event()  # set by the second

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def abandoned(self) -> bool:
        """A second signal came: the steps in flight are abandoned."""
        return self._abandon.is_set()

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    @property
    def exit_code(self) -> int:
        """The shell's code for a death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + (self.signum or 0)

    def request(self, signum: int) -> bool:
        """Stop starting work (True), or, asked again, abandon what is in flight (False)."""
        if self.signum is None:
            self.signum = signum
            # The watchers of the connections in flight start probing.  No lock taken, no thread started
            # here: a signal handler may run while its own thread holds either.
            self._asked.set()
            return True
        # The watchdog closes them: closing takes locks a worker may hold, and a thread started here could wait
        # for a lock the interrupted main thread holds (threading's own, while it starts a thread).
        self._abandon.set()
        return False

    def check(self, where: str) -> None:
        """Raise :class:`Interrupted` when a stop was requested (called before a host's next step)."""
        if self.signum is not None:
            raise Interrupted(f"interrupted by {self.name} {where}")

    def track(self, t: "Transport | Closable | None") -> None:
        if t is not None:
            with self._lock:
                self._open.add(t)
            if self.abandoned or (self.at_once and self.requested):
                self._close_all()
            else:
                self._start_watchdog()

    def untrack(self, t: "Transport | Closable | None") -> None:
        with self._lock:
            self._open.discard(t)

    def _close_all(self) -> None:
        with self._lock:
            open_ = list(self._open)
            if not self.at_once:
                # A run that writes, abandoned by a second signal: a command on the control machine itself (an
                # `ansible_connection: local` host's dpkg, its tune's trial) runs on to its end, as one on an SSH
                # host does when its connection closes; only a read's stop (at_once) ends it.
                open_ = [t for t in open_ if not getattr(t, "ends_its_command_on_close", False)]
            self.closed.update(t.host.name for t in open_ if getattr(t, "host", None) is not None)
        for t in open_:
            try:
                t.close()
            except Exception:  # noqa: BLE001 - a connection already gone is what we want
                pass

    # -- the watchdog after the first signal -----------------------------------------------------

    def _start_watchdog(self) -> None:
        """One thread per run, started with its first connection (in the host's worker, never in a signal
        handler), asleep until a stop is requested: no thread per connection, no polling while the run goes on."""
        with self._lock:
            if self._watchdog is not None:
                return
            self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        """After the first signal: probe each connection in flight that can go silent (a connection to the
        control machine itself cannot), and each one a host opens later, in a thread of its own until its host
        is done with it; after the second, close every connection at once."""
        self._asked.wait()
        if self.at_once:
            self._close_all()
        while not self.abandoned:
            with self._lock:
                new = [t for t in self._open if t.probed and t not in self._watched]
                self._watched.update(new)
            for t in new:
                threading.Thread(target=self._probe, args=(t,), daemon=True).start()
            self._abandon.wait(PROBE_EVERY_S)
        self._close_all()

    def _probe(self, t: Transport) -> None:
        """Probe ``t`` until its host is done with it; close it when it answers nothing within the grace."""
        while not self.abandoned and self._tracked(t):
            if not t.silent(self.grace):
                time.sleep(PROBE_EVERY_S)
                continue
            why = (f"no answer within {self.grace:g} s after {self.name}: connection closed, the step in flight "
                   "may have finished on the host or not (the next run reads what it left)")
            with self._lock:
                if t not in self._open or self.abandoned:
                    return  # the host was done with it meanwhile, or a second signal closes it
                self.silent[t.host.name] = why
            self._say(f"{self.name}: no answer from {t.host.name} within {self.grace:g} s: closing its connection")
            try:
                t.close()
            except Exception:  # noqa: BLE001 - a connection already gone is what we want
                pass
            return

    def _tracked(self, t: Transport) -> bool:
        with self._lock:
            return t in self._open
