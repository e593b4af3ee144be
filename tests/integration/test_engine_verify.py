"""The role-level verify/rollback hook, end to end on `ansible_connection: local`.

The demo role writes a "revision" file; its verify reads it back through the
transport and refuses revision "bad"; its rollback restores the copy that
verify saved after the last good revision.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .helpers import invoke, last_report, recap

ROLE = '''
from bringup.ssh.command import sh
from bringup.errors import BringupError
from bringup.resources import File

DEFAULTS = {"rev": "one"}
LIVE, GOOD = "{root}/live.txt", "{root}/good.txt"

def resources(host):
    return [File(LIVE, content=host.vars["rev"] + "\\n", owner=None, group=None, backup=False)]

def verify(host, t):
    with open("{root}/verify.log", "a") as f:
        f.write("verify\\n")
    got = t.run_script(sh("cat -- %s", LIVE)).stdout.strip()
    if got == "bad":
        raise BringupError(f"revision {got} does not serve")
    t.run_script(sh("cp -- %s %s", LIVE, GOOD))
    return f"revision {got} serves"

def rollback(host, t):
    r = t.run_script(sh("cp -- %s %s && cat -- %s", GOOD, LIVE, LIVE))
    return f"restored revision {r.stdout.strip()}"
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "__init__.py").write_text("ORDER = ['demo']\n")
    (tmp_path / "roles" / "demo.py").write_text(ROLE.replace("{root}", str(tmp_path)))
    (tmp_path / "templates").mkdir()
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))
    return tmp_path


def test_verify_runs_only_after_a_change_and_rollback_restores(project):
    r = invoke("provision", "--host", "me", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    verify = [x for x in last_report(project)["hosts"][0]["resources"] if x["id"] == "verify:demo"]
    assert verify and verify[0]["status"] == "ok" and verify[0]["reason"] == "revision one serves"
    assert (project / "verify.log").read_text() == "verify\n"

    r = invoke("provision", "--host", "me", cwd=project)  # nothing changed: no verify
    assert r.returncode == 0 and recap(r.stdout)["me"]["changed"] == 0
    assert (project / "verify.log").read_text() == "verify\n"

    r = invoke("provision", "--host", "me", "--set", "rev=bad", cwd=project)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "revision bad does not serve; rolled back: restored revision one" in r.stdout
    assert (project / "live.txt").read_text() == "one\n"
    assert recap(r.stdout)["me"]["failed"] == 1

    r = invoke("provision", "--host", "me", "--check", "--set", "rev=two", cwd=project)
    assert r.returncode == 0 and (project / "verify.log").read_text().count("verify") == 2  # check mode: none
