"""Host facts: each a shell command and a pure parser (see :mod:`bringup.facts.base`).

``ALL_FACTS`` lists every fact class in gathering order; ``FACTS_BY_NAME``
maps a fact's ``name`` to its class.
"""
from __future__ import annotations

from .base import Fact, UntrustedOutput, format_cpulist, parse_cpulist, strip_comments
from .cpu import CpuTopology
from .irq import IrqAffinity, IrqInterrupts
from .net import NetInterfaces
from .nvidia import NvidiaQuery, NvidiaSmi, NvidiaTopo
from .os_ import OsBootId, OsKernel, OsRelease
from .pci import PciDevices
from .system import (
    SystemCmdline,
    SystemContainer,
    SystemCpufreq,
    SystemCpuidle,
    SystemDocker,
    SystemDockerDaemon,
    SystemSysctl,
    SystemSysctlWritable,
    SystemSystemd,
    SystemThp,
    SystemThpDefrag,
)
from .triton import TritonWindow

ALL_FACTS: list[type[Fact]] = [
    OsRelease,
    OsKernel,
    OsBootId,
    CpuTopology,
    PciDevices,
    NetInterfaces,
    IrqInterrupts,
    IrqAffinity,
    NvidiaSmi,
    NvidiaQuery,
    NvidiaTopo,
    SystemSystemd,
    SystemDocker,
    SystemDockerDaemon,
    SystemSysctl,
    SystemSysctlWritable,
    SystemCmdline,
    SystemCpufreq,
    SystemCpuidle,
    SystemThp,
    SystemThpDefrag,
    SystemContainer,
    TritonWindow,
]

FACTS_BY_NAME: dict[str, type[Fact]] = {f.name: f for f in ALL_FACTS}

__all__ = [
    "ALL_FACTS",
    "FACTS_BY_NAME",
    "Fact",
    "UntrustedOutput",
    "format_cpulist",
    "parse_cpulist",
    "strip_comments",
    "OsRelease",
    "OsKernel",
    "OsBootId",
    "CpuTopology",
    "PciDevices",
    "NetInterfaces",
    "IrqInterrupts",
    "IrqAffinity",
    "NvidiaSmi",
    "NvidiaQuery",
    "NvidiaTopo",
    "SystemSystemd",
    "SystemDocker",
    "SystemDockerDaemon",
    "SystemSysctl",
    "SystemSysctlWritable",
    "SystemCmdline",
    "SystemCpufreq",
    "SystemCpuidle",
    "SystemThp",
    "SystemThpDefrag",
    "SystemContainer",
    "TritonWindow",
]
