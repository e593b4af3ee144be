"""What a no-op provision of one role loads (issue 42 item 5; not timed): ``bringup provision --roles sysctl
--check`` on the control machine itself (``ansible_connection: local``: the facts, the read, the plan, the
recap and the report, as on a rack's host, writing nothing) imports the sysctl role's module alone, the fact
module it reads, and none of the bench's, the GPU planner's, the acceptance's or testinfra's code, nor asyncio
and unittest (bringup.standins).

The program runs as an installed copy runs it: bytecode written (under a cache prefix of the test's own),
so the second run has the roles' manifest the first wrote (bringup/engine/roles.py); the second run is pinned.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RUN = """if True:
    import atexit, json, sys
    out = sys.argv[1]
    # The modules loaded: bringup.standins' stand-ins (named, not loaded) left out.
    atexit.register(lambda: open(out, "w").write(json.dumps(sorted(
        m for m, v in sys.modules.items() if type(v).__name__ != "_StandIn"))))
    sys.argv = ["bringup", "provision", "--host", "ctl", "--roles", "sysctl", "--check", "--inventory", "hosts.yml"]
    from bringup.entry import main
    main()
"""

#: The fact modules the sysctl role's facts (system.sysctl, system.sysctl_writable) need, and the package's own.
FACT_MODULES = {"bringup.facts", "bringup.facts.base", "bringup.facts.gather", "bringup.facts.helpers",
                "bringup.facts.system"}
#: Code a sysctl run has no use for: the bench and tuning, the GPU and topology planners, the checklist's and
#: the acceptance's checks, pull mode, and the heavy libraries of the bench and the audit.
NEVER = ("bringup.latency", "bringup.hardware.topology", "bringup.hardware.topology_model", "bringup.hardware.topology_facts",
         "bringup.hardware.topology_crossing", "bringup.hardware.topology_text", "bringup.hardware.gpu", "bringup.hardware.gpu_profiles", "bringup.hardware.driver_matrix",
         "bringup.checks", "bringup.checklist.pages", "bringup.engine.auditkit", "bringup.hardware.health", "bringup.hardware.health_gpu",
         "bringup.hardware.health_xid", "bringup.acceptance",
         "bringup.testinfra", "bringup.pull", "matplotlib", "tritonclient", "testinfra", "numpy", "pytest",
         # the other tasks' modules (bringup.cli collects the tasks the command line names)
         "bringup.tasks.accept", "bringup.tasks.audit", "bringup.tasks.checklist", "bringup.tasks.drift",
         "bringup.tasks.inspect", "bringup.tasks.latency", "bringup.tasks.pull",
         # what pydantic-core's deprecated() and invoke.context would load without bringup.standins
         "asyncio", "unittest", "ssl")


def _provision(tmp_path: Path, n: int) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    out = tmp_path / f"modules{n}.json"
    r = subprocess.run([sys.executable, "-c", RUN, str(out)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={**env, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc"),
                                         "COLUMNS": "200"})
    # The run went all the way: the host planned, the recap printed, nothing failed or out of reach.
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr, (r.returncode, r.stdout[-2000:], r.stderr)
    assert "ctl : ok=" in r.stdout and "failed=0" in r.stdout and "unreachable=0" in r.stdout, r.stdout[-2000:]
    return json.loads(out.read_text())


def test_a_sysctl_no_op_loads_the_sysctl_role_and_its_facts_only(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    ctl:\n      ansible_connection: local\n")
    _provision(tmp_path, 1)  # writes the bytecode and the roles' manifest, as the set-up does
    modules = _provision(tmp_path, 2)
    assert "bringup.engine.rolerun" in modules and "bringup.facts.system" in modules  # it did plan
    roles = sorted(m for m in modules if m.startswith("bringup_roles"))
    assert roles == ["bringup_roles", "bringup_roles.sysctl"], roles
    facts = {m for m in modules if m == "bringup.facts" or m.startswith("bringup.facts.")}
    assert facts == FACT_MODULES, sorted(facts ^ FACT_MODULES)
    unneeded = [m for m in modules if any(m == p or m.startswith(p + ".") for p in NEVER)]
    assert not unneeded, unneeded
    # Invoke reads its config files with the installed PyYAML (bringup.cli), not its vendored pure-Python copy.
    vendored = [m for m in modules if m.startswith("invoke.vendor.yaml.")]
    assert not vendored, vendored


DIAL = """if True:
    import json, sys
    out = sys.argv[1]
    from bringup.engine import ahead
    dial = ahead.Ahead.dial
    def recorded(self, hosts):
        open(out, "w").write(json.dumps(sorted(sys.modules)))
        return dial(self, hosts)
    ahead.Ahead.dial = recorded
    sys.argv = ["bringup", "provision", "--host", "ctl", "--roles", "sysctl", "--check", "--inventory", "hosts.yml"]
    from bringup.entry import main
    main()
"""

#: What connecting needs no part of: the run's engine (runner, rollout, the resources, the roles) and the output's
#: libraries load while the hosts log in (bringup.engine.ahead), not before the first host is dialed.
NOT_BEFORE_DIAL = ("bringup.engine.runner", "bringup.engine.rollout", "bringup.engine.rolerun", "bringup.engine.roles",
                   "bringup.resources", "bringup_roles", "rich", "jinja2")


def test_the_hosts_are_dialed_before_the_engine_loads(tmp_path):
    # The connection (paramiko, the inventory's checked connection variables) is all a dial needs: what else is
    # imported before it delays every host's login by its import time (issue 42 item 3).
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    ctl:\n      ansible_connection: local\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    out = tmp_path / "at_dial.json"
    r = subprocess.run([sys.executable, "-c", DIAL, str(out)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={**env, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc"),
                                         "COLUMNS": "200"})
    assert "ctl : ok=" in r.stdout and "failed=0" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
    modules = json.loads(out.read_text())
    assert "bringup.ssh.connection" in modules and "bringup.inventory.hosts" in modules  # what a dial needs
    early = [m for m in modules if any(m == p or m.startswith(p + ".") for p in NOT_BEFORE_DIAL)]
    assert not early, early
