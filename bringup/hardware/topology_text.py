"""The topology plan as text: rich tables for ``invoke topology`` (the picture is bringup/hardware/topology_svg.py).
Cut from bringup/hardware/topology.py (issue 43 item 2): output apart from the planner.
"""
from __future__ import annotations

from ..facts.base import format_cpulist
from .topology_model import TopologyPlan


def format_plan(plan: TopologyPlan, console, title: str = "") -> None:
    """Print the plan as rich tables: one row per NUMA node, then GPUs, pinned IRQs, warnings."""
    from rich.table import Table  # noqa: PLC0415 - only the CLI prints
    from rich.text import Text  # noqa: PLC0415 - only the CLI prints

    t = Table(title=f"{title}: CPU plan (irq_cpus_per_node={plan.irq_cpus_per_node}, "
                    f"triton_cpus_per_gpu={plan.triton_cpus_per_gpu})", title_justify="left")
    for col in ("socket" if plan.unit == "socket" else "node", "CPUs", "IRQ CPUs", "their SMT siblings",
                "Triton CPUs", "other"):
        t.add_column(col)
    for n in plan.nodes:
        triton = "; ".join(f"{g}: {format_cpulist(c)}" for g, c in n.triton.items()) or "-"
        t.add_row("all" if n.node == -1 else str(n.node), format_cpulist(n.cpus), format_cpulist(n.irq_cpus),
                  format_cpulist(n.irq_siblings) or "-", triton, format_cpulist(n.rest) or "-")
    console.print(t)
    if plan.gpus:
        g = Table(title="GPUs", title_justify="left")
        for col in ("GPU", "PCI", "numa_node (reported)", f"planned {'socket' if plan.unit == 'socket' else 'node'}",
                    "Triton CPUs", "L3 groups"):
            g.add_column(col)
        for x in plan.gpus:
            g.add_row(x.name, x.pci_address or "-", str(x.numa_node), "all" if x.node == -1 else str(x.node),
                      format_cpulist(x.cpus), ",".join(x.l3_groups) or "-")
        console.print(g)
    if plan.devices:
        d = Table(title="IRQs pinned to housekeeping CPUs", title_justify="left")
        for col in ("device", "kind", "PCI", "numa_node (reported)",
                    f"planned {'socket' if plan.unit == 'socket' else 'node'}", "IRQ → CPU"):
            d.add_column(col)
        pins = {p.irq: p for p in plan.irqs}
        for x in plan.devices:
            d.add_row(x.name, x.kind, x.pci_address or "-", str(x.numa_node), "all" if x.node == -1 else str(x.node),
                      " ".join(f"{i}→{format_cpulist(pins[i].cpus)}" for i in x.irqs) or "-")
        console.print(d)
    for w in plan.warnings:
        console.print(Text.assemble(("warning", "yellow"), f": {w.text}"), highlight=False)
    console.print(f"Triton cpuset: {format_cpulist(plan.triton_cpus) or '(none: no GPU)'}", highlight=False)
