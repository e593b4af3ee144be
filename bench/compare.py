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

The parts are here; beside this file: compare_run.py (hosts, tools, timing, command counts), compare_peers.py
(the pyinfra and Ansible peers' environment and inventories), compare_testinfra.py (the testinfra peer),
compare_floor.py (the floor and where the time goes), compare_report.py (bench/RESULTS.md).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from compare_floor import COMPOSE_CHECK, floor_tool, replay_floor, where
from compare_peers import peer_venv, versions, write_peer_inventories
from compare_report import write_report
from compare_run import (BENCH, BRINGUP, BRINGUP_ENV, PYTHON, REPO, STOP, WORK, Tool, alternate, bringup_inventory,
                         count_commands, log, settle, start_hosts)
from compare_testinfra import PEERS, audit_spec, testinfra_peer

import harness  # noqa: E402 - compare_run puts the checkout (harness/) on sys.path


MIX_RESET = ("rm -rf /etc/sysctl.d/91-bench-mix.conf* /opt/bench-mix /etc/default/bench-mix*; "
             "sysctl -qw net.ipv4.tcp_fin_timeout=60; systemctl disable -q --now containerd")
MIX_FLOOR = ("for f in /etc/sysctl.d/91-bench-mix.conf /etc/default/bench-mix /opt/bench-mix/motd; do "
             "stat -c '%a %U %G' $f; sha256sum $f; done; stat -c '%a %U %G' /opt/bench-mix; "
             "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' curl procps; "
             "systemctl is-active containerd; systemctl is-enabled containerd")



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
            out["where"] = where(tools[0], sub[0], out["commands"]["bringup"].pop("execs"), runs, sd)
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
            "where": where(tools[0], h[0], commands["bringup"].pop("execs"), runs, sd)}



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
        execs = counted.pop("execs")
        tools = [tool, replay_floor(f"floor_{key}", sd, execs)]
        peers = {}
        if key == "d":
            spec = audit_spec(h[0], sd, binv)
            for i, backend in enumerate(PEERS, start=1):
                log(f"(d) testinfra, {backend} backend: the audit's checks as tests, one verifying run (not timed)")
                testinfra, peer = testinfra_peer(h[0], sd, venv, binv, spec, backend)
                peer["commands"] = count_commands(h[0], testinfra)
                peer["commands"].pop("execs")
                peers[testinfra.name] = peer
                tools.insert(i, testinfra)
        log(f"({key}) {', '.join(t.name for t in tools)}, no-op")
        out[key] = {"times": alternate(tools, runs), "commands": counted,
                    "where": where(tool, h[0], execs, runs, sd, alone=COMPOSE_CHECK if key == "d" else None)}
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



if __name__ == "__main__":
    try:
        main()
    except harness.SandboxError as e:  # one line: a limit of the machine, a host that did not boot
        raise SystemExit(f"bench: {e}") from None
