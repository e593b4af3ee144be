"""The irq_affinity role for real: IRQ writes on this machine, irqbalance and units on a sandbox host.

IRQ affinities are the kernel's, machine-wide: a sandbox container sees (and,
with its capabilities, writes) this machine's /proc/irq, and so does
``ansible_connection: local``.  Every affinity is saved before the module and
restored after it, whatever happens.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from bringup.facts.base import parse_cpulist
from bringup.resources.irq import REFUSED_FILE
from harness import SANDBOX_VARS, write_inventory
from roles.irq_affinity import PLAN_FILE, SCRIPT, UNIT, UNIT_FILE

from .helpers import invoke, last_report, recap

pytestmark = pytest.mark.integration

ENV_FILE = "/etc/default/irqbalance"
#: The local runs touch IRQs only: no irqbalance, no unit files on this machine.  This CI VM owns its IRQs
#: (virtio devices, its own kernel) but carries container markers (/.dockerenv; systemd-detect-virt says
#: docker), so it opts in, as an operator would on such a machine.
LOCAL = ["--roles", "irq_affinity", "--set", "irqbalance=unmanaged", "--set", "irq_affinity_persist=false",
         "--set", "irq_affinity_in_containers=true"]


def affinities() -> dict[int, str]:
    out = {}
    for d in Path("/proc/irq").iterdir():
        f = d / "smp_affinity_list"
        if d.name.isdigit() and f.exists():
            out[int(d.name)] = f.read_text().strip()
    return out


@pytest.fixture(scope="module", autouse=True)
def restore_irqs():
    saved = affinities()
    had_refused = Path(REFUSED_FILE).exists()
    had_dir = Path(REFUSED_FILE).parent.exists()
    try:
        yield saved
    finally:
        for irq, cpus in saved.items():
            try:
                Path(f"/proc/irq/{irq}/smp_affinity_list").write_text(cpus + "\n")
            except OSError:
                pass  # managed IRQs: never moved
        if not had_refused:
            Path(REFUSED_FILE).unlink(missing_ok=True)
        if not had_dir and Path(REFUSED_FILE).parent.exists():
            Path(REFUSED_FILE).parent.rmdir()
        assert affinities() == saved


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("irq-local")
    (d / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))
    return d


@pytest.fixture(scope="module")
def planned(local) -> dict[int, list[int]]:
    r = invoke("topology", "--host", "me", "--json", cwd=local)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads(r.stdout)["plan"]
    assert any(d["kind"] == "nic" and d["irqs"] for d in plan["devices"])  # virtio-net's MSI-X vectors
    return {p["irq"]: p["cpus"] for p in plan["irqs"]}


def test_local_check_mode_changes_nothing(local, planned):
    before = affinities()
    if not any(parse_cpulist(before[i]) != c for i, c in planned.items()):
        # This machine already carries the plan (an earlier run left it so): spread one movable
        # IRQ over every CPU so there is something to plan; restore_irqs puts it back.
        every = f"0-{os.cpu_count() - 1}"
        for irq in planned:
            try:
                Path(f"/proc/irq/{irq}/smp_affinity_list").write_text(every + "\n")
                break
            except OSError:
                continue  # managed: the kernel refuses
        before = affinities()
    assert any(parse_cpulist(before[i]) != c for i, c in planned.items())  # something to do
    r = invoke("plan", "--host", "me", *LOCAL, cwd=local)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "would change" in r.stdout
    assert affinities() == before


def test_local_apply_pins_movable_irqs_and_skips_managed_ones(local, planned):
    r = invoke("provision", "--host", "me", *LOCAL, cwd=local)
    assert r.returncode == 0, r.stdout + r.stderr
    now = affinities()
    results = {x["id"]: x for x in last_report(local)["hosts"][0]["resources"]}
    moved, refused = [], []
    for irq, cpus in planned.items():
        res = next(v for k, v in results.items() if k.startswith(f"irq:{irq} ") or k == f"irq:{irq}")
        if res["status"] == "skipped":
            assert "refuses to move it" in res["reason"]
            refused.append(irq)
        else:
            assert res["status"] in ("changed", "ok") and parse_cpulist(now[irq]) == cpus, (irq, res)
            moved.append(irq)
    assert moved  # the NIC's vectors really moved
    # This VM's virtio-blk queue IRQ is managed: the kernel refuses, per IRQ, not fatal.
    assert refused and recap(r.stdout)["me"]["failed"] == 0
    assert all(f"{i} " in Path(REFUSED_FILE).read_text() for i in refused)


def test_local_rerun_is_a_noop(local):
    r = invoke("provision", "--host", "me", *LOCAL, cwd=local)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)["me"]["changed"] == 0
    assert last_report(local)["hosts"][0]["round_trips"] == 2


# ---------------------------------------------------------------- sandbox host

@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("irq-proj")
    # Opt in: this module saves and restores the machine's IRQs around it.
    write_inventory(d / "hosts", [sandbox_host], extra_vars={**SANDBOX_VARS, "irq_affinity_in_containers": True})
    return d


def test_containers_leave_the_machines_irqs_alone_by_default(sandbox_host, tmp_path):
    write_inventory(tmp_path / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    r = invoke("plan", "--host", sandbox_host.name, "--inventory", "hosts", "--roles", "irq_affinity",
               "--verbose", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "this host is a container (/run/systemd/container says docker); its /proc/irq is the machine's" \
        in r.stdout
    assert not any(l.strip().startswith("would change  irq:") for l in r.stdout.splitlines())


@pytest.mark.reliability(item=15, fault="container detection without /run/systemd/container (Docker's marker, "
                                        "systemd-detect-virt)", checks=("machine left alone",))
def test_a_container_without_systemds_record_is_still_one(sandbox_host, tmp_path):
    """systemd's /run/systemd/container gone (an engine that does not set container=, a cleaned /run): the
    detector and the engine's markers still say so, and nothing is moved."""
    write_inventory(tmp_path / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    saved = sandbox_host.exec(["cat", "/run/systemd/container"]).stdout
    sandbox_host.exec(["rm", "-f", "/run/systemd/container"])
    try:
        r = invoke("plan", "--host", sandbox_host.name, "--inventory", "hosts", "--roles", "irq_affinity",
                   "--verbose", cwd=tmp_path)
    finally:
        sandbox_host.exec(["sh", "-c", "cat > /run/systemd/container"], input=saved)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "this host is a container (systemd-detect-virt --container says docker)" in r.stdout
    assert not any(l.strip().startswith("would change  irq:") for l in r.stdout.splitlines())


def condition_ts(host) -> str:
    """When systemd last evaluated irqbalance's conditions: moves on every (re)start job."""
    return host.exec(["systemctl", "show", "-p", "ConditionTimestampMonotonic", "--value",
                      "irqbalance.service"]).stdout.strip()


def run(host, project, *extra):
    r = invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "irq_affinity", *extra,
               cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_sandbox_check_mode_changes_nothing(sandbox_host, project):
    env = sandbox_host.exec(["sha256sum", ENV_FILE]).stdout
    before = affinities()
    r = invoke("plan", "--host", sandbox_host.name, "--inventory", "hosts", "--roles", "irq_affinity", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"+++ {UNIT_FILE} (wanted)" in r.stdout and "IRQBALANCE_ARGS" in r.stdout
    assert sandbox_host.exec(["sha256sum", ENV_FILE]).stdout == env
    assert sandbox_host.exec(["test", "-e", UNIT_FILE], check=False).returncode == 1
    assert affinities() == before


def test_sandbox_apply_configures_irqbalance_and_the_boot_unit(sandbox_host, project, planned):
    ts = condition_ts(sandbox_host)
    r = run(sandbox_host, project)
    rc = recap(r.stdout)[sandbox_host.name]
    assert rc["failed"] == 0 and rc["changed"] >= 5
    env = sandbox_host.exec(["cat", ENV_FILE]).stdout
    args = next(l for l in env.splitlines() if l.startswith("IRQBALANCE_ARGS="))
    assert sorted(int(a.split("=")[1]) for a in args.split('"')[1].split()) == sorted(planned)
    assert "IRQBALANCE_BANNED_CPULIST" not in env.replace("# No Triton", "")  # no GPU: no Triton CPU to ban
    # The restart handler ran once; systemd evaluated the unit again (and, in a container, declined it).
    host = last_report(project)["hosts"][0]
    assert [x["id"] for x in host["resources"] if x["id"].startswith("handler:")] == [
        "handler:reload systemd", "handler:restart irqbalance"]
    assert condition_ts(sandbox_host) != ts
    svc = next(x for x in host["resources"] if x["id"] == "service:irqbalance.service")
    assert svc["status"] == "skipped" and "ConditionVirtualization=!container" in svc["reason"]
    assert sandbox_host.exec(["systemctl", "is-enabled", UNIT]).stdout.strip() == "enabled"
    conf = sandbox_host.exec(["cat", PLAN_FILE]).stdout
    rows = [l.split() for l in conf.splitlines() if l and not l.startswith("#")]
    assert {int(x[0]): parse_cpulist(x[2]) for x in rows} == planned
    assert sandbox_host.exec(["stat", "-c", "%a", SCRIPT]).stdout.strip() == "755"


def test_sandbox_rerun_is_a_noop_without_restart(sandbox_host, project):
    ts = condition_ts(sandbox_host)
    r = run(sandbox_host, project)
    assert recap(r.stdout)[sandbox_host.name]["changed"] == 0
    assert condition_ts(sandbox_host) == ts


def test_boot_unit_reapplies_the_plan(sandbox_host, planned):
    now = affinities()
    moved = [i for i, cpus in planned.items() if parse_cpulist(now[i]) == cpus and cpus != [0, 1]]
    assert moved
    for irq in moved:  # as after a reboot: the kernel's default spread
        Path(f"/proc/irq/{irq}/smp_affinity_list").write_text("0-1\n")
    out = sandbox_host.exec(["sh", "-c", f"systemctl restart {UNIT} && journalctl -u {UNIT} -b --no-pager -o cat"])
    assert {i: parse_cpulist(affinities()[i]) for i in moved} == {i: planned[i] for i in moved}
    assert sandbox_host.exec(["systemctl", "is-active", UNIT]).stdout.strip() == "active"
    assert "refused by the kernel (managed), skipped" in out.stdout  # the virtio-blk queue


def test_drifted_env_file_is_repaired_and_irqbalance_restarted(sandbox_host, project):
    sandbox_host.exec(["sh", "-c", f"echo 'IRQBALANCE_ONESHOT=1' >> {ENV_FILE}"])
    ts = condition_ts(sandbox_host)
    r = run(sandbox_host, project)
    assert recap(r.stdout)[sandbox_host.name]["changed"] == 2  # the file, the handler
    assert "IRQBALANCE_ONESHOT" not in sandbox_host.exec(["cat", ENV_FILE]).stdout
    assert condition_ts(sandbox_host) != ts


def test_irqbalance_disabled(sandbox_host, project):
    assert sandbox_host.exec(["systemctl", "is-enabled", "irqbalance.service"]).stdout.strip() == "enabled"
    run(sandbox_host, project, "--set", "irqbalance=disabled")
    assert sandbox_host.exec(["systemctl", "is-enabled", "irqbalance.service"],
                             check=False).stdout.strip() == "disabled"
    r = run(sandbox_host, project, "--set", "irqbalance=disabled")
    assert recap(r.stdout)[sandbox_host.name]["changed"] == 0


@pytest.mark.parametrize("value", ["irqbalance=off", "irq_cpus_per_node=0", "triton_cpus_per_gpu=lots"])
def test_bad_input_is_one_line(sandbox_host, project, value):
    r = invoke("provision", "--host", sandbox_host.name, "--inventory", "hosts", "--roles", "irq_affinity",
               "--set", value, cwd=project)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: host ") and "Traceback" not in r.stdout + r.stderr


def test_audit_passes_then_names_drift(sandbox_host, project):
    run(sandbox_host, project)  # back to irqbalance: keep after the test above
    audit = ["audit", "--host", sandbox_host.name, "--roles", "irq_affinity"]
    r = invoke(*audit, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    sandbox_host.exec(f"echo 'IRQBALANCE_ONESHOT=1' >> {ENV_FILE} && rm {PLAN_FILE}")
    try:
        r = invoke(*audit, cwd=project)
        assert r.returncode != 0
        assert f"{sandbox_host.name}: {ENV_FILE} has IRQBALANCE_ONESHOT=1, which the role does not write" in r.stdout
        assert f"{sandbox_host.name}: {PLAN_FILE} is missing" in r.stdout, r.stdout
    finally:
        run(sandbox_host, project)
