"""Does the hardware work?  The rack checklist's passive health lines, from facts alone (pure).

Read in the facts' one round trip, never by running a load: each GPU's ECC counts, memory repairs (remapped
rows, retired pages, the repair flags of newer drivers), clock event reasons and temperature
(``nvidia.query``'s ``health``), its NVLink links (``nvidia.nvlink``) and NVSwitch fabric registration
(``nvidia.query``'s ``fabric_state``), the Xid events of the kernel log since boot (``kernel.xid``), and every
InfiniBand or RoCE port's state and rate (``net.infiniband``).  Each line says what was seen, the limit it was
held against, and the fix; a GPU's lines name it as their ``subject``, a port's lines the port.  What the
limits come from is in ``bringup/data/health.yaml``, with its sources.

    for c in health_checks(facts, vars): print(c.status, c.subject, c.name, c.seen)

The GPUs' own lines and NVLink are in bringup/hardware/health_gpu.py, the Xid lines in bringup/hardware/health_xid.py; this module
holds the inventory's say (:class:`HealthVars`), the RDMA ports' lines and :func:`health_checks`, which gathers
every group, and re-exports the groups' functions.
"""
from __future__ import annotations

from typing import Any

from ..checks import Check, line, not_checked
from .health_gpu import AREA, gpu_health_checks, nvlink_checks
from .health_xid import xid_checks, xid_table
from ..inventory.vars import RoleVars, want

__all__ = ["FACTS", "HealthVars", "check_vars", "health_checks", "gpu_health_checks", "xid_checks", "nvlink_checks",
           "infiniband_checks", "xid_table"]

#: The facts the health lines read (the checklist gathers them with its own).
FACTS = ("nvidia.query", "nvidia.nvlink", "nvidia.topo", "kernel.xid", "net.infiniband", "pci.devices")


class HealthVars(RoleVars):
    """The inventory's say in the health lines (validated before anything connects)."""

    #: The rate every InfiniBand/RoCE port should run at; unset: the fastest rate a port of the host reports.
    infiniband_rate_gbps: float | None = want(None, "must be a rate in Gb/s such as 400", gt=0)
    #: Ports not cabled on purpose: an RDMA device (``mlx5_3``) or one port of it (``mlx5_3/1``).
    infiniband_ignore: list[str] = want([], "must be a list of RDMA devices or device/port (mlx5_3, mlx5_3/1)")


def check_vars(hosts) -> None:
    """Each host's health variables against :class:`HealthVars`: the first bad one is one line, before anything
    connects."""
    from ..errors import InputError
    from ..inventory.vars import check

    for h in hosts:
        try:
            check(HealthVars, h.vars)
        except InputError as e:
            raise InputError(f"host {h.name}: {e}") from None


# --------------------------------------------------------------------------------------------------
# InfiniBand and RoCE


def _model(p: dict) -> str | None:
    """The port's adapter model as its group is known by: its ``hca_type`` without its own device's name.  bnxt_re and
    ionic print the node description there, which rdma-ndd sets to ``<hostname> <device>`` (``gpu01 bnxt_re0``): one
    text per adapter, so each port would be held against itself alone."""
    model = p.get("hca_type")
    if not model:
        return None
    return " ".join(model.replace(str(p.get("device")), " ").split()) or model


def infiniband_checks(facts: dict, vars: dict) -> list[Check]:
    """Each RDMA port ACTIVE, LinkUp, at the expected rate (``infiniband_rate_gbps``, else the fastest rate a port
    of the same link layer and adapter model reports on the host); ports listed in ``infiniband_ignore`` are left out, said once."""
    ports = [p for p in facts.get("net.infiniband") or [] if isinstance(p, dict)]
    ignore = set(vars.get("infiniband_ignore") or [])
    kept = [p for p in ports if p["device"] not in ignore and f"{p['device']}/{p['port']}" not in ignore]
    out: list[Check] = []
    if len(kept) < len(ports):
        held = {id(p) for p in kept}
        out.append(line(AREA, "RDMA ports ignored", "PASS",
                        ", ".join(f"{p['device']}/{p['port']}" for p in ports if id(p) not in held)
                        + " (infiniband_ignore)"))
    pinned = vars.get("infiniband_rate_gbps")
    # The fastest ACTIVE port of each kind (link layer, adapter model), found once: worked out again for every port,
    # 8,000 ports of a host's answer took 78 s (the 16 MiB read holds 85,000).
    fastest: dict[tuple[Any, Any], Any] = {}
    for q in kept:
        if not q.get("refused") and q.get("state") == "ACTIVE":
            k = (q.get("link_layer"), _model(q))
            fastest[k] = q["rate_gbps"] if k not in fastest else max(fastest[k], q["rate_gbps"])
    for p in kept:
        subject = f"{p['device']} port {p['port']}"
        kind = "RoCE port" if p.get("link_layer") == "Ethernet" else "InfiniBand port"
        if p.get("refused"):
            out.append(line(AREA, kind, "FAIL", p["refused"],
                            f"read /sys/class/infiniband/{p['device']}/ports/{p['port']}/ on the host", subject=subject))
            continue
        # Held against its own kind: a host's compute fabric (ConnectX-7 at 400) and front-end ports (ConnectX-6 Dx
        # at 100) run at different rates by design.
        want = float(pinned) if pinned else fastest.get((p.get("link_layer"), _model(p)))
        src = "infiniband_rate_gbps" if pinned else (
            f"the fastest {_model(p)} port of this host" if p.get("hca_type") else "the fastest port of this host")
        seen = f"{p['state']}, {p['phys_state']}, {p['rate']}"
        if p["state"] != "ACTIVE" or p["phys_state"] != "LinkUp":
            fix = ("cable it and check the switch port" if p["phys_state"] in ("Disabled", "Polling", "Sleep")
                   else "start a subnet manager (opensm, or the switch's)" if p["state"] in ("INIT", "ARMED")
                   else "check the cable, the switch port and the subnet manager")
            out.append(line(AREA, kind, "FAIL", seen + " (want ACTIVE, LinkUp)",
                            fix + f"; a port left unused on purpose: add {p['device']}/{p['port']} to infiniband_ignore",
                            subject=subject))
        elif not p["rate_gbps"] or p["rate_gbps"] <= 0:
            # sysfs prints 0 Gb/sec for a port that trained no lanes: up by its state, no link by its rate.
            out.append(line(AREA, kind, "FAIL", seen + " (an ACTIVE port at 0 Gb/s: no usable link)",
                            "reseat or replace the cable/transceiver and check the switch port; ibstat shows the "
                            "port's rate and width", subject=subject, value=p["rate_gbps"], unit="Gb/s"))
        elif not pinned and (p.get("hca_type_unreadable") or not p.get("hca_type") and any(
                q.get("hca_type") for q in kept if q.get("link_layer") == p.get("link_layer"))):
            # Its adapter model unreadable, or not shown where the host's other ports show theirs: which ports it
            # runs with is unknown (alone in a group of its own, a slow port passed): its rate is not checked.
            why = p.get("hca_type_unreadable") or "hca_type not shown, though the host's other ports show theirs"
            out.append(line(AREA, kind, "WARN", f"not checked: {seen}; {why}: the rate it should run is unknown "
                            "(unreadable)", "cat /sys/class/infiniband/*/hca_type on the host; or set "
                            "infiniband_rate_gbps to the rate every port must reach", subject=subject,
                            value=p["rate_gbps"], unit="Gb/s"))
        elif want and p["rate_gbps"] < want:
            out.append(line(AREA, kind, "FAIL", seen + f"; expected {want:g} Gb/s ({src})",
                            "a link below its rate: reseat or replace the cable/transceiver, check the switch port's "
                            "speed and width", subject=subject, value=p["rate_gbps"], limit=want, unit="Gb/s"))
        else:
            out.append(line(AREA, kind, "PASS", seen, subject=subject, value=p["rate_gbps"], limit=want,
                            unit="Gb/s"))
    return out


#: Each group of health lines, the facts it reads, and the one line it gives when one of them could not be read.
_NEEDS = (("GPU health (ECC, memory repair, clocks, temperature, fabric)", ("nvidia.query",)),
          ("NVLink", ("nvidia.nvlink", "nvidia.query")),
          ("Xid events", ("kernel.xid",)),
          ("RDMA ports", ("net.infiniband",)))


def health_checks(facts: dict, vars: dict, fact_errors: dict | None = None) -> list[Check]:
    """Every passive health line for one host (:data:`FACTS`): GPUs, NVLink, Xid events, RDMA ports.  A group whose
    fact could not be read (``fact_errors``) is one "not checked" line, never a PASS or a verdict on the hardware
    from what the fact lacks."""
    groups = (lambda: gpu_health_checks(facts), lambda: nvlink_checks(facts), lambda: xid_checks(facts),
              lambda: infiniband_checks(facts, vars))
    out: list[Check] = []
    for (name, needs), lines in zip(_NEEDS, groups):
        unread = not_checked(AREA, name, needs, fact_errors)
        out += [unread] if unread is not None else lines()
    return out
