"""``nvidia-smi -q``: its indentation tree, each GPU's values, its MIG devices, NVML's failure text."""
from __future__ import annotations

import re
from typing import Any

from .base import UntrustedOutput, ascii_whole
from .nvidia_health import _Reader, gpu_health
from .nvidia_values import (_count, _first, _get, _nval, _sval, read_link_width, read_memory_mib, read_mode,
                            read_pcie_generation)
from .pci import normalize_pci_address

#: The deepest nesting of sections read (nvidia-smi -q nests five or six: GPU, Clocks Event Reasons, ...).
TREE_DEPTH_MAX = 32
#: A key's end: blanks, then its colon (``Driver Version      : 580.159.04``); the key is what comes before.
_COLON = re.compile(r"\s:")


def _key_value(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a ``key : value`` line, both stripped; None for a section title.  In one pass over the
    line: the key runs to the first blank that a colon follows (keys hold colons only without a blank before
    them, as a bus id does), as ``^\\s*(.+?)\\s+:\\s?(.*)$`` read it, whose backtracking made a line of many blanks
    cost cubic time."""
    text = line.strip()
    m = _COLON.search(text, 1)
    if m is None:
        return None
    return text[:m.start()].rstrip(), text[m.end():].strip()


def parse_nvidia_smi_q_tree(output: str) -> dict[str, Any]:
    """Indentation tree of ``nvidia-smi -q``: sections are dicts, leaves strings.

    A key repeated within one section (e.g. per-process entries) becomes a list.
    Tabs are expanded; blank lines and the ``====`` banner are ignored.
    """
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]

    def put(d: dict[str, Any], key: str, value: Any) -> None:
        if key in d:
            if isinstance(d[key], list) and d.get(f"\0{key}"):
                d[key].append(value)
            else:
                d[key] = [d[key], value]
                d[f"\0{key}"] = True
        else:
            d[key] = value

    for raw in output.expandtabs(4).splitlines():
        if not raw.strip() or raw.lstrip().startswith("=") or raw.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        pair = _key_value(raw)
        if pair:
            put(parent, *pair)
        else:
            if len(stack) > TREE_DEPTH_MAX:
                raise UntrustedOutput(f"nvidia-smi -q: sections nested deeper than {TREE_DEPTH_MAX} levels (line "
                                      f"{raw.strip()[:60]!r}): not nvidia-smi's report")
            section: dict[str, Any] = {}
            put(parent, raw.strip(), section)
            stack.append((indent, section))

    def clean(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: clean(v) for k, v in d.items() if not k.startswith("\0")}
        if isinstance(d, list):
            return [clean(v) for v in d]
        return d

    return clean(root)


#: A MIG device's IDs as ``nvidia-smi -q`` prints them, each a whole number on every driver seen.
_MIG_IDS = (("Index", "index"), ("GPU Instance ID", "gpu_instance_id"), ("Compute Instance ID", "compute_instance_id"))


def read_mig_devices(sec: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, str | None] | None:
    """A GPU section's MIG devices as ``(devices, why_unreadable)``: one ``{index, gpu_instance_id,
    compute_instance_id, profile, uuid}`` per ``MIG Device`` (``profile`` and ``uuid`` None: ``-q`` prints
    neither, ``-L`` does).  Drivers print each ``MIG Device`` straight under the GPU after ``MIG Mode`` (590:
    ``tests/fixtures/hosts/public/nvsmi-q-h100-mig4-drv590.txt``) or under a ``MIG Devices`` heading, which
    ``MIG Devices : None`` leaves empty (``[]``).  A device without a whole-number Index, GPU Instance ID or
    Compute Instance ID, or an Index twice (cut, garbled), gives ``(None, why)``: the count is unreadable, never
    an undercount.  None: the section prints no MIG device at all (MIG off, or the count is not in ``-q``)."""
    if "MIG Device" in sec:
        listed, where = sec["MIG Device"], "MIG Device"
        if "MIG Devices" in sec:
            return None, "both a 'MIG Devices' section and 'MIG Device' entries beside it"
    elif "MIG Devices" in sec:
        heading = sec["MIG Devices"]
        if isinstance(heading, str):
            return ([], None) if heading.strip() == "None" else (None, f"'MIG Devices : {heading.strip()[:40]}'")
        if not isinstance(heading, dict) or set(heading) - {"MIG Device"} or "MIG Device" not in heading:
            return None, "a 'MIG Devices' section without its 'MIG Device' entries"
        listed, where = heading["MIG Device"], "MIG Devices"
    else:
        return None
    out: list[dict[str, Any]] = []
    for n, dev in enumerate(listed if isinstance(listed, list) else [listed], 1):
        ids = {key: _count(dev.get(label)) if isinstance(dev, dict) else None for label, key in _MIG_IDS}
        missing = [label for label, key in _MIG_IDS if ids[key] is None]
        if missing:
            return None, f"{where}: MIG device {n} has no whole-number {', '.join(missing)} (output cut short?)"
        if any(d["index"] == ids["index"] for d in out):
            return None, f"{where}: MIG device Index {ids['index']} twice"
        out.append({**ids, "profile": None, "uuid": None})
    return out, None


#: Where each setting the platform lines judge is printed, by the check it belongs to (``settings_unreadable``'s keys).
_LINK = ("PCI", "GPU Link Info")
SETTINGS = {
    "bar1": (("bar1_total_mib", "BAR1 Memory Usage Total", ("BAR1 Memory Usage", "Total"), read_memory_mib),
             ("fb_total_mib", "FB Memory Usage Total", ("FB Memory Usage", "Total"), read_memory_mib),
             ("fb_reserved_mib", "FB Memory Usage Reserved", ("FB Memory Usage", "Reserved"),
              lambda v: read_memory_mib(v, lo=0))),
    "pcie_generation": (
        ("pcie_gen_current", "PCIe Generation Current", (*_LINK, "PCIe Generation", "Current"), read_pcie_generation),
        ("pcie_gen_max", "PCIe Generation Max", (*_LINK, "PCIe Generation", "Max"), read_pcie_generation),
        ("pcie_gen_device_max", "PCIe Generation Device Max", (*_LINK, "PCIe Generation", "Device Max"),
         read_pcie_generation),
        ("pcie_gen_host_max", "PCIe Generation Host Max", (*_LINK, "PCIe Generation", "Host Max"),
         read_pcie_generation)),
    "pcie_width": (("pcie_width_current", "Link Width Current", (*_LINK, "Link Width", "Current"), read_link_width),
                   ("pcie_width_max", "Link Width Max", (*_LINK, "Link Width", "Max"), read_link_width)),
    "persistence": (("persistence_mode", "Persistence Mode", ("Persistence Mode",), read_mode),),
    "ecc": (("ecc_mode_current", "ECC Mode Current", ("ECC Mode", "Current"), read_mode),),
    "mig": (("mig_mode_current", "MIG Mode Current", ("MIG Mode", "Current"), read_mode),),
}


def read_settings(sec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A GPU section's settings the platform lines judge (:data:`SETTINGS`), each read whole and within its range:
    ``(values, unreadable)``.  A value nvidia-smi prints for a part without it (``N/A``) is None; any other value that
    is no reading (PCIe ``Gen99``, a ``999x`` link, ``-1 MiB``, ``NaN``, empty, a word other than Enabled/Disabled,
    a key printed twice) is None too and named in ``unreadable`` by its check (``{"pcie_generation": ["PCIe
    Generation Current '99'"]}``), whose line is then "not checked", never a verdict.  A current generation or width
    above its Max is no reading either: both are named."""
    read = _Reader()
    values = {key: read.value(reader, group, label, _get(sec, *path))
              for group, fields in SETTINGS.items() for key, label, path, reader in fields}
    for group, cur, mx, what in (("pcie_generation", "pcie_gen_current", "pcie_gen_max", "PCIe Generation"),
                                 ("pcie_width", "pcie_width_current", "pcie_width_max", "Link Width")):
        if values[cur] is not None and values[mx] is not None and values[cur] > values[mx]:
            read.bad.setdefault(group, []).append(
                f"{what} Current {_get(sec, *_LINK, what, 'Current')!r} above Max {_get(sec, *_LINK, what, 'Max')!r}")
            values[cur] = values[mx] = None
    return values, read.bad


_NVML_FAILED = re.compile(r"^Failed to initialize NVML: ([^\n]*\S)", re.M)  # linear: no (.+?)\s*$
_NVML_LIBRARY = re.compile(r"^NVML library version: ([0-9]+\.[0-9]+(?:\.[0-9]+)?)\s*$", re.M)


def nvml_failure(output: str) -> dict[str, Any] | None:
    """``{nvml_error, nvml_library_version}`` where nvidia-smi could not start NVML (``Failed to initialize NVML:
    Driver/library version mismatch`` and, from R535 on, ``NVML library version: 580.178``: the installed
    library, another version than the loaded module's until a reboot); None for any other output."""
    failed = _NVML_FAILED.search(output)
    if not failed:
        return None
    library = _NVML_LIBRARY.search(output)
    return {"nvml_error": failed.group(1), "nvml_library_version": library.group(1) if library else None}


#: nvidia-smi's own words for a GPU it cannot open (``Unable to determine the device handle for GPU0000:00:06.0:
#: Unknown Error``; ``... for gpu 0000:00:06.0: GPU is lost.  Reboot the system to recover this GPU``): the driver is
#: loaded, the GPU is not answering.  Linear: bounded repeats, no nested ones.
_NO_HANDLE = re.compile(r"^Unable to determine the device handle for (?:GPU|gpu) ?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                        r"[0-9A-Fa-f]{2}\.[0-7]): ?([^\n]{0,200})$", re.M)
_NO_DEVICES = re.compile(r"^No devices were found\s*$", re.M)


def unreachable_gpus(output: str) -> list[dict[str, Any]]:
    """The GPUs nvidia-smi printed it cannot open: ``[{pci_address, bus_id, error}]`` (its own error text)."""
    out = []
    for m in _NO_HANDLE.finditer(output):
        addr = normalize_pci_address(m.group(1))
        if addr and all(g["pci_address"] != addr for g in out):
            out.append({"pci_address": addr, "bus_id": m.group(1), "error": m.group(2).strip() or "no reason given"})
    return out


def smi_error(output: str) -> str | None:
    """nvidia-smi's own error where it reached no GPU, in its words (``nvidia-smi cannot reach GPU 0000:00:06.0:
    Unknown Error``, ``nvidia-smi: No devices were found``); None where it printed neither."""
    lost = unreachable_gpus(output)
    if lost:
        return "; ".join(f"nvidia-smi cannot reach GPU {g['pci_address']}: {g['error']}" for g in lost[:4]) + \
            (f" and {len(lost) - 4} more" if len(lost) > 4 else "")
    if _NO_DEVICES.search(output):
        return "nvidia-smi: No devices were found"
    return None


_SAID = {"uuid": "UUID", "pci_address": "bus id"}


def listed_once(gpus: list[dict[str, Any]], where: str, keys: tuple[str, ...] = ("index", "uuid", "pci_address")
                ) -> None:
    """:class:`UntrustedOutput` where two GPUs of one listing share an index, a UUID or a bus id (a row or section
    printed twice, two listings run together, a garbled capture): which GPU is true is not known, and a GPU the
    driver lost hid behind the copy (``driver sees the GPUs: 2 × H200`` passed with one GPU listed twice)."""
    for key in keys:
        seen: set[str] = set()
        for g in gpus:
            value = g.get(key)
            if value is None or value == "":
                continue
            if str(value).lower() in seen:
                raise UntrustedOutput(f"{where}: two GPUs with {_SAID.get(key, key)} {str(value)[:80]!r}: a GPU "
                                      "listed twice, not one listing")
            seen.add(str(value).lower())


def parse_nvidia_smi_q(output: str) -> dict[str, Any]:
    """``nvidia-smi -q`` → ``{driver_version, cuda_version, attached_gpus, gpus: [...]}``.

    Per GPU: ``bus_id, pci_address, product_name, uuid, vbios_version,
    persistence_mode, mig_mode_current, ecc_mode_current, virtualization_mode,
    addressing_mode, bar1_total_mib, fb_total_mib, fb_reserved_mib,
    pcie_gen_current, pcie_gen_max, pcie_gen_device_max, pcie_gen_host_max,
    pcie_width_current, pcie_width_max, performance_state, power_limit_w,
    max_power_limit_w, max_clocks_sm_mhz, max_clocks_memory_mhz``; ``settings_unreadable`` where a setting the
    platform lines judge is no reading (:func:`read_settings`).

    An output cut short (a GPU section of a full report without its closing "Processes", fewer
    GPU sections than "Attached GPUs") raises :class:`UntrustedOutput`.  Where NVML could not start (a
    driver/library version mismatch): :func:`nvml_failure`'s ``{nvml_error, nvml_library_version}``.
    """
    tree = parse_nvidia_smi_q_tree(output)
    gpus: list[dict[str, Any]] = []
    for key, sec in tree.items():
        m = re.match(r"^GPU\s+([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$", key)
        if m and isinstance(sec, list):
            # One GPU's section twice (two reports run together, a garbled capture): which one is true is not
            # known; skipped, it read as "fewer sections than attached" or, without that line, as no GPU at all.
            raise UntrustedOutput(f"nvidia-smi -q: the section of GPU {m.group(1)} is printed {len(sec)} times: "
                                  "not one report")
        if not m or not isinstance(sec, dict):
            continue
        settings, unreadable = read_settings(sec)
        power = "GPU Power Readings" if "GPU Power Readings" in sec else "Power Readings"
        gpus.append(
            {
                "bus_id": m.group(1),
                "pci_address": normalize_pci_address(m.group(1)),
                "product_name": _sval(sec, "Product Name"),
                "product_architecture": _sval(sec, "Product Architecture"),
                "uuid": _sval(sec, "GPU UUID"),
                "vbios_version": _sval(sec, "VBIOS Version"),
                **settings,
                "virtualization_mode": _sval(sec, "GPU Virtualization Mode", "Virtualization Mode"),
                # A vGPU guest's licence (``Licensed (Expiry: ...)``, ``Unlicensed (Unrestricted)``, ``Unlicensed``):
                # an unlicensed one runs compute at an idle level once its grace period ends.
                "vgpu_license": _sval(sec, "vGPU Software Licensed Product", "License Status"),
                "addressing_mode": _sval(sec, "Addressing Mode"),
                "compute_mode": _sval(sec, "Compute Mode"),
                "performance_state": _sval(sec, "Performance State"),
                "power_limit_w": _first(_nval(sec, power, "Current Power Limit"),
                                        _nval(sec, power, "Power Limit")),
                "max_power_limit_w": _nval(sec, power, "Max Power Limit"),
                "default_power_limit_w": _nval(sec, power, "Default Power Limit"),
                # Drivers 560+ print the instantaneous and the average draw, older ones one "Power Draw".
                "power_draw_w": _first(_nval(sec, power, "Power Draw"), _nval(sec, power, "Instantaneous Power Draw"),
                                       _nval(sec, power, "Average Power Draw")),
                "max_clocks_sm_mhz": _nval(sec, "Max Clocks", "SM"),
                "max_clocks_memory_mhz": _nval(sec, "Max Clocks", "Memory"),
                # NVSwitch boards (HGX/DGX): the GPU's fabric registration; None where the part has no fabric.
                "fabric_state": _sval(sec, "Fabric", "State"),
                "fabric_status": _sval(sec, "Fabric", "Status"),
                "fabric_health": _sval(sec, "Fabric", "Health", "Summary"),
                "health": gpu_health(sec),
            }
        )
        if unreadable:
            gpus[-1]["settings_unreadable"] = unreadable
        mig = read_mig_devices(sec)
        if mig is not None:
            gpus[-1]["mig_devices"] = mig[0]
            if mig[1]:
                gpus[-1]["mig_devices_unreadable"] = f"nvidia-smi -q: GPU {m.group(1)}: {mig[1]}"
    lost = unreachable_gpus(output)
    if not gpus and "Driver Version" not in tree:
        failed = nvml_failure(output)
        if failed:
            return failed
        # The driver answered that it reaches no GPU (a GPU fallen off the bus, "No devices were found"): its words
        # are kept, so the lines say a GPU fault, not a missing driver, and the GPUs' health is not checked.
        error = smi_error(output)
        return {"smi_error": error, "unreachable_gpus": lost, "gpus": []} if error else {}
    attached = _sval(tree, "Attached GPUs")
    # A cut output must not pass for a GPU without BAR1, ECC or link values.  "Processes" is
    # printed in every GPU section of a full report (all drivers seen); a ``-d`` subset report
    # (no "Product Name") has no such section and is not checked.
    for sec_key, sec in tree.items():
        if re.match(r"^GPU\s+[0-9A-Fa-f]+:", sec_key) and isinstance(sec, dict) and "Product Name" in sec \
                and "Processes" not in sec:
            raise UntrustedOutput(f"nvidia-smi -q: the section of {sec_key} ends before 'Processes' "
                                  "(output cut short?)")
    if attached and ascii_whole(attached, 6) and len(gpus) + len(lost) < int(attached):
        raise UntrustedOutput(f"nvidia-smi -q: Attached GPUs {attached} but {len(gpus)} GPU section(s) "
                              "(output cut short?)")
    if attached and ascii_whole(attached, 6) and len(gpus) > int(attached):
        raise UntrustedOutput(f"nvidia-smi -q: Attached GPUs {attached} but {len(gpus)} GPU sections (two reports "
                              "run together?)")
    listed_once(gpus, "nvidia-smi -q", ("uuid", "pci_address"))
    return {
        "driver_version": _sval(tree, "Driver Version"),
        "cuda_version": _sval(tree, "CUDA Version"),
        "attached_gpus": int(attached) if attached and ascii_whole(attached, 6) else None,
        "gpus": gpus,
        **({"smi_error": smi_error(output), "unreachable_gpus": lost} if lost else {}),
    }
