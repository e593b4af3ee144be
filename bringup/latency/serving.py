"""A model's serving configuration: instances per GPU, batch sizes, the batching window.

What ``invoke tune`` searches and records, what a bench point is labelled with (the configuration Triton
actually served, read from its config API), and how one is applied: the model's own configuration with
these four fields replaced, loaded through Triton's model control API (a config override; explicit
model-control mode), which swaps it in place without dropping a request.
"""
from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .window_tuner import Unreadable, number, proto_uint, window_of

__all__ = ["Serving", "serving_of", "with_serving", "ladder", "label_of"]


class Serving(BaseModel):
    """One serving configuration of a model (None window: no dynamic batching)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)

    instance_count: int = Field(ge=1, le=64)
    max_batch_size: int = Field(ge=0, le=1 << 16)
    preferred_batch_size: tuple[Annotated[int, Field(ge=1)], ...] = ()
    window_us: int | None = Field(None, ge=0, le=1_000_000)

    def label(self) -> str:
        """``2 instances, max batch 16, preferred [4, 8, 16], window 800 µs``."""
        inst = f"{self.instance_count} instance{'s' if self.instance_count != 1 else ''}"
        if self.window_us is None:
            return f"{inst}, max batch {self.max_batch_size}, no dynamic batching"
        pref = f", preferred [{', '.join(map(str, self.preferred_batch_size))}]" if self.preferred_batch_size else ""
        return f"{inst}, max batch {self.max_batch_size}{pref}, window {self.window_us} µs"

    def record(self) -> dict:
        """What the host's record keeps of it beside the window (:data:`~.window_tuner.SERVING_KEYS`)."""
        return {"instance_count": self.instance_count, "max_batch_size": self.max_batch_size,
                "preferred_batch_size": list(self.preferred_batch_size)}


def serving_of(config: dict) -> Serving:
    """The serving configuration of a model config as Triton's config API gives it (JSON form).

    Instances are per GPU (``count`` of a ``KIND_GPU`` group is per listed GPU); several groups: the
    largest count.
    """
    window_us = window_of(config)  # the config and its dynamic_batching are JSON objects, else Unreadable
    groups = config.get("instance_group") or [{}]
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise Unreadable(f"Triton's model config: instance_group {str(groups)[:80]!r} is not a list of objects")
    count = max(_whole(g.get("count", 1) or 1, "instance_group count", 1, 4096) for g in groups)
    preferred = (config.get("dynamic_batching") or {}).get("preferred_batch_size") or []
    if not isinstance(preferred, list):
        raise Unreadable(f"Triton's model config: preferred_batch_size {str(preferred)[:80]!r} is not a list")
    return Serving(instance_count=count,
                   max_batch_size=_whole(config.get("max_batch_size", 0) or 0, "max_batch_size", 0, 2**31 - 1),
                   preferred_batch_size=tuple(_whole(p, "preferred_batch_size", 1, 2**31 - 1) for p in preferred),
                   window_us=window_us)


def _whole(v, what: str, lo: int, hi: int) -> int:
    """A whole number of Triton's model config (protobuf's JSON writes 64-bit ones as digits in text)."""
    return number(proto_uint(v), lo=lo, hi=hi, integer=True, what=f"Triton's model config: {what}")


def label_of(config: dict | None) -> str | None:
    return None if not config else serving_of(config).label()


def with_serving(config: dict, s: Serving) -> dict:
    """A copy of ``config`` serving ``s``: every instance group's count, max_batch_size, the preferred sizes
    and the window (None: dynamic batching off)."""
    cfg = json.loads(json.dumps(config))
    groups = cfg.get("instance_group") or [{"kind": "KIND_AUTO"}]
    for g in groups:
        g["count"] = s.instance_count
    cfg["instance_group"] = groups
    cfg["max_batch_size"] = s.max_batch_size
    if s.window_us is None:
        cfg.pop("dynamic_batching", None)
    else:
        db = cfg.setdefault("dynamic_batching", {})
        db["max_queue_delay_microseconds"] = int(s.window_us)
        db["preferred_batch_size"] = [p for p in s.preferred_batch_size if p <= s.max_batch_size] or \
            [s.max_batch_size]
    return cfg


def ladder(max_batch_size: int, start: int = 2) -> tuple[int, ...]:
    """Powers of two from ``start`` up to ``max_batch_size``, and it: 16 -> (2, 4, 8, 16); 12 -> (2, 4, 8, 12)."""
    out, p = [], start
    while p < max_batch_size:
        out.append(p)
        p *= 2
    return tuple(out + [max_batch_size]) if max_batch_size >= 1 else ()
