"""NVLink: what a link of a GPU should run at, from one table (``bringup/data/nvlink.yaml``, with its sources).

Read by the checklist's health lines (each link's speed as ``nvidia-smi nvlink -s`` prints it) and by the
measured acceptance (a GPU pair's peer-to-peer copy against its links' data rate).

    rate("NVIDIA H100 80GB HBM3", "Hopper")   # LinkRate(printed=26.562, data=25.0)
    link_count("NVIDIA H100 80GB HBM3", "Hopper")   # 18
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from ..shipped import shipped_yaml

__all__ = ["LinkRate", "rate", "link_count"]


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
    entry = _entry(product_name, architecture)
    return LinkRate(float(entry["printed"]), float(entry["data"])) if entry else None


def _entry(product_name: Any, architecture: Any) -> dict[str, Any] | None:
    table = _table()
    entry = (table.get("product") or {}).get(str(product_name or "").strip())
    if entry is None:
        arch = str(architecture or "").strip().lower()
        entry = next((v for k, v in (table.get("architecture") or {}).items() if k.lower() == arch), None)
    return entry


def link_count(product_name: Any, architecture: Any) -> int | None:
    """How many link lines ``nvidia-smi nvlink -s`` prints for one GPU of this part (up or ``<inactive>``): by the start
    of its product name (``links_by_name``), else its product's or architecture's entry; None where the table does not
    know it (H800 and A800: 8 links, not their architecture's)."""
    name = str(product_name or "").strip()
    by_name = _table().get("links_by_name") or {}
    prefix = next((p for p in by_name if name.startswith(str(p))), None)
    n = by_name[prefix] if prefix is not None else (_entry(product_name, architecture) or {}).get("links")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
