"""Host facts: each a shell command and a pure parser (see :mod:`bringup.facts.base`).

A fact class registers itself when it is defined: ``ALL_FACTS`` lists every fact class in gathering
order, ``FACTS_BY_NAME`` maps a fact's ``name`` to its class; both are read-only views of one registry.
:data:`MODULES` names the module of each shipped fact, in gathering order: a run imports only the modules
of the facts its roles read (:func:`named`), so a sysctl no-op does not load the NVIDIA, PCI or Triton
parsers (issue 42).  Reading ``ALL_FACTS`` or ``FACTS_BY_NAME`` here imports every module (``invoke facts``,
a saved facts file).  A new fact is added to :data:`MODULES` once (tests/unit/test_facts_live.py holds the
table to the modules' classes).

May import: leaves, inventory, ssh, latency.
(``leaves``: the shared modules at bringup/'s top. The layer order, lowest first, is
tests/unit/test_wings.py's ``LAYERS``: it fails on an import of a higher wing or a circle.)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import base
from .base import Fact, UntrustedOutput, format_cpulist, parse_cpulist

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["ALL_FACTS", "FACTS_BY_NAME", "MODULES", "known", "named", "Fact", "UntrustedOutput", "format_cpulist",
           "parse_cpulist"]

#: Every shipped fact's name -> its module in this package, in gathering order.
MODULES: dict[str, str] = {
    "os.release": "os_", "os.kernel": "os_", "os.boot_id": "os_",
    "cpu.topology": "cpu",
    "pci.devices": "pci",
    "net.interfaces": "net", "net.infiniband": "net",
    "irq.interrupts": "irq", "irq.affinity": "irq",
    "nvidia.smi": "nvidia", "nvidia.query": "nvidia", "nvidia.topo": "nvidia", "nvidia.nvlink": "nvidia",
    "driver.owner": "driver", "driver.fabric_manager": "driver",
    "system.systemd": "system", "system.docker": "system", "system.docker_daemon": "system",
    "system.sysctl": "system", "system.sysctl_writable": "system", "system.cmdline": "system",
    "system.cpufreq": "system", "system.cpuidle": "system", "system.thp": "system",
    "system.thp_defrag": "system", "system.container": "system",
    "triton.window": "triton",
    "kernel.xid": "kernel",
}

# The registry keeps this order whichever module is imported first; a fact defined elsewhere comes after.
base.rank(MODULES)


def known() -> list[str]:
    """Every fact name a role may declare, without importing a fact module: the shipped ones (:data:`MODULES`)
    and any defined elsewhere so far (a project's own ``Fact`` class, registered when its module ran)."""
    return list(dict.fromkeys([*MODULES, *base.FACTS_BY_NAME]))


def named(names: Iterable[str]) -> list[type[Fact]]:
    """The classes of the facts ``names`` (shipped or already defined), in gathering order, importing only their
    modules.  A name no module defines raises KeyError (the callers check names against :data:`MODULES`)."""
    wanted = set(names)
    for module in dict.fromkeys(MODULES[n] for n in wanted if n in MODULES):
        importlib.import_module(f"{__name__}.{module}")
    missing = wanted - set(base.FACTS_BY_NAME)
    if missing:
        raise KeyError(", ".join(sorted(missing)))
    return [f for f in base.ALL_FACTS if f.name in wanted]


def _every_module() -> None:
    for module in dict.fromkeys(MODULES.values()):
        importlib.import_module(f"{__name__}.{module}")


def __getattr__(name: str) -> Any:
    # Every fact: its modules imported on first use of either view.
    if name in ("ALL_FACTS", "FACTS_BY_NAME"):
        _every_module()
        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
