"""bringup.child's group mechanism for the callers that stream (issue 43 item 3, issue 40 item 3): a started
child is ended group and all (SIGTERM, a grace, SIGKILL), and every streamed read has a cap."""
from __future__ import annotations

import io
import os
import signal
import time
import tracemalloc

import pytest

from bringup import child
from bringup.ssh.connection import LOCAL_OUT_CAP, LocalTransport
from bringup.inventory.hosts import ConnectionVars, Host

from tests.processes import running


@pytest.mark.reliability(item=40, fault="a child whose group member ignores SIGTERM (kill mechanism)",
                         checks=("nothing left running", "no hang"))
def test_end_sends_sigterm_to_the_group_then_sigkill_after_the_grace(tmp_path):
    # The leader traps SIGTERM and says so (a script's cleanup); its background child ignores SIGTERM.
    said = tmp_path / "said"
    c = child.start(["sh", "-c", f"trap 'echo term > {said}; exit 0' TERM; "
                                 "sh -c 'trap \"\" TERM; sleep 600' & echo $! ; wait"], stdout=child.PIPE)
    deaf = int(c.proc.stdout.readline())
    assert os.getpgid(deaf) == c.pid  # in the child's group, not bringup's
    started = time.monotonic()
    c.end(grace=1.0)
    assert said.read_text().strip() == "term"  # SIGTERM first: the trap ran
    assert not running(deaf)  # then SIGKILL to the whole group once the grace passed
    assert time.monotonic() - started < 30
    c.proc.stdout.close()
    assert c.end() == c.proc.returncode  # again: nothing left, no error


def test_a_child_that_left_the_group_carrying_its_tag_is_ended_too(tmp_path):
    c = child.start(["sh", "-c", "setsid sleep 600 & echo $!; wait"], stdout=child.PIPE, tag=True)
    away = int(c.proc.stdout.readline())
    time.sleep(0.2)
    assert os.getpgid(away) != c.pid
    c.end(grace=0.5)
    deadline = time.monotonic() + 10
    while running(away) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(away)
    c.proc.stdout.close()


def test_read_capped_keeps_the_cap_and_ends_the_writer():
    with child.start(["sh", "-c", "exec cat /dev/zero"], stdout=child.PIPE) as c:
        got, passed = child.read_capped(c.proc.stdout, 100_000, over=c.end)
        assert passed and len(got) == 100_000 and got == b"\0" * 100_000
        assert c.proc.wait(10) == -signal.SIGTERM
        c.proc.stdout.close()


def test_lines_cuts_a_line_without_end():
    text = io.StringIO("first\n" + "x" * 1_000_000 + "\nlast\n")
    got = list(child.lines(text, cap=1000))
    assert got[0] == "first\n" and got[-1] == "last\n" and len(got) == 3
    assert got[1].endswith(" ... (cut)\n") and len(got[1]) < 1100


@pytest.mark.reliability(item=40, fault="a local command that floods stdout (/dev/zero, ansible_connection local)",
                         checks=("one clear line", "no hang"))
def test_a_local_command_that_floods_is_one_line_in_bounded_memory():
    t = LocalTransport(Host(name="ctl", groups=["all"], vars={},
                            connection=ConnectionVars(ansible_connection="local", command_timeout=120)))
    tracemalloc.start()
    try:
        started = time.monotonic()
        res = t._exchange("cat /dev/zero; echo never", None, io.BytesIO(b""))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.rc != 0 and res.stdout == ""
    assert res.stderr == f"ctl: the command printed more than {LOCAL_OUT_CAP >> 20} MiB; it was ended there and " \
                         "its output dropped"
    assert peak < 3 * LOCAL_OUT_CAP
    assert time.monotonic() - started < 100
