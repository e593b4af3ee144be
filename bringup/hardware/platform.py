"""Firmware and platform rules for the bring-up checklist: facts in, ``Check`` values out (pure).

Each rule gives PASS / WARN / FAIL, what was seen, and a one-line fix:
BAR1 vs GPU memory (large BAR = Above 4G decoding + Resizable BAR on), PCIe
link generation and width current vs max per GPU, C-state exposure,
kernel command line, NUMA alignment from the topology planner, persistence
mode, ECC and MIG mode.

    for c in checks(facts, host_vars): print(c.status, c.name, c.seen)
"""
from __future__ import annotations

from typing import Any

from ..checks import Check, not_checked
from ..facts.nvidia_values import link_width_ok, memory_mib_ok, pcie_generation_ok
from ..process import command

__all__ = ["Check", "checks", "fact_error_checks"]


#: Each platform GPU line's values (``nvidia.query``'s keys), their group in ``settings_unreadable`` and what a value
#: must be: a saved ``--facts`` file hands them over typed, past the parser's readers.
_MODE = (lambda v: v is None or v is True or v is False)
_SETTING_LINES = (
    ("BAR1 covers GPU memory", "bar1", (("bar1_total_mib", memory_mib_ok), ("fb_total_mib", memory_mib_ok))),
    ("PCIe link width", "pcie_width", (("pcie_width_current", link_width_ok), ("pcie_width_max", link_width_ok))),
    ("PCIe generation", "pcie_generation", (("pcie_gen_current", pcie_generation_ok),
                                            ("pcie_gen_max", pcie_generation_ok))),
    ("persistence mode", "persistence", (("persistence_mode", _MODE),)),
    ("ECC", "ecc", (("ecc_mode_current", _MODE),)),
    ("MIG mode", "mig", (("mig_mode_current", _MODE),)),
)
#: The fix of a setting nvidia-smi printed as no reading.
UNREADABLE_FIX = "read the host again (nvidia-smi -q on it); a value that stays unreadable: update the driver"


def _unreadable_settings(g: dict[str, Any]) -> dict[str, str]:
    """``{check name: what was seen}`` for each platform line whose values are no reading: named by ``nvidia-smi
    -q`` (``settings_unreadable``: ``PCIe Generation Current '99'``), or a saved value out of its range or of
    another type (``pcie_gen_current 99``), or a current generation or width above its Max."""
    named = g.get("settings_unreadable") if isinstance(g.get("settings_unreadable"), dict) else {}
    out: dict[str, str] = {}
    for check, group, fields in _SETTING_LINES:
        given = named.get(group)
        bad = [str(b) for b in given] if isinstance(given, list) else [] if given is None else [f"{group} {given!r}"]
        bad += [f"{key} {g[key]!r}"[:80] for key, ok in fields if g.get(key) is not None and not ok(g[key])]
        if not bad and group in ("pcie_width", "pcie_generation"):
            (cur, ok), (mx, _) = fields
            if ok(g.get(cur)) and ok(g.get(mx)) and g[cur] > g[mx]:  # a link runs at most at its Max
                bad.append(f"{cur} {g[cur]} above {mx} {g[mx]}")
        if bad:
            out[check] = "not checked: nvidia.query unreadable: " + ", ".join(bad[:3]) + \
                (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    return out


def _gpu_checks(g: dict[str, Any]) -> list[Check]:
    name = f"GPU {g.get('bus_id') or g.get('pci_address')}"  # the line's subject, and its names' start
    dev = {"subject": name}
    out: list[Check] = []
    unread = _unreadable_settings(g)

    def said(check: str) -> bool:
        """The check's "not checked" line where its values are no reading (True: its verdict is not given)."""
        if check in unread:
            out.append(Check(f"{name} {check}", "WARN", unread[check], UNREADABLE_FIX, **dev))
        return check in unread

    bar1, fb = g.get("bar1_total_mib"), g.get("fb_total_mib")
    if not said("BAR1 covers GPU memory") and bar1 is not None and fb is not None:
        if bar1 >= fb:
            out.append(Check(f"{name} BAR1 covers GPU memory", "PASS", f"BAR1 {bar1} MiB, memory {fb} MiB", **dev))
        else:
            # A vGPU's BAR1 is its vGPU type's, set on the hypervisor: no firmware setting of the guest changes it.
            vgpu = str(g.get("virtualization_mode") or "").upper() == "VGPU"
            out.append(Check(f"{name} BAR1 covers GPU memory", "WARN", f"BAR1 {bar1} MiB < memory {fb} MiB"
                             + (" (a vGPU: its vGPU type's BAR1)" if vgpu else ""),
                             "not a setting of this VM: a vGPU's BAR1 is fixed by its vGPU type on the hypervisor; "
                             "pass the whole GPU through for a BAR1 that covers its memory" if vgpu else
                             "enable Above 4G Decoding and Resizable BAR in the firmware setup", **dev))
    cur, mx = g.get("pcie_gen_current"), g.get("pcie_gen_max")
    wc, wm = g.get("pcie_width_current"), g.get("pcie_width_max")
    if not said("PCIe link width") and wc is not None and wm is not None:
        if wc < wm:
            out.append(Check(f"{name} PCIe link width", "FAIL", f"x{wc} of x{wm}",
                             "reseat the card or move it to a full-width slot; check the riser", **dev))
        else:
            out.append(Check(f"{name} PCIe link width", "PASS", f"x{wc}", **dev))
    if not said("PCIe generation") and cur is not None and mx is not None:
        # GPUs drop the link generation at idle: lower is a warning, not a failure.
        st = "PASS" if cur >= mx else "WARN"
        out.append(Check(f"{name} PCIe generation", st, f"Gen{cur} of Gen{mx}",
                         "" if st == "PASS" else "re-check under load (idle GPUs downshift); else check slot/BIOS",
                         **dev))
    pm = g.get("persistence_mode")
    if not said("persistence mode") and pm is not None:
        out.append(Check(f"{name} persistence mode", "PASS" if pm is True else "WARN", f"{pm}",
                         "" if pm is True else "enable nvidia-persistenced (nvidia-smi -pm 1)", **dev))
    ecc = g.get("ecc_mode_current")
    if not said("ECC") and ecc is not None:
        out.append(Check(f"{name} ECC", "PASS" if ecc is True else "WARN", f"{ecc}",
                         "" if ecc is True else "nvidia-smi -e 1 and reboot (datacenter GPUs ship with ECC on)", **dev))
    mig = g.get("mig_mode_current")
    if not said("MIG mode") and mig is not None:
        out.append(Check(f"{name} MIG mode", "PASS" if mig is False else "WARN", f"{mig}",
                         "" if mig is False else "nvidia-smi -mig 0 unless the inventory plans MIG slices", **dev))
    return out


def _nic_link_checks(devices: list[dict[str, Any]]) -> list[Check]:
    """PCIe link of each physical NIC (sysfs current vs max); virtual NICs have none and get no line."""
    out: list[Check] = []
    for d in devices:
        if d.get("kind") != "nic" or d.get("link_width") is None or d.get("link_width_max") is None:
            continue
        dev = {"subject": f"NIC {d['address']}"}
        name = f"{dev['subject']} PCIe link"
        wc, wm = d["link_width"], d["link_width_max"]
        sc, sm = d.get("link_speed_gts"), d.get("link_speed_max_gts")
        seen = f"x{wc} of x{wm}" + (f", {sc:g} of {sm:g} GT/s" if sc and sm else "")
        if wc < wm:
            out.append(Check(name, "FAIL", seen, "reseat the NIC or move it to a full-width slot", **dev))
        elif sc and sm and sc < sm:
            # NICs do not downshift at idle the way GPUs do: a slower link is a slot or BIOS setting.
            out.append(Check(name, "WARN", seen, "check the slot's PCIe generation in the BIOS, or move the NIC",
                             **dev))
        else:
            out.append(Check(name, "PASS", seen, **dev))
    return out


def _cstates(facts: dict[str, Any], args: list[str], fact_errors: dict[str, str]) -> Check:
    """C-states from cpu0's cpuidle states.  No data is never a PASS: only ``idle=poll`` on the
    kernel command line says there are no C-states without reading any."""
    idle = facts.get("system.cpuidle")
    if idle:
        deep = [s for s in idle["states"] if (s.get("latency_us") or 0) > 10 and not s.get("disabled")]
        return Check("C-states", "WARN" if deep else "PASS",
                     ", ".join(f"{s['name']} {s['latency_us']}us" for s in idle["states"]),
                     "role cpu_tuning holds cpu_dma_latency (PM QoS) below the deep states" if deep else "")
    if "system.cpuidle" in fact_errors:
        return Check("C-states", "WARN", f"not read: {fact_errors['system.cpuidle']}",
                     "read /sys/devices/system/cpu/cpu0/cpuidle on the host")
    if "idle=poll" in args:
        return Check("C-states", "PASS", "idle=poll on the kernel command line: no C-states")
    if "system.cpuidle" not in facts:
        return Check("C-states", "WARN", "not read (no system.cpuidle fact)",
                     f"gather the facts again ({command('facts')}); the C-state exposure is unknown")
    return Check("C-states", "WARN", "no cpuidle states exposed: C-states are not visible from this kernel",
                 "in a VM the hypervisor's host decides (ask for halt-polling / no deep C-states there); "
                 "on bare metal check the BIOS C-state settings or boot with idle=poll")


#: Kernel command-line words that hurt a GPU host, and why.
_CMDLINE_HURTS = {
    "nomodeset": "keeps the NVIDIA driver from loading",
    "iommu=off": "breaks GPUDirect/P2P setups",
    "pci=nommconf": "hides PCIe extended config space",
}


def _gpu_host(facts: dict[str, Any], host_vars: dict[str, Any]) -> bool:
    """Whether the host is planned with a GPU profile (``auto``: when it has a GPU)."""
    from .gpu import CPU_PROFILES  # noqa: PLC0415 - one constant

    profile = host_vars.get("gpu_profile")
    if profile in CPU_PROFILES:
        return False
    if profile == "auto":
        return any(d.get("kind") == "gpu" for d in facts.get("pci.devices") or []) or bool(facts.get("nvidia.smi"))
    return True


def _cmdline(args: list[str], gpu_host: bool) -> Check:
    """The kernel command line: ``numa=off`` FAILs on a GPU profile (the kernel then shows one NUMA
    node, hides every GPU's and NIC's socket, and the planner cannot keep Triton's CPUs next to its
    GPUs); the words in :data:`_CMDLINE_HURTS` WARN."""
    bad = [w for w in _CMDLINE_HURTS if w in args]
    numa_off = "numa=off" in args
    if not bad and not numa_off:
        return Check("kernel command line", "PASS", f"{len(args)} words, none known to hurt")
    seen = [f"{w} ({_CMDLINE_HURTS[w]})" for w in bad]
    if numa_off:
        seen.insert(0, "numa=off (one NUMA node: the kernel hides which socket each GPU and NIC is on, and "
                       "memory is not kept local to the CPUs that use it)")
    status = "FAIL" if numa_off and gpu_host else "WARN"
    words = (["numa=off"] if numa_off else []) + bad
    return Check("kernel command line", status, "; ".join(seen),
                 f"remove {', '.join(words)} from GRUB_CMDLINE_LINUX in /etc/default/grub (and any "
                 "/etc/default/grub.d/*.cfg, or cpu_tuning's kernel_cmdline), run update-grub "
                 "(grub2-mkconfig on RHEL), reboot")


def _refused_devices(facts: dict[str, Any]) -> list[Check]:
    """One WARN naming the PCI functions and interfaces whose sysfs line the facts refused (a
    local CPU list running backwards): the plan leaves them out, the rest stands."""
    refused = [f"{d['address']} ({d['refused']})" for d in facts.get("pci.devices") or [] if d.get("refused")]
    refused += [f"{i.get('name')} ({i['refused']})" for i in facts.get("net.interfaces") or [] if i.get("refused")]
    if not refused:
        return []
    return [Check("devices read", "WARN", f"{len(refused)} refused: " + "; ".join(refused)
                  + "; the plan leaves them out, the other devices stand",
                  f"read them again ({command('facts')}); compare cat /sys/bus/pci/devices/ADDRESS/local_cpulist "
                  "on the host", area="facts")]


def fact_error_checks(fact_errors: dict[str, str] | None) -> list[Check]:
    """One FAIL per fact that could not be read or trusted (``gather``'s errors: cut, empty where its command
    always prints, not UTF-8, garbled): what it would have said is unknown, so the lines that depend on it say
    "not checked: <fact> unreadable" (:func:`bringup.checks.not_checked`)."""
    from ..facts.nvidia_csv import query_unreachable  # noqa: PLC0415 - one reader
    from .gpu import UNREACHABLE_FIX  # noqa: PLC0415

    # nvidia-smi's own "cannot reach GPU" in place of its list: a GPU fault, whose fix the line gives.
    return [Check(f"fact {name}", "FAIL", msg, UNREACHABLE_FIX if name == "nvidia.smi" and query_unreachable(msg) else
                  f"run `{command('facts --host HOST')}` and compare the command's own output; the checks "
                  f"that read {name} say \"not checked\"", area="facts")
            for name, msg in sorted((fact_errors or {}).items())]


def checks(facts: dict[str, Any], host_vars: dict[str, Any] | None = None,
           fact_errors: dict[str, str] | None = None) -> list[Check]:
    """Every platform rule that the facts allow; ``fact_errors`` (from ``gather``) each give a FAIL."""
    host_vars = host_vars or {}
    out: list[Check] = fact_error_checks(fact_errors)
    # A fact that could not be read gives its checks' "not checked" line, never their verdict on what it lacks.
    unread = [c for c in (
        not_checked("platform", "GPU settings (BAR1, PCIe link, persistence, ECC, MIG mode)", ("nvidia.query",),
                    fact_errors),
        not_checked("platform", "NIC PCIe links", ("pci.devices",), fact_errors),
        not_checked("platform", "kernel command line", ("system.cmdline",), fact_errors),
        not_checked("platform", "NUMA alignment", ("cpu.topology", "pci.devices", "nvidia.smi", "nvidia.topo"),
                    fact_errors)) if c is not None]
    out += unread
    skip = {c.name for c in unread}
    if not any(n.startswith("GPU settings") for n in skip):
        for g in (facts.get("nvidia.query") or {}).get("gpus") or []:
            out += _gpu_checks(g)
        from .gpu import UNREACHABLE_FIX, unanswered_gpus  # noqa: PLC0415

        out += [Check(f"{subject + ' ' if subject else ''}settings (BAR1, PCIe link, persistence, ECC, MIG mode)",
                      "WARN", seen, UNREACHABLE_FIX, subject=subject) for subject, seen in unanswered_gpus(facts)]
    if "NIC PCIe links" not in skip:
        out += _nic_link_checks(facts.get("pci.devices") or [])
    args = (facts.get("system.cmdline") or {}).get("args") or []
    out.append(_cstates(facts, args, fact_errors or {}))
    if args:
        out.append(_cmdline(args, _gpu_host(facts, host_vars)))
    out += _refused_devices(facts)
    unverified = (facts.get("cpu.topology") or {}).get("unverified")
    if unverified:
        out.append(Check("fact cpu.topology", "WARN", unverified,
                         f"read the host again ({command('facts --raw --host HOST')}): the fact prints the kernel's "
                         "node lists after lscpu's rows, against which a cut is told", area="facts"))
    if facts.get("cpu.topology") and "NUMA alignment" not in skip:
        from .topology import plan_topology  # noqa: PLC0415 - the planner's warnings are the alignment rule
        try:
            plan = plan_topology(facts, {k: v for k, v in host_vars.items()
                                         if k in ("irq_cpus_per_node", "triton_cpus_per_gpu", "irq_device_kinds")})
        except Exception as e:  # noqa: BLE001 - a plan that cannot fit is itself the finding
            out.append(Check("NUMA alignment", "FAIL", str(e), "adjust irq_cpus_per_node / triton_cpus_per_gpu"))
        else:
            bad = [w for w in plan.warnings if w.kind in ("interconnect", "numa_distance")]
            # A device whose sysfs node contradicts its CPU list (and topo -m): said on its own line, whatever else.
            out += [Check("NUMA node of a GPU", "WARN", w.text, "the firmware's PCI-to-NUMA table (ACPI _PXM/SRAT) "
                          "disagrees with the CPU list: check the BIOS (NUMA/SRAT settings, firmware update); the plan "
                          "follows the CPU list", subject=w.subject)
                    for w in plan.warnings if w.kind == "numa_contradiction"]
            unknown = [w.subject for w in plan.warnings if w.kind == "numa_unknown"]
            numa_off = [w for w in plan.warnings if w.kind == "numa_off"]
            if numa_off:
                # One node on several sockets: no device's socket is known, so nothing else can be judged.
                out.append(Check("NUMA alignment", "WARN", numa_off[0].text
                                 + (f"; {len(unknown)} device(s) on an unknown socket" if unknown else ""),
                                 "boot without numa=off and enable NUMA (SRAT) in the firmware; "
                                 "then re-run the checklist"))
            elif bad:
                fix = "move NICs and GPUs to slots of one socket" if any(w.kind == "interconnect" for w in bad) \
                    else "move NICs and GPUs to slots of one NUMA node"
                out.append(Check("NUMA alignment", "WARN", "; ".join(w.text for w in bad), fix))
            elif unknown:
                # Devices whose node nothing tells: their alignment could not be verified.
                out.append(Check("NUMA alignment", "WARN", f"numa_node -1 (unknown) on {len(unknown)} device(s): "
                                 + ", ".join(unknown), "bare metal: enable NUMA/SRAT (ACPI _PXM) in the BIOS; "
                                 "in a VM the hypervisor decides, nothing to fix here"))
            else:
                out.append(Check("NUMA alignment", "PASS",
                                 f"{len(plan.gpus)} GPU(s), {len(plan.devices)} I/O device(s) on their nodes"))
    return out
