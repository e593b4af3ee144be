"""The run model: one HostRun per host, the variables merged once, only declared facts gathered."""
from __future__ import annotations

import types

import pytest

from bringup.errors import InputError
from bringup.facts import ALL_FACTS
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.project import content_root
from bringup.engine.roles import FactView, HostContext, Role, load_roles, merged_defaults, wanted_facts
from bringup.engine.results import HostResult
from bringup.engine.runner import HostRun, Options, prepare
from bringup.engine.templates import Templates

from .fixture_hosts import h200_facts

ORDER, ROLES = load_roles(content_root())
EVERY = [ROLES[r] for r in ORDER]


def test_every_shipped_role_declares_its_facts():
    missing = [r.name for r in EVERY if r.facts is None]
    assert not missing, f"roles without FACTS (every fact gathered for them): {missing}"
    # Fewer facts than all: the facts nobody reads are not gathered on a provision.
    assert len(wanted_facts(EVERY)) < len(ALL_FACTS)
    assert [f.name for f in wanted_facts([ROLES["sysctl"]])] == ["system.sysctl", "system.sysctl_writable"]


@pytest.mark.parametrize("name", ORDER)
def test_a_role_reads_only_the_facts_it_declares(name):
    role = ROLES[name]
    facts = {f.name: f.default for f in ALL_FACTS} | h200_facts() | {
        "os.release": {"id": "debian", "version_id": "12", "id_like": ""}, "os.kernel": {"release": "6.1.0-18-amd64"},
        "system.systemd": {"booted": True, "pid1": "systemd"}}
    vars = prepare([Host("h", ["all"], {"gpu_profile": "cpu", "inventory_hostname": "h"}, ConnectionVars())],
                   [role], EVERY)["h"]
    ctx = HostContext("h", vars, FactView(facts, role.facts, role.name), Templates(content_root() / "templates").render)
    try:
        role.resources(ctx)
    except InputError as e:
        assert "without declaring it" not in str(e), e


def test_reading_an_undeclared_fact_names_the_reader():
    view = FactView({"a.b": 1, "c.d": 2}, ("a.b",), "role x")
    assert view.get("a.b") == 1 and dict(view) == {"a.b": 1}
    with pytest.raises(InputError, match="role x reads the fact 'c.d' without declaring it"):
        view.get("c.d")


def _role(name, **attrs) -> Role:
    return Role(name, types.SimpleNamespace(resources=lambda ctx: [], **attrs))


def test_one_variable_two_defaults_is_refused():
    with pytest.raises(InputError, match="roles a and b give x different defaults"):
        merged_defaults([_role("a", DEFAULTS={"x": 1}), _role("b", DEFAULTS={"x": 2})])
    assert merged_defaults([_role("a", DEFAULTS={"x": 1}), _role("b", DEFAULTS={"x": 1, "y": 0})]) == {"x": 1, "y": 0}


def test_a_role_run_alone_sees_every_roles_defaults():
    """The planner's and the shared variables are merged once: triton alone reads what a full run gives it."""
    h = Host("h", ["all"], {"apt_lock_timeout": 60}, ConnectionVars())
    v = prepare([h], [ROLES["triton"]], EVERY)["h"]
    assert v["apt_lock_timeout"] == 60 and v["irq_cpus_per_node"] == 2 and v["nvidia_driver_branch"] == "auto"
    assert v["triton_image"].startswith("nvcr.io/nvidia/tritonserver:")


def test_hostrun_gathers_only_the_declared_facts_in_one_round_trip():
    host = Host("ctl", ["all"], {}, ConnectionVars(ansible_connection="local"))
    vars = prepare([host], [ROLES["sysctl"]], EVERY)["ctl"]
    run = HostRun(host, [ROLES["sysctl"]], vars, Options(check=True), Templates(content_root() / "templates"))
    run.open()
    facts = run.gather()
    assert sorted(facts) == ["system.sysctl", "system.sysctl_writable"] and facts["system.sysctl_writable"]
    assert run.transport.round_trips == 1
    run.close()


def test_roles_that_declare_no_facts_cost_no_facts_round_trip():
    """FACTS = () (bench/mix, monitoring): the run goes straight to the state read, one round trip fewer."""
    role = _role("nofacts", FACTS=())
    host = Host("ctl", ["all"], {}, ConnectionVars(ansible_connection="local"))
    run = HostRun(host, [role], {}, Options(check=True), Templates(content_root() / "templates"))
    run.open()
    assert run.gather() == {} and run.fact_errors == {}
    assert run.transport.round_trips == 0
    run.close()


def test_facts_a_change_invalidates_are_gathered_again_for_the_roles_after_it(tmp_path, monkeypatch):
    """Plan.invalidates: after the role that changed, those facts are gathered again (one round trip) and the
    roles after it are declared from them; facts nobody gathered are not."""
    from bringup.engine import runner
    from bringup.resources.base import Plan, Resource

    class Marker(Resource):
        kind = "marker"

        def __init__(self, path: str, invalidates: tuple[str, ...]):
            super().__init__(path)
            self.invalidates = invalidates

        def read(self) -> str:
            return f"[ -e {self.name} ] && echo there || true"

        def plan(self, current: str) -> Plan:
            if current.strip() == "there":
                return Plan.noop("there")
            return Plan(commands=[f"touch {self.name}"], changes={"marker": (None, self.name)},
                        invalidates=self.invalidates)

    values = iter([False, True])
    gathered: list[list[str]] = []

    def gather(t, wanted, keys=None):
        gathered.append([f.name for f in wanted])
        return {f.name: next(values) for f in wanted}, {}

    monkeypatch.setattr(runner, "gather", gather)
    seen: list = []
    writer = Role("writer", types.SimpleNamespace(FACTS=(), resources=lambda ctx: [
        Marker(str(tmp_path / "a"), ("system.sysctl_writable", "nvidia.smi"))]))
    reader = Role("reader", types.SimpleNamespace(FACTS=("system.sysctl_writable",), resources=lambda ctx: seen.append(
        ctx.facts["system.sysctl_writable"]) or []))
    host = Host("ctl", ["all"], {}, ConnectionVars(ansible_connection="local"))
    run = HostRun(host, [writer, reader], {}, Options(), Templates(content_root() / "templates"))
    result = run.converge()
    assert result.status == "ok" and [r.status for r in result.resources] == ["changed"], result
    assert gathered == [["system.sysctl_writable"], ["system.sysctl_writable"]]  # nvidia.smi was never gathered
    assert seen == [False, True] and run.facts["system.sysctl_writable"] is True


class _Kernel:
    """A resource whose state needs a reboot: installed by its write, running once the (fake) reboot made it so."""

    def __new__(cls, root):
        from bringup.resources.base import Plan, Resource

        class Kernel(Resource):
            kind = "kernel"

            def read(self) -> str:
                return f"[ -e {root}/installed ] && echo installed; [ -e {root}/booted ] && echo booted; true"

            def plan(self, current: str) -> Plan:
                if "installed" not in current:
                    return Plan(commands=[f"touch {root}/installed"], changes={"kernel": (None, "new")},
                                reboot="new kernel")
                if "booted" not in current:
                    return Plan(reason="installed", reboot="new kernel not running")
                return Plan.noop("running")

        return Kernel("k")


def _reboot_run(tmp_path, monkeypatch, allow: bool, boots: bool) -> HostResult:
    from bringup.resources import Command

    def reboot(self):
        if boots:
            (tmp_path / "booted").touch()

    monkeypatch.setattr(HostRun, "reboot", reboot)
    driver = Role("driver", types.SimpleNamespace(FACTS=(), resources=lambda ctx: [_Kernel(tmp_path)]))
    app = Role("app", types.SimpleNamespace(FACTS=(), WAITS_FOR_REBOOT=True, resources=lambda ctx: [
        Command("app", f"touch {tmp_path}/app", creates=f"{tmp_path}/app")]))
    host = Host("ctl", ["all"], {}, ConnectionVars(ansible_connection="local"))
    return HostRun(host, [driver, app], {}, Options(allow_reboot=allow), Templates(content_root() / "templates")).converge()


def test_a_reboot_not_allowed_is_reported_and_the_roles_that_wait_for_it_are_skipped(tmp_path, monkeypatch):
    r = _reboot_run(tmp_path, monkeypatch, allow=False, boots=True)
    assert r.status == "ok" and r.reboot_required and r.reboot_reason == "new kernel" and not r.rebooted
    assert [(x.role, x.id, x.status) for x in r.resources] == [("driver", "kernel:k", "changed"),
                                                               ("app", "command:app", "skipped")]
    assert r.resources[1].reason == "not run: the host must reboot first (new kernel); rerun with --allow-reboot"


def test_an_allowed_reboot_runs_the_role_again_and_keeps_its_first_pass_changes(tmp_path, monkeypatch):
    r = _reboot_run(tmp_path, monkeypatch, allow=True, boots=True)
    assert r.status == "ok" and r.rebooted and r.reboot_reason == "new kernel" and not r.reboot_required
    assert [(x.role, x.id, x.status) for x in r.resources] == [
        ("driver", "kernel:k", "changed"), ("driver", "reboot:ctl", "changed"), ("app", "command:app", "changed")]


def test_a_role_that_still_needs_a_reboot_after_one_fails_the_host(tmp_path, monkeypatch):
    r = _reboot_run(tmp_path, monkeypatch, allow=True, boots=False)
    assert r.status == "failed" and r.rebooted
    assert [(x.role, x.id, x.status) for x in r.resources] == [
        ("driver", "kernel:k", "changed"), ("driver", "reboot:ctl", "changed"), ("driver", "reboot:verify", "failed")]
    assert r.resources[-1].error == "still after the reboot: new kernel not running"
