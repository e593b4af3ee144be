"""The parts of one round trip that do not depend on the transport: its deadline, sudo's handshake on the
command's own stdin and stderr, and the decoding of what came back (:mod:`bringup.ssh.connection` runs them)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from ..errors import BringupError, said

__all__ = ["BecomeError", "Deadline", "Sudo", "text"]


def text(data: bytes) -> str:
    # Undecodable bytes (a binary file's content) survive as surrogates.
    return data.decode("utf-8", "surrogateescape")


class BecomeError(BringupError):
    """sudo refused: a wrong ``ansible_become_password``, or the user may not sudo."""


@dataclass
class Sudo:
    """One sudo call's handshake: its unique prompt, the command's ready line, the password."""

    prompt: str
    ready: str
    password: str = field(repr=False)
    user: str = "root"

    def handshake(self, recv: Callable[[int], bytes], send: Callable[[bytes], object], host: str) -> bytes:
        """Answer sudo's prompt (once) with the password; return stderr that followed the ready line.

        The ready line comes from the command sudo started: once it is seen,
        sudo reads nothing more, and stdin belongs to the command.
        """
        prompt, ready = self.prompt.encode(), self.ready.encode() + b"\n"
        buf, answered = b"", False
        while True:
            if ready in buf:
                return buf.split(ready, 1)[1]
            if prompt in buf:
                if answered:
                    words = said(text(buf.replace(prompt, b" ")), 300)
                    raise BecomeError(f"{host}: sudo -u {self.user} refused ansible_become_password "
                                      f"(sudo says: {words or 'it asked again'}); fix the password or the sudoers entry")
                send(self.password.encode() + b"\n")
                answered = True
                buf = buf.replace(prompt, b" ", 1)
                continue
            chunk = recv(4096)
            if not chunk:
                raise BecomeError(f"{host}: sudo -u {self.user} failed before running anything "
                                  f"(sudo says: {said(text(buf), 300) or 'nothing'})")
            buf += chunk


class Deadline:
    """Calls ``abort`` once ``seconds`` have passed, unless left before; ``fired`` says whether it did."""

    def __init__(self, seconds: float, abort: Callable[[], None]):
        self.fired = False
        self._abort = abort
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        try:
            self._abort()
        except Exception:  # noqa: BLE001 - aborting a dead channel may fail; the flag is what counts
            pass

    def __enter__(self) -> "Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
