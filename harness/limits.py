"""What starting sandbox hosts takes from this machine, checked before they start: :func:`make_room`.

Every sandbox host is a systemd container whose processes are this machine's processes: its systemd,
dbus-daemon and logind hold inotify instances and watches against the machine's per-user limits
(``fs.inotify.max_user_instances``, Debian's default 128, and ``fs.inotify.max_user_watches``).  On a busy
machine they run out at a few dozen hosts and the next container dies at start (exit 137, "cannot exec in a
stopped container").  :func:`make_room` counts what is in use now (every process's inotify file descriptors:
the hosts already running included), adds what the hosts about to start need and a margin for what starts
beside them, and raises a limit that is too low where this process may (root; never lowered), or stops with
one line naming the limit, the value needed and the command that raises it.  Memory (``MemAvailable``) and the
free space under Docker's data root are checked the same way; they cannot be raised, and the line says what
to free.

Per host, measured on a booted bookworm host (``find /proc/*/fd -lname anon_inode:inotify`` inside it, and
this machine's count before and after it started): 7 instances (systemd 5, dbus-daemon 1, systemd-logind 1)
and 23-25 watches, the same for a light host; 17 MiB of memory and an 8 MB writable layer after boot.  Docker
inside a host (dockerd, containerd) holds none.  The figures below leave room for what the roles start.
"""
from __future__ import annotations

import functools
import os
import shutil
import threading
from pathlib import Path

from .common import SandboxError, _log

#: inotify instances and watches one host holds (7 and 23-25 measured, see above).
INOTIFY_INSTANCES_PER_HOST = 8
INOTIFY_WATCHES_PER_HOST = 64
#: Spare on top: other programs of the machine, and hosts another session starts at the same moment.
INOTIFY_SPARE_INSTANCES = 64
INOTIFY_SPARE_WATCHES = 4096
#: MiB of free memory and of free disk under Docker's data root a host needs to start and run its roles (a full
#: host: apt, Docker and images inside; a light host: boot only).
MEMORY_MIB = {False: 256, True: 64}
DISK_MIB = {False: 1024, True: 64}

PROC_SYS = Path("/proc/sys")
MEMINFO = Path("/proc/meminfo")

_LOCK = threading.Lock()


class LimitError(SandboxError):
    """The machine cannot take the hosts: one line naming the limit, what is needed and how to get it."""


def make_room(hosts: int = 1, *, light: bool = False) -> None:
    """Make sure ``hosts`` more sandbox hosts can start: raise the inotify limits (root) or raise :class:`LimitError`.

    ``light``: hosts of ``start_host(light=True)`` (no Docker inside), which need less memory and disk.
    """
    if hosts < 1:
        return
    what = f"starting {hosts} sandbox host{'s' if hosts > 1 else ''}"
    with _LOCK:  # hosts started from threads: one reads and raises the limits at a time
        # What is in use counts the hosts already running; those about to start come on top.
        instances, watches = inotify_in_use()
        for name, used, each, spare in (
                ("fs.inotify.max_user_instances", instances, INOTIFY_INSTANCES_PER_HOST, INOTIFY_SPARE_INSTANCES),
                ("fs.inotify.max_user_watches", watches, INOTIFY_WATCHES_PER_HOST, INOTIFY_SPARE_WATCHES)):
            kind = name.rsplit("_", 1)[1]
            _sysctl(name, used + each * hosts + spare, f"{what} needs about {each} inotify {kind} each ({used} in use)")
    need = MEMORY_MIB[light] * hosts
    free = available_memory_mib()
    if free is not None and free < need:
        raise LimitError(f"{what} needs about {need} MiB of free memory, {free} MiB available (MemAvailable in "
                         f"{MEMINFO}): stop other jobs or containers, or start fewer hosts")
    need = DISK_MIB[light] * hosts
    root = docker_root()
    free = free_mib(root)
    if free is not None and free < need:
        raise LimitError(f"{what} needs about {need} MiB free under Docker's data root {root}, {free} MiB free: "
                         "free space on that file system (docker system prune -f removes stopped containers "
                         "and dangling images)")


def inotify_in_use(pids: str = "[0-9]*") -> tuple[int, int]:
    """``(instances, watches)``: the inotify instances open in the processes this one can see, and their watches.

    ``pids``: which processes, a pattern of /proc's folders (one process: its pid).
    """
    instances = watches = 0
    for proc in Path("/proc").glob(pids):
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:  # the process went away meanwhile (a glob over /proc/*/fd raised for it), or is not ours
            continue
        for fd in fds:
            try:
                if os.readlink(fd) != "anon_inode:inotify":
                    continue
            except OSError:  # the process or the descriptor went away meanwhile
                continue
            instances += 1
            try:
                watches += (proc / "fdinfo" / fd.name).read_text().count("inotify wd:")
            except OSError:
                pass
    return instances, watches


def _sysctl(name: str, need: int, what: str) -> None:
    """Kernel setting ``name`` at least ``need``: raised (root) to twice what it was or ``need``, or one line."""
    path = PROC_SYS.joinpath(*name.split("."))
    try:
        limit = int(path.read_text())
    except (OSError, ValueError):
        return  # no such limit on this machine
    if limit >= need:
        return
    why = ""
    if _is_root():
        new = max(need, 2 * limit)
        try:
            path.write_text(f"{new}\n")
        except OSError as e:
            why = f" (writing {path} failed: {e.strerror})"
        else:
            _log(f"raised {name} from {limit} to {new}: {what}")
            return
    raise LimitError(f"{what}: {name} is {limit}, {need} needed{why}: raise it with sudo sysctl -w {name}={need}")


def _is_root() -> bool:
    return os.geteuid() == 0


def available_memory_mib() -> int | None:
    """MemAvailable in MiB; ``None`` where the kernel does not say."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@functools.lru_cache(maxsize=1)
def docker_root() -> str:
    """Docker's data root (``docker info``), ``/var/lib/docker`` when the daemon does not say."""
    from .docker import _docker

    try:
        root = _docker("info", "--format", "{{.DockerRootDir}}", check=False, timeout=30).stdout.strip()
    except SandboxError:
        root = ""
    return root or "/var/lib/docker"


def free_mib(path: str) -> int | None:
    """Free MiB on the file system of ``path`` (its nearest existing folder); ``None`` where it cannot be read."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free // 2**20
    except OSError:
        return None
