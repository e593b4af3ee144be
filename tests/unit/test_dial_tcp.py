"""Logins dial their own TCP connection with TCP_NODELAY set before the SSH handshake (bringup.ssh.jumps.dial_tcp).

paramiko's connect makes a socket with no option set, so TCP_NODELAY could only come after the login: the
handshake's small packets each waited out a delayed ACK (~40 ms of a ~60 ms login on 127.0.0.1).  What is
checked is the socket paramiko's Transport is handed, at the moment it is handed (before any byte of the
handshake), for a host's own login and a jump host's; and that a refused port is still paramiko's error and
bringup's line.  Speed itself is measured in bench/ (the floor dials the same way).
"""
from __future__ import annotations

import socket

import paramiko
import pytest

import tests.silent
from bringup.errors import Unreachable
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.ssh.connection import connect
from bringup.ssh.jumps import Jumps, Way, dial_tcp
from bringup.ssh.sshconfig import Endpoint


@pytest.fixture
def handed(monkeypatch):
    """TCP_NODELAY of every socket a paramiko Transport is made with, read as it is made."""
    seen: list[int] = []
    real = paramiko.Transport.__init__

    def init(self, sock, *a, **kw):
        sock_ = getattr(sock, "_sock", sock)  # under jumps._BannerCap, which bounds the banner read
        if isinstance(sock_, socket.socket):
            seen.append(sock_.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        elif isinstance(sock, socket.socket):
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        real(self, sock, *a, **kw)

    monkeypatch.setattr(paramiko.Transport, "__init__", init)
    return seen


def test_a_hosts_login_is_handed_a_socket_with_no_delay_already_set(tmp_path, handed):
    with tests.silent.silent_port() as (port, accepted):
        host = Host("h1", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=port,
                                                      ssh_connect_timeout=1,
                                                      ssh_known_hosts=str(tmp_path / "known_hosts")))
        with pytest.raises(Unreachable, match=r"no SSH handshake finished within 1 s \(ssh_connect_timeout\): "):
            connect(host)
        assert accepted.is_set()
    assert handed and all(handed), handed  # before: paramiko's own socket, 0


def test_a_jump_hosts_login_is_handed_a_socket_with_no_delay_already_set(tmp_path, handed):
    with tests.silent.silent_port() as (port, accepted):
        hop = Endpoint("bastion", "127.0.0.1", port, "jump")
        way = Way(known_hosts=(str(tmp_path / "known_hosts"),), accept_new=False, connect_timeout=1)
        with pytest.raises(Unreachable, match="jump host bastion"):
            Jumps()._open(hop, way, "h1", None, None)
        assert accepted.is_set()
    assert handed and all(handed), handed


def test_a_refused_port_is_paramikos_error_and_bringups_line(tmp_path):
    port = tests.silent.closed_port()
    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError) as e:
        dial_tcp("127.0.0.1", port, 2)
    assert e.value.strerror == f"Unable to connect to port {port} on 127.0.0.1"
    host = Host("h1", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=port,
                                                  ssh_known_hosts=str(tmp_path / "known_hosts")))
    with pytest.raises(Unreachable) as line:
        connect(host)
    assert str(line.value) == f"ssh to 127.0.0.1:{port} failed: Unable to connect to port {port} on 127.0.0.1"


def test_an_answering_port_gives_a_connected_socket_with_no_delay():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    try:
        s = dial_tcp("localhost", srv.getsockname()[1], 2)
        try:
            assert s.getpeername()[1] == srv.getsockname()[1]
            assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            s.close()
    finally:
        srv.close()


def test_an_ascii_name_is_resolved_without_the_idna_codec():
    # Python encodes a str host name through the IDNA codec, whose first use imports it and stringprep (~5 ms of
    # every login's CPU): an ASCII name goes to the resolver as bytes (issue 42).
    import subprocess
    import sys

    code = ("import socket, sys\nfrom bringup.ssh.jumps import dial_tcp\nsrv = socket.socket()\n"
            "srv.bind(('127.0.0.1', 0))\nsrv.listen()\ns = dial_tcp('localhost', srv.getsockname()[1], 2)\n"
            "print(s.getpeername()[1] == srv.getsockname()[1], 'encodings.idna' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["True", "False"], (r.stdout, r.stderr[-2000:])


def test_a_dialed_socket_acknowledges_at_once_after_every_read(monkeypatch):
    # An sshd without a terminal sets no TCP_NODELAY: its answer to the first channel open waits behind its
    # hostkeys notice until the client acknowledges that notice, which Linux delays by 40 ms.  The socket a
    # login dials asks for the acknowledgement at once after every read (TCP_QUICKACK: the kernel clears it).
    if not hasattr(socket, "TCP_QUICKACK"):
        pytest.skip("TCP_QUICKACK is Linux's")
    calls: list[tuple[int, int, int]] = []
    real = socket.socket.setsockopt

    def spy(self, level, opt, value, *rest):
        calls.append((level, opt, value))
        return real(self, level, opt, value, *rest)

    monkeypatch.setattr(socket.socket, "setsockopt", spy)
    with socket.create_server(("127.0.0.1", 0)) as srv:
        sock = dial_tcp("127.0.0.1", srv.getsockname()[1], 5)
        peer, _ = srv.accept()
        with sock, peer:
            quick = (socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            assert quick not in calls  # none before a read
            for word in (b"hostkeys", b"open-confirmation"):
                peer.sendall(word)
                calls.clear()
                assert sock.recv(64) == word
                assert calls == [quick]
