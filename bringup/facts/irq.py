"""Interrupts: ``irq.interrupts`` (/proc/interrupts) and ``irq.affinity`` (/proc/irq/N).

Mappings keyed by IRQ number use string keys (``"24"``) so that a value
survives a JSON round trip unchanged; each entry also carries ``irq`` as int.
"""
from __future__ import annotations

import re
from typing import Any

from .helpers import cpulist
from .base import Fact, UntrustedOutput, ascii_whole

__all__ = [
    "IrqInterrupts",
    "IrqAffinity",
    "parse_interrupts",
    "parse_interrupt_desc",
    "parse_irq_affinity",
    "pci_address_in",
]

#: Flow-handler names the kernel appends to the chip or hwirq (``5-edge``).
_FLOWS = r"(?:edge|level|fasteoi|simple|percpu|percpu_devid|nested|untracked|bad|none|eoi)"
_PCI_IN_TEXT = re.compile(r"(?<![0-9a-fA-F])([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])(?![0-9])")


def pci_address_in(text: str) -> str | None:
    """The first full PCI address (``0000:01:00.0``) inside ``text``, lower-cased."""
    m = _PCI_IN_TEXT.search(text)
    return m.group(1).lower() if m else None


def parse_interrupt_desc(desc: str) -> dict[str, Any]:
    """The text after the counts: ``chip [hwirq[-flow]] [Edge|Level] [names]``.

    Formats seen: ``IO-APIC   5-edge      ACPI:Ged``; ``PCI-MSIX-0000:00:05.0   0-edge
    virtio4-config``; ``IR-PCI-MSI 52953105-edge      ice-lan1-TxRx-0``; old
    ``PCI-MSI-edge      nvme0q0`` (flow glued to the chip, no hwirq); ARM
    ``GICv3  27 Level     arch_timer``.  Several actions are joined by ``, ``.
    """
    toks = [(m.group(0), m.start()) for m in re.finditer(r"\S+", desc)]
    out: dict[str, Any] = {"chip": None, "hwirq": None, "flow": None, "trigger": None, "names": [], "name": ""}
    if not toks:
        return out
    chip = toks[0][0]
    i = 1
    m = re.fullmatch(rf"(.+)-({_FLOWS})", chip)
    if m and not (len(toks) > 1 and re.fullmatch(r"[0-9]+(-\S+)?", toks[1][0])):
        chip, out["flow"] = m.group(1), m.group(2)
    elif len(toks) > 1:
        m = re.fullmatch(r"([0-9]+)(?:-(\S+))?", toks[1][0])
        if m:
            out["hwirq"] = int(m.group(1))
            out["flow"] = m.group(2)
            i = 2
    if i < len(toks) and toks[i][0] in ("Edge", "Level"):
        out["trigger"] = toks[i][0].lower()
        i += 1
    out["chip"] = chip
    if i < len(toks):
        name = " ".join(desc[toks[i][1]:].split())
        out["name"] = name
        out["names"] = [n.strip() for n in name.split(",") if n.strip()]
    return out


_COUNT = re.compile(r"\s+([0-9]+)(?=\s|$)")


def parse_interrupts(output: str) -> dict[str, Any]:
    """``/proc/interrupts`` (full, squeezed with ``tr -s ' '``, or a grep excerpt).

    Returns ``{cpus, header, irqs, other}``:

    - ``cpus``: CPU ids of the count columns, from the ``CPU0 CPU1 ...`` header
      (offline CPUs are absent there, so ``counts[i]`` belongs to ``cpus[i]``);
      without a header (an excerpt) ``0..n-1`` and ``header`` is False.
    - ``irqs``: ``{"24": {irq, counts, total, chip, hwirq, flow, name, names,
      pci_address}}`` for the numbered rows.
    - ``other``: the named rows (``NMI``, ``LOC``, ``ERR``...): ``{counts,
      total, description}``; ``counts`` is None for the global ``ERR``/``MIS``.
    """
    cpus: list[int] | None = None
    irqs: dict[int, dict[str, Any]] = {}
    other: dict[str, dict[str, Any]] = {}
    for raw in output.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if re.fullmatch(r"\s*(CPU[0-9]+\s*)+", line):
            cpus = [int(x) for x in re.findall(r"CPU([0-9]+)", line)]
            continue
        m = re.match(r"^\s*([0-9A-Za-z_]+):(.*)$", line)
        if not m:
            continue
        label, rest = m.group(1), m.group(2)
        counts: list[int] = []
        pos = 0
        limit = len(cpus) if cpus is not None else None
        # Each count matched where the last ended (linear: finditer's search for the next one from every
        # position of a long run of spaces was quadratic, 60,000 spaces took 20 s).
        while limit is None or len(counts) < limit:
            cm = _COUNT.match(rest, pos)
            if cm is None:
                break
            counts.append(int(cm.group(1)))
            pos = cm.end()
        desc = rest[pos:].strip()
        if ascii_whole(label):
            if cpus is not None and len(counts) < len(cpus):
                # Every numbered row holds a count per CPU of the header: a row cut short or with a count that is no
                # number (`٣`, a word) is damaged, named, never read as fewer CPUs or skipped.
                raise UntrustedOutput(f"/proc/interrupts: IRQ {label} holds {len(counts)} count(s) for the header's "
                                      f"{len(cpus)} CPUs (cut short, or a count that is no number)")
            if not counts:
                continue
            rec: dict[str, Any] = {"irq": int(label), "counts": counts, "total": sum(counts)}
            rec.update(parse_interrupt_desc(desc))
            rec["pci_address"] = pci_address_in(rec["chip"] or "") or pci_address_in(rec["name"])
            irqs[int(label)] = rec
        else:
            ncpu = len(cpus) if cpus is not None else None
            per_cpu = len(counts) > 1 or (ncpu == 1 and len(counts) == 1 and desc != "")
            other[label] = {
                "counts": counts if per_cpu else None,
                "total": sum(counts),
                "description": " ".join(desc.split()),
            }
    if not irqs and not other:
        return {}
    header = cpus is not None
    if cpus is None:
        width = max((len(r["counts"]) for r in irqs.values()), default=0)
        cpus = list(range(width))
    return {
        "cpus": cpus,
        "header": header,
        "irqs": {str(k): irqs[k] for k in sorted(irqs)},
        "other": other,
    }


class IrqInterrupts(Fact):
    name = "irq.interrupts"
    # Squeezed: /proc/interrupts is column-padded and grows as IRQs x CPUs.
    command = "tr -s ' ' < /proc/interrupts"
    process = staticmethod(parse_interrupts)


def parse_irq_affinity(output: str) -> dict[str, Any]:
    """Lines ``N smp_affinity_list [effective_affinity_list]`` →
    ``{"24": {irq, affinity: [..], effective: [..] | None}}``."""
    out: dict[int, dict[str, Any]] = {}
    for raw in output.splitlines():
        toks = raw.split()
        if not toks:
            continue
        # The command prints "N LIST [LIST]" for each IRQ once: any other line, or an IRQ twice (whose lists would
        # be the last one's), is a cut or garbled output, named, never skipped.
        if not 2 <= len(toks) <= 3 or not ascii_whole(toks[0], 9):
            raise UntrustedOutput(f"irq affinity: a line not in the command's form (cut short or garbled): "
                                  f"{raw.strip()[:80]!r}")
        if int(toks[0]) in out:
            raise UntrustedOutput(f"irq affinity: IRQ {int(toks[0])} is printed twice: damaged")
        affinity = cpulist(toks[1])
        effective = cpulist(toks[2]) if len(toks) > 2 else None
        out[int(toks[0])] = {"irq": int(toks[0]), "affinity": affinity, "effective": effective}
    return {str(k): out[k] for k in sorted(out)}


class IrqAffinity(Fact):
    name = "irq.affinity"
    command = (
        "for d in /proc/irq/[0-9]*; do\n"
        "  a=; e=\n"
        "  if [ -r \"$d/smp_affinity_list\" ]; then read -r a < \"$d/smp_affinity_list\"; fi\n"
        "  if [ -r \"$d/effective_affinity_list\" ]; then read -r e < \"$d/effective_affinity_list\"; fi\n"
        "  if [ -n \"$a\" ]; then echo \"${d##*/} $a $e\"; fi\n"
        "done"
    )
    process = staticmethod(parse_irq_affinity)
    cpu_lists = ("*.affinity", "*.effective")
