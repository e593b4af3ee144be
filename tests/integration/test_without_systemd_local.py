"""Issue 34 item 7 on a real host whose PID 1 is not systemd: this control machine, through
`ansible_connection: local`, in check mode (nothing written), like the H200 VM (PID 1 ``process_api``).

irq_affinity and cpu_tuning plan what they can apply live and skip only what needs systemd, each with one
reason naming it; before, a failed service plan made every other resource of the role "not run"."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .helpers import invoke, last_report


def pid1() -> str:
    return Path("/proc/1/comm").read_text().strip()


@pytest.mark.skipif(Path("/run/systemd/system").is_dir(), reason="this machine runs systemd: not the case tested")
@pytest.mark.reliability(item=34, fault="irq_affinity and cpu_tuning on a real host whose PID 1 is not systemd "
                         "(check mode, local)", checks=("nothing touched", "report written"))
def test_the_tuning_roles_plan_live_changes_and_one_skip_each(tmp_path: Path):
    (tmp_path / "hosts").write_text(yaml.safe_dump(
        {"all": {"hosts": {"me": {"ansible_connection": "local", "gpu_profile": "cpu"}}}}))
    before = sorted(p.name for p in Path("/etc").iterdir())
    r = invoke("plan", "--host", "me", "--roles", "irq_affinity,cpu_tuning", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    res = last_report(tmp_path)["hosts"][0]["resources"]
    assert not [x for x in res if x["status"] == "failed"], res
    assert not [x for x in res if "another resource of the role failed" in (x.get("reason") or "")], res
    skips = {x["role"]: x["reason"] for x in res if x["id"].startswith("skip:")}
    assert set(skips) == {"irq_affinity", "cpu_tuning"}, res
    assert all(s.startswith(f"systemd is not running (PID 1 is {pid1()}): ") for s in skips.values()), skips
    assert "not persisted: bringup-irq-affinity.service" in skips["irq_affinity"]
    # What can be applied live is planned: the THP mode, the plan files, the IRQ resources (skipped here only
    # because this machine is a container, with that reason).
    planned = {x["id"]: x["status"] for x in res}
    for rid in ("sysfs:/sys/kernel/mm/transparent_hugepage/enabled", "file:/etc/bringup/topology.json",
                "file:/usr/local/sbin/bringup-irq-affinity"):
        assert planned.get(rid) in ("changed", "ok"), (rid, planned)
    assert [x for x in res if x["id"].startswith("irq:")], res
    assert sorted(p.name for p in Path("/etc").iterdir()) == before
