"""The running machinery bench/compare.py's parts share, whatever the peer: the paths and the tools' command lines,
the sandbox hosts (booted in waves), a :class:`Tool` (one whole process, timed from outside), the alternation of
tools run by run, and the count of the remote commands a tool's run sends.  Cut from bench/compare.py (issue 43
item 2): how a cell is measured, apart from which peers a part measures and how the report reads.
"""
from __future__ import annotations

import os
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
sys.path.insert(0, str(REPO))

import harness  # noqa: E402

WORK = REPO / ".sandbox" / "bench"
VENV = REPO / ".sandbox" / "bench-venv"
PEER_PACKAGES = ("pyinfra", "ansible-core", "paramiko", "pytest-testinfra")
BRINGUP = [str(Path(sys.executable).with_name("bringup"))]
# This checkout's bringup, whatever checkout an editable install of the console script points at.
# Its bytecode cached under .sandbox (as an installed package has it, without __pycache__ in the checkout).
BRINGUP_ENV = {"PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(REPO / ".sandbox" / "bench-pycache")}
PYTHON = sys.executable
LOGSH = "/usr/local/sbin/bench-logsh"
LOGDIR = "/var/log/bench-cmds"
# sshd runs `$SHELL -c CMD` for every exec request and for the sftp subsystem:
# log each one (and, when asked, its stdin) with the sshd process that serves the connection.
LOGSH_TEXT = f"""#!/bin/bash
d={LOGDIR}; n=$(date +%s%N)-$$
if [ "$1" = -c ]; then
  printf '%s\\n%s' "$PPID" "$2" > "$d/$n.cmd"
  if [ -e "$d/stdin" ]; then tee "$d/$n.in" | /bin/bash -c "$2"; exit "${{PIPESTATUS[1]}}"; fi
  exec /bin/bash -c "$2"
fi
exec /bin/bash "$@"
"""

def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)



#: Hosts booted at once: a wave's containers start together and each wave waits for its hosts' systemd and
#: sshd before the next starts (64 at once on this 2-core machine left systemd booting past any timeout).
WAVE = 8
#: Seconds one host may take to boot inside its wave (its systemd, then its sshd's banner).
BOOT_TIMEOUT = 300
#: Set when the run is stopping (a failure, Ctrl-C): a host that fails to boot is not started again.
STOP = threading.Event()


def boot(name: str, light: bool, image: str) -> harness.SandboxHost:
    """One sandbox host, started once more if it did not finish booting (a loaded moment, not a broken image)."""
    try:
        return harness.start_host(name, workdir=WORK, restart="no", light=light, image=image, timeout=BOOT_TIMEOUT)
    except harness.SandboxError as e:  # start_host removed the container
        if STOP.is_set() or isinstance(e, harness.LimitError):
            raise
        log(f"{name}: {e}; starting it once more")
        return harness.start_host(name, workdir=WORK, restart="no", light=light, image=image, timeout=BOOT_TIMEOUT)


def settle(limit: float = 90) -> None:
    """After booting hosts: wait (at most ``limit`` s) until the 1-minute load is back under the core count, so
    the boot does not weigh on the next cells' numbers."""
    deadline = time.monotonic() + limit
    while os.getloadavg()[0] > (os.cpu_count() or 1) and time.monotonic() < deadline:
        time.sleep(5)
    log(f"load {os.getloadavg()[0]:.1f} after the boot")


def start_hosts(prefix: str, n: int, light: bool, image: str, first: int = 1) -> list[harness.SandboxHost]:
    """Hosts ``<prefix>-<first>``..``<prefix>-<n>`` (3 digits), booted in waves of :data:`WAVE`; light: sshd and
    systemd, no Docker."""
    started = [boot(f"{prefix}-001", light, image)] if first == 1 else []  # the first makes the key pair
    for lo in range(max(first, 2), n + 1, WAVE):
        names = [f"{prefix}-{i:03d}" for i in range(lo, min(n, lo + WAVE - 1) + 1)]
        ex = ThreadPoolExecutor(len(names))
        try:
            futures = [ex.submit(boot, nm, light, image) for nm in names]
            started += [f.result() for f in futures]
        except BaseException:
            # Failure or Ctrl-C: hosts still booting in the wave fail at once without their containers;
            # main() removes whatever this session started once the workers are done.
            STOP.set()
            harness.remove_session_hosts()
            raise
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
        log(f"{first - 1 + len(started)}/{n} {'light ' if light else ''}host(s) up, load {os.getloadavg()[0]:.1f}")
    return started



def bringup_inventory(hosts: list[harness.SandboxHost], path: Path) -> Path:
    return harness.write_inventory(path, hosts, extra_vars=harness.SANDBOX_VARS)


# -- running -----------------------------------------------------------------

class Tool:
    """One way of doing a piece of work: a command line run as a whole process."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict | None = None, ok=(0,)):
        self.name, self.argv, self.cwd, self.env, self.ok = name, argv, cwd, env, ok

    def run(self, prefix: tuple[str, ...] = ()) -> float:
        return self.run_capture(prefix)[0]

    def run_capture(self, prefix: tuple[str, ...] = ()) -> tuple[float, subprocess.CompletedProcess]:
        """Wall time and the finished process; ``prefix`` goes before the command (``python -X importtime``)."""
        env = {**os.environ, **(BRINGUP_ENV if self.argv[:1] == BRINGUP else {}), **(self.env or {})}
        # Every tool may cache its bytecode, as on a user's machine (a test shell's PYTHONDONTWRITEBYTECODE
        # made bringup, run from this checkout, compile its 70 modules in every process).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        cp = subprocess.run([*prefix, *self.argv], cwd=self.cwd, env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        #: The CPU (user + system) the process and the children it waited for used: one run at a time, so the
        #: difference of this process's children's totals.
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if cp.returncode not in self.ok:
            raise SystemExit(f"bench: {self.name} failed (exit {cp.returncode}): {shlex.join(self.argv)}\n"
                             f"{(cp.stdout + cp.stderr)[-3000:]}")
        return dt, cp


def alternate(tools: list[Tool], runs: int, before=None) -> dict[str, dict]:
    """Each tool ``runs`` times, the order rotated run by run; ``before(tool)`` resets the host first."""
    times: dict[str, list[float]] = {t.name: [] for t in tools}
    loads: dict[str, list[float]] = {t.name: [] for t in tools}
    cpus: dict[str, list[float]] = {t.name: [] for t in tools}
    for i in range(runs):
        for t in tools[i % len(tools):] + tools[:i % len(tools)]:
            if before:
                before(t)
            loads[t.name].append(os.getloadavg()[0])
            times[t.name].append(t.run())
            cpus[t.name].append(t.cpu)
    return {n: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v),
                "load": statistics.median(loads[n]), "cpu": statistics.median(cpus[n])} for n, v in times.items()}


def count_commands(host: harness.SandboxHost, tool: Tool, stdin: bool = False) -> dict:
    """Run ``tool`` once with root's shell logging each command sshd runs; count commands and connections."""
    host.exec(f"mkdir -p {LOGDIR} && rm -f {LOGDIR}/* && install -m 0755 /dev/stdin {LOGSH} && "
              f"usermod -s {LOGSH} root" + (f" && touch {LOGDIR}/stdin" if stdin else ""), input=LOGSH_TEXT)
    # A fresh ControlPath dir: Ansible's persisted master would carry the plain shell it logged in with.
    fresh = Tool(tool.name, tool.argv, tool.cwd,
                 {**(tool.env or {}), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(WORK / f"cp-{time.time_ns()}")}, tool.ok)
    try:
        fresh.run()
        listing = host.exec(f"cd {LOGDIR} && head -qn1 -- *.cmd 2>/dev/null; true").stdout.split()
        cmds = host.exec(f"cd {LOGDIR} && for f in $(ls *.cmd 2>/dev/null | sort); do tail -n +2 \"$f\"; "
                         "printf '\\0'; done").stdout.split("\0")[:-1]
        execs = []
        if stdin:
            # Each command as sshd ran it (its login shell's -c) with what was sent on its stdin, in order.
            ins = host.exec(f"cd {LOGDIR} && for f in $(ls *.cmd 2>/dev/null | sort); do "
                            "i=${f%.cmd}.in; [ -e \"$i\" ] && cat \"$i\"; printf '\\0'; done").stdout.split("\0")[:-1]
            execs = [[c, i] for c, i in zip(cmds, ins)]
    finally:
        host.exec(f"usermod -s /bin/bash root && rm -rf {LOGDIR}")
    sftp = sum("sftp-server" in c for c in cmds)
    return {"commands": len(cmds), "sftp": sftp, "connections": len(set(listing)), "execs": execs,
            "sample": [c.splitlines()[0][:90] if c else "" for c in cmds[:3]]}
