"""Connections and facts opened ahead of a run, while the control machine still loads and checks its input.

A whole run first spends a few hundred milliseconds on the control machine alone (loading the roles,
checking every variable, importing Jinja2 and rich) with every host idle, and then waits on the hosts
(the SSH handshake, the facts script) with the control machine idle.  :class:`Ahead` lets the two
overlap: as soon as the inventory names the hosts, a thread per host connects; once the input is checked
and the selected roles said which facts they read (:meth:`Ahead.want`), it gathers them, while the
control machine imports Jinja2 and rich and sets up the run.  :class:`~bringup.engine.runner.HostRun` then takes
that connection and those facts (:meth:`Ahead.take`) instead of opening its own.

Before the input is checked a host sees only a login (key authentication, no command): a run refused for
bad input closes it unused (:meth:`Ahead.close`), and no command, sudo included, ran anywhere.  Not opened
ahead: a host that logs in with a password (a refused run makes no login attempt with it), and the hosts
the caller holds back (``hold``: a host whose drain hook must run before anything touches it).  It never
records a host key: given ``accept_new_host_keys`` (the run's ``--accept-new-host-keys``) it opens nothing,
nor for a host whose own ssh options accept new keys, and the run connects itself once its input was
checked.  An error of the early connection or gathering is raised where the run would have met it, in
the host's own worker (:meth:`Dial.facts_for`, :meth:`Ahead.take`), so it is reported as before.

    with Ahead() as ahead:                    # leaving it closes what no host took
        ahead.dial(hosts)                     # threads connect
        ...                                   # the input checked
        ahead.want(wanted_facts(roles))       # ... and gather these facts once connected
        ...                                   # the control machine's own work meanwhile
        dial = ahead.take(host)               # in the host's worker: waits, raises what connect raised
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ..ssh.connection import Jumps, Transport, connect
from ..facts.gather import ahead_key, gather, lock_and_gather
from ..ssh.sshconfig import Routes

if TYPE_CHECKING:
    from ..inventory.hosts import Host

__all__ = ["Ahead", "Dial"]


class Dial:
    """One host's early connection and, when the run said which in time, its facts."""

    def __init__(self, host: Host):
        self.host = host
        self.started = time.monotonic()
        self.transport: Transport | None = None
        self.error: Exception | None = None
        self.wanted: list | None = None
        self.keys: dict[str, list[str]] = {}  # the facts read in part (bringup.engine.roles.fact_keys)
        self.facts: tuple[dict[str, Any], dict[str, str]] | None = None
        self.facts_error: Exception | None = None
        #: Why the run lock could not be taken on it (a run that writes: :meth:`Ahead.want`'s ``lock``), raised
        #: where the run would have taken it (:class:`~bringup.engine.runner.HostRun`).
        self.lock_error: Exception | None = None
        self.connected = threading.Event()  # set once connecting succeeded or failed
        self.done = threading.Event()  # ... and once the facts were gathered (or were not to be)
        self.taken = False

    def facts_for(self, wanted: list, keys: dict[str, list[str]] | None = None
                  ) -> tuple[dict[str, Any], dict[str, str]] | None:
        """The facts gathered early, when they are exactly ``wanted`` and read in part only where ``keys`` reads
        the same part (a fact read whole serves any part) (waits for them); None when not; raises what gathering
        raised (the connection closed under it by a second signal, a timeout)."""
        self.done.wait()
        keys = keys or {}
        if self.wanted is None or list(self.wanted) != list(wanted) or \
                any(keys.get(name) != part for name, part in self.keys.items()):
            return None
        if self.facts_error is not None:
            raise self.facts_error
        return self.facts


def _records_keys(host: Host, routes: Routes) -> bool:
    """Whether connecting may record a host key without the run's flag: the host's own ssh options say
    ``StrictHostKeyChecking accept-new`` (or ``no``); such a host connects once the input was checked."""
    if host.connection.ansible_connection == "local":
        return False
    return routes.of(host).strict == "accept-new"


#: The longest :meth:`Ahead.close` waits for dials still connecting (a slow host never holds an exit longer).
CLOSE_WAIT_S = 2.0


class Ahead:
    """Connections (and facts) opened for ``hosts`` while the run still prepares; see the module."""

    def __init__(self, enabled: bool = True, extra_facts: tuple[str, ...] = (),
                 hold: Callable[[Host], bool] = lambda host: False, accept_new_host_keys: bool = False) -> None:
        #: When False, :meth:`dial` opens nothing: every host connects in the run itself (also when the run
        #: may record host keys: a key is recorded only once the input was checked).
        self.enabled = enabled and not accept_new_host_keys
        #: Facts the caller gathers beyond the roles' (``HostRun(extra_facts=...)``: the checklist's own).
        self.extra_facts = extra_facts
        #: Hosts :meth:`dial` leaves to their run (True): a drain hook must come first.
        self.hold = hold
        self._dials: dict[str, Dial] = {}
        self._wanted: list | None = None
        self._keys: dict[str, dict[str, list[str]]] = {}
        self._lock_for: str | None = None  # the run lock's owner line, for a run that writes
        self._roles: list[str] = []  # the run's roles, naming the state read it reads ahead
        self._said = threading.Event()  # set once the facts wanted are known, or will never be
        self._lock = threading.Lock()
        self._closed = False
        self._threads: list[threading.Thread] = []
        #: The run's jump host logins: one per jump host for all the hosts behind it (bringup.ssh.jumps), here
        #: because every connection of the run is opened with this object at hand (HostRun takes it too).
        self.jumps = Jumps()
        #: The run's routes, each host's worked out once (its ssh config and Match exec commands): the input's
        #: check fills it (:func:`~bringup.ssh.sshconfig.check_routes`), every connection of the run reads it.
        self.routes = Routes()

    def dial(self, hosts: list[Host]) -> None:
        """Start connecting to each of ``hosts`` (one daemon thread each: an exit never waits on a slow host),
        except those held back (:attr:`hold`) and those that log in with a password."""
        if not self.enabled or self._closed:
            return
        for h in hosts:
            if h.name in self._dials or self.hold(h) or h.connection.ansible_password is not None \
                    or _records_keys(h, self.routes):
                continue
            d = self._dials[h.name] = Dial(h)
            th = threading.Thread(target=self._run, args=(d,), name=f"ahead-{h.name}", daemon=True)
            self._threads.append(th)
            th.start()

    def want(self, facts: list, keys: dict[str, dict[str, list[str]]] | None = None, lock: str | None = None,
             roles: list[str] | None = None) -> None:
        """The facts the run will gather (:func:`~bringup.engine.roles.wanted_facts`): each connection gathers them;
        ``keys``: by host, the facts it reads in part (:func:`~bringup.engine.roles.fact_keys`); ``lock``: a run that
        writes, named as the host's run lock names its owner (:func:`~bringup.ssh.runlock.who`): each connection
        takes the lock, and its holder gathers the facts once it holds it, in the same round trip, then reads ahead
        the state read the last run of these ``roles`` (their names) kept (:func:`~bringup.facts.gather.ahead_key`).

        Called once the run's input is checked: the facts script (or the lock) is the first command a host runs."""
        if not self._said.is_set():
            self._wanted = list(facts)
            self._keys = dict(keys or {})
            self._lock_for = lock
            self._roles = list(roles or [])
            self._said.set()

    def _run(self, d: Dial) -> None:
        try:
            d.transport = connect(d.host, jumps=self.jumps, routes=self.routes)
        except Exception as e:  # noqa: BLE001 - raised again in the host's worker by take()
            d.error = e
        d.connected.set()
        if d.transport is not None:
            self._said.wait()
            wanted, lock = self._wanted, self._lock_for
            if lock is not None and not self._closed:
                try:
                    keys = self._keys.get(d.host.name, {})
                    d.facts = lock_and_gather(d.transport, lock, wanted or [], keys,
                                              ahead_key(self._roles, wanted or [], keys))
                except Exception as e:  # noqa: BLE001 - raised again by the run, where it takes the lock
                    d.lock_error = e
                if d.facts is not None:
                    d.wanted, d.keys = wanted, self._keys.get(d.host.name, {})
            if wanted and d.facts is None and d.lock_error is None and not self._closed:
                d.wanted, d.keys = wanted, self._keys.get(d.host.name, {})
                try:
                    d.facts = gather(d.transport, wanted, d.keys)
                except Exception as e:  # noqa: BLE001 - raised again by facts_for(), where gather() would have
                    d.facts_error = e
        with self._lock:
            orphan = self._closed and not d.taken
            if not orphan:
                d.done.set()  # from here on close() sees it
        if orphan:  # close() came first and left it to this thread
            if d.transport is not None:
                d.transport.close()
            d.done.set()

    def take(self, host: Host) -> Dial | None:
        """``host``'s early connection, once connected (None when it was not dialed); raises what connecting raised.

        Its facts may still be in flight on it: :meth:`Dial.facts_for` waits for them, and nothing else may use
        the transport before.  A host is taken once: after a reboot the run reconnects by itself.
        """
        with self._lock:
            d = self._dials.get(host.name)
            if d is None or d.taken:
                return None
            d.taken = True
        self.want([])  # a run that never said which facts: do not wait for them
        d.connected.wait()
        if d.error is not None:
            raise d.error
        return d

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection no host took (a run refused, interrupted, or with hosts left unstarted)."""
        with self._lock:
            self._closed = True
            left = [d for d in self._dials.values() if d.done.is_set() and not d.taken]
        self.want([])
        for d in left:
            if d.transport is not None:
                d.transport.close()
        # A dial still in its SSH handshake when the process ends is a daemon thread inside paramiko and the
        # cryptography library's native code at interpreter shutdown, which can abort the process ("FATAL:
        # exception not rethrown") after its last line was printed: give those dials a moment to end.
        deadline = time.monotonic() + CLOSE_WAIT_S
        for th in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
        self.jumps.close()  # the run is over: a jump host login a host left open goes too
