"""bringup's modules and the project's roles keep their bytecode cache although Invoke turns bytecode
writing off for its process (they are imported by the tasks, after Invoke set the flag)."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# What `invoke provision` does: Invoke sets sys.dont_write_bytecode (no --write-pyc), imports the checkout's
# tasks.py (the program's start), then the task loads the project's roles.
LOAD = ("import sys; sys.dont_write_bytecode = True\n"
        "import tasks\nfrom pathlib import Path\nfrom bringup.engine.roles import load_roles\n"
        "order, roles = load_roles(Path(sys.argv[1]))\nassert order == ['only']\n")


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
    cached = sorted(p.name for p in (project / "roles" / "__pycache__").iterdir())
    # Its bytecode, and beside it the roles' manifest (bringup.engine.roles: the defaults of roles a run does not import).
    assert [n.split(".")[0] for n in cached if n.endswith(".pyc")] == ["only"]
    assert [n.split(".")[0] for n in cached if not n.endswith(".pyc")] == ["bringup-roles"]


def test_the_interpreters_own_setting_still_wins(tmp_path):
    project = _project(tmp_path)
    _load(project, PYTHONDONTWRITEBYTECODE="1")
    assert not (project / "roles" / "__pycache__").exists()


def _flag_after(argv_code: str, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run([sys.executable, "-c", argv_code], cwd=REPO, env={**base, **env}, capture_output=True,
                          text=True, check=True, timeout=120).stdout.strip()


def test_the_bringup_program_writes_bytecode_after_invoke_turned_it_off():
    # `bringup hosts --help`: Invoke's parse_core sets the flag, bringup's program sets it back.
    probe = ("import sys\nfrom bringup.cli import program\nprogram.run(['bringup', 'hosts', '--help'], exit=False)\n"
             "sys.stdout.write(f'\\ndont_write {sys.dont_write_bytecode}')\n")
    assert _flag_after(probe).splitlines()[-1] == "dont_write False"
    assert _flag_after(probe, PYTHONDONTWRITEBYTECODE="1").splitlines()[-1] == "dont_write True"
