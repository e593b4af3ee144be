"""The Docker daemon: ``docker`` CLI calls, and :func:`ensure_docker` (starting ``dockerd`` when none answers)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from .common import SandboxError, _last_line, _log, _run, state_dir


def _docker(*args: str, check: bool = True, input: str | None = None,
            timeout: float | None = 120) -> subprocess.CompletedProcess:
    return _run(["docker", *args], check=check, input=input, timeout=timeout,
                what=f"docker {args[0]}")


def _docker_ok() -> bool:
    try:
        cp = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                            capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return cp.returncode == 0


def _dockerd_pid() -> int | None:
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def ensure_docker(timeout: float = 60) -> None:
    """Make sure a Docker daemon answers, starting ``dockerd`` if needed."""
    if shutil.which("docker") is None:
        raise SandboxError("docker is not installed: apt-get install docker.io")
    if _docker_ok():
        return
    proc: subprocess.Popen | None = None
    log = state_dir() / "dockerd.log"
    # A daemon that is still starting has written its pid file: wait for it
    # rather than start a second one that would fight over the socket.
    if _dockerd_pid() is None:
        dockerd = shutil.which("dockerd") or (
            "/usr/sbin/dockerd" if os.path.exists("/usr/sbin/dockerd") else None)
        if dockerd is None:
            raise SandboxError("docker is not installed: apt-get install docker.io")
        if os.geteuid() != 0:
            raise SandboxError("docker daemon is not running and starting dockerd needs root")
        _log(f"starting dockerd (log {log})")
        with open(log, "ab") as fh:
            # Own session: the daemon outlives this process and its Ctrl-C.
            proc = subprocess.Popen([dockerd], stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _docker_ok():
            return
        if proc is not None and proc.poll() is not None:
            tail = _last_line(log.read_text(errors="replace")) if log.exists() else ""
            raise SandboxError(f"dockerd exited with {proc.returncode}: {tail} (log {log})")
        time.sleep(0.5)
    pid = _dockerd_pid()
    if proc is None and pid is not None:
        raise SandboxError(f"dockerd (pid {pid}) runs but 'docker info' fails after {timeout}s")
    raise SandboxError(f"docker daemon did not answer within {timeout}s (log {log})")
