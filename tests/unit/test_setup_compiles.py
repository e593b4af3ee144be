"""The README's set-up (``bash scripts/setup.sh``: an editable install) leaves the checkout compiled: pip
compiles what it copies, not a checkout, and a run that finds no bytecode compiles bringup and the roles
again (~100 ms of every run, issue 42).  The set-up's steps after the install run here on a copy of the
checkout, as it runs them."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"


def _after_install() -> str:
    lines = SETUP.read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line and "-e" in line)
    return "\n".join(lines[install + 1:])


def test_the_setup_compiles_what_the_runs_import_and_writes_the_roles_manifest(tmp_path):
    steps = _after_install()
    assert "compileall" in steps, "scripts/setup.sh no longer compiles the checkout after its editable install"
    copy = tmp_path / "checkout"
    copy.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("bringup", "roles", "harness"):
        shutil.copytree(REPO / folder, copy / folder, ignore=ignore)
    shutil.copy2(REPO / "tasks.py", copy / "tasks.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", steps], cwd=copy, capture_output=True, text=True,
                       timeout=300, env={**env, "PYTHONPATH": str(copy)})
    assert r.returncode == 0, r.stderr
    sources = [p for folder in ("bringup", "roles") for p in (copy / folder).rglob("*.py")] + [copy / "tasks.py"]
    assert len(sources) > 100
    uncompiled = [str(p.relative_to(copy)) for p in sources
                  if not Path(importlib.util.cache_from_source(str(p))).is_file()]
    assert not uncompiled, uncompiled
    assert list((copy / "roles" / "__pycache__").glob("bringup-roles.*.json")), "no roles manifest written"
