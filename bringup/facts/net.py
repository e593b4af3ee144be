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
from .base import Fact
from .pci import PCI_ADDRESS_RE

__all__ = ["NetInterfaces", "parse_net_interfaces", "IRQ_NAMES_AWK"]

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
        if len(toks) >= 2 and toks[0] == "irq" and toks[1].isdigit():
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
                "msi_irqs": [] if refused else sorted({int(x) for x in kv.get("irqs", "").split(",") if x.isdigit()}),
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
