"""Pull mode's fleet benchmark (issue 33): the Git server's load per fetch and the fleet's time to converge,
against the same change pushed from one control machine.

    python3 bench/pull_fleet.py [--scale 16,64] [--runs 3] [--spread 20] [--out .sandbox/bench/pull.json]

What is real and what is simulated (said again in bench/RESULTS.md):
- The Git server is real: a light sandbox container (systemd, sshd, Debian's git from this machine) serving a bare
  repository over SSH on 127.0.0.1; its cost is read from the container's own cgroup (CPU time of sshd, git
  upload-pack and an idle systemd) and its eth0 counters (bytes sent), before and after each wave of fetches.
- The hosts are simulated: host i is one real ``bringup pull`` process on this machine (its own cache folder, run
  lock, state and textfile, signature check, checkout, and ``bringup provision`` of itself through the local
  connection writing its own file under a temporary root), started after a random delay drawn from
  [0, spread) as the timer's RandomizedDelaySec does.  So N hosts share this machine's 2 cores; on a real fleet
  each has its own, and the converge time is the spread plus one run.
- Push: ``bringup provision --group all --forks N`` of the same change over the same N targets, each through the
  local connection (no SSH: the (a) rows of RESULTS.md give the SSH no-op cost at 16 and 64 hosts).

A benchmark, not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harness  # noqa: E402

WORK = REPO / ".sandbox" / "bench-pull"
#: The bringup the simulated hosts and the push run: a copy of this checkout's, made at the start, so an edit
#: of the checkout during a long run changes nothing under it.
SRC = WORK / "src"
ENV = dict(os.environ, PYTHONPATH=str(SRC), PYTHONPYCACHEPREFIX=str(REPO / ".sandbox" / "bench-pycache"),
           GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
ENTRY = [sys.executable, "-c", "import sys; from bringup.entry import main; sys.argv[0] = 'bringup'; main()"]
ROLE = '''
from bringup.resources import File

FACTS = ()

def resources(host):
    return [File(host.vars["demo_path"], content=host.vars["greeting"] + "\\n")]
'''


def git(cwd: Path, *args: str, key: Path | None = None, env: dict | None = None) -> str:
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"] if key else []
    p = subprocess.run(["git", "-c", "user.name=ops", "-c", "user.email=ops@example.org", *sign, *args], cwd=cwd,
                       env=dict(ENV, **(env or {})), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"git {args[0]}: {p.stderr.strip()}")
    return p.stdout.strip()


def timed(argv: list[str], log: Path, cwd: Path | None = None) -> tuple[int, float, float]:
    """Run ``argv`` (its output to ``log``); its exit code, wall seconds and CPU seconds (itself and the
    children it waited for)."""
    t0 = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        p = subprocess.Popen(argv, cwd=cwd, env=ENV, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, time.monotonic() - t0, ru.ru_utime + ru.ru_stime


class Server:
    """The Git server container and its counters."""

    def __init__(self, workdir: Path):
        from tests.integration.pull_setup import git_repository, use_apt_repository

        self.host = harness.start_host("bench-git", workdir=workdir, light=True)
        apt = workdir / "apt"
        shutil.rmtree(apt, ignore_errors=True)
        apt.mkdir()
        use_apt_repository(self.host, git_repository(apt))
        self.host.exec("apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q git "
                       ">/dev/null && git init --quiet --bare -b main /srv/fleet.git")
        self.url = f"ssh://root@127.0.0.1:{self.host.port}/srv/fleet.git"
        self.ssh = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                    "-o", f"UserKnownHostsFile={self.host.known_hosts}", "-o", "StrictHostKeyChecking=yes"]

    def counters(self) -> tuple[float, int]:
        """CPU seconds of the container's cgroup, bytes sent on its eth0."""
        out = self.host.exec(
            "p=$(grep -E '^[0-9]+:[^:]*cpuacct' /proc/1/cgroup | cut -d: -f3); "
            "if [ -n \"$p\" ]; then echo ns $(cat /sys/fs/cgroup/cpuacct$p/cpuacct.usage); "
            "else echo us $(sed -n 's/^usage_usec //p' /sys/fs/cgroup$(cut -d: -f3 /proc/1/cgroup)/cpu.stat); fi; "
            "grep eth0 /proc/net/dev").stdout.split("\n")
        unit, raw = out[0].split()
        cpu = int(raw) / (1e9 if unit == "ns" else 1e6)
        tx = int(out[1].split(":", 1)[1].split()[8])
        return cpu, tx

    def remove(self) -> None:
        self.host.remove()


class Fleet:
    """N simulated hosts: a repository pushed to the server, each host's cache and target under ``root``."""

    def __init__(self, n: int, root: Path, server: Server, keys: Path):
        self.n, self.root, self.server, self.keys = n, root, server, keys
        self.names = [f"h{i:03d}" for i in range(n)]
        self.work = root / "work"
        git(root, "init", "--quiet", "-b", "main", str(self.work))
        (self.work / "roles").mkdir()
        (self.work / "roles" / "__init__.py").write_text("ORDER = ['demo']\n")
        (self.work / "roles" / "demo.py").write_text(ROLE)
        (self.work / "templates" / "demo").mkdir(parents=True)
        (self.work / "templates" / "demo" / ".keep").write_text("")
        (root / "textfiles").mkdir()
        (root / "signers").write_text(f"ops@example.org {(keys / 'ops.pub').read_text().strip()}\n")
        self.version = 0

    def inventory(self, greeting: str) -> None:
        import yaml

        (self.work / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {
            n: {"ansible_connection": "local", "demo_path": str(self.root / "targets" / n / "demo.conf"),
                "greeting": greeting} for n in self.names}}}))

    def push(self) -> str:
        self.version += 1
        self.inventory(f"version {self.version}")
        git(self.work, "add", "-A")
        git(self.work, "commit", "--quiet", "-S", "-m", f"version {self.version}", key=self.keys / "ops")
        git(self.work, "push", "--quiet", "--force", self.server.url, "HEAD:main",
            env={"GIT_SSH_COMMAND": " ".join(self.server.ssh + ["-i", str(self.server.host.key_file)])})
        return git(self.work, "rev-parse", "HEAD")

    def pull_argv(self, name: str) -> list[str]:
        return [*ENTRY, "pull", "--url", self.server.url, "--allowed-signers", str(self.root / "signers"),
                "--name", name, "--cache", str(self.root / "cache" / name), "--lock", str(self.root / f"{name}-lock"),
                "--prometheus", str(self.root / "textfiles" / f"{name}.prom"),
                "--ssh-key", str(self.server.host.key_file), "--known-hosts", str(self.server.host.known_hosts)]

    def wave(self, spread: float, seed: int) -> dict:
        """Every host pulls once, each after its random delay; what it cost and how long until the last ended."""
        rng = random.Random(seed)
        delays = {n: rng.uniform(0, spread) for n in self.names}
        results: dict[str, tuple[int, float, float, float]] = {}
        cpu0, tx0 = self.server.counters()
        t0 = time.monotonic()

        def one(name: str) -> None:
            time.sleep(delays[name])
            rc, wall, cpu = timed(self.pull_argv(name), self.root / "logs" / f"{name}.log")
            results[name] = (rc, wall, cpu, time.monotonic() - t0)

        threads = [threading.Thread(target=one, args=(n,)) for n in self.names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu1, tx1 = self.server.counters()
        ends = sorted(r[3] for r in results.values())
        # A connection the server's sshd dropped before the key exchange (MaxStartups: too many handshakes at once)
        refused = sum("kex_exchange_identification" in (self.root / "logs" / f"{n}.log").read_text(errors="replace")
                      for n, r in results.items() if r[0])
        return {"hosts": self.n, "spread_s": spread, "ok": sum(r[0] == 0 for r in results.values()),
                "dropped_by_sshd": refused,
                "converged_s": ends[-1], "median_end_s": statistics.median(ends),
                "run_wall_s": statistics.median(r[1] for r in results.values()),
                "host_cpu_s": statistics.median(r[2] for r in results.values()),
                "server_cpu_s_per_fetch": (cpu1 - cpu0) / self.n, "server_tx_bytes_per_fetch": (tx1 - tx0) / self.n,
                "load": os.getloadavg()[0]}

    def applied(self, commit: str) -> int:
        done = 0
        for n in self.names:
            try:
                done += json.loads((self.root / "cache" / n / "state.json").read_text()).get("applied") == commit
            except (OSError, ValueError):
                pass
        return done

    def push_run(self) -> dict:
        """The same change pushed from one control machine: provision --group all --forks N in the repository."""
        self.version += 1
        self.inventory(f"version {self.version}")
        rc, wall, cpu = timed([*ENTRY, "provision", "--group", "all", "--forks", str(self.n)],
                              self.root / "logs" / "push.log", cwd=self.work)
        git(self.work, "checkout", "--quiet", "--", "hosts")
        self.version -= 1
        return {"hosts": self.n, "rc": rc, "wall_s": wall, "cpu_s": cpu, "load": os.getloadavg()[0]}


def _cell(values: list[float], fmt: str) -> str:
    """median (min–max)"""
    if not values:
        return "—"
    med = statistics.median(values)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})" if len(values) > 1 \
        else fmt.format(med)


def render(doc: dict) -> str:
    """The RESULTS.md section of a saved run."""
    out = [f"Written by `python3 bench/pull_fleet.py --runs {doc['runs']}` on {doc['at']}, at commit {doc['commit']}; "
           f"each cell: median (min–max) of the runs done at that size; `load`: the 1-minute load average when "
           f"the wave ended (2 cores).", "",
           "| hosts | wave | runs | hosts ok (worst run) | dropped by sshd (worst run) | converged (last host) | median host "
           "done | one run, wall | one run, CPU (host) | server CPU per fetch | server bytes sent per fetch | load |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, rows in doc["scales"].items():
        for wave, label in (("first", "first fetch (clone)"), ("change", "signed change"),
                            ("nothing", "nothing new")):
            rs = rows[wave] if isinstance(rows[wave], list) else [rows[wave]]
            if not rs:
                continue
            out.append(f"| {n} | {label} (spread {rs[0]['spread_s']:g} s) | {len(rs)} | "
                       f"{min(r['ok'] for r in rs)}/{n} | {max(r.get('dropped_by_sshd', 0) for r in rs)} | "
                       f"{_cell([r['converged_s'] for r in rs], '{:.1f} s')} | "
                       f"{_cell([r['median_end_s'] for r in rs], '{:.1f} s')} | "
                       f"{_cell([r['run_wall_s'] for r in rs], '{:.1f} s')} | "
                       f"{_cell([r['host_cpu_s'] for r in rs], '{:.2f} s')} | "
                       f"{_cell([r['server_cpu_s_per_fetch'] * 1000 for r in rs], '{:.0f} ms')} | "
                       f"{_cell([r['server_tx_bytes_per_fetch'] / 1024 for r in rs], '{:.1f} KiB')} | "
                       f"{_cell([r['load'] for r in rs], '{:.1f}')} |")
        ps = rows["push"]
        if ps:
            out.append(f"| {n} | push: `provision --group all --forks {n}` (local connection) | {len(ps)} | "
                       f"{n if all(r['rc'] == 0 for r in ps) else 'not all'}/{n} | — | "
                       f"{_cell([r['wall_s'] for r in ps], '{:.1f} s')} | — | — | "
                       f"{_cell([r['cpu_s'] for r in ps], '{:.2f} s')} (whole run) | — | — | "
                       f"{_cell([r['load'] for r in ps], '{:.1f}')} |")
    return "\n".join(out) + "\n"


BEGIN, END = "<!-- pull_fleet: begin -->", "<!-- pull_fleet: end -->"


def write_section(doc: dict, results: Path) -> None:
    """The pull section of ``results`` (bench/RESULTS.md) replaced by this run's, or added at its end; kept by
    bench/compare.py when it writes that file again."""
    text = results.read_text() if results.exists() else ""
    section = f"{BEGIN}\n{SECTION_HEAD}\n{render(doc)}\n{SECTION_NOTE}\n{END}\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results.write_text(text)


SECTION_HEAD = """## Pull mode: a fleet converging itself against one Git server (issue 33)
"""
SECTION_NOTE = """What is real: the Git server (a light sandbox container: sshd and git upload-pack, its CPU read from its
cgroup, bytes from its eth0), every host's `bringup pull` (fetch over SSH with a deploy key and a pinned host
key, `git verify-commit` against the allowed signers, a worktree checkout, `bringup provision` of itself through
the local connection, state and textfile written). What is simulated: the hosts are processes on this one 2-core
machine (their own cache, lock, state and target file under a temporary root), started after a random delay in
[0, spread) as the timer's `RandomizedDelaySec` does; so the N runs queue for these 2 cores (and the other
sessions' load), where a real fleet runs each on its own. "one run, wall" is therefore this machine's queueing,
and "converged" is bounded below by the spread; per host, the CPU column is what a host pays and the server
columns what the Git server pays. "nothing new" is the usual tick: the same revision re-converged (drift
corrected), a fetch that brings no objects. The push row is the same change from one control machine, over the
same targets through the local connection (no SSH: (a) above gives the SSH no-op cost per host). See NOTES.md,
"Pull mode at 10,000 hosts", for the extrapolation."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="16,64")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--spread", type=float, default=20.0, help="the simulated RandomizedDelaySec, seconds")
    ap.add_argument("--out", default=str(WORK / "pull.json"))
    ap.add_argument("--markdown", metavar="JSON", help="print the RESULTS.md table of a saved run and stop")
    ap.add_argument("--write", metavar="JSON", help="write a saved run's section into bench/RESULTS.md and stop")
    a = ap.parse_args()
    if a.markdown:
        print(render(json.loads(Path(a.markdown).read_text())), end="")
        return
    if a.write:
        write_section(json.loads(Path(a.write).read_text()), REPO / "bench" / "RESULTS.md")
        return
    WORK.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(SRC, ignore_errors=True)
    shutil.copytree(REPO / "bringup", SRC / "bringup", ignore=shutil.ignore_patterns("__pycache__"))
    keys = WORK / "keys"
    if not (keys / "ops").exists():
        keys.mkdir(exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ops", "-f", str(keys / "ops")],
                       check=True)
    server = Server(WORK)
    doc: dict = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
                 "commit": git(REPO, "rev-parse", "--short", "HEAD"), "runs": a.runs, "scales": {}}
    try:
        for n in (int(s) for s in a.scale.split(",")):
            root = WORK / f"fleet-{n}"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            fleet = Fleet(n, root, server, keys)
            commit = fleet.push()
            first = fleet.wave(a.spread, seed=0)  # the first fetch: a whole clone per host
            first["applied"] = fleet.applied(commit)
            rows = {"first": first, "change": [], "nothing": [], "push": []}
            doc["scales"][n] = rows
            for r in range(a.runs):
                commit = fleet.push()
                rows["change"].append(fleet.wave(a.spread, seed=100 + r))
                rows["change"][-1]["applied"] = fleet.applied(commit)
                rows["nothing"].append(fleet.wave(a.spread, seed=200 + r))
                rows["push"].append(fleet.push_run())
                print(json.dumps({"hosts": n, "run": r, **{k: v[-1] for k, v in rows.items() if k != "first"}}),
                      flush=True)
                Path(a.out).write_text(json.dumps(doc, indent=1))  # kept as it goes
    finally:
        server.remove()
    write_section(doc, REPO / "bench" / "RESULTS.md")
    print(a.out)


if __name__ == "__main__":
    main()
