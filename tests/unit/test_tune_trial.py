"""The trial record of ``invoke tune`` (issue 40 item 7): written on the host, whole, BEFORE Triton is asked to
serve anything but the model's own configuration; removed once the own one serves again; refused when it
cannot be written (nothing loaded then); read back as one line when it is not bringup's.  Through
``ansible_connection: local`` (real files); Triton's client is a stand-in that records, at each load, whether
the record was on disk then.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bringup.errors import BringupError
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.ssh.connection import LocalTransport
from bringup.latency.override import Override
from bringup.latency.target import Target
from bringup.latency.trial import TrialMark, parse_trial, read_trial, restore_command, trial_path

OWN = {"name": "add", "max_batch_size": 8, "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
       "dynamic_batching": {"max_queue_delay_microseconds": "800"}}


def _t() -> LocalTransport:
    return LocalTransport(Host(name="ctl", groups=["all"], vars={},
                               connection=ConnectionVars(ansible_connection="local")))


class Client:
    """Triton's gRPC client, as far as :func:`bringup.latency.window.load_config` uses it."""

    def __init__(self, record: Path) -> None:
        self.record, self.loads = record, []

    def load_model(self, model, config=None, client_timeout=None):
        self.loads.append((json.loads(config), self.record.exists() and json.loads(self.record.read_text())))

    def is_model_ready(self, model):
        return True

    def close(self):
        pass


def _override(tmp_path: Path):
    path = tmp_path / "etc" / "bringup" / "triton-trial.json"
    client = Client(path)
    mark = TrialMark(_t(), str(path), "add", OWN, "tune from ctl (pid 1)", "2026-12-05T08:00:00+00:00")
    o = Override(client, Target(host="ctl", address="127.0.0.1", grpc_port=1, model="add"), OWN, None,
                 what="the search", unit="configuration(s)", measured=lambda: 0, unsaved="nothing recorded",
                 trial=mark)
    return o, client, path, mark


@pytest.mark.reliability(item=40, fault="tune killed (SIGKILL) mid-search: the trial record written before the "
                                        "trial configuration is loaded", checks=("whole old or new file",
                                                                                 "next run converges"))
def test_the_record_is_on_the_host_before_a_trial_is_loaded_and_gone_once_the_own_serves(tmp_path):
    o, client, path, _ = _override(tmp_path)
    trial = {**OWN, "instance_group": [{"count": 3, "kind": "KIND_CPU"}]}
    with o:
        o.load(trial, "3 instances")
        o.load({**trial, "max_batch_size": 4}, "3 instances, max batch 4")
    # At the first trial's load the record was there already, whole, naming the model's own configuration.
    (first, seen), (_, seen2) = client.loads[:2]
    assert first == trial and seen and seen["own_config"] == OWN and seen["model"] == "add"
    assert seen["serving"] == "3 instances" and seen2 == seen   # written once, not per configuration
    assert parse_trial(path.read_text(), "x")["own_config"] == OWN
    assert not list(path.parent.glob("*.json.*")), "a temporary file left beside the record"
    # A SIGKILL here would leave it; the own configuration loaded back removes it.
    assert o.own_again() == "add serves its own configuration again"
    assert client.loads[-1][0] == OWN and not path.exists()


@pytest.mark.reliability(item=40, fault="the trial record cannot be written (its path is a folder)",
                         checks=("one clear line", "nothing touched"))
def test_a_record_that_cannot_be_written_loads_nothing(tmp_path):
    o, client, path, _ = _override(tmp_path)
    path.mkdir(parents=True)
    with pytest.raises(BringupError) as e:
        o.load({**OWN, "max_batch_size": 4}, "max batch 4")
    assert client.loads == []
    assert "could not be written, so no other configuration was loaded" in str(e.value)


@pytest.mark.reliability(item=40, fault="a damaged or foreign trial record on the host (cut, not JSON, a link)",
                         checks=("one clear line",))
@pytest.mark.parametrize("text, said", [
    ('{"kind": "bringup-tune-trial", "model": "add", "own_con', "not readable JSON"),
    ('{"kind": "other", "model": "add", "own_config": {}}', "not a trial record bringup wrote"),
    ('{"kind": "bringup-tune-trial", "model": "a/../b", "own_config": {}}', "not a trial record bringup wrote"),
    ("[" * 100_000, "not readable JSON"),
])
def test_a_record_that_is_not_bringups_is_one_line(tmp_path, text, said):
    path = tmp_path / "triton-trial.json"
    path.write_text(text)
    with pytest.raises(BringupError) as e:
        read_trial(_t(), str(path))
    assert said in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(BringupError, match="a link|link, not"):
        read_trial(_t(), str(link))
    assert read_trial(_t(), str(tmp_path / "none.json")) is None


def test_the_trial_record_sits_beside_the_window_record_and_provisions_step_keeps_it_on_failure(tmp_path):
    assert trial_path("/etc/bringup/triton-window.json") == "/etc/bringup/triton-trial.json"
    path = tmp_path / "triton-trial.json"
    path.write_text(json.dumps({"kind": "bringup-tune-trial", "model": "add", "own_config": OWN}, indent=1))
    (tmp_path / "repo" / "add").mkdir(parents=True)
    # No Triton answers on port 9: the load fails, the record stays for the next run.
    r = subprocess.run(["sh", "-c", restore_command(["add", "other"], str(tmp_path / "repo"), "http://127.0.0.1:9",
                                                    str(path))], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and path.exists() and "kept" in r.stderr


def test_provision_checks_the_trial_record_after_triton_is_up():
    """The triton role's last step: guarded by the record's presence (a plain provision does nothing more), run
    after compose up (Triton serves), naming the role's own models, ports and repository."""
    from tests.unit.test_triton_role import PCI_GPU, ctx, host_vars

    import roles.triton as T
    from bringup.resources.command import Command

    v = host_vars("trt-l40s-01")
    res = T.resources(ctx(v, PCI_GPU))
    kinds = [r.kind for r in res]
    step = res[-1]
    assert isinstance(step, Command) and kinds.index("compose") < len(res) - 1
    assert step.onlyif == "[ -f /etc/bringup/triton-trial.json ] && [ ! -L /etc/bringup/triton-trial.json ]"
    assert not step.plan("onlyif=no\n").commands and step.plan("onlyif=ok\n").commands == [step.cmd]
    port = int(v.get("triton_ports", {}).get("http", 8000))
    assert f"http://127.0.0.1:{port}/v2/repository/models/" in step.cmd
    assert step.cmd.rstrip().endswith("rm -f -- /etc/bringup/triton-trial.json")


@pytest.mark.parametrize("text", [
    '{"kind": "K", "model": "m\\n", "own_config": {}}',
    '{"kind": "K", "model": "m", "own_config": {"max_batch_size": NaN}}',
    '{"kind": "K", "model": "m", "model": "other", "own_config": {}}',
])
def test_a_trial_record_of_hostile_values_is_refused(text):
    """Found by a hostile-input review: a model name ending in a newline, NaN in the model's own configuration,
    and a key given twice were each taken as bringup's own trial record."""
    from bringup.latency.trial import KIND

    with pytest.raises(BringupError) as e:
        parse_trial(text.replace('"K"', json.dumps(KIND)), "/x/trial.json")
    assert str(e.value).startswith("/x/trial.json") and "\n" not in str(e.value), e.value


class SlowLoad:
    """A Triton whose load takes longer than any deadline: each load's ``client_timeout`` recorded, then the
    gRPC deadline raised as tritonclient raises it."""

    def __init__(self) -> None:
        self.timeouts: list = []

    def load_model(self, model, config=None, client_timeout=None):
        from tritonclient.utils import InferenceServerException

        self.timeouts.append(client_timeout)
        raise InferenceServerException("Deadline Exceeded", status="StatusCode.DEADLINE_EXCEEDED")

    def is_model_ready(self, model):
        return False

    def close(self):
        pass


@pytest.mark.reliability(item=40, fault="a model (a large TensorRT engine) that loads for longer than 120 s",
                         variants=4, checks=("one clear line", "next run converges"))
def test_a_load_is_given_its_callers_bound_and_a_slow_one_is_said_as_not_loaded(monkeypatch):
    # Before: load_model ran under tritongrpc's fixed 120 s deadline whatever load_config's timeout, and its
    # Deadline Exceeded was "Triton refused to reload ..." while Triton was still loading.
    from bringup.latency import override, tritongrpc
    from bringup.latency.window import WindowError, load_config

    slow = SlowLoad()
    with pytest.raises(WindowError) as e:
        load_config(slow, "add", OWN, timeout=900)
    assert slow.timeouts == [900]
    assert str(e.value) == "add not loaded within 900 s (Triton may still be loading it)"
    with pytest.raises(WindowError):
        load_config(slow, "add", OWN)
    assert slow.timeouts[-1] == tritongrpc.LOAD_S == 600
    # The bounded client's own default for a load, when a caller gives none, is the same 600 s.
    with pytest.raises(Exception):
        tritongrpc.Bounded(slow).load_model("add", config="{}")
    assert slow.timeouts[-1] == 600
    # load_own's restore passes its own bound, and says the deadline as a load not finished.
    monkeypatch.setattr(tritongrpc, "client", lambda url, call_s=None: slow)
    said = override.load_own(Target(host="ctl", address="127.0.0.1", grpc_port=1, model="add"), OWN,
                             "3 instances", timeout=1200)
    assert slow.timeouts[-1] == 1200
    assert "add not loaded within 1200 s" in said and "refused" not in said, said
