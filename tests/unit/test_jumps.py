"""Issue 32 item 3: jump host logins shared by the hosts behind them, and given back (bringup.ssh.jumps).

No network: the login itself (:meth:`Jumps._open`) is replaced by a recorder; what is tested is which
logins are made, shared, and closed, and the words of a failure.  The real logins are in
tests/integration/test_bastion.py.
"""
from __future__ import annotations

import paramiko
import pytest

from bringup.errors import Unreachable
from bringup.ssh.jumps import Jumps, Way, unreachable
from bringup.ssh.sshconfig import Endpoint

WAY = Way(known_hosts=("/nonexistent/known_hosts",), accept_new=False, connect_timeout=3)
BASTION = Endpoint("bastion", "203.0.113.7", 22, "jump")
INNER = Endpoint("inner", "10.9.0.2", 22, "jump")


class FakeTransport:
    def __init__(self, name: str, log: list):
        self.name, self.log, self.active = name, log, True

    def is_active(self) -> bool:
        return self.active

    def open_channel(self, kind, dest, src, timeout=None):
        if dest[0] == "refuse":
            raise paramiko.ChannelException(2, "Connect failed")
        self.log.append(("channel", self.name, dest))
        return f"chan:{self.name}->{dest[0]}"


class FakeClient:
    def __init__(self, name: str, log: list):
        self.t, self.log, self.name = FakeTransport(name, log), log, name

    def get_transport(self):
        return self.t

    def close(self) -> None:
        self.t.active = False
        self.log.append(("close", self.name))


@pytest.fixture
def jumps(monkeypatch):
    j = Jumps()
    j.log = []

    def _open(hop, way, host, through, prev):
        if hop.hostname == "down":
            raise Unreachable(f"jump host {hop.name}: down")
        j.log.append(("login", hop.name, through.name if through else None))
        return FakeClient(hop.name, j.log), []

    monkeypatch.setattr(j, "_open", _open)
    return j


def target(name: str, *hops: Endpoint) -> Endpoint:
    return Endpoint(name, name, 22, "root", jumps=hops)


def test_two_hosts_behind_two_hops_share_one_login_each_and_the_last_closes_them(jumps):
    sock1, held1 = jumps.reach(target("gpu1", BASTION, INNER), WAY, "gpu1")
    sock2, held2 = jumps.reach(target("gpu2", BASTION, INNER), WAY, "gpu2")
    logins = [e for e in jumps.log if e[0] == "login"]
    assert logins == [("login", "bastion", None), ("login", "inner", "bastion")]
    assert (sock1, sock2) == ("chan:inner->gpu1", "chan:inner->gpu2")
    jumps.release(held1)
    assert not [e for e in jumps.log if e[0] == "close"]  # gpu2 still goes through them
    jumps.release(held2)
    assert [e for e in jumps.log if e[0] == "close"] == [("close", "inner"), ("close", "bastion")]


def test_a_different_way_in_is_not_shared(jumps):
    other_user = Endpoint("bastion", "203.0.113.7", 22, "someone-else")
    jumps.reach(target("gpu1", BASTION), WAY, "gpu1")
    jumps.reach(target("gpu2", other_user), WAY, "gpu2")
    jumps.reach(target("gpu3", BASTION), Way(WAY.known_hosts, True, 3), "gpu3")  # accept-new: not shared
    assert len([e for e in jumps.log if e[0] == "login"]) == 3


def test_a_dead_login_is_made_again(jumps):
    _, held = jumps.reach(target("gpu1", BASTION), WAY, "gpu1")
    next(h for h in jumps._hops.values()).client.t.active = False  # the bastion's connection dropped
    jumps.reach(target("gpu2", BASTION), WAY, "gpu2")
    assert len([e for e in jumps.log if e[0] == "login"]) == 2


def test_a_failure_further_on_gives_back_what_was_taken(jumps):
    with pytest.raises(Unreachable, match="jump host dead: down"):
        jumps.reach(target("gpu1", BASTION, Endpoint("dead", "down", 22, "x")), WAY, "gpu1")
    assert ("close", "bastion") in jumps.log and jumps._hops == {}
    with pytest.raises(Unreachable) as e:
        jumps.reach(target("refuse", BASTION), WAY, "gpu1")
    assert "through jump host bastion failed: the jump host could not connect to it (Connect failed)" in str(e.value)
    assert jumps._hops == {}


def test_close_closes_what_is_left(jumps):
    jumps.reach(target("gpu1", BASTION, INNER), WAY, "gpu1")
    jumps.close()
    assert [e for e in jumps.log if e[0] == "close"] == [("close", "inner"), ("close", "bastion")]


def test_failure_words():
    k = paramiko.RSAKey.generate(1024)
    changed = unreachable(paramiko.BadHostKeyException("bastion", k, k), ep=BASTION, way=WAY, host="bastion")
    assert str(changed).startswith("host key for 203.0.113.7:22 CHANGED (got ssh-rsa ")
    assert "/nonexistent/known_hosts" in str(changed)
    unknown = unreachable(paramiko.SSHException("Server '[x]:22' not found in known_hosts"), ep=BASTION, way=WAY,
                          host="bastion")
    assert "unknown host key for 203.0.113.7:22" in str(unknown) and "--accept-new-host-keys" in str(unknown)
    assert str(unreachable(TimeoutError(), ep=BASTION, way=WAY, host="b")) == \
        "ssh to 203.0.113.7:22 timed out after 3 s (ssh_connect_timeout)"


def _gone(pid: int) -> bool:
    """No such process, or one that ended and waits to be reaped (a container's init may be slow at it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.reliability(item=32, fault="a ProxyCommand that leaves a background child holding its pipes open "
                                        "(sh -c \"sleep 100 &\"), with ssh_connect_timeout 3: hung for the child's "
                                        "100 s", variants=1, checks=("no hang", "nothing left running",
                                                                     "one clear line"))
def test_a_proxy_command_whose_background_child_holds_the_pipe_fails_within_the_timeout(tmp_path):
    import time

    pidfile = tmp_path / "pid"
    hop = Endpoint("hop", "127.0.0.1", 22, "jump",
                   proxy_command=f"sh -c 'sleep 97 & echo $! > {pidfile}'")
    way = Way(known_hosts=(str(tmp_path / "kh"),), accept_new=False, connect_timeout=3)
    t0 = time.monotonic()
    with pytest.raises(Unreachable) as e:
        Jumps().reach(target("gpu-01", hop), way, "gpu-01")
    took = time.monotonic() - t0
    said = str(e.value)
    assert took < 15 and "ProxyCommand for 127.0.0.1:22 failed" in said and "\n" not in said, (took, said)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), "the proxy command's background child outlived it"


@pytest.mark.reliability(item=3, fault="ssh accept-new: a FIFO put at the known_hosts file after the login's check "
                                       "made the key's append wait for ever",
                         variants=3, checks=("no hang", "one clear line"))
def test_accept_new_appends_to_a_file_or_a_linked_one_and_never_waits_on_a_fifo(tmp_path):
    import os
    import threading

    import paramiko

    from bringup.errors import BringupError
    from bringup.ssh.jumps import AcceptNew

    key = paramiko.RSAKey.generate(1024)
    plain, real, linked = tmp_path / "kh", tmp_path / "real_kh", tmp_path / "linked_kh"
    real.write_text("# kept\n")
    linked.symlink_to(real)  # a dotfile manager's link: followed, as ssh does
    for path in (plain, linked):
        AcceptNew(path).missing_host_key(paramiko.SSHClient(), "[127.0.0.1]:2222", key)
    line = f"[127.0.0.1]:2222 {key.get_name()} {key.get_base64()}\n"
    assert plain.read_text() == line and real.read_text() == "# kept\n" + line

    fifo = tmp_path / "fifo_kh"
    os.mkfifo(fifo)
    got: list = []

    def add() -> None:
        try:
            AcceptNew(fifo).missing_host_key(paramiko.SSHClient(), "h", key)
        except BaseException as e:  # noqa: BLE001 - what it raised is the assertion
            got.append(e)

    t = threading.Thread(target=add, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # the old open(path, "a") waits for a reader: give it one so the thread ends
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    assert not t.is_alive(), "the append waited on the FIFO"
    assert len(got) == 1 and isinstance(got[0], BringupError), got
    assert str(got[0]).startswith(f"{fifo}: not a regular file any more") and "\n" not in str(got[0])


@pytest.mark.reliability(item=40, fault="accept-new's known_hosts append on a full disk (its own copy of the log "
                                        "append: an OSError traceback, a cut line left for the next key to be glued to)",
                         variants=1, checks=("one clear line", "whole old or new file"))
def test_accept_new_on_a_full_disk_is_one_line_and_leaves_known_hosts_as_it_was(tmp_path, monkeypatch):
    import errno
    import os

    import paramiko

    from bringup import outfile
    from bringup.errors import BringupError
    from bringup.ssh.jumps import AcceptNew

    key = paramiko.RSAKey.generate(1024)
    kh = tmp_path / "kh"
    kh.write_text("# kept\n")
    real = os.write

    def full(fd, data):  # the disk fills mid-line: 10 bytes written, then no room
        if data.startswith(b"h "):
            return real(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outfile.os, "write", full)
    with pytest.raises(BringupError) as e:
        AcceptNew(kh).missing_host_key(paramiko.SSHClient(), "h", key)
    monkeypatch.undo()
    assert str(e.value).startswith(f"{kh}: could not be written: No space left on device; ") and "\n" not in str(e.value)
    assert kh.read_text() == "# kept\n"
