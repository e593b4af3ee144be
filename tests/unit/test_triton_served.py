"""The triton role's audit of what Triton serves (issue 34 item 10): a configuration loaded on the running server
that neither the inventory nor the record says (an `invoke tune` cut short) is one line naming the model, what
it serves and what is wanted; an answer that is no configuration is said as such.  Against a real Triton:
tests/integration/test_tune_interrupt_local.py."""
from __future__ import annotations

import json

import pytest


@pytest.mark.reliability(item=34, fault="Triton serves a configuration that neither the inventory nor the record "
                                        "says; its config API answers damaged (empty, cut, an error, not UTF-8)",
                         checks=("one clear line",))
def test_the_audit_names_a_served_configuration_the_inventory_and_record_do_not_say():
    from roles.triton.served import serving_matches

    rendered = ('name: "add"\nbackend: "python"\nmax_batch_size: 8\n'
                'instance_group [ { kind: KIND_CPU count: 1 } ]\n'
                'dynamic_batching {\n  preferred_batch_size: [ 2, 4, 8 ]\n  max_queue_delay_microseconds: 800\n}\n')
    item = serving_matches("http://127.0.0.1:8000", "/data/models", {"add": rendered})
    # As Triton's config API writes it (uint64 as a number, as Triton 2.51 does; as a string, as protobuf's JSON).
    served = {"name": "add", "max_batch_size": 8, "instance_group": [{"name": "add_0", "kind": "KIND_CPU", "count": 1}],
              "dynamic_batching": {"preferred_batch_size": [2, 4, 8], "max_queue_delay_microseconds": 800}}
    assert item.judge(f"@@ model add\n{json.dumps(served)}\n") is None
    served["dynamic_batching"]["max_queue_delay_microseconds"] = "800"
    assert item.judge(f"@@ model add\n{json.dumps(served)}\n") is None
    served["instance_group"][0]["count"] = 3
    served["dynamic_batching"]["max_queue_delay_microseconds"] = 400
    assert item.judge(f"@@ model add\n{json.dumps(served)}\n") == (
        "triton model add serves 3 instances, window 400 µs, while the inventory and the record "
        "(/etc/bringup/triton-window.json) want 1 instance, window 800 µs: a configuration loaded on the running "
        "server that nothing records (a tune cut short?); load the model's own back on the host: touch "
        "/data/models/add/config.pbtxt && curl -sX POST http://127.0.0.1:8000/v2/repository/models/add/load, or "
        "restart Triton")
    # An answer that is no configuration is said as such, never read as one.
    for damaged, why in (("", "no answer"), ('{"error":"Request for unknown model"}', '{"error":"Request for unknown '
                                                                                        'model"}'),
                         (json.dumps(served)[:40], json.dumps(served)[:40]), ("\udcff", "\udcff")):
        assert item.judge(f"@@ model add\n{damaged}\n") == (
            f"triton model add: its configuration could not be read from "
            f"http://127.0.0.1:8000/v2/models/add/config ({why})"), damaged


def test_the_served_configuration_is_judged_only_once_every_model_is_ready():
    """One cause, one finding: a model not ready is that item's line, not also a configuration unread."""
    from tests.unit.test_auditkit import ROLES, _ctx

    items = ROLES["triton"].module.audit(_ctx("triton", gpu_profile="cpu", triton_models={"add": {
        "backend": "python", "max_batch_size": 8,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}}))
    ready, served = items[-2:]
    assert (ready.name, served.name) == ("triton models ready", "triton models serve their configuration")
    assert served.needs is ready
    ready.plan("add 000\n")
    assert served.plan("").reason == "not checked: triton model(s) not ready: add (000), want 200 from each"
