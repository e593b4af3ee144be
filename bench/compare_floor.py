"""The floor of bench/compare.py and where bringup's time goes: the floor tools (bench/floor.py: one fresh paramiko
process, one connection, one command), a bringup run's scripts replayed as its floor, and a run's time split into
imports by package, the SSH handshake and each round trip (bench/where.py).  Cut from bench/compare.py (issue 43
item 2): the floor is a peer of its own.
"""
from __future__ import annotations

import json
import shlex
import os
import statistics
import subprocess
import time
from pathlib import Path

from compare_run import BENCH, BRINGUP_ENV, PYTHON, Tool

import harness  # noqa: E402 - compare_run puts the checkout (harness/) on sys.path


def floor_tool(name: str, d: Path, cmd: str, stdin: str = "", hosts: str = "floor_hosts.json") -> Tool:
    (d / f"{name}.cmd").write_text(cmd)
    argv = [PYTHON, str(BENCH / "floor.py"), str(d / hosts), str(d / f"{name}.cmd")]
    if stdin:
        (d / f"{name}.in").write_text(stdin)
        argv.append(str(d / f"{name}.in"))
    return Tool("floor", argv, d)


def replay_floor(name: str, d: Path, execs: list[list[str]]) -> Tool:
    """The floor of a bringup run: every command it ran on the host, each with what it sent on its stdin, in one
    command over one connection (the run lock's holder with its facts and the state read it read ahead included:
    a run that reads its state ahead sends no read script of its own)."""
    body = "".join(f"printf '%s' {shlex.quote(i)} | /bin/bash -c {shlex.quote(c)} >/dev/null 2>&1\n"
                   for c, i in execs) + "exit 0\n"
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
    run: the run imports in two threads at once (bringup/engine/ahead.py), and importtime, which nests by one global
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


def where(tool: Tool, host: harness.SandboxHost, execs: list[list[str]], runs: int, d: Path,
          alone: str | None = None) -> dict:
    """Imports of ``tool`` by package, and its remote part replayed (bench/where.py): handshake, each trip;
    ``alone``: one more script timed by itself (``alone`` in the result)."""
    (d / "where_host.json").write_text(json.dumps(
        {"port": host.port, "key": str(host.key_file), "known_hosts": str(host.known_hosts)}))
    (d / "where_scripts.json").write_text(json.dumps(execs + ([["sh -c 'eval \"$(cat)\"'", alone]] if alone else [])))
    cp = subprocess.run([PYTHON, str(BENCH / "where.py"), str(d / "where_host.json"), str(d / "where_scripts.json"),
                         str(runs)], capture_output=True, text=True, check=True)
    remote = json.loads(cp.stdout)
    if alone:
        remote["alone"] = remote["trips"].pop()
    return {"imports": import_breakdown(tool, runs), **remote, "load": os.getloadavg()[0]}
