"""Issue 41: a GPU whose sysfs ``numa_node`` contradicts its local CPU list and ``nvidia-smi topo -m``.

No public capture of such a host was found (a firmware PCI-to-NUMA table naming the wrong node).  The host is the
DGX A100-class board of ``tests/unit/test_dgx_planner.py``, built there from its real ``lscpu`` and ``topo -m``
captures; here one GPU's sysfs ``numa_node`` in its ``pci.devices`` line is changed to another node while its
``local_cpulist`` and the real ``topo -m`` still name its own: the contradiction the firmware makes.
"""
from __future__ import annotations

import re

import pytest

from bringup.facts.pci import parse_pci_devices
from bringup.hardware.platform import checks as platform_checks
from bringup.hardware.topology import plan_topology

from .test_dgx_planner import GPUS, GPU_NODES, dgx_facts, pci_lines


def _contradicted(node: int) -> dict:
    facts = dgx_facts()
    lines = pci_lines()
    lines, n = re.subn(rf"^({re.escape(GPUS[0])} .*?)numa={GPU_NODES[0]} ", rf"\g<1>numa={node} ", lines,
                       count=1, flags=re.M)
    assert n == 1
    facts["pci.devices"] = parse_pci_devices(lines)
    return facts


@pytest.mark.reliability(item=41, fault="a GPU's sysfs numa_node contradicting its CPU list and topo -m",
                         checks=("one clear line",))
def test_a_gpu_whose_sysfs_node_contradicts_its_cpus_and_topology_is_placed_by_them_with_a_warn():
    wrong = (GPU_NODES[0] + 2) % 8
    plan = plan_topology(_contradicted(wrong))
    g0 = next(g for g in plan.gpus if g.pci_address == GPUS[0])
    assert g0.numa_node == wrong and g0.node == GPU_NODES[0]  # reported as read, planned where its CPUs are
    [w] = [w for w in plan.warnings if w.kind == "numa_contradiction"]
    assert f"sysfs numa_node {wrong}" in w.text and f"NUMA node {GPU_NODES[0]}'s" in w.text
    assert f"nvidia-smi topo -m says NUMA node {GPU_NODES[0]}" in w.text
    lines = [c for c in platform_checks(_contradicted(wrong), {}) if c.name == "NUMA node of a GPU"]
    assert [(c.status, c.subject) for c in lines] == [("WARN", "GPU0")] and "ACPI _PXM" in lines[0].fix
    # The real host (sysfs, CPU list and topo -m agree): no such warning, no such line.
    assert not [w for w in plan_topology(dgx_facts()).warnings if w.kind == "numa_contradiction"]
    assert not [c for c in platform_checks(dgx_facts(), {}) if c.name == "NUMA node of a GPU"]


def test_topology_siding_with_sysfs_keeps_its_node_and_still_warns():
    # Changed further: the GPU's topo -m NUMA Affinity also names the wrong node (two sources against the CPU list).
    wrong = (GPU_NODES[0] + 2) % 8
    facts = _contradicted(wrong)
    facts["nvidia.topo"]["gpus"][0]["numa_node"] = wrong
    plan = plan_topology(facts)
    g0 = next(g for g in plan.gpus if g.pci_address == GPUS[0])
    assert g0.node == wrong
    [w] = [w for w in plan.warnings if w.kind == "numa_contradiction"]
    assert f"nvidia-smi topo -m says NUMA node {wrong}: planned on node {wrong}" in w.text
