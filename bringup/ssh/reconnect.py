"""Waiting for a host to come back (after a reboot): reconnect until a probe answers, within a deadline, each
try bounded, and a signal of the run ending the wait."""
from __future__ import annotations

import time
from typing import Protocol

from .connection import Transport, connect
from .sshconfig import Routes
from ..errors import Unreachable
from ..inventory.hosts import Host

__all__ = ["Watch", "wait_for_ssh"]


class Watch(Protocol):
    """What a wait asks of the run that waits (:class:`bringup.ssh.stop.Stop` is one): whether it may go on, and to
    know each connection in flight, which it may probe or close."""

    def check(self, where: str) -> None: ...

    def track(self, t: Transport | None) -> None: ...

    def untrack(self, t: Transport | None) -> None: ...


def wait_for_ssh(host: Host, timeout: float = 300, interval: float = 2.0, stop: Watch | None = None,
                 probe: str = "true", not_yet: str = "the probe failed", routes: Routes | None = None) -> Transport:
    """Reconnect until the host runs ``probe`` with exit 0 (after a reboot: a new boot); raises Unreachable after
    ``timeout`` s, naming what the last try met (``not_yet``: the probe ran and said no).

    Each try is bounded: the login by ``ssh_connect_timeout`` and authentication's own bound (jumps.log_in), the
    probe's round trip by what is left of ``timeout`` (at most ``ssh_connect_timeout``, at least 1 s): a host that
    logs in but never runs the probe is tried again, not waited for through command_timeout.  With ``stop`` (the
    run's), a signal ends the wait (:class:`~bringup.ssh.stop.Interrupted` before each try) and the connection of a
    try in flight is the run's to probe and close like any other.  ``routes``: the run's, so that each try reuses
    the host's route (its Match exec commands are not run again at every try)."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unreachable(f"{host.name} did not come back within {timeout:g} s ({last or 'no answer'})")
        if stop is not None:
            stop.check("while waiting for the host to come back from its reboot")
        t: Transport | None = None
        try:
            t = connect(host, routes=routes)
            if stop is not None:
                stop.track(t)
            with t.limited(min(left, float(host.connection.ssh_connect_timeout))):
                if t.run_script(probe).rc == 0:
                    return t
            last = not_yet
        except Unreachable as e:
            last = str(e)
        if t is not None:
            if stop is not None:
                stop.untrack(t)
            t.close()
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
