"""Whole-process benchmark of bringup against pyinfra, Ansible and the SSH floor (issue 11).

    python3 bench/compare.py [--runs 5] [--scale 1,4,16,64] [--ansible-max 16] [--parts s,a,b,c,d]

Builds its own sandbox hosts (harness: systemd containers reached over real
SSH on 127.0.0.1) and its own virtual environment with pyinfra and
ansible-core from PyPI (.sandbox/bench-venv, made once and reused), then
times whole processes from outside (``subprocess``, start-up included), the
tools alternated run by run, and writes bench/RESULTS.md:

(a) the sysctl role's file and keys, no-op, over 1..N hosts: bringup, a pyinfra
    deploy and an Ansible playbook doing the same, and the floor;
(b) a six-operation mix (bench/mix, bench/peers): apply from scratch and no-op;
(c) the full cpu-profile ``provision`` no-op, against its own floor;
(d) ``bringup audit`` (= ``invoke audit``) of the provisioned host, against testinfra doing the same checks
    (bench/peers/audit_testinfra.py) with its paramiko backend and with bringup's (bringup.testinfra), and the
    floor.

The floor is bench/floor.py: a fresh Python process, paramiko, one connection
per host (a thread each), one command reading everything the no-op checks.
Remote commands are counted by making root's login shell a logging wrapper
for one extra run of each tool (sshd runs every exec request and the sftp
subsystem through it); timed runs go through the plain shell.

A benchmark, not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import platform
import re
import resource
import shlex
import statistics
import subprocess
import signal
import sys
import threading
import time
import xml.etree.ElementTree as ET
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
MIX_RESET = ("rm -rf /etc/sysctl.d/91-bench-mix.conf* /opt/bench-mix /etc/default/bench-mix*; "
             "sysctl -qw net.ipv4.tcp_fin_timeout=60; systemctl disable -q --now containerd")
MIX_FLOOR = ("for f in /etc/sysctl.d/91-bench-mix.conf /etc/default/bench-mix /opt/bench-mix/motd; do "
             "stat -c '%a %U %G' $f; sha256sum $f; done; stat -c '%a %U %G' /opt/bench-mix; "
             "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' curl procps; "
             "systemctl is-active containerd; systemctl is-enabled containerd")


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# -- environment -------------------------------------------------------------

def peer_venv() -> Path:
    """.sandbox/bench-venv with pyinfra, ansible-core and pytest-testinfra (made once; reused while it imports)."""
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import pyinfra, ansible, paramiko, testinfra"],
                                        capture_output=True).returncode == 0
    if not ok:
        log(f"making {VENV} with {', '.join(PEER_PACKAGES)} from PyPI")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return VENV / "bin"


def versions(venv: Path) -> dict[str, str]:
    def out(argv: list[str]) -> str:
        return subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[0]
    return {
        "bringup": out([PYTHON, "-c", "import bringup; print(bringup.__version__)"]),
        "python (bringup)": platform.python_version(),
        "paramiko (bringup, floor)": out([PYTHON, "-c", "import paramiko; print(paramiko.__version__)"]),
        "pyinfra": out([str(venv / "pyinfra"), "--version"]),
        "ansible-core": out([str(venv / "ansible-playbook"), "--version"]),
        "pytest-testinfra": out([str(venv / "python"), "-c", "from importlib.metadata import version as v; print("
                                 "v('pytest-testinfra'), 'with pytest', v('pytest'), 'and paramiko', v('paramiko'))"]),
        "pytest-testinfra (bringup backend)": out([PYTHON, "-c", "from importlib.metadata import version as v; print("
                                                   "v('pytest-testinfra'), 'with pytest', v('pytest'))"]),
        "OpenSSH (client, Ansible)": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip(),
    }


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


def write_peer_inventories(hosts: list[harness.SandboxHost], d: Path) -> None:
    """pyinfra's inventory.py, Ansible's inventory and ansible.cfg (pipelining, ControlPersist), one known_hosts."""
    kh = d / "known_hosts"
    kh.write_text("".join(h.known_hosts.read_text() for h in hosts))
    key = hosts[0].key_file
    (d / "pyinfra_inventory.py").write_text("hosts = [\n" + "".join(
        f"    ({h.name!r}, {{'ssh_hostname': '127.0.0.1', 'ssh_port': {h.port}, 'ssh_user': 'root', "
        f"'ssh_key': {str(key)!r}, 'ssh_known_hosts_file': {str(kh)!r}, "
        f"'ssh_strict_host_key_checking': 'yes'}}),\n" for h in hosts) + "]\n")
    (d / "ansible_hosts").write_text("[all]\n" + "".join(
        f"{h.name} ansible_host=127.0.0.1 ansible_port={h.port} ansible_user=root\n" for h in hosts))
    (d / "ansible.cfg").write_text(
        "[defaults]\nhost_key_checking = True\ninterpreter_python = /usr/bin/python3\n"
        f"private_key_file = {key}\nforks = 64\nretry_files_enabled = False\n"
        "[ssh_connection]\npipelining = True\n"
        f"ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={kh} "
        "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes\n"
        f"control_path_dir = {d / 'cp'}\n")
    (d / "floor_hosts.json").write_text(json.dumps(
        [{"port": h.port, "key": str(key), "known_hosts": str(h.known_hosts)} for h in hosts]))


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
        scripts = []
        if stdin:
            scripts = host.exec(f"cd {LOGDIR} && for f in $(ls *.in 2>/dev/null | sort); do cat \"$f\"; "
                                "printf '\\0'; done").stdout.split("\0")[:-1]
    finally:
        host.exec(f"usermod -s /bin/bash root && rm -rf {LOGDIR}")
    sftp = sum("sftp-server" in c for c in cmds)
    return {"commands": len(cmds), "sftp": sftp, "connections": len(set(listing)), "scripts": scripts,
            "sample": [c.splitlines()[0][:90] if c else "" for c in cmds[:3]]}


def floor_tool(name: str, d: Path, cmd: str, stdin: str = "", hosts: str = "floor_hosts.json") -> Tool:
    (d / f"{name}.cmd").write_text(cmd)
    argv = [PYTHON, str(BENCH / "floor.py"), str(d / hosts), str(d / f"{name}.cmd")]
    if stdin:
        (d / f"{name}.in").write_text(stdin)
        argv.append(str(d / f"{name}.in"))
    return Tool("floor", argv, d)


def replay_floor(name: str, d: Path, scripts: list[str]) -> Tool:
    """The floor of a bringup run: every script it ran, in one command over one connection."""
    body = "".join(f"(\n{s}\n) >/dev/null 2>&1\n" for s in scripts) + "exit 0\n"
    return floor_tool(name, d, "sh -c 'eval \"$(cat)\"'", body, hosts="floor_one.json")


# -- where the time goes -------------------------------------------------------

#: Import time by top-level package, in this order; the rest is Python's standard library and small packages.
IMPORT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("invoke", ("invoke",)),
    ("fabric", ("fabric", "decorator", "deprecated", "wrapt")),
    ("paramiko + cryptography", ("paramiko", "cryptography", "bcrypt", "nacl", "cffi", "_cffi_backend")),
    ("pydantic", ("pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection")),
    ("jinja2", ("jinja2", "markupsafe")),
    ("rich", ("rich", "pygments", "markdown_it", "mdurl")),
    ("yaml", ("yaml", "_yaml")),
    ("bringup engine", ("bringup",)),
    ("roles", ("roles", "bringup_roles")),
)


def _importtime(stderr: str) -> list[tuple[str, float]]:
    """``python -X importtime``'s lines as ``(module, own seconds)``, in import order."""
    out = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line[len("import time:"):].split("|")
        out.append((name.strip(), int(own) / 1e6))
    return out


def import_breakdown(tool: Tool, runs: int) -> dict:
    """Imports of ``tool``'s run: ``all``, the median wall time a fresh process takes to import every module
    the run loaded (in its order; role modules, loaded from their files, are not among them) less ``python -c
    pass``; and per group, the median share of ``python -X importtime``'s own times summed by top-level
    package in that same importing process, scaled to ``all`` (importtime's bookkeeping inflates every
    module's time, so only its shares are used).  The shares come from that one-thread process, not from the
    run: the run imports in two threads at once (bringup/ahead.py), and importtime, which nests by one global
    level, then subtracts one thread's imports from the other's and prints negative times."""
    _, cp = tool.run_capture((PYTHON, "-X", "importtime"))
    wanted = [n for n, _ in _importtime(cp.stderr) if not n.startswith("bringup_roles")]
    # __import__, not importlib.import_module: importtime sees only imports that go through the former.
    loader = ("import sys\nfor n in sys.argv[1:]:\n    try:\n        __import__(n)\n"
              "    except Exception:\n        pass\n")
    env = {**os.environ, **BRINGUP_ENV}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    walls = []
    per: dict[str, list[float]] = {}
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([PYTHON, "-c", "pass"], env=env, check=True)
        t1 = time.perf_counter()
        subprocess.run([PYTHON, "-c", loader, *wanted], env=env, cwd=tool.cwd, check=True)
        walls.append((time.perf_counter() - t1) - (t1 - t0))
        timed = subprocess.run([PYTHON, "-X", "importtime", "-c", loader, *wanted], env=env, cwd=tool.cwd,
                               check=True, capture_output=True, text=True)
        got: dict[str, float] = {}
        for name, own in _importtime(timed.stderr):
            top = name.split(".")[0]
            group = next((g for g, tops in IMPORT_GROUPS if top in tops), "standard library and the rest")
            got[group] = got.get(group, 0.0) + own
        total = sum(got.values())
        for k, v in got.items():
            per.setdefault(k, []).append(v / total)
    total = statistics.median(walls)
    out = {k: statistics.median(v) * total for k, v in per.items()}
    out["all"] = total
    return out


#: Timed alone on the provisioned host, beside (d): the audit's compose check (it must show that a compose works,
#: and the sandbox's compose is v1, docker-compose, a Python program).
COMPOSE_CHECK = "docker compose version >/dev/null 2>&1 || docker-compose version >/dev/null 2>&1\n"


def where(tool: Tool, host: harness.SandboxHost, scripts: list[str], runs: int, d: Path,
          alone: str | None = None) -> dict:
    """Imports of ``tool`` by package, and its remote part replayed (bench/where.py): handshake, each trip;
    ``alone``: one more script timed by itself (``alone`` in the result)."""
    (d / "where_host.json").write_text(json.dumps(
        {"port": host.port, "key": str(host.key_file), "known_hosts": str(host.known_hosts)}))
    (d / "where_scripts.json").write_text(json.dumps(scripts + ([alone] if alone else [])))
    cp = subprocess.run([PYTHON, str(BENCH / "where.py"), str(d / "where_host.json"), str(d / "where_scripts.json"),
                         str(runs)], capture_output=True, text=True, check=True)
    remote = json.loads(cp.stdout)
    if alone:
        remote["alone"] = remote["trips"].pop()
    return {"imports": import_breakdown(tool, runs), **remote, "load": os.getloadavg()[0]}


# -- the parts ---------------------------------------------------------------

def sysctl_spec(host: harness.SandboxHost, d: Path) -> Path:
    """The file and live keys bringup's sysctl role manages here, for the peers (read after bringup applied)."""
    from roles.sysctl import PERSIST_FILE
    content = host.exec(["cat", PERSIST_FILE]).stdout
    keys = {}
    for line in content.splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            keys[k] = v
    spec = d / "sysctl.json"
    spec.write_text(json.dumps({"path": PERSIST_FILE, "content": content, "keys": keys}))
    return spec


def part_a(grow, d: Path, venv: Path, runs: int, scale: list[int], ansible_max: int) -> dict:
    """``grow(n)``: the fleet's first ``n`` hosts, booting the missing ones (so small sizes run beside few hosts)."""
    hosts = grow(scale[0])
    inv = bringup_inventory(hosts, d / "hosts")
    Tool("bringup apply", BRINGUP + ["provision", "-i", str(inv), "--roles", "sysctl", "--forks", "64",
                                     "--group", "sandbox"], d).run()
    spec = sysctl_spec(hosts[0], d)
    keys = json.loads(spec.read_text())["keys"]
    floor_cmd = (f"stat -c '%a %U %G' {json.loads(spec.read_text())['path']}; "
                 f"sha256sum {json.loads(spec.read_text())['path']}; "
                 + "; ".join(f"cat /proc/sys/{k.replace('.', '/')}" for k in keys))
    out = {"keys": len(keys), "scale": {}}
    for n in scale:
        sub = grow(n)
        sd = d / f"n{n}"
        sd.mkdir(exist_ok=True)
        write_peer_inventories(sub, sd)
        binv = bringup_inventory(sub, sd / "hosts")
        forks = str(max(n, 1))
        tools = [
            Tool("bringup", BRINGUP + ["provision", "-i", str(binv), "--roles", "sysctl", "--forks", forks,
                                       "--group", "sandbox"], sd),
            Tool("pyinfra", [str(venv / "pyinfra"), "-y", "--parallel", forks, "pyinfra_inventory.py",
                             str(BENCH / "peers" / "sysctl_deploy.py")], sd, {"BENCH_SYSCTL_JSON": str(spec)}),
            Tool("ansible", [str(venv / "ansible-playbook"), "-i", "ansible_hosts", "-f", forks,
                             "-e", f"@{spec}", str(BENCH / "peers" / "sysctl_playbook.yml")], sd,
                 {"ANSIBLE_CONFIG": str(sd / "ansible.cfg")}),
            floor_tool("floor_a", sd, floor_cmd),
        ]
        if n > ansible_max:  # ~3 s per added host: past the cap one size would take longer than the rest
            tools = [t for t in tools if t.name != "ansible"]
        for t in tools[:-1]:
            t.run()  # converge every tool's view once (pyinfra's file mode, Ansible's first connection)
        log(f"(a) sysctl no-op, {n} host(s)")
        out["scale"][n] = alternate(tools, runs)
        if n == 1:
            out["commands"] = {t.name: count_commands(sub[0], t, stdin=t.name == "bringup") for t in tools}
            log("(a) where bringup's time goes, 1 host")
            out["where"] = where(tools[0], sub[0], out["commands"]["bringup"].pop("scripts"), runs, sd)
    return out


def part_b(hosts, d: Path, venv: Path, runs: int) -> dict:
    h = hosts[:1]
    sd = d / "mix"
    sd.mkdir(exist_ok=True)
    write_peer_inventories(h, sd)
    binv = bringup_inventory(h, sd / "hosts")
    tools = [
        Tool("bringup", BRINGUP + ["provision", "-i", str(binv), "--host", h[0].name], BENCH / "mix"),
        Tool("pyinfra", [str(venv / "pyinfra"), "-y", "pyinfra_inventory.py", str(BENCH / "peers" / "mix_deploy.py")],
             sd),
        Tool("ansible", [str(venv / "ansible-playbook"), "-i", "ansible_hosts",
                         str(BENCH / "peers" / "mix_playbook.yml")], sd, {"ANSIBLE_CONFIG": str(sd / "ansible.cfg")}),
    ]
    log("(b) mix: apply from scratch")
    apply_ = alternate(tools, runs, before=lambda t: h[0].exec(MIX_RESET))
    for t in tools:
        t.run()
    log("(b) mix: no-op")
    noop = alternate(tools + [floor_tool("floor_b", sd, MIX_FLOOR)], runs)
    commands = {t.name: count_commands(h[0], t, stdin=t.name == "bringup") for t in tools}
    log("(b) where bringup's time goes")
    return {"apply": apply_, "noop": noop, "commands": commands,
            "where": where(tools[0], h[0], commands["bringup"].pop("scripts"), runs, sd)}


#: The testinfra peer's tools: over testinfra's paramiko backend in its best configuration (TCP_NODELAY set by the
#: peer's fixture), the same backend as shipped (no TCP_NODELAY), and over bringup's backend (bringup.testinfra).
TESTINFRA = "testinfra"
TESTINFRA_SHIPPED = "testinfra (paramiko as shipped)"
TESTINFRA_BRINGUP = "testinfra (bringup://)"
#: part (d)'s peers by backend: (tool name, key of the part's results)
PEERS = {"paramiko": (TESTINFRA, "testinfra"), "shipped": (TESTINFRA_SHIPPED, "testinfra_shipped"),
         "bringup": (TESTINFRA_BRINGUP, "testinfra_bringup")}


def audit_spec(host: harness.SandboxHost, sd: Path, binv: Path) -> Path:
    """What the audit of ``host`` checks (bench/peers/audit_spec.py), from the resources bringup's roles declare
    for the host and the newest audit report under ``sd/reports`` (the run just before this)."""
    report = sorted((sd / "reports").glob("*-audit.json"))[-1]
    spec = sd / "audit_spec.json"
    subprocess.run([PYTHON, str(BENCH / "peers" / "audit_spec.py"), str(binv), host.name, str(report), str(spec)],
                   cwd=sd, env={**os.environ, **BRINGUP_ENV}, check=True)
    return spec


def testinfra_peer(host: harness.SandboxHost, sd: Path, venv: Path, binv: Path, spec: Path,
                   backend: str = "paramiko") -> tuple[Tool, dict]:
    """testinfra doing the audit's checks (bench/peers/audit_testinfra.py) over its paramiko backend (in the
    peers' venv; ``backend="shipped"``: without the TCP_NODELAY its fixture sets), or over bringup's
    (``backend="bringup"``: bringup's Python, the plugin, the inventory ``binv``), and how its verifying run went:
    every test passed or skipped exactly where the audit's item did (else the peer file has a bug, and the run
    stops here)."""
    (sd / "pytest.ini").write_text("[pytest]\n")  # its own, empty: not the checkout's (testpaths, addopts)
    common = ["-q", "-p", "no:cacheprovider", "-c", str(sd / "pytest.ini"), "--rootdir", str(sd)]
    peer = str(BENCH / "peers" / "audit_testinfra.py")
    if backend == "bringup":
        tool = Tool(TESTINFRA_BRINGUP, [PYTHON, "-m", "pytest", *common, "-p", "bringup.testinfra.plugin", peer,
                                        f"--hosts=bringup://{host.name}", f"--bringup-inventory={binv}"], sd,
                    {**BRINGUP_ENV, "BENCH_AUDIT_JSON": str(spec)})
    else:
        tool = Tool(PEERS[backend][0], [str(venv / "pytest"), *common, peer,
                                        f"--hosts=paramiko://root@127.0.0.1:{host.port}",
                                        f"--ssh-identity-file={host.key_file}"], sd,
                    {"BENCH_AUDIT_JSON": str(spec), "BENCH_TESTINFRA_NODELAY": "0" if backend == "shipped" else "1"})
    junit = sd / f"testinfra-{backend}.xml"
    Tool(tool.name, tool.argv + [f"--junitxml={junit}"], sd, tool.env).run()
    got = {}
    for case in ET.parse(junit).iter("testcase"):
        tag = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        got[case.get("name")] = tag
    items = json.loads(spec.read_text())["items"]
    differ = []
    for i in items:
        names = [n for n in got if n.endswith(f"-{i['id']}]")]
        outcome = got[names[0]] if len(names) == 1 else f"{len(names)} tests"
        if outcome != i["outcome"]:
            differ.append(f"{i['id']}: audit {i['outcome']}, testinfra {outcome}")
    if differ or len(got) != len(items):
        raise SystemExit(f"bench: testinfra's run ({backend} backend) differs from the audit's ({len(got)} tests, "
                         f"{len(items)} items):\n" + "\n".join(differ))
    return tool, {"tests": len(got), **{k: sum(v == k for v in got.values()) for k in ("passed", "skipped")}}


def part_cd(hosts, d: Path, venv: Path, runs: int) -> dict:
    h = hosts[:1]
    sd = d / "full"
    sd.mkdir(exist_ok=True)
    write_peer_inventories(h, sd)
    (sd / "floor_one.json").write_text((sd / "floor_hosts.json").read_text())
    binv = bringup_inventory(h, sd / "hosts")
    prov = Tool("bringup provision", BRINGUP + ["provision", "-i", str(binv), "--host", h[0].name], sd)
    audit = Tool("bringup audit", BRINGUP + ["audit", "-i", str(binv), "--host", h[0].name], sd)
    log("(c) full provision: first apply (not timed)")
    try:
        prov.run()
    except SystemExit as e:
        log(f"first apply did not converge; re-running once: {str(e).splitlines()[0]}")
        prov.run()
    out = {}
    for key, tool in (("c", prov), ("d", audit)):
        counted = count_commands(h[0], tool, stdin=True)
        scripts = counted.pop("scripts")
        tools = [tool, replay_floor(f"floor_{key}", sd, scripts)]
        peers = {}
        if key == "d":
            spec = audit_spec(h[0], sd, binv)
            for i, backend in enumerate(PEERS, start=1):
                log(f"(d) testinfra, {backend} backend: the audit's checks as tests, one verifying run (not timed)")
                testinfra, peer = testinfra_peer(h[0], sd, venv, binv, spec, backend)
                peer["commands"] = count_commands(h[0], testinfra)
                peer["commands"].pop("scripts")
                peers[testinfra.name] = peer
                tools.insert(i, testinfra)
        log(f"({key}) {', '.join(t.name for t in tools)}, no-op")
        out[key] = {"times": alternate(tools, runs), "commands": counted,
                    "where": where(tool, h[0], scripts, runs, sd, alone=COMPOSE_CHECK if key == "d" else None)}
        for name, field in PEERS.values():
            if name in peers:
                out[key][field] = peers[name]
    return out


def part_s(runs: int) -> dict:
    """Start-up: `bringup --help`, `invoke --list` against a bare `python -c pass`."""
    log("start-up: bringup --help, invoke --list")
    invoke = str(Path(sys.executable).with_name("invoke"))
    tools = [Tool("bringup --help", BRINGUP + ["--help"], REPO),
             Tool("invoke --list", [invoke, "--list"], REPO, BRINGUP_ENV),
             Tool("python -c pass", [PYTHON, "-c", "pass"], REPO),
             # What the start-up cannot go under: Invoke's own import (the CLI is an Invoke program),
             # and the floor's import for comparison.
             Tool("python -c 'import invoke'", [PYTHON, "-c", "import invoke"], REPO),
             Tool("python -c 'import paramiko'", [PYTHON, "-c", "import paramiko"], REPO)]
    for t in tools:
        t.run()  # untimed: a fresh checkout's first run writes its bytecode cache
    return alternate(tools, runs * 2)


# -- the report --------------------------------------------------------------

def fmt(r: dict | None) -> str:
    """Median (min–max) and the median 1-minute load average when this tool's runs started; — when not run."""
    if not r:
        return "—"
    return f"{r['median']:.2f} s ({r['min']:.2f}–{r['max']:.2f}) ·{r['load']:.1f}"


def ratio(a: dict | None, b: dict | None) -> str:
    return f"{a['median'] / b['median']:.2f}×" if a and b else "—"


def report(res: dict, meta: dict) -> str:
    L = ["# bringup benchmark: whole processes against pyinfra, Ansible and the SSH floor", "",
         f"Written by `python3 bench/compare.py {meta['args']}` on {meta['date']}, at commit {meta['commit']}.", "",
         f"- machine: {meta['machine']}, {meta['cores']} cores, {meta['mem']}",
         "- " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()),
         "- hosts: sandbox containers (Debian, systemd, sshd) on 127.0.0.1, the control node the same machine",
         f"- each cell: median (min–max) of {meta['runs']} runs, wall time of the whole process from outside "
         "(start-up included), tools alternated run by run; `·N` after a cell is the median 1-minute load "
         "average (`os.getloadavg`) when that tool's runs started, on 2 cores a load above 2 means waiting for a core", ""]
    st = res.get("s")
    if st:
        L += ["## Start-up (target under 0.15 s)", "", "| command | wall time ·load |", "|---|---|"]
        L += [f"| `{n}` | {fmt(r)} |" for n, r in st.items()] + [""]
    a = res.get("a")
    if a:
        L += ["## (a) sysctl role, no-op: file and " + str(a["keys"]) + " live keys", "",
              "Light sandbox hosts (sshd and systemd, no Docker inside), the fleet grown size by size (booted in "
              f"waves of {WAVE}, then the load left to settle) after (b)-(d); `--forks`/`--parallel`/`-f` = the host count. Ansible runs up to "
              f"{a.get('ansible_max', '?')} hosts (`--ansible-max`): about 3 s per added host.", "",
              "| hosts | bringup | pyinfra | ansible | floor | bringup/pyinfra | bringup/ansible | bringup/floor |",
              "|---|---|---|---|---|---|---|---|"]
        for n, r in a["scale"].items():
            L.append(f"| {n} | {fmt(r['bringup'])} | {fmt(r['pyinfra'])} | {fmt(r.get('ansible'))} | "
                     f"{fmt(r['floor'])} | {ratio(r['bringup'], r['pyinfra'])} | "
                     f"{ratio(r['bringup'], r.get('ansible'))} | {ratio(r['bringup'], r['floor'])} |")
        if len(a["scale"]) > 1:
            L += ["", "Cost per added host (median, from the smallest to the largest size each ran at): " + ", ".join(
                per_host(a["scale"], t) for t in ("bringup", "pyinfra", "ansible", "floor"))]
        L += ["", commands_table(a.get("commands", {}))]
    b = res.get("b")
    if b:
        L += ["## (b) six-operation mix, one host", "",
              "| run | bringup | pyinfra | ansible | floor | bringup/pyinfra | bringup/ansible | bringup/floor |",
              "|---|---|---|---|---|---|---|---|"]
        for what, r in (("apply from scratch", b["apply"]), ("no-op", b["noop"])):
            fl = r.get("floor")
            L.append(f"| {what} | {fmt(r['bringup'])} | {fmt(r['pyinfra'])} | {fmt(r['ansible'])} | "
                     f"{fmt(fl)} | {ratio(r['bringup'], r['pyinfra'])} | "
                     f"{ratio(r['bringup'], r['ansible'])} | {ratio(r['bringup'], fl)} |")
        L += ["", commands_table(b["commands"])]
    for key, title in (("c", "(c) full `provision`, cpu profile, no-op, one host"),
                       ("d", "(d) `bringup audit` (= `invoke audit`) of the provisioned host")):
        r = res.get("cd", {}).get(key)
        if not r:
            continue
        t = r["times"]
        name = next(n for n in t if n not in ("floor", *(tool for tool, _ in PEERS.values())))
        c = r["commands"]
        peer = r.get("testinfra")
        if peer:
            pc = peer["commands"]
            L += [f"## {title}", "",
                  "| bringup | testinfra | its floor | bringup/testinfra | bringup/floor | remote commands "
                  "(bringup / testinfra) | connections (bringup / testinfra) |", "|---|---|---|---|---|---|---|",
                  f"| {fmt(t[name])} | {fmt(t.get(TESTINFRA))} | {fmt(t['floor'])} | "
                  f"{ratio(t[name], t.get(TESTINFRA))} | {ratio(t[name], t['floor'])} | "
                  f"{c['commands']} / {pc['commands']} | {c['connections']} / {pc['connections']} |", "",
                  f"testinfra: `pytest -q -p no:cacheprovider bench/peers/audit_testinfra.py "
                  f"--hosts=paramiko://...`, one test per audit item ({peer['tests']} tests: {peer['passed']} "
                  f"passed, {peer['skipped']} skipped, each as the audit's item), over the one paramiko "
                  "connection its backend keeps for the session, TCP_NODELAY set by the peer's fixture.", "",
                  *backends_table(r, t), ""]
        else:
            L += [f"## {title}", "", "| bringup | its floor | bringup/floor | remote commands | connections |",
                  "|---|---|---|---|---|",
                  f"| {fmt(t[name])} | {fmt(t['floor'])} | {ratio(t[name], t['floor'])} | {c['commands']} | "
                  f"{c['connections']} |", ""]
        L += ["Its floor: every script this run sent, captured on the host, replayed from a fresh paramiko "
              "process in one command over one connection.", ""]
    L += targets_table(res)
    L += cpu_table(res)
    L += where_table(res)
    L += [meta["notes"]]
    return "\n".join(L) + "\n"


def backends_table(r: dict, t: dict) -> list[str]:
    """(d)'s peer on each testinfra backend: the same tests, whole processes, against bringup's backend."""
    rows = []
    for backend, (tool, field) in PEERS.items():
        peer = r.get(field)
        if not peer or tool not in t:
            continue
        how = {"paramiko": "paramiko, TCP_NODELAY set by the peer's fixture (its best configuration)",
               "shipped": "paramiko as testinfra ships it (no TCP_NODELAY)",
               "bringup": "bringup's (`-p bringup.testinfra.plugin --hosts=bringup://HOST "
                          "--bringup-inventory=hosts`, bringup's Python)"}[backend]
        rows.append(f"| {how} | {fmt(t[tool])} | {peer['commands']['commands']} | "
                    f"{peer['commands']['connections']} | {ratio(t.get(TESTINFRA_BRINGUP), t[tool])} |")
    if len(rows) < 2:
        return []
    return ["testinfra's backends on the same tests (each run first verified item for item against the audit):", "",
            "| backend | whole run | remote commands | connections | bringup's backend / this |", "|---|---|---|---|---|",
            *rows]


def targets_table(res: dict) -> list[str]:
    """Issue 11's targets against this run's medians: holds, or not, with the number."""
    rows = []

    def row(target: str, value: str, holds: bool | None) -> None:
        rows.append(f"| {target} | {value} | {'holds' if holds else 'not measured' if holds is None else '**does not hold**'} |")

    def vs_floor(target: str, a: dict | None, b: dict | None, limit: float) -> None:
        if a and b:
            r = a["median"] / b["median"]
            row(target, f"{r:.2f}× ({a['median']:.2f} s against {b['median']:.2f} s)", r <= limit)

    scale = res.get("a", {}).get("scale", {})
    one = scale.get(1, {})
    vs_floor("(a) sysctl no-op, one host: ≤ 1.3× floor", one.get("bringup"), one.get("floor"), 1.3)
    b = res.get("b")
    if b:
        vs_floor("(b) mix no-op, one host: ≤ 1.3× floor", b["noop"]["bringup"], b["noop"].get("floor"), 1.3)
        ap = b["apply"]
        r = ap["pyinfra"]["median"] / ap["bringup"]["median"]
        row("(b) mix apply from scratch: ≥ 2× faster than pyinfra", f"{r:.2f}× faster "
            f"({ap['bringup']['median']:.2f} s against {ap['pyinfra']['median']:.2f} s)", r >= 2)
    c = (res.get("cd") or {}).get("c")
    if c:
        vs_floor("(c) full provision no-op, one host: ≤ 1.5× its floor", c["times"]["bringup provision"],
                 c["times"]["floor"], 1.5)
    for n in sorted(scale):
        if n >= 16:
            vs_floor(f"(a) sysctl no-op, {n} hosts: ≤ 1.3× the fleet floor", scale[n].get("bringup"),
                     scale[n].get("floor"), 1.3)
    d = (res.get("cd") or {}).get("d")
    if d:
        t = d["times"]["bringup audit"]["median"]
        row("(d) audit of a provisioned host: under 1 s", f"{t:.2f} s", t < 1)
        ti = d["times"].get("testinfra")
        if ti:
            row("(d) audit faster than testinfra's paramiko backend", f"{ti['median'] / t:.2f}× faster ({t:.2f} s "
                f"against {ti['median']:.2f} s)" if t < ti["median"] else f"{t / ti['median']:.2f}× slower "
                f"({t:.2f} s against {ti['median']:.2f} s)", t < ti["median"])
        else:
            row("(d) audit faster than testinfra's paramiko backend", "testinfra not run", None)
        tb = d["times"].get(TESTINFRA_BRINGUP)
        for tool, what in ((TESTINFRA_SHIPPED, "as shipped"), (TESTINFRA, "with TCP_NODELAY (its best)")):
            other = d["times"].get(tool)
            target = f"(d) testinfra: bringup's backend faster than the paramiko backend {what}"
            if tb and other:
                r = other["median"] / tb["median"]
                row(target, f"{r:.2f}× faster ({tb['median']:.2f} s against {other['median']:.2f} s)" if r > 1 else
                    f"{1 / r:.2f}× slower ({tb['median']:.2f} s against {other['median']:.2f} s)", r > 1)
            else:
                row(target, "not run", None)
    for name, r in (res.get("s") or {}).items():
        if name.startswith(("bringup", "invoke")):
            row(f"`{name}`: under 0.15 s", f"{r['median']:.2f} s", r["median"] < 0.15)
    if not rows:
        return []
    return ["## The issue's targets in this run", "", "| target | this run (medians) | |", "|---|---|---|", *rows, ""]


def cpu_table(res: dict) -> list[str]:
    """The one-host no-op cells' CPU (user + system of the whole process, medians) beside their wall times: a
    ratio target to the floor's wall time cannot hold while bringup's CPU alone is above it."""
    rows = []
    c = (res.get("cd") or {}).get("c")
    for label, a, b, limit in (
            ("(a) sysctl", res.get("a", {}).get("scale", {}).get(1, {}).get("bringup"),
             res.get("a", {}).get("scale", {}).get(1, {}).get("floor"), 1.3),
            ("(b) mix", (res.get("b") or {}).get("noop", {}).get("bringup"),
             (res.get("b") or {}).get("noop", {}).get("floor"), 1.3),
            ("(c) provision", c and c["times"].get("bringup provision"), c and c["times"].get("floor"), 1.5)):
        if not a or not b or "cpu" not in a or "cpu" not in b:
            continue
        budget = limit * b["median"]
        rows.append(f"| {label} | {a['median']:.2f} s | {a['cpu']:.2f} s | {b['median']:.2f} s | {b['cpu']:.2f} s "
                    f"| {budget:.2f} s ({limit:g}×) | {a['cpu'] / budget:.0%} |")
    if not rows:
        return []
    return ["## CPU of the whole process (one host, no-op, medians)", "",
            "User + system seconds of the process and the children it waited for (`getrusage`), run by run. "
            "On one host the work is mostly the control process's own: what it uses in CPU the wall time "
            "cannot go below, however much of it overlaps the network.", "",
            "| run | bringup wall | bringup CPU | floor wall | floor CPU | the target's wall budget | bringup's "
            "CPU / budget |", "|---|---|---|---|---|---|---|", *rows, ""]


def where_table(res: dict) -> list[str]:
    """Whole run = imports + SSH handshake + round trips + the rest, per one-host no-op, medians."""
    rows = []
    for label, whole, w in (
            ("(a) sysctl", res.get("a", {}).get("scale", {}).get(1, {}).get("bringup"), res.get("a", {}).get("where")),
            ("(b) mix", res.get("b", {}).get("noop", {}).get("bringup"), res.get("b", {}).get("where")),
            ("(c) provision", (res.get("cd", {}).get("c") or {}).get("times", {}).get("bringup provision"),
             (res.get("cd", {}).get("c") or {}).get("where")),
            ("(d) audit", (res.get("cd", {}).get("d") or {}).get("times", {}).get("bringup audit"),
             (res.get("cd", {}).get("d") or {}).get("where"))):
        if not whole or not w:
            continue
        imp = w["imports"]
        groups = sorted(((k, v) for k, v in imp.items() if k != "all"), key=lambda kv: -kv[1])
        trips = w["trips"]
        rest = whole["median"] - imp["all"] - w["connect"] - sum(trips)
        rows.append(f"| {label} | {whole['median']:.2f} s | {imp['all']:.2f} s: "
                    + ", ".join(f"{k} {v * 1000:.0f}" for k, v in groups if v >= 0.005)
                    + f" ms | {w['connect'] * 1000:.0f} ms | {len(trips)}: "
                    + " + ".join(f"{t * 1000:.0f}" for t in trips) + f" ms | {rest:+.2f} s | {w['load']:.1f} |")
    if not rows:
        return []
    return ["## Where bringup's time goes (one host, no-op, medians)", "",
            "Whole run: the timed cell above. Imports: the wall time a fresh process takes to import every module "
            "the same command loaded, less `python -c pass` (role modules, loaded from their files, are in the "
            "rest); split by top-level package in the shares `python -X importtime` gives them (ms). Handshake and round trips: bench/where.py replays the scripts "
            "this run sent (captured on the host) over a fresh paramiko connection: TCP, key exchange and "
            "authentication, then each script on a new channel. The rest: whole run minus those three, that is "
            "interpreter start-up and exit, reading the inventory, merging and validating variables, declaring and "
            "planning resources, printing and writing the report, less the overlap: a run connects and gathers the "
            "facts while it still loads its roles, checks its variables and imports Jinja2 and rich "
            "(bringup/ahead.py), so the handshake and the first round trip partly run at the same time as the "
            "imports and the rest (a negative rest: more overlapped than left).", "",
            "| run | whole run | imports, by package | SSH handshake | round trips | the rest | load |",
            "|---|---|---|---|---|---|---|", *rows, "", *compose_line(res)]


def compose_line(res: dict) -> list[str]:
    alone = ((res.get("cd") or {}).get("d") or {}).get("where", {}).get("alone")
    if alone is None:
        return []
    return [f"The audit's compose check alone (`{COMPOSE_CHECK.strip()}`, one round trip on the provisioned host): "
            f"{alone * 1000:.0f} ms. The sandbox's compose is v1 (`docker-compose`, a Python program), and the audit "
            "must show that a compose works, so it runs it; the provision's docker role only looks for it on the PATH.",
            ""]


def per_host(scale: dict, tool: str) -> str:
    """Median cost of one added host, from the smallest to the largest size this tool ran at."""
    ns = sorted(n for n in scale if tool in scale[n])
    lo, hi = ns[0], ns[-1]
    if hi == lo:
        return f"{tool} —"
    return f"{tool} {(scale[hi][tool]['median'] - scale[lo][tool]['median']) / (hi - lo) * 1000:.0f} ms ({lo}→{hi})"


def commands_table(cmds: dict) -> str:
    if not cmds:
        return ""
    rows = ["Remote commands of one no-op run on one host (exec requests and sftp sessions, logged by a "
            "wrapper login shell on the host; connections = distinct sshd session processes):", "",
            "| tool | commands | of which sftp | connections | first commands |", "|---|---|---|---|---|"]
    for n, c in cmds.items():
        rows.append(f"| {n} | {c['commands']} | {c['sftp']} | {c['connections']} | "
                    + "<br>".join(f"`{s.replace('|', '¦')}`" for s in c["sample"]) + " |")
    return "\n".join(rows) + "\n"


NOTES = (BENCH / "NOTES.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scale", default="1,4,16,64", help="host counts for (a)")
    ap.add_argument("--parts", default="s,a,b,c,d", help="s start-up, a sysctl, b mix, c provision, d audit")
    ap.add_argument("--ansible-max", type=int, default=16, help="largest host count (a) runs Ansible at")
    ap.add_argument("--out", default=str(BENCH / "RESULTS.md"))
    ap.add_argument("--render", action="store_true",
                    help="write --out again from the last run's results (.sandbox/bench/results.pickle) and the "
                         "current bench/NOTES.md; measures nothing")
    args = ap.parse_args()
    if args.render:
        if not (WORK / "results.pickle").exists():
            raise SystemExit(f"bench: --render: no earlier run's results in {WORK / 'results.pickle'}; "
                             "run the benchmark first")
        saved = pickle.loads((WORK / "results.pickle").read_bytes())
        write_report(saved["res"], saved["meta"], Path(args.out))
        return
    scale = sorted({int(x) for x in args.scale.split(",")})
    parts = set(args.parts.split(","))
    venv = peer_venv()
    # The commit measured, taken before the run: edits made while it runs are not what it measured.
    when = datetime.datetime.now().astimezone().isoformat(timespec="minutes")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "bringup", "roles", "templates",
                            "bench"], capture_output=True, text=True).stdout.strip()
    meta = {"args": " ".join(sys.argv[1:]), "date": when,
            "commit": (git.stdout.strip() or "?") + (" with uncommitted changes in bringup/, roles/, templates/ or "
                                                      "bench/" if dirty else ""),
            "machine": f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
            "cores": os.cpu_count(), "mem": f"{mem:.0f} GiB", "runs": args.runs,
            "versions": versions(venv)}
    WORK.mkdir(parents=True, exist_ok=True)
    harness.remove_leftovers()
    # A kill runs the clean-up below as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    res: dict = {"s": part_s(args.runs)} if "s" in parts else {}
    started: dict = {}
    try:
        harness.ensure_docker()
        image = harness.build_image()
        # (b), (c), (d) first, on one full sandbox host (the provision's roles run Docker there), with no
        # fleet running beside it; then (a) on a fleet of light hosts (sshd and systemd, no Docker inside),
        # grown size by size.
        if parts & {"b", "c", "d"}:
            started["bench"] = start_hosts("bench", 1, False, image)
        if "b" in parts:
            res["b"] = part_b(started["bench"], WORK, venv, args.runs)
        if parts & {"c", "d"}:
            res["cd"] = part_cd(started["bench"], WORK, venv, args.runs)
        fleet: list[harness.SandboxHost] = started.setdefault("fleet", [])

        def grow(n: int) -> list[harness.SandboxHost]:
            if len(fleet) < n:
                # The machine's inotify limits (raised as root), memory and disk for the hosts to come.
                harness.make_room(n - len(fleet), light=True)
                t0 = time.monotonic()
                fleet.extend(start_hosts("fleet", n, True, image, first=len(fleet) + 1))
                log(f"{n} fleet host(s) up in {time.monotonic() - t0:.0f} s")
                settle()
            return fleet[:n]

        if "a" in parts:
            res["a"] = part_a(grow, WORK, venv, args.runs, scale, args.ansible_max)
            res["a"]["ansible_max"] = args.ansible_max
    finally:
        STOP.set()
        log(f"removed {len(harness.remove_session_hosts())} sandbox container(s) this run started")
    (WORK / "results.json").write_text(json.dumps(res, indent=1, default=str))
    # Everything the report is made of, to write it again with --render (after NOTES.md was edited).
    (WORK / "results.pickle").write_bytes(pickle.dumps({"res": res, "meta": meta}))
    write_report(res, meta, Path(args.out))


#: The section bench/pull_fleet.py writes into the same file, carried over when this report is written again.
PULL_SECTION = re.compile(r"<!-- pull_fleet: begin -->.*?<!-- pull_fleet: end -->\n", re.S)


def write_report(res: dict, meta: dict, out: Path) -> None:
    meta = {**meta, "notes": NOTES.read_text() if NOTES.exists() else ""}
    text = report(res, meta)
    kept = PULL_SECTION.search(out.read_text()) if out.exists() else None
    if kept:
        text = text.rstrip("\n") + "\n\n" + kept.group(0)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    try:
        main()
    except harness.SandboxError as e:  # one line: a limit of the machine, a host that did not boot
        raise SystemExit(f"bench: {e}") from None
