"""Sandbox hosts: containers started, waited for (systemd, sshd, host key), restarted, removed; leftovers."""
from __future__ import annotations

import os
import re
import secrets
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import IMAGE_REPO, LABEL, NAME_LABEL, SESSION, SESSION_LABEL, SandboxError, _log, _run
from .docker import _docker
from .image import build_image
from .keys import _key_pair, _pin_host_key
from .limits import make_room

#: What a systemd container needs short of --privileged (which fails on our
#: CI hosts): all capabilities except SYS_RESOURCE, no seccomp/AppArmor
#: filtering, unmasked /proc and /sys paths, and the host's cgroup tree so
#: systemd can manage its own slice.  /run must be a tmpfs for systemd.
RUN_FLAGS: tuple[str, ...] = (
    "--cap-add=ALL",
    "--cap-drop=SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined",
    "--security-opt", "apparmor=unconfined",
    "--security-opt", "systempaths=unconfined",
    "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run",
    "--tmpfs", "/run/lock",
    # systemd halts cleanly on SIGRTMIN+3 (SIGTERM makes it re-execute).
    "--stop-signal", "SIGRTMIN+3",
    # Docker inside the host wants a real filesystem under its data dirs
    # (overlay2 on the container's own overlayfs root is unsupported on many
    # kernels): anonymous volumes, removed with the container (rm -v).
    "-v", "/var/lib/docker",
    "-v", "/var/lib/containerd",
)

#: A light host (``start_host(light=True)``, bench/compare.py's fleet of 16 or 64): the same image and
#: SSH, no Docker inside (no anonymous volumes for its data dirs), and units that only cost boot time on a
#: loaded machine masked through systemd's own command line (in a container systemd reads PID 1's arguments
#: as the kernel command line).  logind stays: sshd's PAM session asks it.
LIGHT_RUN_FLAGS: tuple[str, ...] = RUN_FLAGS[:RUN_FLAGS.index("/var/lib/docker") - 1]
LIGHT_MASKED_UNITS: tuple[str, ...] = (
    "e2scrub_reap.service", "systemd-journal-flush.service", "dev-hugepages.mount",
    "modprobe@configfs.service", "modprobe@dm_mod.service", "modprobe@drm.service",
    "modprobe@efi_pstore.service", "modprobe@fuse.service", "modprobe@loop.service",
    "docker.socket", "docker.service", "containerd.service",
)
LIGHT_COMMAND: tuple[str, ...] = ("/lib/systemd/systemd", *(f"systemd.mask={u}" for u in LIGHT_MASKED_UNITS))


def _session_alive(session: str) -> bool:
    """Whether the process that started a container (label ``<pid>-<token>``) still runs."""
    pid = session.split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: A container of a dead session is a leftover only once it is this old (seconds).
LEFTOVER_AGE_S = 3600


def _age_s(created: str) -> float:
    """Seconds since Docker's CreatedAt (``2026-12-03 10:01:02 +0000 UTC``); unknown: very old."""
    from datetime import datetime

    try:
        return time.time() - datetime.strptime(" ".join(created.split()[:3]), "%Y-%m-%d %H:%M:%S %z").timestamp()
    except ValueError:
        return float("inf")


def remove_leftovers(*, include_current: bool = False) -> list[str]:
    """Remove sandbox containers (running or not) left by earlier sessions.

    Every container labelled ``bringup.sandbox=1`` goes, except those this
    process started (unless ``include_current``), so a test can call it while
    its own hosts run, and those of other sessions still running (parallel
    test runs in one checkout).  Images are kept: they are the cache.  Returns the
    removed container ids.
    """
    cp = _docker("ps", "-a", "--no-trunc", "--filter", f"label={LABEL}=1", "--format",
                 f'{{{{.ID}}}}\t{{{{.Label "{SESSION_LABEL}"}}}}\t{{{{.CreatedAt}}}}')
    ids = []
    for line in cp.stdout.splitlines():
        cid, _, rest = line.partition("\t")
        session, _, created = rest.partition("\t")
        session = session.strip()
        # A session whose process still runs is a concurrent test run, not a leftover; nor is a session's
        # container younger than LEFTOVER_AGE_S (a run whose process this one cannot see: a kept
        # `invoke sandbox` host a test still inspects, or a run in another PID namespace).
        if cid and (include_current or (session != SESSION and not _session_alive(session)
                                        and (not session or _age_s(created) > LEFTOVER_AGE_S))):
            ids.append(cid)
    if ids:
        # -v: the anonymous /var/lib/docker volumes go with them.
        _docker("rm", "-f", "-v", *ids)
        _log(f"removed {len(ids)} leftover container(s)")
    return ids


_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
#: How many of its last log lines a host that died at start is reported with.
DIED_LOG_LINES = 5


@dataclass
class SandboxHost:
    """One running sandbox container and how to reach it over SSH."""

    name: str
    container: str
    port: int
    key_file: Path
    known_hosts: Path
    #: Seconds from ``docker run`` (or restart) until sshd answered.
    boot_seconds: float = field(default=0.0, compare=False)

    def exec(self, cmd: list[str] | str, check: bool = True, *, input: str | None = None,
             user: str | None = None, timeout: float | None = 300) -> subprocess.CompletedProcess:
        """Run a command in the container via ``docker exec`` (a str via ``sh -c``)."""
        argv = ["docker", "exec"]
        if input is not None:
            argv.append("-i")
        if user:
            argv += ["-u", user]
        argv.append(self.container)
        argv += ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return _run(argv, check=check, input=input, timeout=timeout,
                    what=f"{self.name}: {shown!r}")

    def restart(self, timeout: float = 120) -> None:
        """Restart the container and wait until SSH answers again (port may change)."""
        t0 = time.monotonic()
        _docker("restart", "--time", "10", self.container, timeout=timeout)
        try:
            self._wait_ready(t0, timeout)
        except SandboxError as e:
            raise self._explain(e) from None

    def remove(self) -> None:
        """Remove the container and its volumes; a missing container is fine."""
        _docker("rm", "-f", "-v", self.container, check=False)

    def address(self) -> str:
        """The container's address on Docker's bridge: services the host runs (Triton) answer there."""
        ip = _docker("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                     self.container).stdout.strip()
        if not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", ip):
            raise SandboxError(f"{self.name}: no bridge address for container {self.container} ({ip!r})")
        return ip

    def inventory_vars(self) -> dict[str, Any]:
        """Return the Ansible connection variables of this host."""
        return {
            "ansible_host": "127.0.0.1",
            "ansible_port": self.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key_file),
            "ssh_known_hosts": str(self.known_hosts),
        }

    def ssh_argv(self, user: str = "root") -> list[str]:
        """Return an OpenSSH client command line (strict host keys) for this host."""
        return ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
                "-i", str(self.key_file), "-p", str(self.port), f"{user}@127.0.0.1"]

    # -- internals ---------------------------------------------------------

    def _read_port(self) -> int:
        out = _docker("port", self.container, "22/tcp").stdout
        for line in out.splitlines():
            host, _, port = line.strip().rpartition(":")
            if host == "127.0.0.1" and port.isdigit():
                return int(port)
        raise SandboxError(f"{self.name}: no 127.0.0.1 port published for ssh: {out.strip()!r}")

    def _state(self) -> str:
        return _docker("inspect", "--format", "{{.State.Status}}", self.container,
                       check=False).stdout.strip() or "missing"

    def _died(self) -> SandboxError:
        """What a container that stopped running said last: its state, exit code and last log lines, one line."""
        state = _docker("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}",
                        self.container, check=False).stdout.split() or ["missing"]
        how = state[0] + (f", exit {state[1]}" if len(state) > 1 else "") + (
            ", killed for memory" if state[2:] == ["true"] else "")
        # Timestamped: its stdout and stderr come back apart, and are put in order again.
        logs = _docker("logs", "--timestamps", "--tail", str(DIED_LOG_LINES), self.container, check=False)
        said = [ln.partition(" ")[2].strip() for ln in sorted((logs.stdout + "\n" + logs.stderr).splitlines())
                if ln.partition(" ")[2].strip()]
        return SandboxError(f"{self.name}: container {self.container} stopped while booting ({how}); its last log "
                            f"lines: {' | '.join(said[-DIED_LOG_LINES:]) or '(none)'}")

    def _explain(self, e: SandboxError) -> SandboxError:
        """``e``, or, where the container no longer runs, its own story (:meth:`_died`) instead of Docker's."""
        return e if self._state() == "running" else self._died()

    def _wait_ready(self, t0: float, timeout: float) -> None:
        deadline = t0 + timeout
        self.port = self._read_port()
        # 1. systemd has finished booting.  Before its bus is up the command
        #    fails ("Failed to connect to bus"): retry.
        state = ""
        while True:
            if self._state() != "running":
                raise self._died()
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError(f"{self.name}: systemd did not finish booting within "
                                   f"{timeout}s (state {state or 'unknown'})")
            cp = self.exec(["systemctl", "is-system-running", "--wait"], check=False,
                           timeout=max(left, 1))
            state = cp.stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.3)
        if state == "degraded":
            failed = self.exec(["systemctl", "--failed", "--plain", "--no-legend"],
                               check=False).stdout.split()
            _log(f"{self.name}: systemd is degraded, failed units: "
                 f"{' '.join(u for u in failed if '.' in u) or '?'}")
        # 2. sshd answers with its banner.  Docker's proxy accepts TCP even
        #    when nothing listens inside, so a connect alone proves nothing.
        while not _ssh_banner(self.port):
            if time.monotonic() > deadline:
                raise SandboxError(f"{self.name}: sshd did not answer on 127.0.0.1:{self.port} "
                                   f"within {timeout}s")
            time.sleep(0.2)
        # 3. Trust the host key read over the second channel, docker exec.
        key = self.exec(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()
        _pin_host_key(self.known_hosts, self.port, self.name, key)
        self.boot_seconds = time.monotonic() - t0


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def remove_named(name: str) -> list[str]:
    """Remove the sandbox hosts named ``name`` (containers bringup's harness labelled so; nothing else)."""
    cp = _docker("ps", "-aq", "--filter", f"label={LABEL}=1", "--filter", f"label={NAME_LABEL}={name}")
    ids = cp.stdout.split()
    if ids:
        _docker("rm", "-f", "-v", *ids)
    return ids


def remove_session_hosts(session: str = SESSION) -> list[str]:
    """Remove every sandbox container labelled with ``session`` (default: this process's), running or not.

    For a caller's clean-up after a failure or Ctrl-C, when a host still booting in a worker thread
    was never handed back to it; other sessions' containers are not touched.
    """
    ids = _docker("ps", "-aq", "--no-trunc", "--filter", f"label={SESSION_LABEL}={session}",
                  check=False).stdout.split()
    if ids:
        _docker("rm", "-f", "-v", *ids, check=False)
    return ids


def start_host(name: str, *, restart: str = "unless-stopped", workdir: Path,
               image: str | None = None, timeout: float = 120, port: int | None = None,
               light: bool = False, ports: tuple[int, ...] = ()) -> SandboxHost:
    """Start a sandbox host named ``name`` and wait until SSH is ready.

    ``workdir`` holds the run's key pair (made once per workdir) and the
    host's known_hosts file.  ``image`` defaults to :func:`build_image`'s tag.
    ``light``: no Docker inside and fewer units at boot (:data:`LIGHT_RUN_FLAGS`), for fleets of many hosts.
    ``ports``: more ports published on 127.0.0.1 under the same numbers (a service the host runs, such as
    Triton's, reached from here as on a rack: at the inventory's address and the inventory's ports).
    What the host takes of the machine (inotify, memory, disk) is checked first (:func:`harness.limits.make_room`);
    a container that stops while it boots is reported with its own last log lines.
    """
    if not _NAME.match(name):
        raise SandboxError(f"invalid sandbox host name {name!r}: use a-z, 0-9 and '-'")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    key = _key_pair(workdir)
    image = image or build_image()
    make_room(1, light=light)
    # A random suffix: a new session never trips over an old container's name.
    cname = f"{IMAGE_REPO}-{name}-{secrets.token_hex(3)}"
    t0 = time.monotonic()
    cid = _docker(
        "run", "--detach", "--name", cname, "--hostname", name,
        "--label", f"{LABEL}=1", "--label", f"{NAME_LABEL}={name}",
        "--label", f"{SESSION_LABEL}={SESSION}",
        # A fixed port survives the container restarting itself (a reboot); a random one is re-drawn.
        "--publish", f"127.0.0.1:{port or ''}:22", *(a for p in ports for a in ("--publish", f"127.0.0.1:{p}:{p}")),
        "--restart", restart,
        *(LIGHT_RUN_FLAGS if light else RUN_FLAGS), image, *(LIGHT_COMMAND if light else ()),
    ).stdout.strip()
    host = SandboxHost(name=name, container=cid[:12], port=0, key_file=key,
                       known_hosts=workdir / f"{name}.known_hosts")
    try:
        pub = (workdir / "id_ed25519.pub").read_text()
        # Through stdin, not the command line: keys are data, not code.
        host.exec("install -m 0600 /dev/stdin /root/.ssh/authorized_keys && "
                  "install -m 0600 -o deploy -g deploy /root/.ssh/authorized_keys "
                  "/home/deploy/.ssh/authorized_keys", input=pub)
        host._wait_ready(t0, timeout)
    except SandboxError as e:
        # Docker's words for a container that died ("cannot exec in a stopped container") say nothing of why.
        err = host._explain(e)
        host.remove()
        raise err from None
    except BaseException:
        host.remove()
        raise
    _log(f"{name}: ssh ready on 127.0.0.1:{host.port} after {host.boot_seconds:.1f}s "
         f"(container {host.container})")
    return host
