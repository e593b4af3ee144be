"""The local transport for real: round trips that hang are cut off; become's prompt handshake."""
from __future__ import annotations

import io
import time

import pytest

from bringup.ssh.connection import BecomeError, LocalTransport, Sudo
from bringup.errors import Unreachable
from bringup.inventory.hosts import ConnectionVars, Host


def local_host(**conn) -> Host:
    c = ConnectionVars(ansible_connection="local", **conn)
    return Host(name="ctl", groups=["all"], vars={}, connection=c)


@pytest.mark.reliability(item=9, fault='a round trip past command_timeout (local transport)',
                         checks=('no hang',))
def test_a_round_trip_past_command_timeout_is_unreachable_and_killed(tmp_path):
    t = LocalTransport(local_host(command_timeout=1))
    marker = tmp_path / "after"
    started = time.monotonic()
    with pytest.raises(Unreachable, match=r"ctl stopped answering: no result within 1 s \(command_timeout\)"):
        t.run_script(f"sleep 30; touch {marker}")
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    assert not marker.exists()  # the whole process group was killed, not left behind
    # The transport still works for the next round trip.
    assert t.run_script("echo fine").stdout.strip() == "fine"


def test_a_read_script_cut_off_by_the_timeout_leaves_no_folder_and_a_deaf_one_is_still_killed(tmp_path,
                                                                                               monkeypatch):
    from bringup.ssh.script import batch

    work = tmp_path / "tmp"
    work.mkdir()
    monkeypatch.setenv("TMPDIR", str(work))
    t = LocalTransport(local_host(command_timeout=1))
    script, _ = batch([("a", "sleep 30"), ("b", "sleep 30")], lanes=2)
    with pytest.raises(Unreachable):
        t.run_script(script)
    assert list(work.iterdir()) == []  # SIGTERM first: the script's trap removed its lanes' folder
    started = time.monotonic()
    with pytest.raises(Unreachable):  # a script that ignores SIGTERM gets SIGKILL after the grace
        t.run_script(f"trap '' TERM; sleep 30; touch {tmp_path}/deaf")
    assert time.monotonic() - started < 10 and not (tmp_path / "deaf").exists()


def test_round_trip_within_timeout_returns_output():
    t = LocalTransport(local_host(command_timeout=30))
    r = t.run_script("echo out; echo err >&2; exit 3")
    assert (r.rc, r.stdout, r.stderr) == (3, "out\n", "err\n")


class _Pipe:
    """Scripted stderr of a sudo: chunks handed out one by one; what is sent is kept."""

    def __init__(self, chunks: list[bytes]):
        self.chunks, self.sent = list(chunks), []

    def recv(self, n: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def send(self, data: bytes) -> None:
        self.sent.append(data)


SUDO = Sudo(prompt="[bringup-sudo-ab12]", ready="bringup-ready-ab12", password="s3cret", user="root")


@pytest.mark.reliability(item=1, fault="become password: sent only at sudo's own prompt (scripted sudo)",
                         checks=('nothing executed',))
def test_handshake_sends_the_password_only_at_the_prompt():
    p = _Pipe([b"[bringup-sudo-", b"ab12]", b"bringup-ready-ab12\nwarn: x\n"])
    assert SUDO.handshake(p.recv, p.send, "h") == b"warn: x\n"
    assert p.sent == [b"s3cret\n"]


@pytest.mark.reliability(item=1, fault="become password: sent only at sudo's own prompt (scripted sudo)",
                         checks=('nothing executed',))
def test_handshake_without_a_prompt_never_sends_the_password():
    p = _Pipe([b"bringup-ready-ab12\n"])
    assert SUDO.handshake(p.recv, p.send, "h") == b""
    assert p.sent == []


@pytest.mark.reliability(item=18, fault='sudo refuses (wrong password, not in sudoers): its own words')
def test_handshake_second_prompt_is_a_wrong_password_with_sudos_words():
    p = _Pipe([b"[bringup-sudo-ab12]", b"Sorry, try again.\n[bringup-sudo-ab12]"])
    with pytest.raises(BecomeError, match=r"refused ansible_become_password \(sudo says: Sorry, try again\.\)") as e:
        SUDO.handshake(p.recv, p.send, "h")
    assert "s3cret" not in str(e.value)
    assert p.sent == [b"s3cret\n"]


@pytest.mark.reliability(item=18, fault='sudo refuses (wrong password, not in sudoers): its own words')
def test_handshake_sudo_exits_first():
    p = _Pipe([b"deploy is not in the sudoers file.\n"])
    with pytest.raises(BecomeError, match="not in the sudoers file"):
        SUDO.handshake(p.recv, p.send, "h")


def test_stream_through_local_transport():
    t = LocalTransport(local_host())
    r = t._exchange("wc -c", None, io.BytesIO(b"x" * 5000))
    assert r.stdout.strip() == "5000"


def test_run_command_is_the_exec_line_itself_bounded_and_without_stdin(tmp_path):
    # testinfra's one-line commands go as the exec request (no script read from stdin first): the same shell
    # semantics, exit status and both streams, under the same host-side timeout and command_timeout.
    t = LocalTransport(local_host(command_timeout=1))
    res = t.run_command("printf 'a b'; printf err >&2; cat; exit 3")  # cat: stdin is empty, not the script
    assert (res.rc, res.stdout, res.stderr) == (3, "a b", "err")
    assert t.round_trips == 1
    with pytest.raises(Unreachable, match="command_timeout"):
        t.run_command(f"sleep 30; touch {tmp_path / 'after'}")
    time.sleep(0.2)
    assert not (tmp_path / "after").exists()


LEFT = {"a background job": "sleep {mark} & echo hi",
        "a session of its own (setsid)": "setsid sleep {mark} & echo hi",
        "its tag shed too (env -i setsid)": "env -i setsid sleep {mark} & echo hi"}


@pytest.mark.reliability(item=40, fault="a local host's command leaving a child that holds its stdout (a background "
                         "job, setsid, env -i setsid)", variants=len(LEFT),
                         checks=("no hang", "nothing left running"))
@pytest.mark.parametrize("leave", LEFT.values(), ids=LEFT.keys())
def test_a_child_holding_the_output_neither_holds_the_round_trip_nor_outlives_it(leave):
    """``ansible_connection: local`` (pull mode's hosts): the reader waited for the pipe's end, which the child held.
    A background job held the round trip until command_timeout, which then discarded the output ("stopped
    answering"); one that left the process group (setsid) held it past command_timeout too, for the child's whole
    life, since the deadline ends the group alone.  Now what it printed is read, and the child ended; one that shed
    the tag too is no longer waited for (it runs on, as it would on an SSH host: no orphan of this process is
    killed here, a site test's own detached process among them)."""
    import os

    mark = f"62.{os.getpid()}{len(leave)}"
    t = LocalTransport(local_host(command_timeout=5))
    started = time.monotonic()
    try:
        r = t.run_script(leave.format(mark=mark))
        got = (r.rc, r.stdout)
    except Unreachable as e:
        got = (None, str(e))
    took = time.monotonic() - started
    time.sleep(0.3)
    left = [p for p in os.listdir("/proc") if p.isdigit() and mark.encode() in _cmdline(p)]
    for pid in left:
        os.kill(int(pid), 9)
    assert got == (0, "hi\n") and took < 5, (got, took, left)
    assert not left or leave.startswith("env -i"), left


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""
