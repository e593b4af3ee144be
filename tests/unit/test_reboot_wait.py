"""Waiting for a host to come back from its reboot is bounded by reboot_timeout and by a signal, never by
command_timeout: a host that logs in but never runs the probe (sshd up, the shell stuck half way through the
boot) is tried again until the wait ends, and a SIGTERM ends the wait at the next try.

Real objects: bringup's :func:`wait_for_ssh` and :class:`SSHTransport` talk SSH to paramiko servers on
127.0.0.1 (the servers of tests/unit/test_stop_silent.py: each round trip answered ``step`` seconds after the
script came, here accepting every new connection).
"""
from __future__ import annotations

import re
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from bringup.ssh.reconnect import wait_for_ssh
from bringup.errors import Unreachable
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.ssh.stop import Interrupted, Stop

from .test_stop_silent import PASSWORD, USER, ssh_server


@contextmanager
def booting_host(tmp_path: Path, step: float) -> Iterator[Host]:
    """A host whose sshd takes every login and answers each round trip after ``step`` s; command_timeout 120 s."""
    with ssh_server(step, logins=None) as (port, key):
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n")
        yield Host(name="booting", groups=["all"], vars={}, connection=ConnectionVars(
            ansible_host="127.0.0.1", ansible_port=port, ansible_user=USER, ansible_password=PASSWORD,
            ssh_known_hosts=str(known), ssh_connect_timeout=2, command_timeout=120))


def test_a_host_that_answers_is_returned_connected(tmp_path):
    with booting_host(tmp_path, step=0.0) as host:
        t = wait_for_ssh(host, timeout=20, interval=0.2)
        try:
            assert t.run_script("true").stdout == "done\n"
        finally:
            t.close()


@pytest.mark.reliability(item=26, fault="a host that logs in but never runs a command, during the reboot wait",
                         checks=("no hang",))
def test_a_host_that_logs_in_but_never_answers_is_given_up_at_the_wait_not_at_command_timeout(tmp_path):
    with booting_host(tmp_path, step=600.0) as host:
        t0 = time.monotonic()
        with pytest.raises(Unreachable) as e:
            wait_for_ssh(host, timeout=5, interval=0.2)
        took = time.monotonic() - t0
    # Each probe is cut after ssh_connect_timeout (2 s) and tried again; the wait ends at its 5 s, not at
    # command_timeout's 120 s (the old probe waited that long inside the first try).
    assert took < 15, took
    # The last try had what was left of the wait, at most ssh_connect_timeout.
    assert re.fullmatch(r"booting did not come back within 5 s \(booting stopped answering: no result within [12] s\)",
                        str(e.value)), str(e.value)


@pytest.mark.reliability(item=26, fault="SIGTERM while a host is waited for after its reboot",
                         checks=("no hang",))
def test_a_signal_ends_the_wait_at_the_next_try(tmp_path):
    stop = Stop(grace=30, say=lambda line: None)
    with booting_host(tmp_path, step=600.0) as host:
        threading.Timer(1.0, stop.request, args=(signal.SIGTERM,)).start()
        t0 = time.monotonic()
        with pytest.raises(Interrupted, match="while waiting for the host to come back from its reboot"):
            wait_for_ssh(host, timeout=300, interval=0.2, stop=stop)
        assert time.monotonic() - t0 < 10
