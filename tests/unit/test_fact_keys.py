"""Facts read in part: a run of the sysctl role reads its keys of ``system.sysctl`` and ``system.sysctl_writable``,
not ``sysctl -a`` (~40 KB) and the whole of /proc/sys (issue 42 item 3), with the same values, on this very
machine's kernel; a fact another reader wants whole is read whole."""
from __future__ import annotations

import shutil
import subprocess
import types

import pytest

from bringup.ssh.connection import LocalTransport
from bringup.facts.gather import collect_raw, fact_snippet
from bringup.facts.system import SystemSysctl, SystemSysctlWritable
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.project import content_root
from bringup.engine.roles import Role, fact_keys, load_roles
from bringup.engine.runner import HostRun, Options, prepare
from bringup.engine.templates import Templates

ORDER, ROLES = load_roles(content_root())
SYSCTL = ROLES["sysctl"]

#: Present, present with tabs, a write-only one (sysctl -a does not list it), one no kernel has.
KEYS = ["net.core.somaxconn", "net.ipv4.tcp_rmem", "vm.swappiness", "kernel.numa_balancing",
        "net.ipv4.route.flush", "net.nope.none"]


def _sh(command: str) -> str:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60).stdout


@pytest.mark.skipif(not shutil.which("sysctl"), reason="no sysctl(8) here")
def test_the_keys_read_alone_are_what_the_whole_fact_says_of_them():
    whole = SystemSysctl.process(_sh(SystemSysctl.command))
    part = SystemSysctl.process(_sh(SystemSysctl.command_for(KEYS)))
    assert part == {k: whole[k] for k in KEYS if k in whole} and "net.core.somaxconn" in part
    writable = SystemSysctlWritable.process(_sh(SystemSysctlWritable.command))
    part_w = SystemSysctlWritable.process(_sh(SystemSysctlWritable.command_for(KEYS)))
    assert sorted(part_w) == sorted(k for k in writable if k in KEYS)


@pytest.mark.parametrize("keys", [[], ["net.core.somaxconn", "net/../../etc/passwd"], ["x; rm -rf /"],
                                  [f"net.k{i}" for i in range(201)]])
def test_keys_that_are_no_plain_sysctl_key_read_the_fact_whole(keys):
    assert SystemSysctl.command_for(keys) is None and SystemSysctlWritable.command_for(keys) is None
    assert fact_snippet(SystemSysctl, keys).endswith("sysctl -a")


def _vars(**more):
    host = Host("h", ["all"], more, ConnectionVars(ansible_connection="local"))
    return prepare([host], [SYSCTL], [ROLES[r] for r in ORDER])["h"]


def test_the_sysctl_role_reads_its_keys_alone_and_the_inventorys_too():
    keys = fact_keys([SYSCTL], _vars(sysctl={"net.core.rmem_default": 262144, "vm.swappiness": None}))
    assert set(keys) == {"system.sysctl", "system.sysctl_writable"}
    assert "net.core.rmem_default" in keys["system.sysctl"] and "vm.swappiness" not in keys["system.sysctl"]
    assert keys["system.sysctl"] == keys["system.sysctl_writable"]


def test_a_fact_another_reader_wants_whole_is_read_whole():
    v = _vars()
    assert fact_keys([SYSCTL], v, extra=("system.sysctl",)) == {
        "system.sysctl_writable": fact_keys([SYSCTL], v)["system.sysctl_writable"]}
    whole = Role("whole", types.SimpleNamespace(FACTS=("system.sysctl",), resources=lambda h: []))
    assert set(fact_keys([SYSCTL, whole], v)) == {"system.sysctl_writable"}
    every = Role("every", types.SimpleNamespace(resources=lambda h: []))  # FACTS left out: every fact
    assert fact_keys([SYSCTL, every], v) == {}


class _Seen(LocalTransport):
    scripts: list[str] = []

    def run_script(self, script, keep=None):
        _Seen.scripts.append(script)
        return super().run_script(script, keep=keep)


@pytest.mark.skipif(not shutil.which("sysctl"), reason="no sysctl(8) here")
def test_a_run_of_the_sysctl_role_reads_its_keys_not_sysctl_a(monkeypatch):
    import bringup.engine.runner as runner

    _Seen.scripts = []
    monkeypatch.setattr(runner, "connect", lambda host, **kw: _Seen(host))
    host = Host("ctl", ["all"], {}, ConnectionVars(ansible_connection="local"))
    vars = prepare([host], [SYSCTL], [ROLES[r] for r in ORDER])["ctl"]
    run = HostRun(host, [SYSCTL], vars, Options(check=True), Templates(content_root() / "templates"))
    result = run.converge()
    assert result.status == "ok", result.message
    facts_script = _Seen.scripts[0]
    assert "sysctl -a" not in facts_script and "sysctl -e " in facts_script and "find . " not in facts_script
    assert set(run.facts["system.sysctl"]) <= set(fact_keys([SYSCTL], vars)["system.sysctl"])
    assert run.facts["system.sysctl"]["net.core.somaxconn"]
    # What `invoke facts --raw` saves (no role said which keys) is the whole fact, as before.
    raw = collect_raw(LocalTransport(host), [SystemSysctl])
    assert len(SystemSysctl.process(raw["system.sysctl"]["output"])) > 100


@pytest.mark.parametrize("hook", [lambda v: 1 / 0, lambda v: ["system.sysctl"], lambda v: {"system.sysctl": "vm.x"},
                                  lambda v: {"system.sysctl": [1, 2]}])
def test_a_fact_keys_hook_that_fails_or_answers_nonsense_has_its_facts_read_whole(hook):
    odd = Role("odd", types.SimpleNamespace(FACTS=("system.sysctl",), fact_keys=hook, resources=lambda h: []))
    assert odd.fact_keys({}) == {} and fact_keys([odd], {}) == {}
