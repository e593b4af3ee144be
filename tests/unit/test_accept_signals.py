"""Ctrl-C (SIGINT) and SIGTERM of ``invoke accept`` in the middle of its GPU load (issue 40 item 7), through
``ansible_connection: local`` on this machine with the libcuda TEST DOUBLE (harness/doubles/fake_libcuda.c, built
here with gcc, loaded by the probe through BRINGUP_LIBCUDA), whose copies sleep: a 60 s load runs.

The load is found through /proc, not through the tool: the process whose environment carries the run's tag
(``BRINGUP_ACCEPT_RUN``).  ``timeout(1)`` puts it in a process group of its own, which ending the script's
group does not reach: before the fix it loaded the GPUs for its whole bound after accept had gone.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.doubles.libcuda import build_fake_libcuda
from tests.processes import hang_up

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    return build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))


def _loads() -> dict[int, str]:
    """{pid: start time} of the processes whose environment carries an accept run's tag (zombies have none)."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if any(e.startswith(b"BRINGUP_ACCEPT_RUN=") for e in env.split(b"\0")):
            found[int(d.name)] = stat[stat.rindex(")") + 2:].split()[19]
    return found


def _gone(pid: int, start: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    f = stat[stat.rindex(")") + 2:].split()
    return f[19] != start or f[0] in ("Z", "X")


@pytest.mark.reliability(item=40, fault="SIGINT/SIGTERM of accept in the middle of its GPU load; SIGHUP (the "
                         "operator's terminal gone: bringup died on the spot and the load ran its whole bound)",
                         variants=3, checks=("no leftovers", "one clear line", "exit code", "no hang"))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_load_kills_the_load_on_the_host_and_says_so(tmp_path, lib, sig):
    assert not _loads(), "an accept load of another run is there already"
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"gpu-01": {"ansible_connection": "local"}}}}))
    env = {**os.environ, "BRINGUP_LIBCUDA": str(lib), "FAKE_CUDA_MODE": "ok", "FAKE_CUDA_GPUS": "1",
           "BRINGUP_NVIDIA_SMI": "/nonexistent/nvidia-smi", "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    p = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "accept", "--host", "gpu-01",
                          "--out", "out", "--seconds", "60", "--dcgm-level", "0", "--force"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)   # its own process group, as a shell's job: Ctrl-C is killpg
    try:
        deadline = time.monotonic() + 90
        load: dict[int, str] = {}
        while time.monotonic() < deadline and p.poll() is None:
            load = _loads()
            if any(b"python3" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in load
                   if Path(f"/proc/{pid}/cmdline").exists()):
                break
            time.sleep(0.2)
        assert load and p.poll() is None, "the load never started: " + (p.stderr.read() if p.poll() is not None
                                                                         else "")
        time.sleep(1.0)   # inside the load, not at its start
        sent = time.monotonic()
        os.killpg(p.pid, sig)
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 128 + sig, out + err
    assert "Traceback" not in err and "Traceback" not in out, err
    name = signal.Signals(sig).name
    assert err.strip().splitlines()[-1].startswith(f"{name}: acceptance stopped; gpu-01: GPU load stopped ("), err
    assert err.strip().endswith("killed, none left); nothing saved"), err
    assert took < 30, took
    # The second channel: every process of the load is gone from /proc (a zombie awaiting its reaper counts as
    # gone: it holds no GPU), well before the load's own 60 s were over.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_gone(pid, st) for pid, st in load.items()):
        time.sleep(0.2)
    assert all(_gone(pid, st) for pid, st in load.items()), load
    assert not list((tmp_path / "out").glob("gpu-01-*.json")) if (tmp_path / "out").exists() else True


@pytest.mark.reliability(item=40, fault="a second Ctrl-C as accept ends by the first (KeyboardInterrupt in the "
                         "interpreter's teardown: a traceback after the one line)", variants=1,
                         checks=("one clear line",))
def test_once_a_signal_ended_accept_later_signals_stay_ignored():
    """Before, the handlers in place before the task (Python's default_int_handler) came back as the task ended by
    the first signal, so a second Ctrl-C a moment later raised KeyboardInterrupt wherever the program was."""
    from invoke import Exit

    from bringup.tasks import accept as accept_mod

    def body():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)

    before = {s: signal.getsignal(s) for s in accept_mod._ENDING}
    try:
        with pytest.raises(Exit) as e:
            accept_mod._own_signals(body)()
        assert e.value.code == 130 and "nothing saved" in str(e.value.message)
        assert all(signal.getsignal(s) == signal.SIG_IGN for s in accept_mod._ENDING)
        os.kill(os.getpid(), signal.SIGINT)   # ignored: no KeyboardInterrupt
        time.sleep(0.1)
        # A task that ended without a signal gives the handlers back.
        assert accept_mod._own_signals(lambda: 7)() == 7
    finally:
        for s, h in before.items():
            signal.signal(s, h)
    assert signal.getsignal(signal.SIGINT) == before[signal.SIGINT]


def test_under_nohup_a_hang_up_leaves_accept_running():
    """``nohup bringup accept ...``: SIGHUP ignored by the operator's shell stays ignored (taking it replaced the
    SIG_IGN, so a dropped session stopped an accept its operator had meant to outlive the session)."""
    from bringup.tasks import accept as accept_mod

    def body():
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.2)
        return "ran on"

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert accept_mod._own_signals(body)() == "ran on"
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


@pytest.mark.reliability(item=40, fault="a real hang-up of accept's terminal mid-load (a pty closed: SIGHUP, then EIO "
                         "on every write): an EIO traceback, exit 1", variants=1,
                         checks=("no leftovers", "exit code", "no hang"))
def test_a_real_hang_up_mid_load_stops_the_load_and_ends_129(tmp_path, lib):
    """Under a real terminal (a pty whose master this test closes, as sshd does when the operator's session drops):
    the kernel sends SIGHUP and every write there fails with EIO.  Before, the stop was done but its line, written
    to the gone terminal, raised an EIO traceback (exit 1).  What the program says is not readable here (the
    terminal is gone): the exit status and /proc speak."""
    import pty
    import select

    assert not _loads(), "an accept load of another run is there already"
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"gpu-01": {"ansible_connection": "local"}}}}))
    env = {**os.environ, "BRINGUP_LIBCUDA": str(lib), "FAKE_CUDA_MODE": "ok", "FAKE_CUDA_GPUS": "1",
           "BRINGUP_NVIDIA_SMI": "/nonexistent/nvidia-smi", "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "accept", "--host", "gpu-01", "--out", "out",
            "--seconds", "60", "--dcgm-level", "0", "--force"]
    pid, master = pty.fork()
    if pid == 0:  # the child: a session of its own, the pty its controlling terminal
        try:
            os.chdir(tmp_path)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    status = None
    try:
        deadline = time.monotonic() + 90
        load: dict[int, str] = {}
        while time.monotonic() < deadline and not load:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
            load = {p: s for p, s in _loads().items() if b"python3" in _cmdline(p)}
        assert load, "the load never started"
        time.sleep(1.0)
        status, master = hang_up(pid, master), -1
    finally:
        if master >= 0:
            os.close(master)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert status == 128 + signal.SIGHUP
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_gone(p, st) for p, st in load.items()):
        time.sleep(0.2)
    assert all(_gone(p, st) for p, st in load.items()), load


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
