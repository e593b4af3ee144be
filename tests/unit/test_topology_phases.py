"""The planner's phases on their own (issue 23): each takes values and returns values, its
warnings among them, and leaves what it was given as it was; and the one triton_cpuset rule
that the triton role and the checklist both ask."""
from __future__ import annotations

import copy

import pytest

import roles.triton as triton_role
from bringup.checklist.pages import cpu_plan
from bringup.errors import InputError
from bringup.facts.base import parse_cpulist
from bringup.hardware.topology import (NodePlan, irq_pins, place_gpus, plan_node, resolve_node, take_triton,
                              triton_count, plan_topology, triton_pin)
from harness.captures import topology_from_numa

from .test_topology import h200_facts

TWO = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}


def gpu(i: int, numa: int = -1, local: list[int] | None = None) -> dict:
    return {"index": i, "name": f"GPU{i}", "model": None, "pci_address": f"0000:{i:02x}:00.0",
            "numa_node": numa, "local_cpus": local or [], "topo": None}


def test_resolve_returns_the_node_and_the_warning_instead_of_appending_it():
    assert resolve_node(TWO, "numa", "nic x", 1, []) == (1, None)
    node, said = resolve_node(TWO, "numa", "nic x", -1, [5, 6])
    assert node == 1 and (said.kind, said.subject) == ("numa_inferred", "nic x")
    assert "local CPUs 5-6 are NUMA node 1's" in said.text
    assert resolve_node(TWO, "numa", "nic x", -1, [3, 4]) == (-1, None)  # spans nodes: unresolved, said by the caller
    node, said = resolve_node({0: [0, 1]}, "numa", "nic y", -1, [])
    assert node == 0 and said.kind == "numa_unknown" and "the only NUMA node 0" in said.text
    # Per package the kernel's one node says nothing: numa_node 0 is not taken as socket 0.
    node, said = resolve_node(TWO, "socket", "GPU0", 0, [4])
    assert node == 1 and "socket 1's" in said.text


def test_gpus_without_a_node_go_to_the_emptiest_node_and_their_input_is_left_alone():
    gpus = [gpu(0, 1), gpu(1), gpu(2), gpu(3, local=[0, 1])]
    before = copy.deepcopy(gpus)
    placed, warnings = place_gpus(gpus, TWO, "numa")
    assert gpus == before  # copied with their node, never mutated
    assert [(g["node"], g["guessed"]) for g in placed] == [(1, False), (0, True), (0, True), (0, False)]
    assert [(w.kind, w.subject) for w in warnings] == [("numa_unknown", "GPU1"), ("numa_unknown", "GPU2"),
                                                       ("numa_inferred", "GPU3")]
    assert "planned on NUMA node 0, the one with the fewest GPUs" in warnings[0].text


@pytest.mark.parametrize("per_gpu,free,n,tpc,want", [
    (4, 30, 2, 2, 4), ("auto", 30, 2, 2, 14), ("auto", 15, 1, 2, 14), ("auto", 1, 1, 2, 1), ("auto", 9, 0, 1, 0)])
def test_triton_count_auto_shares_the_free_cpus_in_whole_cores(per_gpu, free, n, tpc, want):
    assert triton_count(per_gpu, free, n, tpc) == want


def test_take_triton_prefers_the_tightest_clean_l3_group_and_leaves_the_input_alone():
    groups = {"0": [[2, 3], [4, 5]], "1": [[8, 9], [10, 11], [12, 13]], "2": [[16, 17], [18, 19]]}
    before = copy.deepcopy(groups)
    taken, used, left = take_triton(groups, 4, dirty={"0"})
    assert groups == before
    assert (taken, used) == ([16, 17, 18, 19], ["2"])  # "0" fits as tightly but holds the IRQ CPUs
    assert left == {"0": [[2, 3], [4, 5]], "1": [[8, 9], [10, 11], [12, 13]], "2": []}
    taken, used, left = take_triton(left, 6, dirty={"0"})
    assert (taken, used) == ([8, 9, 10, 11, 12, 13], ["1"])
    # No group has room: the biggest clean ones first, then the dirty one.
    taken, used, _ = take_triton({"0": [[2, 3]], "1": [[8, 9]], "2": [[16, 17], [18, 19]]}, 5, dirty={"0"})
    assert (taken, used) == ([8, 16, 17, 18, 19], ["2", "1"])


def test_plan_node_splits_one_node_and_warns_once_about_a_shared_l3():
    cores = {c: [c, c + 8] if c < 8 else [c - 8, c] for c in range(16)}
    l3_of = {c: "0" for c in range(16)}
    gpus = [{**gpu(0, 0), "node": 0}, {**gpu(1, 0), "node": 0}]
    plan, placed, warnings = plan_node(0, list(range(16)), gpus, cores, l3_of, 2, 4, "NUMA node", True)
    assert plan == NodePlan(0, list(range(16)), [0, 1], [8, 9], {"GPU0": [2, 3, 10, 11], "GPU1": [4, 5, 12, 13]},
                            [6, 7, 8, 9, 14, 15])  # the rest: the IRQ CPUs' siblings included
    assert [(p.name, p.cpus, p.l3_groups) for p in placed] == [("GPU0", [2, 3, 10, 11], ["0"]),
                                                               ("GPU1", [4, 5, 12, 13], ["0"])]
    assert [(w.kind, w.subject) for w in warnings] == [("l3", "NUMA node 0")]
    with pytest.raises(InputError, match=r"NUMA node 0 has 16 CPUs: 2 IRQ CPU\(s\).*need 14"):
        plan_node(0, list(range(16)), gpus, cores, l3_of, 2, 7, "NUMA node", True)


def test_irq_pins_round_robin_per_node_across_devices_and_every_node_when_unknown():
    nodes = [NodePlan(0, [0, 1, 2], [0, 1], [], {}, [2]), NodePlan(1, [4, 5, 6], [4], [], {}, [5, 6])]

    def dev(name, kind, node, irqs):
        return {"name": name, "kind": kind, "pci_address": None, "numa_node": node, "node": node, "irqs": irqs,
                "irq_names": {}}

    devices = [dev("nvme0", "nvme", 0, [20, 21]), dev("eth0", "nic", 0, [10, 11, 12]), dev("eth1", "nic", 1, [30]),
               dev("odd", "storage", -1, [40]), dev("ib0", "nic", 1, [])]
    plans, pins, warnings = irq_pins(devices, nodes)
    assert [(d.name, d.node) for d in plans] == [("odd", -1), ("eth0", 0), ("nvme0", 0), ("eth1", 1), ("ib0", 1)]
    assert {p.irq: p.cpus for p in pins} == {10: [0], 11: [1], 12: [0], 20: [1], 21: [0], 30: [4], 40: [0, 1, 4]}
    assert [p.irq for p in pins] == sorted(p.irq for p in pins)
    assert [(w.kind, w.subject) for w in warnings] == [("irqs", "nic ib0")]


@pytest.mark.parametrize("value,pin", [(None, None), ("", None), (0, "0"), ("0", "0"), ("4-7", "4-7"),
                                       (False, None), (True, None)])
def test_triton_pin_is_one_rule(value, pin):
    assert triton_pin({"triton_cpuset": value}) == pin
    assert triton_pin({}) is None


@pytest.mark.parametrize("value", [None, "", 0, "3", "8-11,14"])
def test_the_checklist_draws_triton_where_the_role_puts_it(value):
    """The checklist's picture and the compose cpuset come from one rule: a pin (CPU 0 too)
    is where Triton runs; no pin is the plan's Triton CPUs."""
    facts = h200_facts()
    v = {"triton_cpuset": value}
    roles, _ = cpu_plan(facts, v)
    drawn = sorted(c for c, r in roles.items() if r.startswith("triton"))
    assert drawn == parse_cpulist(triton_role.cpuset(v, facts))
    assert drawn == (parse_cpulist(str(value)) if value not in (None, "") else [2, 3, 4, 5])


def test_a_two_node_host_through_the_phases_matches_its_plan():
    """The phases compose: a two-node host with a GPU per node gets each GPU's CPUs on its node."""
    facts = {"cpu.topology": topology_from_numa({"0": list(range(8)), "1": list(range(8, 16))}),
             "nvidia.topo": {"gpus": [{"index": 0, "numa_node": 1, "cpus": list(range(8, 16))},
                                      {"index": 1, "numa_node": 0, "cpus": list(range(8))}]}}
    plan = plan_topology(facts)
    assert [(g.name, g.node, g.cpus) for g in plan.gpus] == [("GPU0", 1, [10, 11, 12, 13]), ("GPU1", 0, [2, 3, 4, 5])]
