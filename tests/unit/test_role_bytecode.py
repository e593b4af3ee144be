"""Role modules keep their bytecode cache although Invoke turns bytecode writing off for its process."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# What `invoke provision` / `bringup provision` do: Invoke sets sys.dont_write_bytecode (no --write-pyc), then
# the task loads the project's roles.
LOAD = ("import sys; sys.dont_write_bytecode = True\n"
        "from pathlib import Path\nfrom bringup.roles import load_roles\n"
        "order, roles = load_roles(Path(sys.argv[1]))\n"
        "assert order == ['only'] and sys.dont_write_bytecode is True\n")


def _project(tmp_path: Path) -> Path:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "only.py").write_text('"""A role."""\nFACTS = ()\n\ndef resources(host):\n    return []\n')
    return tmp_path


def _load(project: Path, **env) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run([sys.executable, "-c", LOAD, str(project)], cwd=REPO, env={**base, **env}, check=True,
                   timeout=120)


def test_role_modules_are_cached_like_any_module(tmp_path):
    project = _project(tmp_path)
    _load(project)
    assert [p.name.split(".")[0] for p in (project / "roles" / "__pycache__").iterdir()] == ["only"]


def test_the_interpreters_own_setting_still_wins(tmp_path):
    project = _project(tmp_path)
    _load(project, PYTHONDONTWRITEBYTECODE="1")
    assert not (project / "roles" / "__pycache__").exists()
