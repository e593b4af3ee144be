"""``invoke accept`` over SSH on a real sandbox host (issue 31 part 2): a host without the NVIDIA driver (no
libcuda.so.1, no nvidia-smi, no dcgmi, no Triton) gets its pages with the one named line, its saved result,
and nothing left running; the libcuda TEST DOUBLE (harness/doubles/fake_libcuda.c, built here with gcc and copied
onto the host, its mode in /run/fake_cuda_mode) whose first device copy never returns is bounded by the probe's
watchdog, with nothing left running either.  Checks go through ``docker exec``.
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from harness.doubles.libcuda import build_fake_libcuda

from .helpers import REPO, invoke

pytestmark = pytest.mark.integration


def project(tmp_path: Path, host, **extra) -> Path:
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {**host.inventory_vars(), **extra}}}}))
    return tmp_path


@contextmanager
def fake_cuda_on(host, tmp_path: Path, mode: str) -> Iterator[None]:
    """The libcuda TEST DOUBLE where the host's loader finds libcuda.so.1, in ``mode``; removed after."""
    lib = build_fake_libcuda(tmp_path)
    host.exec("mkdir -p /opt/fakecuda")
    subprocess.run(["docker", "cp", str(lib), f"{host.container}:/opt/fakecuda/libcuda.so.1"], check=True, timeout=60)
    try:
        host.exec(f"echo /opt/fakecuda > /etc/ld.so.conf.d/fakecuda.conf && ldconfig && echo {mode} > /run/fake_cuda_mode")
        yield
    finally:
        host.exec("rm -f /etc/ld.so.conf.d/fakecuda.conf /run/fake_cuda_mode && ldconfig; rm -rf /opt/fakecuda")


def left(host) -> str:
    return host.exec("pgrep -af 'python[3] -' || true").stdout.strip()


@pytest.mark.reliability(item=31, fault="accept over SSH on a host without the NVIDIA driver",
                         checks=("one clear line", "exit code", "report written", "no leftovers"))
def test_a_host_without_the_driver_gets_its_pages_with_the_one_named_line(sandbox_host, tmp_path):
    host = sandbox_host
    has_python = host.exec("command -v python3 || true").stdout.strip()
    r = invoke("accept", "--host", "h", "--out", "out", "--seconds", "1", cwd=project(tmp_path, host), timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    page = json.loads((tmp_path / "out/h.json").read_text())
    fails = [(k["name"], k["seen"]) for k in page["checks"] if k["status"] == "FAIL"]
    want = ("libcuda.so.1 not found: install the NVIDIA driver" if has_python else
            "python3 not found on the host: the probe needs Python 3 (apt-get install python3)")
    assert fails == [("acceptance probe", want)], page
    assert [k["name"] for k in page["checks"] if k["status"] == "WARN"] == ["DCGM diagnostics (level 1)"]
    assert len(list((tmp_path / "out").glob("h-*.json"))) == 1
    assert left(host) == ""


@pytest.mark.reliability(item=31, fault="a GPU copy that never returns, over SSH",
                         checks=("one clear line", "exit code", "no hang", "no leftovers"))
def test_a_copy_that_never_returns_is_bounded_on_the_host(sandbox_host, tmp_path):
    host = sandbox_host
    if not host.exec("command -v python3 || true").stdout.strip():
        pytest.fail("the sandbox image has no python3: the probe cannot run there")
    with fake_cuda_on(host, tmp_path, "hang"):
        started = time.monotonic()
        r = invoke("accept", "--host", "h", "--out", "out", "--seconds", "1", "--dcgm-level", "0",
                   cwd=project(tmp_path, host), timeout=300)
        took = time.monotonic() - started
        assert r.returncode == 2, r.stdout + r.stderr
        page = json.loads((tmp_path / "out/h.json").read_text())
        fails = [k["seen"] for k in page["checks"] if k["status"] == "FAIL"]
        assert len(fails) == 1 and "did not return within 20 s (watchdog)" in fails[0], page
        assert took < 120
        assert left(host) == ""


@pytest.mark.reliability(item=40, fault="Ctrl-C (SIGINT) of accept over SSH in the middle of the GPU load",
                         checks=("no leftovers", "one clear line", "exit code", "no hang"))
def test_ctrl_c_mid_load_kills_the_load_on_the_host(sandbox_host, tmp_path):
    import os
    import signal
    import sys

    host = sandbox_host
    if not host.exec("command -v python3 || true").stdout.strip():
        pytest.fail("the sandbox image has no python3: the probe cannot run there")
    with fake_cuda_on(host, tmp_path, "ok"):
        try:
            # The TEST DOUBLE's "ok" mode: its copies sleep, so a 60 s load runs on the host.
            p = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "accept", "--host", "h",
                                  "--out", "out", "--seconds", "60", "--dcgm-level", "0"], cwd=project(tmp_path, host),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                def loading() -> str:   # the probe, not the preflight's own python3 (Triton's metrics read)
                    return host.exec("pgrep -af 'python[3] - --seconds' || true").stdout.strip()

                deadline = time.monotonic() + 120
                while not loading() and time.monotonic() < deadline and p.poll() is None:
                    time.sleep(0.5)
                assert loading(), "the load never started on the host: " + (p.communicate()[1] if p.poll() is not None
                                                                              else "")
                time.sleep(2)
                sent = time.monotonic()
                os.killpg(p.pid, signal.SIGINT)   # a terminal's Ctrl-C
                out, err = p.communicate(timeout=90)
                took = time.monotonic() - sent
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            assert p.returncode == 130, out + err
            assert "Traceback" not in out + err
            assert err.strip().splitlines()[-1].startswith("SIGINT: acceptance stopped; h: GPU load stopped ("), err
            assert took < 45, took
            assert left(host) == ""   # the second channel: docker exec on the host, well before the load's 60 s
        finally:
            host.exec("pkill -KILL -f 'python[3] -' || true")   # whatever a failed assertion left running
