"""Run the tool as an operator would: a subprocess of `invoke` (or `bringup`)."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RECAP = re.compile(r"^(?P<host>\S+)\s+: ok=(?P<ok>\d+) changed=(?P<changed>\d+) failed=(?P<failed>\d+) "
                   r"skipped=(?P<skipped>\d+) unreachable=(?P<unreachable>\d+)(?:  \(.*\))?$", re.M)


def invoke(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``invoke <args>`` with the repo's tasks.py, from ``cwd`` (where reports/ lands)."""
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def recap(out: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP lines, by host."""
    return {m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"} for m in RECAP.finditer(out)}


def last_report(cwd: Path) -> dict:
    reports = sorted((cwd / "reports").glob("*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(reports[-1].read_text())


def free_port() -> int:
    """A free TCP port on 127.0.0.1: a fixed SSH port survives a host's reboot (container restart)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1: every socket stays bound until all are chosen, so the kernel
    cannot hand the same port out twice (three separate ``free_port()`` calls can, and did: Triton then refused
    HTTP and gRPC on one port)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def role_project(path: Path, roles: dict[str, str | dict[str, str]], hosts: dict) -> Path:
    """A project folder of its own: ``roles`` (name -> module source, or a package role's {file name: source},
    run in that order), an empty templates folder and an inventory of ``hosts`` (name -> sandbox host, or
    anything with ``inventory_vars()``); returns ``path``."""
    import yaml

    (path / "roles").mkdir()
    (path / "roles" / "__init__.py").write_text(f"ORDER = {list(roles)!r}\n")
    for name, source in roles.items():
        if isinstance(source, dict):
            (path / "roles" / name).mkdir()
            for file, text in source.items():
                (path / "roles" / name / file).write_text(text)
        else:
            (path / "roles" / f"{name}.py").write_text(source)
    (path / "templates").mkdir()
    (path / "hosts").write_text(yaml.safe_dump(
        {"all": {"hosts": {name: h.inventory_vars() for name, h in hosts.items()}}}))
    return path


def install_copy(tmp_path: Path) -> Path:
    """A pip install of this checkout's bringup (the package, its roles and templates) into a fresh venv under
    ``tmp_path`` that sees the system's packages; returns the venv."""
    import shutil

    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("bringup", "roles", "templates"):
        shutil.copytree(REPO / part, src / part, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", src)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(src)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return venv
