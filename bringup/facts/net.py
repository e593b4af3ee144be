"""Physical network interfaces: ``net.interfaces``.

A physical NIC is one with ``/sys/class/net/X/device``.  Its ``device`` link
may point at the PCI function itself (mlx5, ice) or at a child of it (virtio:
``.../0000:00:03.0/virtio2``), so the command walks up to the PCI address.
IRQs are the PCI function's ``msi_irqs`` plus every ``/proc/interrupts`` row
whose chip or name mentions the interface name or the PCI address.
"""
from __future__ import annotations

import re
from typing import Any

from .helpers import key_values, local_cpus, pci_reads, sysfs_each, sysfs_reads, to_int as _int, uevent_driver
from .base import Fact, UntrustedOutput, ascii_whole
from .pci import PCI_ADDRESS_RE
from ..untrusted import Unreadable, text_number

__all__ = ["NetInterfaces", "parse_net_interfaces", "IRQ_NAMES_AWK", "NetInfiniband", "parse_infiniband_ports"]

#: awk program: ``irq N <chip hwirq name...>`` for each numbered /proc/interrupts row.
IRQ_NAMES_AWK = (
    "NR == 1 { n = NF; next }"
    " $1 ~ /^[0-9]+:$/ { s = \"\"; for (i = n + 2; i <= NF; i++) s = s \" \" $i;"
    " print \"irq \" substr($1, 1, length($1) - 1) s }"
)


def _mentions(text: str, word: str) -> bool:
    if not word:
        return False
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(word)}(?![0-9A-Za-z])", text) is not None


def parse_net_interfaces(output: str) -> list[dict[str, Any]]:
    """Parse ``iface NAME key=value...`` lines and ``irq N desc`` lines.

    Returns one dict per interface: ``name, pci_address, bus, driver,
    pci_driver, numa_node, local_cpus, speed_mbps, mtu, operstate, mac, type,
    rx_queues, tx_queues, msi_irqs, irqs, irq_names``.  ``speed_mbps`` is None
    when the link is down or the driver reports -1 (virtio); ``numa_node`` -1
    stays -1.  An interface whose local CPU list runs backwards (no list the
    kernel prints) is refused alone: ``refused`` says why, its ``numa_node`` is -1
    and it has no local CPUs or IRQs.
    """
    ifaces: list[dict[str, Any]] = []
    irq_rows: list[tuple[int, str]] = []
    for raw in output.splitlines():
        toks = raw.split()
        if len(toks) >= 2 and toks[0] == "irq" and ascii_whole(toks[1], 9):
            irq_rows.append((int(toks[1]), " ".join(toks[2:])))
            continue
        if len(toks) < 2 or toks[0] != "iface":
            continue
        kv = key_values(toks[2:])
        pci = kv.get("pci", "").lower()
        speed = _int(kv.get("speed"))
        numa = _int(kv.get("numa"))
        cpus, refused = local_cpus(kv.get("cpus", ""))
        ifaces.append(
            {
                "name": toks[1],
                "pci_address": pci if PCI_ADDRESS_RE.match(pci) else None,
                "bus": kv.get("bus") or None,
                "driver": kv.get("driver") or None,
                "pci_driver": kv.get("pcidriver") or None,
                "numa_node": -1 if numa is None or refused else numa,
                "local_cpus": cpus,
                "speed_mbps": speed if speed is not None and speed > 0 else None,
                "mtu": _int(kv.get("mtu")),
                "operstate": kv.get("operstate") or None,
                "mac": kv.get("mac") or None,
                "type": _int(kv.get("type")),
                "rx_queues": _int(kv.get("rxq")),
                "tx_queues": _int(kv.get("txq")),
                "msi_irqs": [] if refused else sorted({int(x) for x in kv.get("irqs", "").split(",")
                                                       if ascii_whole(x, 9)}),
                **({"refused": refused} if refused else {}),
            }
        )
    for iface in ifaces:
        if iface.get("refused"):
            iface["irqs"], iface["irq_names"] = [], {}
            continue
        matched: dict[int, str] = {}
        for irq, desc in irq_rows:
            if _mentions(desc, iface["name"]) or (iface["pci_address"] and _mentions(desc, iface["pci_address"])):
                matched[irq] = desc
        iface["irqs"] = sorted(set(iface["msi_irqs"]) | set(matched))
        iface["irq_names"] = {str(k): matched[k].split()[-1] for k in sorted(matched) if matched[k].split()}
    ifaces.sort(key=lambda i: i["name"])
    return ifaces


class NetInterfaces(Fact):
    name = "net.interfaces"
    command = (
        sysfs_each("n", "/sys/class/net/*", "device") +
        "  dev=$(readlink -f \"$n/device\")\n"
        "  p=$dev; pci=\n"
        "  while [ -n \"$p\" ] && [ \"$p\" != /sys ]; do\n"
        "    case ${p##*/} in (*:*:*.*) if [ -r \"$p/class\" ]; then pci=$p; break; fi;; esac\n"
        "    p=${p%/*}\n"
        "  done\n"
        "  bus=; if [ -e \"$dev/subsystem\" ]; then bus=$(readlink \"$dev/subsystem\"); bus=${bus##*/}; fi\n"
        "  drv=; pdrv=; numa=; cpus=; msi=; speed=; mtu=; op=; mac=; typ=; rxq=0; txq=0\n"
        + uevent_driver("$dev", "drv", "  ") +
        "  if [ -n \"$pci\" ]; then\n"
        + pci_reads("$pci", "pdrv", "    ") +
        "  fi\n"
        + sysfs_reads("$n", {"speed": "speed", "mtu": "mtu", "op": "operstate", "mac": "address", "typ": "type"}, "  ") +
        "  for q in \"$n\"/queues/rx-*; do if [ -e \"$q\" ]; then rxq=$((rxq + 1)); fi; done\n"
        "  for q in \"$n\"/queues/tx-*; do if [ -e \"$q\" ]; then txq=$((txq + 1)); fi; done\n"
        "  echo \"iface ${n##*/} pci=${pci##*/} bus=$bus driver=$drv pcidriver=$pdrv numa=$numa cpus=$cpus"
        " speed=$speed mtu=$mtu operstate=$op mac=$mac type=$typ rxq=$rxq txq=$txq irqs=$msi\"\n"
        "done\n"
        "awk '" + IRQ_NAMES_AWK + "' /proc/interrupts"
    )
    process = staticmethod(parse_net_interfaces)


# --------------------------------------------------------------------------
# InfiniBand and RoCE ports: net.infiniband
# --------------------------------------------------------------------------

#: The port files read, as the key the fact gives each.
IB_PORT_FILES = {"state": "state", "phys_state": "phys_state", "rate": "rate", "link_layer": "link_layer"}


#: What the kernel prints for a port's ``state`` and ``phys_state`` (drivers/infiniband/core/sysfs.c): the number
#: and its name, which must agree (a value cut short, ``4: ACT``, is no state).
IB_STATES = {"state": {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"},
             "phys_state": {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
                            6: "LinkErrorRecovery", 7: "Phy Test"}}


#: What the kernel prints for a port's ``link_layer``.
IB_LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")
#: The fastest rate read from an RDMA port's sysfs ``rate`` (Gb/s): XDR ports run 800, 1.6T ones 1600.
IB_RATE_MAX = 100_000


def _ib_state(file: str, text: str) -> str | None:
    """``4: ACTIVE`` → ``ACTIVE``; ``5: LinkUp`` → ``LinkUp``; anything the kernel does not print → None."""
    m = re.fullmatch(r"([0-9]{1,3}):([^\n]*)", text.strip())  # linear: no \s*(.*?)\s* over host text
    state = m.group(2).strip() if m else None
    return state if m and IB_STATES[file].get(int(m.group(1))) == state else None


#: The longest hca_type read: bnxt_re and ionic print the device's node_desc there, which the kernel holds in 64
#: bytes (IB_DEVICE_NODE_DESC_MAX); the other drivers' models are shorter.
HCA_TYPE_MAX = 64


def _hca_type_ok(model: str) -> bool:
    """An adapter model as the RDMA drivers print it in sysfs' hca_type: mlx4/mlx5 ``MT4129``, i40iw ``I40IW``, hfi1
    its board name (``Intel Omni-Path Host Fabric Interface Adapter 100 Series``), qedr ``FastLinQ QL8070 RoCE``,
    bnxt_re and ionic the node description (``Broadcom NetXtreme-C/E RoCE Driver HCA``, or rdma-ndd's
    ``<hostname> <device>``): printable text up to :data:`HCA_TYPE_MAX` characters.  Control characters (an escape
    sequence), a byte that is not UTF-8 or a longer value are no model."""
    return (0 < len(model) <= HCA_TYPE_MAX and model.isprintable()
            and not any("\udc80" <= ch <= "\udcff" for ch in model))


def parse_infiniband_ports(output: str) -> list[dict[str, Any]]:
    """``ibport DEV PORT FILE VALUE`` lines (the fact's command) → one port each: ``device, port, state,
    phys_state, rate_gbps, rate, link_layer, hca_type`` (the adapter's model, ``MT4129`` or a node description such as
    ``Broadcom NetXtreme-C/E RoCE Driver HCA``, None if not shown; one that is not printable text of a sane length is
    None with ``hca_type_unreadable`` saying what was printed).

    sysfs prints ``4: ACTIVE``, ``5: LinkUp``, ``200 Gb/sec (4X HDR)``, ``InfiniBand``/``Ethernet``.  A port
    with a value missing or in no form sysfs prints (cut short, garbled, not UTF-8) is kept with ``refused``
    saying which file: its state is not known, never taken for up.  A file printed twice for one port (``1: DOWN``
    then ``4: ACTIVE``) is damage, kept with ``refused`` too: neither value is taken.  A line not in the command's
    form (``ibport mlx5_0 1``, ``garbage line``) is :class:`UntrustedOutput`: never read as "no RDMA ports".
    """
    ports: dict[tuple[str, int], dict[str, Any]] = {}
    printed: dict[tuple[str, int], list[str]] = {}
    twice: dict[tuple[str, int], list[str]] = {}
    for raw in output.splitlines():
        if not raw.strip():
            continue
        toks = raw.split(" ", 4)
        # The command prints "ibport DEV PORT FILE VALUE" lines only (VALUE may be empty, its space is printed).
        if len(toks) < 5 or toks[0] != "ibport" or not toks[1] or not re.fullmatch(r"[0-9]{1,3}", toks[2]) \
                or toks[3] not in IB_PORT_FILES and toks[3] != "hca_type":
            raise UntrustedOutput(f"net.infiniband: a line not in the command's form (cut short or garbled): "
                                  f"{raw[:80]!r}")
        dev, port, file, value = toks[1], int(toks[2]), toks[3], toks[4]
        entry = ports.setdefault((dev, port), {"device": dev, "port": port, "state": None, "phys_state": None,
                                               "rate_gbps": None, "rate": None, "link_layer": None,
                                               "hca_type": None})
        read = printed.setdefault((dev, port), [])
        if file in read:  # the command prints each file of a port once: a second is no sysfs, never "last wins"
            twice.setdefault((dev, port), []).append(file)
        read.append(file)
        if file == "hca_type":  # the adapter's model (MT4129: ConnectX-7); optional, some drivers have none
            model = value.strip()
            if model and not _hca_type_ok(model):
                # Garbled (not UTF-8, control characters, overlong): the model is not known, never a group of its own.
                entry["hca_type_unreadable"] = f"hca_type {model[:40]!r} is not an adapter model"
                model = ""
            entry["hca_type"] = model or None
            continue
        bad = any("\udc80" <= ch <= "\udcff" for ch in value)
        if file in ("state", "phys_state"):
            entry[file] = None if bad else _ib_state(file, value)
        elif file == "rate":
            # Linear (no \s*(.*?)\s* over host text); a rate no port runs at (400 digits read as Infinity) is none.
            m = None if bad else re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*Gb/sec\b[^\n]*", value.strip())
            try:
                rate = text_number(m.group(1), lo=0, hi=IB_RATE_MAX, what="rate") if m else None
            except Unreadable:
                m = rate = None
            entry["rate_gbps"] = float(rate) if m else None
            entry["rate"] = value.strip() if m else None
        else:  # the kernel prints one of these (drivers/infiniband/core/sysfs.c); "Infini", "Eth": cut or garbled
            entry["link_layer"] = value.strip() if value.strip() in IB_LINK_LAYERS and not bad else None
    out = []
    for key, entry in ports.items():
        missing = [f for f in ("state", "phys_state", "rate", "link_layer") if entry[f] is None]
        if key in twice:
            entry["refused"] = "damaged: " + ", ".join(dict.fromkeys(twice[key])) + " printed more than once"
        elif missing:
            entry["refused"] = "unreadable or garbled: " + ", ".join(missing)
        out.append(entry)
    return sorted(out, key=lambda e: (e["device"], e["port"]))


class NetInfiniband(Fact):
    name = "net.infiniband"
    reads_bytes = True  # a port with a byte that is not UTF-8 is refused alone, named (``refused``)
    # Every RDMA port (InfiniBand, and RoCE's Ethernet ports of the same HCAs): no tool needed, sysfs alone, each
    # file read with the read builtin (its whole line: "200 Gb/sec (4X HDR)").
    command = (
        sysfs_each("p", "/sys/class/infiniband/*/ports/*", "state")
        + "  d=${p%/ports/*}; n=${p##*/}; hca=\n"
        + "".join(f"  {f}=\n" for f in IB_PORT_FILES)
        + sysfs_reads("$p", {f: f for f in IB_PORT_FILES}, "  ", if_readable=True)
        + sysfs_reads("$d", {"hca": "hca_type"}, "  ", if_readable=True)
        + "".join(f"  printf 'ibport %s %s {f} %s\\n' \"${{d##*/}}\" \"$n\" \"${f}\"\n" for f in IB_PORT_FILES)
        + "  printf 'ibport %s %s hca_type %s\\n' \"${d##*/}\" \"$n\" \"$hca\"\n"
        + "done"
    )
    process = staticmethod(parse_infiniband_ports)
