"""cpu_tuning for real: the skip paths on this VM and a sandbox host, the write path on a sysfs fixture tree."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness import SANDBOX_VARS, write_inventory
from roles.cpu_tuning import CPUSET_FILE, LATENCY_SCRIPT, LATENCY_UNIT, PLAN_FILE

from .helpers import invoke, last_report, recap

pytestmark = pytest.mark.integration

# ---------------------------------------------------------------- sysfs fixture tree, local

ROLE = '''
from bringup.resources.cpu import CpuFreq, SysfsChoice

def resources(host):
    root = host.vars["sysfs_root"]
    return [CpuFreq("performance", epp="performance", root=root),
            SysfsChoice("/sys/kernel/mm/transparent_hugepage/enabled", "never", root=root)]
'''


def make_tree(root: Path, cpus: int = 4) -> None:
    """What intel_pstate shows under /sys (powersave + balance_performance: the distro default)."""
    for c in range(cpus):
        d = root / f"sys/devices/system/cpu/cpu{c}/cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("powersave\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
        (d / "energy_performance_preference").write_text("balance_performance\n")
    t = root / "sys/kernel/mm/transparent_hugepage"
    t.mkdir(parents=True)
    (t / "enabled").write_text("always [madvise] never\n")


@pytest.fixture()
def tree_project(tmp_path: Path) -> Path:
    # roles/ AND templates/: otherwise the checkout's real roles would run on this machine.
    (tmp_path / "roles").mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "roles" / "__init__.py").write_text("ORDER = ['cpu_fixture']\n")
    (tmp_path / "roles" / "cpu_fixture.py").write_text(ROLE)
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))
    return tmp_path


def test_governor_epp_and_thp_written_on_a_fixture_tree(tree_project):
    root = tree_project / "sysfs"
    make_tree(root)
    r = invoke("provision", "--host", "me", "--set", f"sysfs_root={root}", cwd=tree_project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [x["role"] for x in last_report(tree_project)["hosts"][0]["resources"]] == ["cpu_fixture"] * 2
    assert "governor: powersave → performance on 4 CPU(s)" in r.stdout
    for c in range(4):
        d = root / f"sys/devices/system/cpu/cpu{c}/cpufreq"
        assert (d / "scaling_governor").read_text() == "performance\n"
        assert (d / "energy_performance_preference").read_text() == "performance\n"
    # A plain file does not re-bracket like the kernel: the write is what is checked.
    assert (root / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "never\n"
    r = invoke("provision", "--host", "me", "--set", f"sysfs_root={root}", cwd=tree_project)
    assert recap(r.stdout)["me"]["changed"] == 0


def test_this_vm_has_no_cpufreq_and_says_so(tree_project):
    assert not list(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"))
    r = invoke("plan", "--host", "me", "--set", "sysfs_root=", "--verbose", cwd=tree_project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no cpufreq on this host" in r.stdout


# ---------------------------------------------------------------- the role on a sandbox host

@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("cpu-proj")
    write_inventory(d / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    return d


def run(host, project, *extra, check=False):
    r = invoke("plan" if check else "provision", "--host", host.name, "--inventory", "hosts",
               "--roles", "cpu_tuning", *extra, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_sandbox_check_mode_changes_nothing(sandbox_host, project):
    r = run(sandbox_host, project, check=True)
    assert "would change" in r.stdout
    for p in (CPUSET_FILE, PLAN_FILE, LATENCY_SCRIPT):
        assert sandbox_host.exec(["test", "-e", p], check=False).returncode == 1


def test_sandbox_apply_skips_what_a_container_cannot_do(sandbox_host, project):
    r = run(sandbox_host, project)
    res = {x["id"]: x for x in last_report(project)["hosts"][0]["resources"]}
    assert res["cpufreq:governor=performance,epp=performance"]["status"] == "skipped"
    assert "no cpufreq" in res["cpufreq:governor=performance,epp=performance"]["reason"]
    thp = res["sysfs:/sys/kernel/mm/transparent_hugepage/enabled"]
    assert thp["status"] in ("skipped", "ok") and thp["reason"]
    svc = res[f"service:{LATENCY_UNIT}"]
    assert svc["status"] == "skipped" and "ConditionPathExists=/dev/cpu_dma_latency" in svc["reason"]
    assert sandbox_host.exec(["systemctl", "is-enabled", LATENCY_UNIT]).stdout.strip() == "enabled"
    plan = json.loads(sandbox_host.exec(["cat", PLAN_FILE]).stdout)
    assert plan["triton_cpuset"] == sandbox_host.exec(["cat", CPUSET_FILE]).stdout.strip() == ""  # no GPU here
    assert plan["nodes"][0]["irq_cpus"]
    # 10 us as a native int32, in octal escapes for printf.
    assert "printf '\\012\\000\\000\\000' >&3" in sandbox_host.exec(["cat", LATENCY_SCRIPT]).stdout
    assert recap(r.stdout)[sandbox_host.name]["failed"] == 0


def test_sandbox_rerun_is_a_noop(sandbox_host, project):
    r = run(sandbox_host, project)
    assert recap(r.stdout)[sandbox_host.name]["changed"] == 0


def test_latency_holder_really_sets_pm_qos(tmp_path):
    """The rendered holder script, run on this VM (which has /dev/cpu_dma_latency): PM QoS reads back 7."""
    import struct
    import subprocess
    import time

    from bringup.engine.templates import Templates
    from tests.integration.helpers import REPO

    text = Templates(REPO / "templates").render("cpu_tuning/bringup-cpu-dma-latency.sh.j2", us=7,
                                                octal="".join(f"\\{b:03o}" for b in struct.pack("=i", 7)))
    script = tmp_path / "holder.sh"
    script.write_text(text)
    before = struct.unpack("=i", Path("/dev/cpu_dma_latency").read_bytes()[:4])[0]
    p = subprocess.Popen(["sh", str(script)])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            now = struct.unpack("=i", Path("/dev/cpu_dma_latency").read_bytes()[:4])[0]
            if now == 7:
                break
            time.sleep(0.05)
        assert now == 7, (before, now)
    finally:
        p.terminate()
        p.wait(5)


def test_audit_passes_then_names_drift(sandbox_host, project):
    audit = ["audit", "--host", sandbox_host.name, "--roles", "cpu_tuning"]
    r = invoke(*audit, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    sandbox_host.exec(f"echo 0-3 > {CPUSET_FILE} && systemctl disable --quiet {LATENCY_UNIT}")
    try:
        r = invoke(*audit, cwd=project)
        assert r.returncode != 0
        assert f"{sandbox_host.name}: {CPUSET_FILE} has 0-3, which the role does not write" in r.stdout, r.stdout
        assert f"{sandbox_host.name}: service:{LATENCY_UNIT}: enabled is disabled, want enabled" in r.stdout, r.stdout
    finally:
        run(sandbox_host, project)
    assert invoke(*audit, cwd=project).returncode == 0
