"""A 127.0.0.1 port that accepts TCP and never answers: an sshd that is frozen, overloaded, or behind a
firewall that drops traffic after the handshake.  A context manager yielding ``(port, accepted)``:
``accepted`` is set once a client has connected.  And :func:`closed_port`: one that refuses."""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def silent_port() -> Iterator[tuple[int, threading.Event]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    held: list[socket.socket] = []
    accepted, stop = threading.Event(), threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
                accepted.set()
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1], accepted
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        srv.close()


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (free a moment ago): a connection to it is refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
