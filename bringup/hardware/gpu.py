"""Whether a host has an NVIDIA GPU, for roles that need one.

Detection is sysfs: a PCI display-class device of vendor 0x10de
(``pci.devices``), which works before any driver is installed.
"""
from __future__ import annotations

from typing import Any, Literal

from .gpu_profiles import AUTO, ProfileVars
from ..facts.driver import DRIVER_VERSION, driver_branch
from ..errors import BringupError
from ..resources.guard import Fail, Skip, unread_facts
from ..inventory.vars import want

__all__ = ["nvidia_gpus", "gpu_gate", "GpuVars", "driver_version", "driver_version_unreadable", "branch_of", "nvml_failure", "nvml_fix", "smi_unreachable", "unanswered_gpus", "UNREACHABLE_FIX", "CPU_PROFILES", "without_gpu", "nvswitch_evidence",
           "fabric_states", "fabric_elsewhere", "in_passthrough_vm", "pci_unread"]

#: gpu_profile values meaning "this host has no GPU".  The GPU classes are profiles: bringup.hardware.gpu_profiles.
CPU_PROFILES = (None, "", "cpu", "none")


def nvidia_gpus(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The NVIDIA GPUs on the PCI bus (vendor 0x10de, display class)."""
    return [d for d in facts.get("pci.devices") or [] if d.get("kind") == "gpu"]


def pci_unread(facts: dict[str, Any]) -> str | None:
    """Why ``pci.devices`` could not be read on this host (its value is then its default, no device), where the facts
    say (a role's :class:`~bringup.engine.role_contract.FactView`); None when it was read, or a plain dict."""
    unread = getattr(facts, "unread", None)
    return unread("pci.devices") if callable(unread) else None


def nvswitch_evidence(facts: dict[str, Any]) -> str | None:
    """Why this host has an NVSwitch fabric (HGX/DGX boards), in words; None: no sign of one.

    Two signs, either enough: NVSwitch functions on the PCI bus (vendor 0x10de, bridge class 0x0680, which
    ``pci.devices`` lists as kind ``other``), or a GPU whose ``nvidia-smi -q`` Fabric section shows a state
    (``nvidia.query``; N/A, None, on parts without a fabric, and on NVSwitch boards before Hopper).
    """
    switches = [d["address"] for d in facts.get("pci.devices") or []
                if d.get("vendor") == "0x10de" and str(d.get("class") or "").startswith("0x0680")]
    fabric = [g for g in (facts.get("nvidia.query") or {}).get("gpus") or [] if g.get("fabric_state")]
    if switches:
        return f"{len(switches)} NVSwitch(es) on the PCI bus (vendor 0x10de, class 0x0680: {', '.join(switches[:4])}" \
               + ("…" if len(switches) > 4 else "") + ")"
    if fabric:
        states = sorted({str(g["fabric_state"]) for g in fabric})
        return f"{len(fabric)} GPU(s) in an NVLink fabric (nvidia-smi -q Fabric State {'/'.join(states)})"
    return None


def fabric_states(facts: dict[str, Any]) -> str | None:
    """The fabric registration the GPUs' ``nvidia-smi -q`` shows, in words (``State Completed, Status Success on 8
    GPUs``; several states: each with its count); None: no GPU shows one."""
    gpus = [g for g in (facts.get("nvidia.query") or {}).get("gpus") or [] if g.get("fabric_state")]
    if not gpus:
        return None
    counts: dict[str, int] = {}
    for g in gpus:
        key = f"State {g['fabric_state']}, Status {g.get('fabric_status') or 'N/A'}"
        counts[key] = counts.get(key, 0) + 1
    return "; ".join(f"{k} on {n} GPU(s)" for k, n in sorted(counts.items()))


def in_passthrough_vm(facts: dict[str, Any]) -> bool:
    """Whether the GPUs are passed through into a VM (``nvidia-smi -q``'s Virtualization Mode ``Pass-Through``)."""
    gpus = (facts.get("nvidia.query") or {}).get("gpus") or []
    return bool(gpus) and all(str(g.get("virtualization_mode") or "").lower() == "pass-through" for g in gpus)


def fabric_elsewhere(facts: dict[str, Any]) -> str | None:
    """Why this machine runs no Fabric Manager of its own though its GPUs are in an NVLink fabric, in words; None
    when it must run one (or has no fabric).

    A pass-through VM (Virtualization Mode ``Pass-Through``) whose PCI bus shows no NVSwitch and whose every GPU's
    fabric registration is ``Completed``/``Success``: the NVSwitches stayed with the hypervisor host, whose Fabric
    Manager registered the GPUs (NVIDIA's shared NVSwitch virtualization model).  A VM given the NVSwitches too
    (full pass-through) runs Fabric Manager itself, as bare metal does.  An unreadable ``pci.devices``
    (:func:`pci_unread`) shows no bus: None, never "no NVSwitch on its PCI bus" from a listing not read.
    """
    gpus = [g for g in (facts.get("nvidia.query") or {}).get("gpus") or [] if g.get("fabric_state")]
    switches = [d for d in facts.get("pci.devices") or []
                if d.get("vendor") == "0x10de" and str(d.get("class") or "").startswith("0x0680")]
    if not gpus or switches or not in_passthrough_vm(facts) or pci_unread(facts):
        return None
    if not all(g["fabric_state"] == "Completed" and g.get("fabric_status") == "Success" for g in gpus):
        return None
    return (f"a pass-through VM whose {len(gpus)} GPU(s) joined the NVLink fabric (nvidia-smi -q Fabric State "
            "Completed, Status Success) with no NVSwitch on its PCI bus: Fabric Manager runs on the hypervisor host")


class GpuVars(ProfileVars):
    """The GPU roles' shared variables: what to do on a host without an NVIDIA GPU, and its GPU profile."""

    nvidia_without_gpu: Literal["skip", "install"] = want(
        "skip", "must be skip or install (install: set the NVIDIA stack up on a host without a GPU, "
                "e.g. an image builder)")


#: What :func:`gpu_gate` reads: a role that gates on a GPU includes it in its FACTS.
FACTS = ("pci.devices",)

def driver_version(facts: dict[str, Any]) -> str | None:
    """The loaded NVIDIA driver's version, from ``nvidia.smi`` (None: no driver answering, or a value that is no
    driver version: :func:`driver_version_unreadable` says which)."""
    smi = facts.get("nvidia.smi") or []
    drv = smi[0].get("driver_version") if smi and isinstance(smi[0], dict) else None
    return drv if isinstance(drv, str) and DRIVER_VERSION.fullmatch(drv) else None


def driver_version_unreadable(facts: dict[str, Any]) -> str | None:
    """What ``nvidia.smi`` printed as the driver version when it is no driver version (``580garbage``, ``NaN``,
    ``99999.1.1``, 5000 digits), shown quoted and cut to 40 characters; None when it is one, or none was printed."""
    smi = facts.get("nvidia.smi") or []
    drv = smi[0].get("driver_version") if smi and isinstance(smi[0], dict) else None
    if drv is None or drv == "" or (isinstance(drv, str) and DRIVER_VERSION.fullmatch(drv)):
        return None
    shown = repr(str(drv) if not isinstance(drv, (int, float)) else "(a number)")
    return shown if len(shown) <= 40 else shown[:37] + "..."


def nvml_failure(facts: dict[str, Any]) -> dict[str, Any] | None:
    """Where nvidia-smi could not start NVML (``nvidia.query``): ``{nvml_error, nvml_library_version}``, e.g. a
    ``Driver/library version mismatch`` after a driver upgrade without a reboot; None otherwise."""
    query = facts.get("nvidia.query") or {}
    return query if isinstance(query, dict) and query.get("nvml_error") else None


def smi_unreachable(facts: dict[str, Any], fact_errors: dict[str, str] | None = None) -> str | None:
    """nvidia-smi's own words where the driver answered but reached no GPU (``nvidia.query``: ``nvidia-smi cannot
    reach GPU 0000:00:06.0: Unknown Error``, ``nvidia-smi: No devices were found``; else the ``nvidia.smi`` fact's
    error in ``fact_errors`` where ``--query-gpu`` printed it: ``nvidia-smi --query-gpu cannot reach GPU ...``), with
    the loaded module's version where ``driver.owner`` read it; None otherwise.  A GPU fault (fallen off the bus,
    lost), not a missing driver."""
    from ..facts.nvidia_csv import query_unreachable  # noqa: PLC0415 - one reader

    query = facts.get("nvidia.query") or {}
    error = query.get("smi_error") if isinstance(query, dict) else None
    if not isinstance(error, str) or not error:
        said = query_unreachable((fact_errors or {}).get("nvidia.smi"))
        error = said.replace("nvidia-smi ", "nvidia-smi --query-gpu ", 1) if said else None
    if not error:
        return None
    owner = facts.get("driver.owner") or {}
    module = owner.get("version") if isinstance(owner, dict) else None
    return error + (f" (driver {module} loaded)" if isinstance(module, str) and DRIVER_VERSION.fullmatch(module) else "")


def unanswered_gpus(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """``(subject, seen)`` for each GPU whose ``nvidia-smi -q`` values are missing because nvidia-smi said it cannot
    reach it (``nvidia.query``'s ``smi_error``): the ones it named, and the PCI bus's GPUs it did not list; one
    ``("", seen)`` where it named none and the bus shows none.  Empty when nvidia-smi printed no such error."""
    query = facts.get("nvidia.query") or {}
    error = query.get("smi_error") if isinstance(query, dict) else None
    if not isinstance(error, str) or not error:
        return []
    listed = {g.get("pci_address") for g in query.get("gpus") or [] if isinstance(g, dict)}
    lost = {u["pci_address"]: u["error"] for u in query.get("unreachable_gpus") or []
            if isinstance(u, dict) and isinstance(u.get("pci_address"), str)}
    on_bus = {d["address"] for d in nvidia_gpus(facts) if isinstance(d.get("address"), str)}
    out = [(f"GPU {a}", f"not checked: nvidia-smi cannot reach GPU {a}: {lost[a]}" if a in lost
            else f"not checked: nvidia-smi -q lists no GPU {a} ({error})")
           for a in sorted((on_bus | set(lost)) - listed)]
    return out or [("", f"not checked: {error}")]


#: The fix for GPUs nvidia-smi cannot reach while a driver is loaded.
UNREACHABLE_FIX = ("a GPU fault, not a missing driver: dmesg shows its Xid/NVRM errors; drain the host, reset the GPU "
                   "(nvidia-smi -r) or reboot; lost again: reseat or replace the board")


def nvml_fix(failed: dict[str, Any], otherwise: str) -> str:
    """The fix for an NVML failure: a version mismatch wants the installed driver loaded; anything else,
    ``otherwise``."""
    if "mismatch" not in str(failed.get("nvml_error")).lower():
        return otherwise
    lib = failed.get("nvml_library_version")
    return "reboot to load the installed driver" + (f" ({lib})" if lib else "") + \
        "; nvidia-smi and CUDA programs fail until then"


def branch_of(version: str | None) -> int | None:
    """550 of ``550.90.07``; None for what is no driver version (``580garbage``, ``NaN``, 5000 digits)."""
    return driver_branch(version)


def without_gpu(vars: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Whether the host is served without a GPU: a cpu profile (one of ``KIND_CPU``), or ``auto`` on a host
    whose PCI bus shows no NVIDIA GPU (``FACTS``)."""
    profile = vars.get("gpu_profile", AUTO)
    if profile in CPU_PROFILES:
        return True
    if profile == AUTO:
        return not nvidia_gpus(facts)
    from .gpu_profiles import table

    try:
        return table(vars)[profile].kind == "KIND_CPU"
    except (KeyError, BringupError):
        return False  # an unknown profile is refused where it is validated; here it is a GPU one


def gpu_gate(host, what: str, *, without_gpu_install: bool = True) -> list | None:
    """None when a GPU role may go on; else the one resource that skips it or fails it, with why.

    No GPU on a ``cpu`` profile: skipped.  No GPU on a GPU profile: failed
    (the card is missing, unseated or not passed through).  The variable
    ``nvidia_without_gpu: install`` goes on anyway, for roles that install
    (``without_gpu_install``); one that needs the GPU itself (a container
    reserving it) fails all the same.
    """
    if nvidia_gpus(host.facts):
        return None
    unread = pci_unread(host.facts)
    if unread:
        # The listing was not read (cut, garbled): no device in it says nothing of the bus, never "no NVIDIA GPU".
        profile = host.vars.get("gpu_profile", AUTO)
        if profile in CPU_PROFILES:
            return [Skip(what, f"gpu_profile is {profile or 'unset'} (no GPU); pci.devices unreadable: the PCI bus "
                               "not read")]
        return [unread_facts(host, ("pci.devices",), what)]
    if without_gpu_install and host.vars.get("nvidia_without_gpu", "skip") == "install":
        return None
    profile = host.vars.get("gpu_profile", AUTO)
    if without_gpu(host.vars, host.facts):
        return [Skip(what, f"no NVIDIA GPU on this host (no PCI display device of vendor 0x10de) "
                           f"and gpu_profile is {profile or 'unset'}" + (" (served as cpu)" if profile == AUTO else ""))]
    return [Fail(what, f"gpu_profile is {profile} but this host has no NVIDIA GPU (no PCI display device of "
                       "vendor 0x10de under /sys/bus/pci/devices): check the card is seated and passed through, "
                       "or set gpu_profile: cpu")]
