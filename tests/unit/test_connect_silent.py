"""A port that accepts TCP but whose sshd never answers (frozen, overloaded, traffic dropped after connect).

paramiko gives up with "No existing session", which names nothing the operator can act on; the run says
what happened, where, and exits 4 (unreachable) with the recap.
"""
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tests.silent

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def silent_port():
    with tests.silent.silent_port() as (port, _):
        yield port


@pytest.mark.reliability(item=18, fault="a host that accepts TCP but never answers SSH ('No existing session')",
                         checks=("one clear line", "exit code"))
def test_silent_sshd_is_one_line_naming_the_handshake(tmp_path, silent_port):
    inv = tmp_path / "hosts"
    inv.write_text("all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: %d, ssh_connect_timeout: 2}\n"
                   % silent_port)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "--host", "h1",
                        "--inventory", str(inv), "--roles", "sysctl", "--check"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 4, out
    assert "No existing session" not in out and "Traceback" not in out, out
    assert f"ssh to 127.0.0.1:{silent_port}: the port accepted the connection but no SSH handshake finished " \
           "within 2 s" in out, out
    assert "unreachable=1" in out, out
    assert time.monotonic() - t0 < 60  # the connect timeout bounds it
