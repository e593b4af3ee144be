"""The limits a measured rate is held against, and the inventory's ``accept_thresholds``.

PCIe, per direction, after line encoding (PCI-SIG's transfer rates: Gen1 2.5 GT/s and Gen2 5 GT/s with
8b/10b, Gen3 8 GT/s, Gen4 16 GT/s and Gen5 32 GT/s with 128b/130b, Gen6 64 GT/s PAM4 with FLIT mode's
242/256; https://pcisig.com/specifications): GB/s per lane 0.25, 0.5, 0.985, 1.969, 3.938, 7.563, times the
link's MAX width.  The link's max generation and width (``nvidia.query``: what the GPU and the slot can both
do), not the current ones: a GPU that trained at Gen3 in a Gen5 slot is the fault to find.

NVLink, per link and direction: the data rate of :func:`bringup.hardware.nvlink.rate` (one table with its sources, by
product for bridged PCIe cards, else by architecture: 25 GB/s Ampere and Hopper, 50 Blackwell, 14.0625 an A40);
a pair's expectation is the links ``nvidia-smi topo -m`` shows between them (NV#) times that.

Thresholds (fractions of the limit): bringup's own defaults, set between what healthy hosts measure (the H200 below:
87-88 %) and what a degraded link or part gives (a link one generation down or at half width: under 50 %):

- PCIe host-to-device and device-to-host: WARN below 75 %, FAIL below 60 %.  A healthy x16 link moves
  80-90 % of its rate with pinned memory (an H200 on Gen5 x16: 55.4 of 63 GB/s, 88 %); a link trained one
  generation down or at half width moves under 50 %.
- Device memory (a device-to-device copy reads and writes each byte: 2x the bytes copied): WARN below 70 %
  of the datasheet, FAIL below 50 % (an H200: 4.2 of 4.8 TB/s, 87 %).
- NVLink peer-to-peer: WARN below 70 %, FAIL below 50 % of the links' rate.
- PCIe peer-to-peer: WARN below 50 %, FAIL below 20 % of the slower GPU's link: a path through the CPU's
  root complex or across sockets is slower by design, so only a pair far below is a fault.
"""
from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError, model_validator

from ..errors import InputError
from ..facts.nvidia_health import CLOCK_REASON_BITS, HOLDING_REASONS
from ..hardware.nvlink import rate
from ..inventory.vars import RoleVars, Spec, one_line, want

__all__ = ["PCIE_LANE_GBS", "Thresholds", "thresholds", "pcie_gbs", "nvlink_gbs",
           "CLOCK_REASONS", "THROTTLE_FAIL"]

#: GB/s per lane and direction, by PCIe generation (PCI-SIG).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

#: NVML's clock event reason bits by the words the lines say (``bringup.facts.nvidia_health.CLOCK_REASON_BITS``).
CLOCK_REASONS = {CLOCK_REASON_BITS[k]: words for k, words in (
    ("idle", "GPU idle"), ("applications_clocks", "applications clocks setting"), ("sw_power_cap", "SW power cap"),
    ("hw_slowdown", "HW slowdown"), ("sync_boost", "sync boost"), ("sw_thermal_slowdown", "SW thermal slowdown"),
    ("hw_thermal_slowdown", "HW thermal slowdown"), ("hw_power_brake", "HW power brake slowdown"),
    ("display_clock", "display clock setting"))}
#: Reasons that mean the hardware holds the clocks down (the health lines' too): one under load FAILs.
THROTTLE_FAIL = sum(CLOCK_REASON_BITS[k] for k in HOLDING_REASONS)

_FRACTION = "must be a fraction of the limit, above 0 and at most 1 (0.75: below 75 % of the limit)"


class Thresholds(Spec):
    """``accept_thresholds``: below ``*_warn`` x the limit a measured rate WARNs, below ``*_fail`` it FAILs."""

    pcie_warn: float = want(0.75, _FRACTION, gt=0, le=1)
    pcie_fail: float = want(0.60, _FRACTION, gt=0, le=1)
    memory_warn: float = want(0.70, _FRACTION, gt=0, le=1)
    memory_fail: float = want(0.50, _FRACTION, gt=0, le=1)
    nvlink_warn: float = want(0.70, _FRACTION, gt=0, le=1)
    nvlink_fail: float = want(0.50, _FRACTION, gt=0, le=1)
    pcie_p2p_warn: float = want(0.50, _FRACTION, gt=0, le=1)
    pcie_p2p_fail: float = want(0.20, _FRACTION, gt=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _numbers(cls, data: Any) -> Any:
        # A whole number (1) is a fraction too; strict mode would refuse an int for a float.
        if isinstance(data, dict):
            return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _order(self) -> "Thresholds":
        for kind in ("pcie", "memory", "nvlink", "pcie_p2p"):
            warn, fail = getattr(self, f"{kind}_warn"), getattr(self, f"{kind}_fail")
            if fail > warn:
                raise ValueError(f"{kind}_fail {fail:g} is above {kind}_warn {warn:g}: a rate that fails must "
                                 "also warn; give fail <= warn")
        return self


class _Given(RoleVars):
    accept_thresholds: Thresholds = want({}, "must be a mapping of thresholds (pcie_warn, pcie_fail, memory_warn, "
                                             "memory_fail, nvlink_warn, nvlink_fail, pcie_p2p_warn, pcie_p2p_fail)")


def thresholds(vars: Mapping[str, Any]) -> Thresholds:
    """The host's ``accept_thresholds`` over the defaults; bad values raise :class:`InputError` (one line)."""
    try:
        return _Given.model_validate({"accept_thresholds": vars.get("accept_thresholds") or {}}).accept_thresholds
    except ValidationError as e:
        err = one_line(e, _Given)
        text = str(err)
        raise InputError(text if text.startswith("accept_thresholds") else f"accept_thresholds: {text}") from None


def pcie_gbs(gen: Any, width: Any) -> float | None:
    """GB/s per direction of a PCIe link of generation ``gen`` and ``width`` lanes; None when unknown."""
    if isinstance(gen, bool) or isinstance(width, bool):
        return None
    try:
        g, w = int(gen), int(width)
    except (TypeError, ValueError):
        return None
    lane = PCIE_LANE_GBS.get(g)
    return round(lane * w, 3) if lane and w > 0 else None


def nvlink_gbs(product_name: Any, architecture: Any, links: int) -> float | None:
    """GB/s per direction of ``links`` NVLink links of this GPU (:func:`bringup.hardware.nvlink.rate`); None when unknown."""
    per = rate(product_name, architecture)
    return per.data * links if per and links > 0 else None
