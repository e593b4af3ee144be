"""The engine end to end on `ansible_connection: local`, with roles of a test project.

These roles write under a temp folder only, so the control machine itself is
the host; the checks read the files directly.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from .helpers import invoke, last_report, recap, role_project

ROLE = '''
from bringup.ssh.command import sh
from bringup.resources import Command, File

DEFAULTS = {"greeting": "hello"}
HANDLERS = {"log change": [sh("echo changed >> %s", "{root}/handler.log")]}

def resources(host):
    return [
        File("{root}/out/a.conf", content=host.render("demo/a.conf.j2", greeting=host.vars["greeting"]),
             owner=None, group=None, notify=["log change"]),
        File("{root}/out/b.conf", content="static\\n", owner=None, group=None, notify=["log change"]),
        Command("fail on demand", "echo 'no space left' >&2; exit 3", onlyif=sh("test -e %s", "{root}/fail")),
        File("{root}/out/c.conf", content="after\\n", owner=None, group=None),
    ]
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "__init__.py").write_text("ORDER = ['demo']\n")
    (tmp_path / "roles" / "demo.py").write_text(ROLE.replace("{root}", str(tmp_path)))
    (tmp_path / "templates" / "demo").mkdir(parents=True)
    (tmp_path / "templates" / "demo" / "a.conf.j2").write_text("greeting = {{ greeting }}\n")
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))
    return tmp_path


def test_handlers_run_once_after_the_role_and_only_on_change(project):
    r = invoke("provision", "--host", "me", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (project / "out" / "a.conf").read_text() == "greeting = hello\n"
    assert (project / "handler.log").read_text() == "changed\n"  # two notifiers, one run
    assert recap(r.stdout)["me"] == {"ok": 5, "changed": 4, "failed": 0, "skipped": 0, "unreachable": 0}
    r = invoke("provision", "--host", "me", cwd=project)
    assert recap(r.stdout)["me"]["changed"] == 0
    assert (project / "handler.log").read_text() == "changed\n"


def test_check_mode_writes_nothing(project):
    r = invoke("provision", "--host", "me", "--check", "--diff", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (project / "out").exists() and not (project / "handler.log").exists()
    assert "+greeting = hello" in r.stdout and "would change" in r.stdout


def test_set_overrides_role_default(project):
    invoke("provision", "--host", "me", "--set", "greeting=bonjour", cwd=project)
    assert (project / "out" / "a.conf").read_text() == "greeting = bonjour\n"


def test_failing_step_is_attributed_and_stops_the_role(project):
    (project / "fail").touch()
    r = invoke("provision", "--host", "me", cwd=project)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "command:fail on demand  exit 3: no space left" in r.stdout
    assert recap(r.stdout)["me"]["failed"] == 1
    rep = {x["id"]: x for x in last_report(project)["hosts"][0]["resources"]}
    assert rep[f"file:{project}/out/c.conf"]["status"] == "skipped"
    assert "earlier step" in rep[f"file:{project}/out/c.conf"]["reason"]
    assert not (project / "out" / "c.conf").exists()
    assert (project / "out" / "a.conf").exists()  # steps before the failure stand


def test_undefined_template_variable_is_one_line(project):
    (project / "templates" / "demo" / "a.conf.j2").write_text("x = {{ nope }}\n")
    r = invoke("provision", "--host", "me", cwd=project)
    assert r.returncode == 2
    assert "template demo/a.conf.j2: 'nope' is undefined" in r.stdout
    assert not (project / "out").exists()


def test_unknown_role_and_bad_forks(project):
    r = invoke("provision", "--host", "me", "--roles", "dem", cwd=project)
    assert r.returncode == 1 and r.stderr.strip() == "error: --roles: unknown role 'dem' (did you mean demo?); known: demo"
    r = invoke("provision", "--host", "me", "--forks", "0", cwd=project)
    assert r.returncode == 1 and "--forks" in r.stderr


def test_unknown_host_one_line(project):
    r = invoke("provision", "--host", "mee", cwd=project)
    assert r.returncode == 1
    assert r.stderr.strip() == f"error: hosts: unknown host 'mee'; did you mean me? (`invoke hosts` lists them)"


def test_check_mode_plans_every_role_past_a_failing_one(project):
    (project / "roles" / "__init__.py").write_text("ORDER = ['broken', 'demo']\n")
    (project / "roles" / "broken.py").write_text(
        "from bringup.resources import File\n"
        f"def resources(host):\n    return [File({str(project)!r}, content='x')]\n")  # a folder: unplannable
    r = invoke("provision", "--host", "me", "--check", cwd=project)
    assert r.returncode == 2
    roles = {x["role"] for x in last_report(project)["hosts"][0]["resources"]}
    assert roles == {"broken", "demo"}  # demo was still planned
    r = invoke("provision", "--host", "me", cwd=project)
    assert {x["role"] for x in last_report(project)["hosts"][0]["resources"]} == {"broken"}
    assert not (project / "out").exists()  # a real run stops at the failed role


class _Local:
    """The control machine as a host of role_project's inventory."""

    @staticmethod
    def inventory_vars() -> dict:
        return {"ansible_connection": "local"}


def test_a_package_role_split_by_concern_converges_and_audits(tmp_path):
    """roles/<name>/__init__.py with its concerns in modules of its own (relative imports), beside a one-file role."""
    root = tmp_path / "p"
    root.mkdir()
    package = {
        "__init__.py": "from .files import config\nfrom .runtime import promises\n\nFACTS = ()\n"
                       "HANDLERS = {'log change': [%r]}\n\n"
                       "def resources(host):\n    return config(host)\n\n"
                       "def audit(host):\n    return promises(host)\n" % f"echo changed >> {root}/handler.log",
        "files.py": "from bringup.resources import File\n\n"
                    "def config(host):\n    return [File(%r, content='split\\n', owner=None, group=None, "
                    "notify=['log change'])]\n" % f"{root}/out/pkg.conf",
        "runtime.py": "from bringup.engine.auditkit import Expect\n\n"
                      "def promises(host):\n    return [Expect('pkg.conf says split', 'cat %s', "
                      "lambda out: None if out.strip() == 'split' else f'pkg.conf says {out.strip()}, want split')]\n"
                      % f"{root}/out/pkg.conf",
    }
    one = "from bringup.resources import Directory\nFACTS = ()\n\ndef resources(host):\n" \
          f"    return [Directory({str(root / 'out')!r}, owner=None, group=None)]\n"
    role_project(root, {"one": one, "split": package}, {"me": _Local()})
    r = invoke("provision", "--host", "me", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "out" / "pkg.conf").read_text() == "split\n" and (root / "handler.log").read_text() == "changed\n"
    r = invoke("provision", "--host", "me", cwd=root)
    assert recap(r.stdout)["me"]["changed"] == 0, r.stdout + r.stderr
    r = invoke("audit", "--host", "me", cwd=root)
    assert r.returncode == 0 and "me : passed=3 failed=0" in r.stdout, r.stdout + r.stderr
