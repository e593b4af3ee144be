"""The topology planner: host facts in, a CPU and IRQ plan out (pure, no host).

Each NUMA node's CPUs are split three ways:

- **housekeeping** (``irq_cpus``): the first ``irq_cpus_per_node`` cores of
  the node (one thread each); they take the IRQs of the node's NICs and
  storage controllers (NVMe and others), round-robin one CPU per IRQ;
- **Triton** CPUs, ``triton_cpus_per_gpu`` per GPU on the GPU's own node,
  taken as whole cores from one L3 group when one has room (L3 groups without
  housekeeping CPUs first), never an IRQ CPU or its SMT sibling;
- the **rest** (the IRQ CPUs' siblings included): the OS and everything else.

``numa_node = -1`` (VMs, some boards) means unknown, and each such device is
resolved on its own, never moving the others: on a one-node host it is planned
on that node; on a multi-node host its local CPUs decide when they fall in one
node (a GPU's NUMA Affinity from ``nvidia-smi topo -m`` first).  A device still
unresolved keeps node -1: its IRQs go to every node's housekeeping CPUs, and a
GPU is planned on the node with the fewest GPUs.  Each case is a warning about
that device.  What the planner cannot fix (a GPU without a NIC on its node, all
GPUs on one node and the NICs on another, every NIC ``SYS`` to every GPU) is a
warning too, worded by sockets (lscpu's socket column): between sockets it
crosses the socket interconnect, between NUMA nodes of one socket (EPYC NPS2/4,
Intel SNC) it is a shorter, in-socket hop.  Warnings are values
(:class:`PlanWarning`: kind, subject, text).  A plan that cannot fit raises
:class:`InputError` naming the numbers.

A kernel that shows one NUMA node on a host of several sockets (``numa=off``, or
NUMA off in the firmware) hides where every device is: the plan is then made per
physical package (``plan.unit == "socket"``: each "node" of the plan is a socket),
so that the GPUs' Triton CPUs are spread over the sockets instead of all landing
on the first one, and it says so.  Every network function (Ethernet, InfiniBand
with or without a netdev) is a NIC, named by its netdev, else its RDMA device
(``mlx5_0``), else its address.  A device whose sysfs line the fact refused
(``refused``: a local CPU list running backwards) is left out of the plan alone,
with a warning naming it; a GPU among them is still planned, from
``nvidia-smi topo -m`` or as unknown.

    plan = plan_topology(facts, {"irq_cpus_per_node": 2, "triton_cpus_per_gpu": 4})
    plan.triton_cpus            # [4, 5, 6, 7]
    plan.to_dict()              # JSON-able

Facts read: ``cpu.topology``, ``pci.devices``, ``net.interfaces``,
``irq.interrupts``, ``nvidia.smi`` and ``nvidia.topo`` (all optional but the
CPU topology).

The planner's parts live beside it: its variables and the plan's values in bringup/hardware/topology_model.py, what it
reads from the facts in bringup/hardware/topology_facts.py, the warnings about what it cannot fix (sockets and NICs) in
bringup/hardware/topology_crossing.py, the text tables in bringup/hardware/topology_text.py and the picture in
bringup/hardware/topology_svg.py.  The names callers use are importable from here.
"""
from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..facts.base import format_cpulist
from ..process import command
from .topology_crossing import misplaced
from .topology_facts import FACTS, cores_of, device_kind, gpus_of, io_devices, l3_groups_of, topo_only_nics
from .topology_model import (DEFAULTS, WARNING_KINDS, DeviceIrqs, GpuPlacement, IrqPin, NodePlan, PlannerVars,
                             PlanWarning, TopologyPlan, validate_vars)

__all__ = [
    "DEFAULTS",
    "FACTS",
    "WARNING_KINDS",
    "PlannerVars",
    "DeviceIrqs",
    "GpuPlacement",
    "IrqPin",
    "NodePlan",
    "PlanWarning",
    "TopologyPlan",
    "validate_vars",
    "plan_topology",
    "cpu_roles",
    "triton_pin",
    "device_kind",
]


def _unit(unit: str) -> str:
    return "socket" if unit == "socket" else "NUMA node"


def resolve_node(cpu_nodes: dict[int, list[int]], unit: str, what: str, numa: int | None,
             local_cpus: list[int] | None) -> tuple[int, PlanWarning | None]:
    """A reported numa_node (maybe -1) → a planning node for one device, with the warning about
    that device; -1 when nothing tells its node.  Per package (``unit`` ``socket``) a reported
    numa_node says nothing (the kernel's one node): only local CPUs place a device."""
    word = _unit(unit)
    if unit == "socket":
        numa = -1 if numa is None else numa
    elif numa is not None and numa in cpu_nodes:
        return numa, None
    if len(cpu_nodes) == 1:
        only = next(iter(cpu_nodes))
        return only, PlanWarning("numa_unknown", what, f"{what}: numa_node {numa} (unknown); "
                                 f"planned on the only {word} {only}")
    if local_cpus:
        hits = [n for n, cpus in cpu_nodes.items() if set(local_cpus) <= set(cpus)]
        if len(hits) == 1:
            return hits[0], PlanWarning("numa_inferred", what, f"{what}: numa_node {numa} (unknown); its local "
                                        f"CPUs {format_cpulist(local_cpus)} are {word} {hits[0]}'s")
    return -1, None


def _unresolved_why(unit: str, local_cpus: list[int] | None) -> str:
    """Why :func:`resolve_node` found no node: words that end a warning's clause."""
    if not local_cpus:
        return "no local CPU list"
    return f"its local CPUs {format_cpulist(local_cpus)} span {_unit(unit)}s"


def plan_topology(facts: dict[str, Any], vars: dict[str, Any] | None = None) -> TopologyPlan:
    """Plan CPUs and IRQs from a host's facts; see the module docstring.

    A composition of pure phases, each taking values and returning values (its warnings among
    them, in the order people read them): the planning nodes and host warnings (:func:`planning_nodes`,
    :func:`topology_warnings`), the GPUs' and the devices' nodes (:func:`place_gpus`, :func:`place_devices`,
    :func:`place_topo_nics`, each device through :func:`resolve_node`), each node's CPU split with L3 fitting
    (:func:`plan_node`), the IRQ pins (:func:`irq_pins`), then what the plan cannot fix (:func:`misplaced`).
    The phases are public so that each can be read and tested on its own."""
    v = {**DEFAULTS, **(vars or {})}
    validate_vars(v)
    per_node_irq: int = v["irq_cpus_per_node"]
    per_gpu: int | str = v["triton_cpus_per_gpu"]
    kinds: list[str] = v["irq_device_kinds"]
    topo = facts.get("cpu.topology") or {}
    numa_known = bool(topo.get("numa_known", True))
    cpu_nodes, unit, warnings = planning_nodes(topo, numa_known)
    warnings += topology_warnings(topo)
    gpus, said = place_gpus(gpus_of(facts), cpu_nodes, unit)
    warnings += said
    found, refused = io_devices(facts, kinds)
    devices, said = place_devices(found, cpu_nodes, unit)
    warnings += refused + said
    topo_nics: list[dict[str, Any]] = []
    if "nic" in kinds and not any(d["kind"] == "nic" for d in devices):
        topo_nics, said = place_topo_nics(facts, gpus, cpu_nodes, unit)
        warnings += said
    core_of, l3_of = cores_of(topo), l3_groups_of(topo)
    node_plans: list[NodePlan] = []
    placements: list[GpuPlacement] = []
    for node, cpus in cpu_nodes.items():
        plan, placed, said = plan_node(node, cpus, [g for g in gpus if g["node"] == node], core_of, l3_of,
                                        per_node_irq, per_gpu, _unit(unit), bool(topo.get("l3_groups")))
        node_plans.append(plan)
        placements += placed
        warnings += said
    dev_plans, pins, said = irq_pins(devices + topo_nics, node_plans)
    warnings += said
    warnings += misplaced(facts, topo, cpu_nodes, placements, dev_plans, devices + topo_nics)
    placements.sort(key=lambda g: g.index)
    return TopologyPlan(numa_known, per_node_irq, per_gpu, node_plans, placements, dev_plans, pins, warnings, unit)


def planning_nodes(topo: dict[str, Any], numa_known: bool) -> tuple[dict[int, list[int]], str, list[PlanWarning]]:
    """The nodes to plan on (node → CPUs), what a node is (``numa``, or ``socket`` when the
    kernel shows one NUMA node on several sockets: one physical package each), and what the
    host's NUMA view needs said; no CPU topology at all is an :class:`InputError`."""
    nodes_all = {int(k): list(c) for k, c in (topo.get("numa_nodes") or {}).items()}
    cpu_nodes = {n: c for n, c in sorted(nodes_all.items()) if c}
    if not cpu_nodes:
        raise InputError("no CPU topology in the facts (cpu.topology is empty: not gathered, or its output refused; "
                         f"see the errors of {command('facts')}): cannot plan")
    packages = _packages(topo, cpu_nodes)
    if packages:
        # One NUMA node on several sockets: the kernel hides every device's socket.  Planned
        # per package, so that the GPUs' Triton CPUs are spread over the sockets.
        (only, only_cpus), = cpu_nodes.items()
        seen = f"one NUMA node (node {only}: CPUs {format_cpulist(only_cpus)})" if numa_known else "no NUMA nodes"
        return packages, "socket", [PlanWarning(
            "numa_off", "host", f"the kernel shows {seen} on {len(packages)} sockets (numa=off on the kernel "
            "command line, or NUMA off in the firmware): planned per physical package ("
            + "; ".join(f"socket {p}: {format_cpulist(c)}" for p, c in packages.items())
            + "); the kernel tells no device's socket")]
    if not numa_known:
        return cpu_nodes, "numa", [PlanWarning("topology", "host",
                                               "the kernel reports no NUMA nodes: planned as a single node")]
    return cpu_nodes, "numa", []


def topology_warnings(topo: dict[str, Any]) -> list[PlanWarning]:
    """What the CPU topology leaves unknown: SMT siblings on an SMT host, L3 groups."""
    out = []
    if topo.get("smt_known") is False and (topo.get("threads_per_core") or 1) > 1:
        out.append(PlanWarning("topology", "host", f"SMT siblings unknown ({topo.get('threads_per_core')} threads "
                               "per core): Triton CPUs may share cores with IRQ CPUs"))
    if not topo.get("l3_groups"):
        out.append(PlanWarning("topology", "host", "L3 groups unknown: each NUMA node is taken as one L3 group"))
    return out


def place_gpus(gpus: list[dict[str, Any]], cpu_nodes: dict[int, list[int]],
                unit: str) -> tuple[list[dict[str, Any]], list[PlanWarning]]:
    """Each GPU (from :func:`~bringup.hardware.topology_facts.gpus_of`) with its planning ``node``, and ``guessed`` when nothing
    told its node: Triton needs CPUs of some node, so it goes on the one with the fewest GPUs
    placed before it."""
    word = _unit(unit)
    placed: list[dict[str, Any]] = []
    warnings: list[PlanWarning] = []
    for g in gpus:
        if g.get("refused"):
            warnings.append(PlanWarning("refused", g["name"], f"{g['name']} ({g['pci_address']}): its sysfs line was "
                                        f"refused ({g['refused']}): planned without it"
                                        + (", from nvidia-smi topo -m" if g.get("numa_from_topo") else "")))
        if g.get("numa_from_topo") and g["pci_address"] and len(cpu_nodes) > 1 and g["numa_node"] in cpu_nodes \
                and unit == "numa":
            warnings.append(PlanWarning("numa_inferred", g["name"], f"{g['name']}: numa_node -1 (unknown) in sysfs; "
                                        f"NUMA node {g['numa_node']} from nvidia-smi topo -m"))
        contradiction = _numa_contradiction(g, cpu_nodes) if unit == "numa" else None
        if contradiction is not None:
            node, said = contradiction
        else:
            node, said = resolve_node(cpu_nodes, unit, g["name"], g["numa_node"], g["local_cpus"])
        warnings += [said] if said else []
        guessed = node == -1
        if guessed:
            load = {n: sum(1 for x in placed if x["node"] == n) for n in cpu_nodes}
            node = min(cpu_nodes, key=lambda n: (load[n], n))
            seen = "the kernel's one NUMA node tells no socket" if unit == "socket" else \
                f"numa_node {g['numa_node'] if g['numa_node'] is not None else -1} (unknown)"
            warnings.append(PlanWarning("numa_unknown", g["name"], f"{g['name']}: {seen} and "
                                        f"{_unresolved_why(unit, g['local_cpus'])}: planned on {word} {node}, the one "
                                        "with the fewest GPUs; check which socket its slot is on"))
        placed.append({**g, "node": node, "guessed": guessed})
    return placed, warnings


def _numa_contradiction(g: dict[str, Any], cpu_nodes: dict[int, list[int]]) -> tuple[int, PlanWarning] | None:
    """A GPU whose sysfs ``numa_node`` names one NUMA node while its local CPU list lies wholly in another: the
    node it is planned on and the warning that names the contradiction; None when they agree (or nothing to hold
    the node against).  The CPU list wins when ``nvidia-smi topo -m`` agrees with it, or says nothing (two sources
    against one); where topo -m sides with sysfs, sysfs's node is kept, said all the same."""
    numa, cpus = g.get("numa_node"), g.get("local_cpus") or []
    if g.get("numa_from_topo") or numa not in cpu_nodes or not cpus or len(cpu_nodes) < 2:
        return None
    hits = [n for n, c in cpu_nodes.items() if set(cpus) <= set(c)]
    if len(hits) != 1 or hits[0] == numa:
        return None
    other = hits[0]
    topo = (g.get("topo") or {}).get("numa_node")
    said = f"{g['name']}: sysfs numa_node {numa}, but its local CPUs {format_cpulist(cpus)} are NUMA node {other}'s"
    if topo == numa:
        return numa, PlanWarning("numa_contradiction", g["name"], said + f"; nvidia-smi topo -m says NUMA node {numa}: "
                                 f"planned on node {numa}; check the firmware's PCI-to-NUMA table (ACPI _PXM/SRAT)")
    agree = f" and nvidia-smi topo -m says NUMA node {other}" if topo == other else ""
    return other, PlanWarning("numa_contradiction", g["name"], said + agree + f": planned on node {other}; the "
                              "firmware's PCI-to-NUMA table (ACPI _PXM/SRAT) is likely wrong: check the BIOS")


def place_devices(devices: list[dict[str, Any]], cpu_nodes: dict[int, list[int]],
                   unit: str) -> tuple[list[dict[str, Any]], list[PlanWarning]]:
    """Each NIC or storage controller (from :func:`~bringup.hardware.topology_facts.io_devices`) with its planning ``node``: -1
    when nothing tells it (its IRQs then go to every node's housekeeping CPUs)."""
    placed: list[dict[str, Any]] = []
    warnings: list[PlanWarning] = []
    for d in devices:
        what = f"{d['kind']} {d['name']}"
        node, said = resolve_node(cpu_nodes, unit, what, d["numa_node"], d["local_cpus"])
        warnings += [said] if said else []
        if node == -1:
            seen = "the kernel's one NUMA node tells no socket" if unit == "socket" else "numa_node -1 (unknown)"
            warnings.append(PlanWarning("numa_unknown", what, f"{what}: {seen} and "
                                        f"{_unresolved_why(unit, d['local_cpus'])}: its IRQs go to the housekeeping "
                                        f"CPUs of every {_unit(unit)}"))
        placed.append({**d, "node": node})
    return placed, warnings


def place_topo_nics(facts: dict[str, Any], gpus: list[dict[str, Any]], cpu_nodes: dict[int, list[int]],
                     unit: str) -> tuple[list[dict[str, Any]], list[PlanWarning]]:
    """NICs known from ``nvidia-smi topo -m`` alone, with their planning ``node``: they follow
    the placed GPUs whose node is known, never a guessed one."""
    word = _unit(unit)
    gpu_node = {g["index"]: g["node"] for g in gpus if not g["guessed"]}
    placed: list[dict[str, Any]] = []
    warnings: list[PlanWarning] = []
    for d in topo_only_nics(facts, gpu_node, list(cpu_nodes)):
        what = f"nic {d['name']}"
        if d["inferred"] in cpu_nodes:
            node = d["inferred"]
            warnings.append(PlanWarning("numa_inferred", what, f"{what}: known from nvidia-smi topo -m only; {word} "
                                        f"{node} inferred from its links to the GPUs"))
        elif len(cpu_nodes) == 1:
            node, said = resolve_node(cpu_nodes, unit, what, -1, [])
            warnings += [said] if said else []
        else:
            node = -1
            warnings.append(PlanWarning("numa_unknown", what, f"{what}: known from nvidia-smi topo -m only, and "
                                        f"its links to the GPUs name no single {word}"))
        placed.append({**d, "node": node})
    return placed, warnings


def _node_cores(cpus: list[int], core_of: dict[int, list[int]]) -> list[list[int]]:
    """A node's cores in CPU order, each as its CPUs on that node."""
    node_set = set(cpus)
    cores: list[list[int]] = []
    seen: set[int] = set()
    for c in sorted(cpus):
        if c in seen:
            continue
        core = [x for x in core_of.get(c, [c]) if x in node_set]
        seen.update(core)
        cores.append(core)
    return cores


def triton_count(per_gpu: int | str, free: int, n_gpus: int, threads_per_core: int) -> int:
    """Triton CPUs per GPU on a node: ``triton_cpus_per_gpu``, or for ``auto`` the node's free
    CPUs shared by its GPUs, rounded down to whole cores when each gets at least one core."""
    if per_gpu != "auto":
        return int(per_gpu)
    want = free // n_gpus if n_gpus else 0
    if want >= threads_per_core:
        want -= want % threads_per_core  # whole cores
    return want


def take_triton(groups: dict[str, list[list[int]]], want: int,
                 dirty: set[str]) -> tuple[list[int], list[str], dict[str, list[list[int]]]]:
    """``want`` Triton CPUs for one GPU from the free cores by L3 group (``groups``: L3 group →
    its free cores in CPU order): the L3 groups it used, and the groups left for the next GPU.
    One group when one has room, clean groups (none of the IRQ CPUs, ``dirty``) first, then the
    tightest fit, keeping big groups whole for others; else the biggest groups, clean first."""
    left = {gid: list(cs) for gid, cs in groups.items()}
    avail = {gid: sum(len(c) for c in cs) for gid, cs in left.items()}
    fits = [gid for gid, n in avail.items() if n >= want]
    if fits:
        order = [sorted(fits, key=lambda gid: (gid in dirty, avail[gid], _natural(gid)))[0]]
    else:
        order = sorted((gid for gid in avail if avail[gid]), key=lambda gid: (gid in dirty, -avail[gid]))
    taken: list[int] = []
    used: list[str] = []
    for gid in order:
        while left[gid] and len(taken) < want:
            core = left[gid].pop(0)
            taken += core[: want - len(taken)]
            if gid not in used:
                used.append(gid)
        if len(taken) >= want:
            break
    return sorted(taken), used, left


def plan_node(node: int, cpus: list[int], gpus: list[dict[str, Any]], core_of: dict[int, list[int]],
               l3_of: dict[int, str], per_node_irq: int, per_gpu: int | str, word: str,
               l3_known: bool) -> tuple[NodePlan, list[GpuPlacement], list[PlanWarning]]:
    """One node's CPU split (housekeeping CPUs, their siblings, Triton CPUs of its ``gpus``, the
    rest), its GPUs' placements in the order given, and the L3 warnings; a split that cannot
    fit is an :class:`InputError` naming the numbers."""
    where = f"{word} {node}"
    cores = _node_cores(cpus, core_of)
    if per_node_irq > len(cores):
        raise InputError(f"{where} has {len(cores)} core(s) ({len(cpus)} CPUs): irq_cpus_per_node "
                         f"{per_node_irq} does not fit; lower irq_cpus_per_node")
    irq_cpus = [core[0] for core in cores[:per_node_irq]]
    siblings = [c for core in cores[:per_node_irq] for c in core[1:]]
    free_cores = cores[per_node_irq:]
    free = sum(len(c) for c in free_cores)
    want = triton_count(per_gpu, free, len(gpus), max(len(c) for c in cores))
    need = want * len(gpus)
    if gpus and (want < 1 or need > free):
        raise InputError(
            f"{where} has {len(cpus)} CPUs: {len(irq_cpus)} IRQ CPU(s) (irq_cpus_per_node) + {len(siblings)} "
            f"SMT sibling(s) leave {free}, but {len(gpus)} GPU(s) x {want} Triton CPUs "
            f"(triton_cpus_per_gpu {per_gpu}) need {need}; lower triton_cpus_per_gpu or irq_cpus_per_node")
    groups: dict[str, list[list[int]]] = {}
    for core in free_cores:
        groups.setdefault(l3_of.get(core[0], f"node{node}"), []).append(core)
    dirty = {l3_of.get(c, f"node{node}") for c in irq_cpus + siblings}
    triton: dict[str, list[int]] = {}
    placements: list[GpuPlacement] = []
    warnings: list[PlanWarning] = []
    shared_warned = False
    for g in gpus:
        taken, used, groups = take_triton(groups, want, dirty)
        if len(used) > 1:
            warnings.append(PlanWarning("l3", g["name"], f"{g['name']}: its {want} Triton CPUs span L3 groups "
                                        f"{', '.join(used)} (no single L3 group on its node has room)"))
        if l3_known and any(gid in dirty for gid in used) and not shared_warned:
            shared_warned = True
            warnings.append(PlanWarning("l3", where, f"{where}: Triton CPUs share an L3 group with the IRQ CPUs "
                                        f"{format_cpulist(irq_cpus)} (no L3 group of the node is free of them)"))
        triton[g["name"]] = taken
        placements.append(GpuPlacement(g["index"], g["name"], g["pci_address"], g["numa_node"]
                                       if g["numa_node"] is not None else -1, node, taken,
                                       [gid for gid in used if not gid.startswith("node")]))
    used_cpus = set(irq_cpus) | {c for cs in triton.values() for c in cs}
    return (NodePlan(node, sorted(cpus), irq_cpus, sorted(siblings), triton, sorted(set(cpus) - used_cpus)),
            placements, warnings)


def irq_pins(devices: list[dict[str, Any]],
              nodes: list[NodePlan]) -> tuple[list[DeviceIrqs], list[IrqPin], list[PlanWarning]]:
    """The devices as planned (by node, NICs first, then by name) and their IRQ pins (by IRQ):
    round-robin over each node's IRQ CPUs, continuing across devices; a device of unknown node
    on every node's IRQ CPUs (never a Triton one); a device without IRQs is a warning."""
    by_node = {n.node: n.irq_cpus for n in nodes}
    every = sorted({c for cs in by_node.values() for c in cs})
    turn = {n: 0 for n in by_node}
    pins: list[IrqPin] = []
    dev_plans: list[DeviceIrqs] = []
    warnings: list[PlanWarning] = []
    for d in sorted(devices, key=lambda d: (d["node"], d["kind"] != "nic", d["name"])):
        dev_plans.append(DeviceIrqs(d["name"], d["kind"], d["pci_address"], d["numa_node"], d["node"], d["irqs"]))
        for irq in d["irqs"]:
            if d["node"] == -1:
                pins.append(IrqPin(irq, every, d["name"], d["irq_names"].get(irq, "")))
                continue
            cpus = by_node[d["node"]]
            pins.append(IrqPin(irq, [cpus[turn[d["node"]] % len(cpus)]], d["name"], d["irq_names"].get(irq, "")))
            turn[d["node"]] += 1
        if not d["irqs"]:
            what = f"{d['kind']} {d['name']}"
            warnings.append(PlanWarning("irqs", what, f"{what}: no IRQs known (not in the facts): none pinned"))
    return dev_plans, sorted(pins, key=lambda p: p.irq), warnings


def _packages(topo: dict[str, Any], cpu_nodes: dict[int, list[int]]) -> dict[int, list[int]]:
    """The physical packages to plan by when the kernel shows one NUMA node on several sockets
    (lscpu's socket column); ``{}`` otherwise."""
    if len(cpu_nodes) != 1:
        return {}
    (only,) = cpu_nodes.values()
    on_node = set(only)
    packages = {int(k): sorted(set(c) & on_node) for k, c in (topo.get("sockets") or {}).items()}
    packages = {k: c for k, c in sorted(packages.items()) if c}
    return packages if len(packages) > 1 else {}


def _natural(gid: str) -> tuple:
    return (0, int(gid)) if gid.isdigit() else (1, gid)


def triton_pin(vars: dict[str, Any]) -> str | None:
    """The CPU list the inventory pins Triton to (``triton_cpuset``), or ``None`` when it leaves
    Triton's CPUs to the plan: unset or ``""``.  ``0`` is CPU 0, a pin; ``true``/``false`` are no
    CPU list (the triton role refuses them), never a pin.  The triton role's compose ``cpuset:``
    and the checklist's picture both ask this, so they cannot disagree."""
    pin = vars.get("triton_cpuset")
    if pin is None or pin == "" or isinstance(pin, bool):
        return None
    return str(pin)


def cpu_roles(facts: dict[str, Any], vars: dict[str, Any] | None = None) -> tuple[dict[int, str], list[str]]:
    """``({cpu: "irq" | "triton:GPU0" | "reserved" | "other"}, warning texts)`` for the checklist picture.

    ``reserved`` are the IRQ CPUs' SMT siblings (kept off Triton).
    """
    plan = plan_topology(facts, {k: v for k, v in (vars or {}).items() if k in DEFAULTS})
    roles: dict[int, str] = {}
    for n in plan.nodes:
        for c in n.rest:
            roles[c] = "other"
        for c in n.irq_siblings:
            roles[c] = "reserved"
        for c in n.irq_cpus:
            roles[c] = "irq"
        for gpu, cpus in n.triton.items():
            for c in cpus:
                roles[c] = f"triton:{gpu}"
    return roles, [w.text for w in plan.warnings]
