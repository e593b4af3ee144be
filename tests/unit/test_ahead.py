"""Connections and facts opened ahead of a run (bringup.engine.ahead): taken once, errors where the run meets them."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

import tests.silent

import bringup.engine.ahead as ahead_mod
from bringup.engine.ahead import Ahead
from bringup.ssh.connection import LocalTransport, connect
from bringup.errors import Unreachable
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.project import content_root
from bringup.engine.roles import load_roles, wanted_facts
from bringup.engine.runner import HostRun, Options, prepare
from bringup.engine.templates import Templates

ORDER, ROLES = load_roles(content_root())
EVERY = [ROLES[r] for r in ORDER]
SYSCTL = [ROLES["sysctl"]]


def _local(name="ctl") -> Host:
    return Host(name, ["all"], {}, ConnectionVars(ansible_connection="local"))


def _run(host: Host, ahead: Ahead | None) -> HostRun:
    vars = prepare([host], SYSCTL, EVERY)[host.name]
    return HostRun(host, SYSCTL, vars, Options(check=True, ahead=ahead), Templates(content_root() / "templates"))


def test_a_run_takes_the_connection_and_the_facts_gathered_ahead():
    host = _local()
    with Ahead() as ahead:
        ahead.dial([host])
        ahead.want(wanted_facts(SYSCTL))
        run = _run(host, ahead)
        result = run.converge()
    assert result.status == "ok", result.message
    assert run.facts["system.sysctl_writable"]
    # One facts script (gathered ahead, not again) and one read of the state.
    assert result.round_trips == 2


def test_facts_gathered_for_other_roles_are_not_used():
    host = _local()
    with Ahead() as ahead:
        ahead.dial([host])
        ahead.want(wanted_facts([ROLES["nvidia_driver"]]))
        run = _run(host, ahead)
        result = run.converge()
    assert result.status == "ok", result.message
    assert sorted(run.facts) == ["system.sysctl", "system.sysctl_writable"]
    assert result.round_trips == 3  # the early facts, the run's own, the state read


def test_a_host_not_dialled_connects_in_its_run():
    with Ahead() as ahead:
        ahead.dial([_local("other")])
        ahead.want(wanted_facts(SYSCTL))
        result = _run(_local("ctl"), ahead).converge()
    assert result.status == "ok" and result.round_trips == 2


@pytest.mark.parametrize("kw", [{"enabled": False}, {"accept_new_host_keys": True}])
def test_a_disabled_ahead_opens_nothing(kw):
    """Disabled, or in a run that may record host keys (a key is recorded only once the input was checked)."""
    with Ahead(**kw) as ahead:
        ahead.dial([_local()])
        assert ahead.take(_local()) is None


def test_an_unreachable_host_is_reported_by_its_own_run_with_connects_message(tmp_path):
    host = Host("gone", ["all"], {}, ConnectionVars(ansible_host="127.0.0.1", ansible_port=tests.silent.closed_port(),
                                                    ssh_known_hosts=str(tmp_path / "known_hosts")))
    with pytest.raises(Unreachable) as direct:
        connect(host)
    with Ahead() as ahead:
        ahead.dial([host])
        ahead.want(wanted_facts(SYSCTL))
        result = _run(host, ahead).converge()
    assert result.status == "unreachable"
    assert result.message == str(direct.value)


class _Recording(LocalTransport):
    """A real local transport that records its commands and its closing (and can be made to fail)."""

    closed: list[str] = []
    ran: list[str] = []
    fail = False

    def close(self) -> None:
        _Recording.closed.append(self.host.name)

    def _exchange(self, cmd, sudo, data):
        _Recording.ran.append(self.host.name)
        if _Recording.fail:
            raise Unreachable(f"connection to {self.host.name} lost: test")
        return super()._exchange(cmd, sudo, data)


@pytest.fixture
def recording(monkeypatch):
    _Recording.closed, _Recording.ran, _Recording.fail = [], [], False
    monkeypatch.setattr(ahead_mod, "connect", lambda host, jumps=None, routes=None: _Recording(host))
    return _Recording


def test_close_closes_what_no_host_took_and_only_that(recording):
    a, b = _local("a"), _local("b")
    with Ahead() as ahead:
        ahead.dial([a, b])
        ahead.want([])
        taken = ahead.take(a)
        assert taken is not None and ahead.take(a) is None  # a host is taken once
        for d in ahead._dials.values():
            d.done.wait(10)
    assert recording.closed == ["b"]


def test_a_failed_early_gathering_is_raised_in_the_run(recording):
    recording.fail = True
    host = _local()
    with Ahead() as ahead:
        ahead.dial([host])
        ahead.want(wanted_facts(SYSCTL))
        result = _run(host, ahead).converge()
    assert result.status == "unreachable" and result.message == "connection to ctl lost: test"


def test_a_run_refused_before_it_took_its_connection_closes_it(recording):
    """Bad input found after dialling (a variable): the connection the run never took is closed at once."""
    host = _local()
    with pytest.raises(RuntimeError):
        with Ahead() as ahead:
            ahead.dial([host])
            raise RuntimeError("refused")
    # The connection is closed when it is ready, by close() or by its own thread right after.
    for d in ahead._dials.values():
        d.done.wait(10)
    assert recording.closed == ["ctl"]


def test_held_hosts_and_password_logins_are_not_opened_ahead(recording):
    drained, by_password, plain = _local("drained"), _local("pw"), _local("plain")
    by_password = Host("pw", ["all"], {}, ConnectionVars(ansible_connection="local", ansible_password="s3cret"))
    with Ahead(hold=lambda h: h.name == "drained") as ahead:
        ahead.dial([drained, by_password, plain])
        assert ahead.take(drained) is None and ahead.take(by_password) is None
        assert ahead.take(plain) is not None


def test_a_host_whose_ssh_options_accept_new_keys_is_not_opened_ahead(recording):
    """Its key may be recorded only once the run's input was checked (issue 32: the host's own
    StrictHostKeyChecking accept-new, or no, records keys as --accept-new-host-keys does)."""
    def ssh(name: str, args: str) -> Host:
        v = {"ansible_host": "192.0.2.9", "ansible_ssh_common_args": args, "ssh_config": "none"}
        return Host(name, ["all"], v, ConnectionVars.model_validate(v))

    new, no, strict = (ssh("new", "-o StrictHostKeyChecking=accept-new"), ssh("no", "-o StrictHostKeyChecking=no"),
                       ssh("strict", "-o StrictHostKeyChecking=yes"))
    with Ahead() as ahead:
        ahead.dial([new, no, strict])
        assert set(ahead._dials) == {"strict"}


def _project(tmp_path, thp) -> Path:
    (tmp_path / "hosts").write_text(
        "all:\n  vars: {gpu_profile: cpu, sysctl_profile: none}\n"
        f"  hosts:\n    h1: {{ansible_connection: local, thp: {thp}}}\n")
    return tmp_path / "hosts"


def test_a_run_refused_for_bad_input_ran_no_command_on_a_host_it_had_dialled(recording, tmp_path, monkeypatch):
    """The connection opens while the variables are checked; the facts script waits for them to pass."""
    from invoke import Exit

    from bringup.tasks.converge import converge

    monkeypatch.chdir(tmp_path)
    inv = _project(tmp_path, "sometimes")
    with pytest.raises(Exit) as refused:
        converge(host="h1", check=True, inventory=str(inv))
    assert refused.value.code == 1 and "thp 'sometimes'" in str(refused.value.message)
    for th in threading.enumerate():
        if th.name.startswith("ahead-"):
            th.join(10)
    assert recording.ran == [] and recording.closed == ["h1"]


def test_a_checked_run_gathers_its_facts_on_the_connection_opened_ahead(recording, tmp_path, monkeypatch):
    from bringup.tasks.converge import converge

    monkeypatch.chdir(tmp_path)
    assert converge(host="h1", roles="sysctl", check=True, inventory=str(_project(tmp_path, "madvise"))) == 0
    # One connection: the facts, then the state read, both on the transport dialled ahead.
    assert recording.ran == ["h1", "h1"]
