"""NVLink: what a link of a GPU should run at, from one table (``bringup/data/nvlink.yaml``, with its sources).

Read by the checklist's health lines (each link's speed as ``nvidia-smi nvlink -s`` prints it) and by the
measured acceptance (a GPU pair's peer-to-peer copy against its links' data rate).

    rate("NVIDIA H100 80GB HBM3", "Hopper")   # LinkRate(printed=26.562, data=25.0)
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from ..shipped import shipped_yaml

__all__ = ["LinkRate", "rate"]


class LinkRate(NamedTuple):
    """One link, one direction, GB/s: ``printed`` by nvidia-smi when it trained right, ``data`` it carries."""

    printed: float
    data: float


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return shipped_yaml("nvlink.yaml")


def rate(product_name: Any, architecture: Any) -> LinkRate | None:
    """The rate of a link of this GPU: by its product name (PCIe cards with a bridge), else by its architecture
    (``nvidia-smi -q``'s Product Architecture, any case); None when the table does not know the part."""
    table = _table()
    by_name = table.get("product") or {}
    entry = by_name.get(str(product_name or "").strip())
    if entry is None:
        arch = str(architecture or "").strip().lower()
        entry = next((v for k, v in (table.get("architecture") or {}).items() if k.lower() == arch), None)
    return LinkRate(float(entry["printed"]), float(entry["data"])) if entry else None
