"""Issue 40 item 3 at the transport: a host whose login shell floods stdout, whatever script it is sent.

The facts script cuts each section at 16 MiB on the host, but a host that does not run the script as sent (a
login shell or an sshd that prints without end) used to be read to its end into memory: a host held the
control machine's memory for as long as command_timeout allowed.  Now one round trip reads at most
``OUT_MAX`` of stdout; past it the channel is closed, the command is not read, and the run says so in one
line.  The login shell here is a real one on a sandbox host (``yes`` for any command), checked through
``docker exec``.
"""
from __future__ import annotations

import resource
import time

import pytest

from .test_connection import _sudo_user, inventory

pytestmark = pytest.mark.integration

SHELL = "/usr/local/bin/flood-shell"


@pytest.fixture
def flooder(sandbox_host):
    _sudo_user(sandbox_host, "flooder", "unused-pw-40", nopasswd=True)
    sandbox_host.exec(["sh", "-c", f"cat > {SHELL} && chmod 755 {SHELL} && usermod -s {SHELL} flooder"],
                      input="#!/bin/sh\nexec yes 'GPU 0: NVIDIA H200 (UUID: GPU-flood-40)'\n")
    assert sandbox_host.exec(["getent", "passwd", "flooder"]).stdout.strip().endswith(SHELL)
    try:
        yield sandbox_host
    finally:
        sandbox_host.exec(["sh", "-c", "usermod -s /bin/bash flooder; pkill -u flooder yes || true"])


@pytest.mark.reliability(item=40, fault="a host's login shell floods stdout for every command (transport)",
                         checks=("no hang", "one clear line", "nothing left running"))
def test_a_flooding_host_is_cut_off_at_the_cap_in_one_line(flooder, tmp_path, monkeypatch):
    import bringup.ssh.connection as connection
    from bringup.ssh.connection import connect
    from bringup.errors import BringupError
    from bringup.inventory.hosts import load_inventory

    monkeypatch.setattr(connection, "OUT_MAX", 8 << 20)
    hv = dict(flooder.inventory_vars(), ansible_user="flooder", command_timeout=120)
    inv = load_inventory(inventory(tmp_path / "hosts", {"h": hv}))
    t = connect(inv.hosts["h"])
    try:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        with pytest.raises(BringupError) as e:
            t.run_script("echo hello")
        took = time.monotonic() - started
        grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    finally:
        t.close()
    msg = str(e.value)
    assert "\n" not in msg and "more than 8 MiB on stdout" in msg and "h answered" in msg, msg
    assert took < 60, took  # cut at the cap, not at command_timeout (120 s)
    assert grown_mib < 64, grown_mib  # 8 MiB kept, not the flood
    # The flood on the host ended with its channel (second channel: docker exec).
    deadline = time.monotonic() + 20
    while flooder.exec(["sh", "-c", "pgrep -u flooder -x yes || true"]).stdout.strip():
        assert time.monotonic() < deadline, "the flooding command outlived its channel"
        time.sleep(0.5)


def test_the_cli_names_a_flooding_host_in_one_line(flooder, tmp_path):
    from .helpers import invoke

    hv = dict(flooder.inventory_vars(), ansible_user="flooder")
    inventory(tmp_path / "hosts", {"h": hv})
    r = invoke("plan", "--host", "h", "--roles", "sysctl", cwd=tmp_path, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out, out[-2000:]
    assert "more than 256 MiB on stdout" in out, out[-2000:]
