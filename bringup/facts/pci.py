"""PCI devices from sysfs: ``pci.devices``."""
from __future__ import annotations

import re
from typing import Any

from .helpers import key_values, local_cpus, pci_reads, sysfs_each, sysfs_names, sysfs_reads, to_int as _int
from .base import Fact, UntrustedOutput, ascii_whole

__all__ = ["PciDevices", "parse_pci_devices", "parse_pci_output", "pci_kind", "normalize_pci_address", "END"]

#: The last line the command prints: an output without it was cut short.
END = "end=pci"
#: The keys the command prints on each device's line, and the form of those that name the device.
_KEYS = frozenset({"class", "vendor", "device", "numa", "cpus", "driver", "irq", "irqs", "rdma", "net", "lsc", "lsm",
                   "lwc", "lwm"})
_FORMS = {"class": re.compile(r"0x[0-9a-fA-F]{6}"), "vendor": re.compile(r"0x[0-9a-fA-F]{4}"),
          "device": re.compile(r"0x[0-9a-fA-F]{4}")}

#: A PCI address as sysfs names it (domain may be wider than 4 digits: VMD).
PCI_ADDRESS_RE = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def normalize_pci_address(text: str) -> str | None:
    """``00000000:00:06.0`` (nvidia-smi) or ``0000:00:06.0`` → ``0000:00:06.0``; None for anything else, a domain
    of more than 8 hex digits too (PCI segments are 16 bits, 32 in a VM's vPCI: a 400-digit one is no address)."""
    m = re.match(r"^\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s*$", text)
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def pci_kind(vendor: str | None, pci_class: str | None) -> str:
    """Classify: ``gpu`` (NVIDIA display/3D), ``nic`` (any network controller, base class 0x02:
    Ethernet 0x0200, InfiniBand 0x0207, fabric 0x0208, other 0x0280; with a netdev or not),
    ``nvme``, else ``other``."""
    cls = (pci_class or "").lower().replace("0x", "")
    ven = (vendor or "").lower().replace("0x", "")
    if ven == "10de" and cls.startswith("03"):
        return "gpu"
    if cls.startswith("02"):
        return "nic"
    if cls == "010802":
        return "nvme"
    return "other"


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:  # "Unknown" on links that never trained
        return None


def _names(text: str | None) -> list[str]:
    return [n for n in (text or "").split(",") if n]


def parse_pci_devices(output: str) -> list[dict[str, Any]]:
    """Parse lines ``ADDR class=.. vendor=.. device=.. numa=.. cpus=.. [driver=..] [irq=..] [irqs=a,b]
    [rdma=mlx5_0] [net=ib0]``.

    ``numa_node`` is an int and -1 stays -1 (also when the kernel has no
    ``numa_node`` file).  ``irqs`` are the MSI/MSI-X vectors, or the legacy
    ``irq`` when the device has no MSI vectors and a driver is bound.  ``rdma``
    is the function's RDMA device (``/sys/.../infiniband/mlx5_0``: the name
    ``nvidia-smi topo -m`` shows), ``netdevs`` its network interfaces (none for an
    InfiniBand HCA without IPoIB).

    A line whose local CPU list the kernel could not have printed (a range that
    runs backwards: a cut or garbled output) refuses that device alone: it stays
    listed by what names it (address, class, vendor, device, kind, driver) with
    ``refused`` saying why, and nothing of its placement or IRQs is kept
    (``numa_node`` -1, no local CPUs, no IRQs); every other device is read as usual.

    Every line that is not blank must be a device's line (its address, then the command's ``key=value`` words; the
    class, vendor and device ids whole): anything else (an error such as ``ls: cannot access ...``, a line cut
    inside, ``0000:00:06.0 class=0x03``) is :class:`UntrustedOutput`, never a device dropped in silence.
    """
    devices: list[dict[str, Any]] = []
    for n, raw in enumerate(output.splitlines(), 1):
        toks = raw.split()
        if not toks:
            continue
        if raw.strip() == END:
            break  # the command's last line (parse_pci_output holds it to be the last)
        _check_line(n, raw, toks)
        kv = key_values(toks[1:])
        cpus, refused = local_cpus(kv.get("cpus", ""))
        numa = _int(kv.get("numa"))
        msi = sorted({int(x) for x in kv.get("irqs", "").split(",") if ascii_whole(x.strip(), 9)})
        legacy = _int(kv.get("irq"))
        driver = kv.get("driver") or None
        irqs = msi if msi else ([legacy] if legacy and driver else [])
        cls = kv.get("class", "").lower() or None
        vendor = kv.get("vendor", "").lower() or None
        dev: dict[str, Any] = {
            "address": toks[0].lower(),
            "class": cls,
            "vendor": vendor,
            "device": kv.get("device", "").lower() or None,
            "kind": pci_kind(vendor, cls),
            "numa_node": -1 if numa is None else numa,
            "local_cpus": cpus,
            "driver": driver,
            "irq": legacy if legacy else None,
            "msi_irqs": msi,
            "irqs": irqs,
            "rdma": (_names(kv.get("rdma")) or [None])[0],
            "netdevs": _names(kv.get("net")),
            "link_speed_gts": _float(kv.get("lsc")),
            "link_speed_max_gts": _float(kv.get("lsm")),
            "link_width": _int(kv.get("lwc")),
            "link_width_max": _int(kv.get("lwm")),
        }
        if refused:
            dev.update({"numa_node": -1, "irq": None, "msi_irqs": [], "irqs": [], "link_speed_gts": None,
                        "link_speed_max_gts": None, "link_width": None, "link_width_max": None,
                        "refused": refused})
        devices.append(dev)
    return sorted(devices, key=lambda d: d["address"])


def _check_line(n: int, raw: str, toks: list[str]) -> None:
    """:class:`UntrustedOutput` naming line ``n`` when it is not a device line the command prints."""
    why = None
    if not PCI_ADDRESS_RE.match(toks[0]):
        why = "no PCI address first"
    else:
        for tok in toks[1:]:
            key, sep, value = tok.partition("=")
            if not sep or key not in _KEYS:
                why = f"{tok[:30]!r} is none of its key=value words"
                break
            if key in _FORMS and value and not _FORMS[key].fullmatch(value):
                why = f"{key} {value[:20]!r} is no PCI {key} id"
                break
        else:
            missing = [k for k in _FORMS if f"{k}=" not in raw]
            if missing:
                why = f"no {', '.join(missing)} (cut short?)"
    if why:
        raise UntrustedOutput(f"pci.devices: line {n} is no device line, not in the command's form ({why}): "
                              f"{raw[:80]!r}")


def parse_pci_output(output: str) -> list[dict[str, Any]]:
    """The fact's output: :func:`parse_pci_devices` of the lines before :data:`END`, which must be its last line (an
    output cut short, or saved by a bringup before the mark, is :class:`UntrustedOutput`: save it again)."""
    lines = output.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:  # no output at all: the fact's default (always_prints names it as a reading failure first)
        return []
    if lines[-1].strip() != END:
        last = lines[-1][:80]
        raise UntrustedOutput(f"pci.devices: the output ends before its last line {END!r} (cut short, or not in the "
                              f"command's form: saved by an older bringup? save it again); it ends with {last!r}")
    return parse_pci_devices("\n".join(lines[:-1]))


class PciDevices(Fact):
    name = "pci.devices"
    always_prints = True  # every host has a PCI host bridge in sysfs
    # Builtins only (no fork per file, see .helpers): a host has hundreds of functions.
    command = (
        sysfs_each("d", "/sys/bus/pci/devices/*", "class") +
        "  cls=; ven=; dev=; numa=; cpus=; irq=; drv=; msi=\n"
        + sysfs_reads("$d", {"cls": "class", "ven": "vendor", "dev": "device"}, "  ")
        + pci_reads("$d", "drv", "  ")
        + sysfs_reads("$d", {"irq": "irq"}, "  ", if_readable=True) +
        # RDMA device (mlx5_0: the name nvidia-smi topo -m shows) and netdevs; an IB HCA
        # without IPoIB has the first and none of the second.
        "  rdma=; net=\n"
        + sysfs_names('"$d"/infiniband/*', "rdma", "  ")
        + sysfs_names('"$d"/net/*', "net", "  ") +
        # PCIe link (absent on virtual devices): speed's first word (GT/s) and width, current and max.
        "  lsc=; lsm=; lwc=; lwm=\n"
        + sysfs_reads("$d", {"lsc _": "current_link_speed", "lsm _": "max_link_speed", "lwc": "current_link_width",
                             "lwm": "max_link_width"}, "  ", if_readable=True) +
        "  echo \"${d##*/} class=$cls vendor=$ven device=$dev numa=$numa cpus=$cpus driver=$drv irq=$irq irqs=$msi\" \\\n"
        "    \"rdma=$rdma net=$net lsc=$lsc lsm=$lsm lwc=$lwc lwm=$lwm\"\n"
        "done\n"
        "echo " + END
    )
    process = staticmethod(parse_pci_output)
    default: list = []  # no output at all (always_prints names it as a reading failure)
    cpu_lists = ("*.local_cpus",)
