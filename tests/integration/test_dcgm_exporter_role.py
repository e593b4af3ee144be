"""The whole NVIDIA stack on one sandbox host: nvidia_driver (with its reboot), docker,
container_toolkit and dcgm_exporter, from the signed `file:` mirror of TEST DOUBLES and a
TEST DOUBLE exporter image pushed from this machine (docker save | ssh | docker load).
"""
from __future__ import annotations

import json

import pytest

from harness import write_inventory
from roles.dcgm_exporter import CSV, DEFAULT_COUNTERS

from harness.doubles.dcgm_double import TAG, build_image
from .helpers import invoke, last_report, recap, free_port
from harness.doubles.nvidia_mirror import build_mirror, running_kernel

pytestmark = pytest.mark.integration

H = "gpu-stack-01"
ROLES = "nvidia_driver,docker,container_toolkit,dcgm_exporter"


@pytest.fixture(scope="module")
def host(sandbox_host_factory):
    return sandbox_host_factory(H, port=free_port())  # fixed: survives the reboot


@pytest.fixture(scope="module")
def image_id(tmp_path_factory):
    return build_image(tmp_path_factory.mktemp("dcgm-image"))


@pytest.fixture(scope="module")
def project(host, image_id, tmp_path_factory):
    d = tmp_path_factory.mktemp("stack")
    mirror = build_mirror(d / "build", running_kernel(host))
    mirror.copy_to(host)
    write_inventory(d / "hosts", [host], extra_vars={
        "nvidia_without_gpu": "install",
        "nvidia_driver_source": "ubuntu-server",
        "nvidia_driver_expected_gpus": 1,
        "docker_compose": "none",
        "dcgm_exporter_image": TAG,
        "image_transfer": "push",
        **mirror.inventory_vars(),
    })
    return d


def metrics(host) -> str:
    return host.exec(["curl", "-fsS", "http://127.0.0.1:9400/metrics"]).stdout


def container(host) -> dict:
    return json.loads(host.exec(["docker", "inspect", "dcgm-exporter"]).stdout)[0]


def test_whole_stack_converges_with_reboot(host, project, image_id):
    r = invoke("provision", "--host", H, "--roles", ROLES, "--allow-reboot", cwd=project, timeout=500)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = last_report(project)["hosts"][0]
    assert rep["rebooted"] is True and rep["status"] == "ok"
    body = metrics(host)
    for name, typ, _ in DEFAULT_COUNTERS:
        assert f"# TYPE {name} {typ}\n" in body
    assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0"' in body
    c = container(host)
    assert c["Image"] == image_id  # the control machine's image, pushed
    assert c["HostConfig"]["CapAdd"] == ["SYS_ADMIN"]
    assert c["HostConfig"]["DeviceRequests"][0]["Capabilities"] == [["gpu"]]  # --gpus all
    assert c["HostConfig"]["PortBindings"]["9400/tcp"][0]["HostPort"] == "9400"
    assert host.exec(["systemctl", "is-enabled", "dcgm-exporter"]).stdout.strip() == "enabled"
    image = next(x for x in rep["resources"] if x["id"] == f"image:{TAG}")
    assert image["status"] == "changed" and "pushed" in image["changes"]["image"][1]


def test_rerun_is_a_noop_and_pushes_nothing(host, project, image_id):
    cid = container(host)["Id"]
    r = invoke("provision", "--host", H, "--roles", ROLES, "--verbose", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[H]["changed"] == 0
    assert f"host already has {TAG} ({image_id[:19]})" in r.stdout
    assert last_report(project)["hosts"][0]["round_trips"] == 2
    assert container(host)["Id"] == cid


def test_counters_from_inventory_restart_the_exporter_once(host, project):
    cid = container(host)["Id"]
    extra = "dcgm_exporter_extra_counters=[[DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).]]"
    r = invoke("provision", "--host", H, "--roles", "dcgm_exporter", "--set", extra, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz)." in host.exec(["cat", CSV]).stdout
    assert "# TYPE DCGM_FI_DEV_MEM_CLOCK gauge" in metrics(host)
    assert container(host)["Id"] != cid
    cid = container(host)["Id"]
    r = invoke("provision", "--host", H, "--roles", "dcgm_exporter", "--set", extra, cwd=project)
    assert recap(r.stdout)[H]["changed"] == 0 and container(host)["Id"] == cid


def test_image_missing_on_the_control_machine_is_a_clear_error(host, project):
    r = invoke("provision", "--host", H, "--roles", "dcgm_exporter",
               "--set", "dcgm_exporter_image=bringup-test-double/absent:0", cwd=project)
    assert r.returncode == 2
    assert "image bringup-test-double/absent:0 is not on the control machine" in r.stdout


def test_pending_reboot_stops_the_exporter_role_with_the_reason(host, project):
    cid = container(host)["Id"]
    r = invoke("provision", "--host", H, "--roles", ROLES,
               "--set", "nvidia_driver_version=550.127.05-0ubuntu0.24.04.1", cwd=project, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reboot required: driver 550.144.03 is loaded, branch 550 (550.127.05) is wanted" in r.stdout
    assert "not run: the host must reboot first (driver 550.144.03 is loaded" in r.stdout
    skipped = [x for x in last_report(project)["hosts"][0]["resources"] if x["role"] == "dcgm_exporter"]
    assert skipped and all(x["status"] == "skipped" for x in skipped)
    assert container(host)["Id"] == cid  # left alone


@pytest.mark.parametrize("value", ["dcgm_exporter_port=0", "image_transfer=scp",
                                   "dcgm_exporter_extra_counters=[[GPU_UTIL, gauge, x]]",
                                   "dcgm_exporter_image='nvcr.io/x;reboot'"])
def test_bad_input_is_one_line(host, project, value):
    r = invoke("provision", "--host", H, "--roles", "dcgm_exporter", "--set", value, cwd=project)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: host {H}, role dcgm_exporter:"), r.stderr


def test_audit_passes_then_names_a_stopped_exporter(host, project):
    """`invoke audit --roles dcgm_exporter`: green as provisioned, red (host and item) once the exporter stops."""
    # The inventory's own state (earlier tests left extra counters and a pending driver change behind).
    r = invoke("provision", "--host", H, "--roles", "dcgm_exporter", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    r = invoke("audit", "--host", H, "--roles", "dcgm_exporter", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    # On a cpu profile without a GPU the role skips: its promise is no exporter, which this host breaks.
    r = invoke("audit", "--host", H, "--roles", "dcgm_exporter", "--set", "nvidia_without_gpu=skip",
               "--set", "gpu_profile=cpu", cwd=project)
    assert r.returncode != 0, r.stdout
    assert f"{H}: /etc/systemd/system/dcgm-exporter.service exists but the role skips this host (no NVIDIA GPU" \
        in r.stdout
    assert f"{H}: container dcgm-exporter exists but the role skips this host" in r.stdout
    host.exec(["systemctl", "stop", "dcgm-exporter"])
    try:
        r = invoke("audit", "--host", H, "--roles", "dcgm_exporter", cwd=project)
        assert r.returncode != 0, r.stdout
        assert f"{H}: unit dcgm-exporter is inactive, want active" in r.stdout
        # One cause, one line: the port and the counters follow from the unit and are not judged.
        assert "nothing listens on TCP port 9400" not in r.stdout and "carries no" not in r.stdout, r.stdout
    finally:
        r = invoke("provision", "--host", H, "--roles", "dcgm_exporter", cwd=project)
        assert r.returncode == 0, r.stdout + r.stderr
    assert invoke("audit", "--host", H, "--roles", "dcgm_exporter", cwd=project).returncode == 0
