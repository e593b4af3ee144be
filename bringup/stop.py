"""Stopping a run in order: the first SIGINT/SIGTERM starts no new host or role, the second abandons the steps
in flight.  One :class:`Stop` is shared by every host of a run; :mod:`bringup.tasks.context` installs the
signal handlers that call :meth:`Stop.request`.
"""
from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import Transport

__all__ = ["Stop", "Interrupted"]


class Interrupted(Exception):
    """The run was asked to stop (a signal) before this host's next step."""


class Stop:
    """A run asked to stop by a signal, shared by every host of the run.

    After the first :meth:`request` no host starts and no role starts (the
    role in progress finishes: its writes, handlers and checks); after a
    second, the connections are closed, which wakes every round trip in
    flight, and the hosts end at once (:attr:`abandoned`).  Handlers a cut-off
    role owed stay recorded on the host for the next run.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.abandoned = False
        self._lock = threading.Lock()
        self._open: set[Transport] = set()

    @property
    def requested(self) -> bool:
        return self.signum is not None

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
            return True
        self.abandoned = True
        # Not in the signal handler itself: closing takes locks a worker may hold.
        threading.Thread(target=self._close_all, daemon=True).start()
        return False

    def check(self, where: str) -> None:
        """Raise :class:`Interrupted` when a stop was requested (called before a host's next step)."""
        if self.signum is not None:
            raise Interrupted(f"interrupted by {self.name} {where}")

    def track(self, t: Transport | None) -> None:
        if t is not None:
            with self._lock:
                self._open.add(t)
            if self.abandoned:
                self._close_all()

    def untrack(self, t: Transport | None) -> None:
        with self._lock:
            self._open.discard(t)

    def _close_all(self) -> None:
        with self._lock:
            open_ = list(self._open)
        for t in open_:
            try:
                t.close()
            except Exception:  # noqa: BLE001 - a connection already gone is what we want
                pass
