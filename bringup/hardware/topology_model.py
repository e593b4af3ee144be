"""The topology plan as values: the planner's variables (:class:`PlannerVars`) and what a plan is made of
(nodes, GPU placements, pinned IRQs, warnings).  Cut from bringup/hardware/topology.py (issue 43 item 2) so that the
planner, the fact readers, the crossing warnings and the text output each read these values from one leaf.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import field_validator

from ..facts.base import format_cpulist
from ..inventory.vars import RoleVars, check, defaults_of, want

_KINDS = ("nic", "nvme", "storage")


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class PlannerVars(RoleVars):
    """The planner's variables: every role that plans includes them."""

    irq_cpus_per_node: int = want(2, "must be a whole number >= 1 (CPUs per NUMA node for IRQs)", ge=1)
    triton_cpus_per_gpu: Any = want(4, "must be a whole number >= 1 or 'auto'")
    #: PCI device kinds whose IRQs go to the housekeeping CPUs.
    irq_device_kinds: list[Literal["nic", "nvme", "storage"]] = want(
        ["nic", "nvme", "storage"], f"must be a list of {', '.join(_KINDS)}")

    @field_validator("triton_cpus_per_gpu")
    @classmethod
    def _per_gpu(cls, v: Any) -> Any:
        if v != "auto" and (not _is_count(v) or v < 1):
            raise ValueError("must be a whole number >= 1 or 'auto'")
        return v


#: Planner variables and their defaults (every role that plans includes them).
DEFAULTS: dict[str, Any] = defaults_of(PlannerVars)


def validate_vars(vars: dict[str, Any]) -> None:
    """Refuse malformed planner variables (before any host is touched)."""
    check(PlannerVars, vars)


#: PlanWarning kinds: ``numa_unknown`` (a device's node unknown and not resolved from
#: evidence), ``numa_inferred`` (resolved from local CPUs or nvidia-smi topo -m),
#: ``interconnect`` (GPU traffic crosses sockets, or NUMA nodes of unknown sockets),
#: ``numa_distance`` (crosses NUMA nodes of one socket), ``topology`` (SMT, L3 or NUMA
#: unknown), ``l3`` (Triton CPUs span or share L3 groups), ``irqs`` (a device without IRQs),
#: ``numa_off`` (one NUMA node on several sockets: planned per package), ``refused`` (a
#: device whose sysfs line the fact refused: left out of the plan).
WARNING_KINDS = ("numa_unknown", "numa_inferred", "interconnect", "numa_distance", "topology", "l3", "irqs",
                 "numa_off", "refused", "numa_contradiction")


@dataclass(frozen=True)
class PlanWarning:
    """What the planner could not fix or had to guess: a kind (:data:`WARNING_KINDS`), the
    device or node it is about, and one line for people."""

    kind: str
    subject: str
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class IrqPin:
    """One IRQ pinned to housekeeping CPUs."""

    irq: int
    cpus: list[int]
    device: str
    name: str = ""


@dataclass
class DeviceIrqs:
    """A NIC or storage controller whose IRQs the plan pins."""

    name: str
    kind: str
    pci_address: str | None
    numa_node: int  # as the host reported it (-1: unknown)
    node: int  # where it is planned (-1: unknown, IRQs on every node's housekeeping CPUs)
    irqs: list[int] = field(default_factory=list)


@dataclass
class GpuPlacement:
    """A GPU and the Triton CPUs planned for it."""

    index: int
    name: str
    pci_address: str | None
    numa_node: int
    node: int
    cpus: list[int] = field(default_factory=list)
    l3_groups: list[str] = field(default_factory=list)


@dataclass
class NodePlan:
    """How one NUMA node's CPUs are used."""

    node: int
    cpus: list[int]
    irq_cpus: list[int]
    irq_siblings: list[int]
    triton: dict[str, list[int]]
    rest: list[int]


@dataclass
class TopologyPlan:
    """The whole plan: nodes, GPUs, pinned IRQs, and what could not be fixed."""

    numa_known: bool
    irq_cpus_per_node: int
    triton_cpus_per_gpu: int | str
    nodes: list[NodePlan]
    gpus: list[GpuPlacement]
    devices: list[DeviceIrqs]
    irqs: list[IrqPin]
    warnings: list[PlanWarning]
    #: What a node of the plan is: ``numa`` (the kernel's NUMA nodes) or ``socket`` (one
    #: physical package each, when the kernel shows one node on several sockets).
    unit: str = "numa"

    @property
    def triton_cpus(self) -> list[int]:
        """Every Triton CPU (the compose ``cpuset:``; irqbalance bans them)."""
        return sorted({c for g in self.gpus for c in g.cpus})

    @property
    def irq_cpus(self) -> list[int]:
        return sorted({c for n in self.nodes for c in n.irq_cpus})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["triton_cpus"] = self.triton_cpus
        d["triton_cpuset"] = format_cpulist(self.triton_cpus)
        d["irq_cpus"] = self.irq_cpus
        return d


