"""The NVIDIA roles in check mode on `ansible_connection: local`: this control machine has no GPU
and PID 1 is not systemd, like the H200 host the lead checks by hand.  Nothing may be written and
nothing may crash: plans skip or fail with their reasons.  Plus the engine's upload step, locally.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from .helpers import invoke, last_report, recap

ROLES = "nvidia_driver,docker,container_toolkit,dcgm_exporter"


def pid1() -> str:
    return Path("/proc/1/comm").read_text().strip()


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "hosts").write_text(yaml.safe_dump(
        {"all": {"hosts": {"me": {"ansible_connection": "local", "gpu_profile": "cpu"}}}}))
    return tmp_path


def listing() -> list[str]:
    return sorted(p.name for p in Path("/etc/apt/sources.list.d").iterdir())


def test_cpu_profile_skips_the_gpu_roles(project):
    r = invoke("provision", "--host", "me", "--roles", ROLES, "--check", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    res = last_report(project)["hosts"][0]["resources"]
    skipped = {x["role"] for x in res if x["status"] == "skipped" and "no NVIDIA GPU" in (x["reason"] or "")}
    assert skipped == {"nvidia_driver", "container_toolkit", "dcgm_exporter"}


def test_gpu_profile_without_gpu_fails_clearly(project):
    r = invoke("provision", "--host", "me", "--roles", ROLES, "--check", "--set", "gpu_profile=h200", cwd=project)
    assert r.returncode == 2
    assert "gpu_profile is h200 but this host has no NVIDIA GPU" in r.stdout and "Traceback" not in r.stdout


def test_check_mode_plans_without_systemd_and_writes_nothing(project):
    before = listing()
    r = invoke("provision", "--host", "me", "--roles", ROLES, "--check", "--verbose",
               "--set", "nvidia_without_gpu=install", cwd=project)
    assert "Traceback" not in r.stdout + r.stderr and "internal error" not in r.stdout
    assert recap(r.stdout)["me"]["unreachable"] == 0
    if pid1() != "systemd":
        assert f"systemd is not running (PID 1 is {pid1()})" in r.stdout
    assert "would change" in r.stdout and "reboot required: driver branch 550 not loaded" in r.stdout
    assert listing() == before
    assert not Path("/etc/apt/preferences.d/bringup-nvidia-driver").exists()


UPLOAD_ROLE = '''
from bringup.resources.base import Plan, Resource, Upload
from bringup.resources import File

class Pushed(Resource):
    kind = "pushed"
    def read(self):
        return "cat {out} 2>/dev/null || true"
    def plan(self, current):
        if current.strip() == "payload":
            return Plan.noop("already there")
        return Plan(changes={{"data": ("absent", "pushed")}}, upload=Upload(["printf", "payload"], "cat > {out}"))

def resources(host):
    return [File("{before}", content="1\\n", owner=None, group=None), Pushed("data"),
            File("{after}", content="2\\n", owner=None, group=None)]
'''


def test_upload_streams_local_output_in_order(tmp_path: Path):
    # roles/ AND templates/: with either missing the repo's own roles would run on this machine.
    (tmp_path / "roles").mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "roles" / "__init__.py").write_text("ORDER = ['up']\n")
    (tmp_path / "roles" / "up.py").write_text(UPLOAD_ROLE.format(
        out=tmp_path / "out", before=tmp_path / "before", after=tmp_path / "after"))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))
    r = invoke("provision", "--host", "me", "--roles", "up", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "out").read_text() == "payload" and (tmp_path / "after").exists()
    assert recap(r.stdout)["me"]["changed"] == 3
    r = invoke("provision", "--host", "me", "--roles", "up", cwd=tmp_path)
    assert recap(r.stdout)["me"]["changed"] == 0
