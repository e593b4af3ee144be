"""A run imports the roles it runs: the others' defaults come from the roles' manifest (bringup.engine.roles), made
from exactly these files; anything changed, damaged or uncertain and every role is imported as before (issue 42).

Each load is a fresh process (what is imported is the point), with bytecode written as an installed copy
writes it, under a cache prefix of the test's own.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

LOAD = """if True:
    import json, sys
    from pathlib import Path
    from bringup.errors import BringupError
    from bringup.engine.roles import load_roles, merged_defaults, select_roles
    only = sys.argv[2] or None
    order, roles = load_roles(Path(sys.argv[1]), only=only)
    chosen = select_roles(order, roles, only)
    loaded = sorted(m for m in sys.modules if m.startswith("bringup_roles."))
    try:
        merged = merged_defaults([roles[r] for r in order])
    except BringupError as e:
        merged = str(e)
    use = sys.argv[3] if len(sys.argv) > 3 else ""
    if use:  # a role the run did not select, used whole: its module is imported then
        roles[use].validate({"b_port": 1})
        use = [roles[use].module.__name__, roles[use].has_resources, roles[use].facts]
    print(json.dumps({"order": order, "loaded": loaded, "merged": merged, "chosen": [r.name for r in chosen],
                      "used": use}))
"""

A = '"""Role a."""\nFACTS = ()\nDEFAULTS = {"a_size": 4}\n\ndef resources(host):\n    return []\n'
B = ('"""Role b: reads a typed variable."""\nfrom bringup.inventory.vars import RoleVars, want\nFACTS = ("system.thp",)\n\n'
     'class Vars(RoleVars):\n    b_port: int = want(PORT, "a port")\n    b_hosts: list[str] = want(["x"], "names")\n\n'
     'def resources(host):\n    return []\n')


def _project(tmp_path: Path, port: int = 8000) -> Path:
    roles = tmp_path / "proj" / "roles"
    roles.mkdir(parents=True)
    (roles / "__init__.py").write_text('ORDER = ["a", "b"]\n')
    (roles / "a.py").write_text(A)
    (roles / "b.py").write_text(B.replace("PORT", str(port)))
    return tmp_path / "proj"


def _load(tmp_path: Path, project: Path, only: str = "a", use: str = "", **env) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    r = subprocess.run([sys.executable, "-c", LOAD, str(project), only, use], cwd=REPO, capture_output=True,
                       text=True, timeout=120, env={**base, "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc"), **env})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def _manifest(tmp_path: Path) -> Path:
    found = list((tmp_path / "pyc").rglob("bringup-roles.*.json"))
    assert len(found) == 1, found
    return found[0]


FULL = {"a_size": 4, "b_port": 8000, "b_hosts": ["x"]}


def test_the_second_run_imports_only_the_selected_role_and_sees_every_default(tmp_path):
    project = _project(tmp_path)
    first = _load(tmp_path, project)
    assert first["loaded"] == ["bringup_roles.a", "bringup_roles.b"] and first["merged"] == FULL
    second = _load(tmp_path, project)
    assert second["loaded"] == ["bringup_roles.a"], second
    assert second["merged"] == FULL and second["order"] == ["a", "b"] and second["chosen"] == ["a"]
    # Every role asked for (no --roles): every role imported, as before.
    assert _load(tmp_path, project, only="")["loaded"] == ["bringup_roles.a", "bringup_roles.b"]


def test_a_role_not_selected_is_imported_when_used(tmp_path):
    project = _project(tmp_path)
    _load(tmp_path, project)
    got = _load(tmp_path, project, use="b")
    assert got["loaded"] == ["bringup_roles.a"]  # before it was used
    assert got["used"] == ["bringup_roles.b", True, ["system.thp"]]


def test_a_changed_role_file_is_imported_again_and_its_new_default_seen(tmp_path):
    project = _project(tmp_path)
    _load(tmp_path, project)
    # Another size: Python's own bytecode check (the source's mtime in seconds and its size) would take a file
    # rewritten within the same second at the same size for the one it compiled.
    (project / "roles" / "b.py").write_text(B.replace("PORT", "65001"))
    got = _load(tmp_path, project)
    assert got["loaded"] == ["bringup_roles.a", "bringup_roles.b"] and got["merged"]["b_port"] == 65001
    again = _load(tmp_path, project)
    assert again["loaded"] == ["bringup_roles.a"] and again["merged"]["b_port"] == 65001


def test_a_role_added_or_removed_imports_them_all(tmp_path):
    project = _project(tmp_path)
    _load(tmp_path, project)
    (project / "roles" / "__init__.py").write_text('ORDER = ["a", "b", "c"]\n')
    (project / "roles" / "c.py").write_text(A.replace("a_size", "c_size"))
    got = _load(tmp_path, project)
    assert got["loaded"] == ["bringup_roles.a", "bringup_roles.b", "bringup_roles.c"] and got["merged"]["c_size"] == 4


@pytest.mark.reliability(item=42, fault="damaged roles manifest (a saved file)", checks=("no hang",))
@pytest.mark.parametrize("damage", ["garbage", "not-utf8", "wrong-defaults-shape", "huge", "fifo", "link-to-zero",
                                    "other-path"])
def test_a_damaged_manifest_is_ignored(tmp_path, damage):
    project = _project(tmp_path)
    _load(tmp_path, project)
    m = _manifest(tmp_path)
    doc = json.loads(m.read_text())
    m.unlink()
    if damage == "garbage":
        m.write_text("{not json")
    elif damage == "not-utf8":
        m.write_bytes(b"\xff\xfe{}")
    elif damage == "wrong-defaults-shape":
        doc["roles"]["b"]["defaults"] = [1, 2]
        m.write_text(json.dumps(doc))
    elif damage == "huge":
        m.write_text(" " * (2 << 20) + json.dumps(doc))
    elif damage == "fifo":
        os.mkfifo(m)
    elif damage == "link-to-zero":
        m.symlink_to("/dev/zero")
    elif damage == "other-path":
        doc["roles"]["b"]["path"] = "/etc/passwd"
        m.write_text(json.dumps(doc))
    got = _load(tmp_path, project)
    assert got["loaded"] == ["bringup_roles.a", "bringup_roles.b"] and got["merged"] == FULL


def test_no_manifest_where_no_bytecode_is_written(tmp_path):
    project = _project(tmp_path)
    for _ in range(2):
        got = _load(tmp_path, project, PYTHONDONTWRITEBYTECODE="1")
        assert got["loaded"] == ["bringup_roles.a", "bringup_roles.b"] and got["merged"] == FULL
    assert not list((tmp_path / "pyc").rglob("bringup-roles.*.json"))


def test_defaults_json_would_change_keep_every_role_imported(tmp_path):
    project = _project(tmp_path)
    (project / "roles" / "a.py").write_text(A.replace("{\"a_size\": 4}", "{\"a_size\": (4, 5)}"))
    for _ in range(2):
        got = _load(tmp_path, project)
        assert got["loaded"] == ["bringup_roles.a", "bringup_roles.b"] and got["merged"]["a_size"] == [4, 5]


def test_roles_whose_defaults_disagree_are_refused_at_every_run(tmp_path):
    project = _project(tmp_path)
    (project / "roles" / "a.py").write_text(A.replace("a_size", "b_port"))
    for _ in range(2):
        got = _load(tmp_path, project)
        assert got["loaded"] == ["bringup_roles.a", "bringup_roles.b"]
        assert "roles a and b give b_port different defaults" in got["merged"]


def test_a_run_of_every_role_leaves_a_current_manifest_as_it_is(tmp_path):
    project = _project(tmp_path)
    _load(tmp_path, project, only="")
    m = _manifest(tmp_path)
    before = m.stat().st_mtime_ns, m.stat().st_ino
    _load(tmp_path, project, only="")
    assert (m.stat().st_mtime_ns, m.stat().st_ino) == before
    assert _load(tmp_path, project)["loaded"] == ["bringup_roles.a"]
