"""The audit helpers' parser of listening ports, on this machine's real /proc/net/tcp."""
import socket
from pathlib import Path

from bringup.auditkit import listening


def test_listening_sees_a_real_listener_and_not_a_connection():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    try:
        text = Path("/proc/net/tcp").read_text() + Path("/proc/net/tcp6").read_text()
        ports = listening(text)
        assert port in ports
        assert cli.getsockname()[1] not in ports  # the client's end is ESTABLISHED, not LISTEN
    finally:
        cli.close()
        srv.close()
    assert listening(None) == set()
