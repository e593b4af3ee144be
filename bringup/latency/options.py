"""The options of ``bench``, ``tune-window`` and ``tune``, checked like inventory input (issue 26, item 2).

Every flag arrives as text (the tasks declare text defaults, so Invoke's own casting never ends in a
traceback) and is read here into typed values, pydantic models with ``allow_inf_nan=False``: a NaN, an
infinity, a word where a number belongs, a value out of range, a CPU this machine does not have, an
``--out`` that is a file -- each is one :class:`~bringup.errors.InputError` naming the flag and what was
given, before anything is contacted.  Lists keep their order; ``--input-shape`` keeps repeated sizes
(``3,224,224`` is three dimensions).
"""
from __future__ import annotations

import math
import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InputError, first_line as _first_line, quoted
from ..outfile import out_folder  # noqa: F401 - where the tasks have long imported it from
from . import MAX_BATCH  # a request batch at most (in the leaf: bringup.hardware.gpu_profiles reads it too)
from .window_tuner import WINDOW_MAX, WINDOW_MIN

__all__ = ["RepeatOptions", "BenchOptions", "TuneWindowOptions", "TuneOptions", "FollowOptions", "read", "number",
           "whole", "whole_list", "quoted", "dims", "cpus", "out_folder", "MAX_CONCURRENCY", "MAX_PROCESSES",
           "MAX_ITEM_ELEMENTS"]

#: Requests in flight at most: each is a coroutine and a buffer in a client process.
MAX_CONCURRENCY = 4096
#: Client processes at most (each is a Python interpreter with tritonclient).
MAX_PROCESSES = 64
#: One item's elements at most (a 3x224x224 image is 150,528): the client builds a batch of them per coroutine.
MAX_ITEM_ELEMENTS = 1 << 26


def _finite(v: Any, flag: str) -> float:
    try:
        x = float(str(v).strip()) if not isinstance(v, (int, float)) or isinstance(v, bool) else float(v)
    except ValueError:
        raise InputError(f"{flag} {quoted(v)}: must be a number") from None
    if not math.isfinite(x):
        raise InputError(f"{flag} {quoted(v)}: must be a finite number")
    return x


def number(v: Any, flag: str, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           unit: str = "") -> float:
    """A finite number within ``lo``..``hi`` (``lo_open``: above ``lo``)."""
    x = _finite(v, flag)
    u = f" {unit}" if unit else ""
    if lo is not None and (x <= lo if lo_open else x < lo):
        raise InputError(f"{flag} {quoted(v)}: must be {'above' if lo_open else 'at least'} {lo:g}{u}")
    if hi is not None and x > hi:
        raise InputError(f"{flag} {quoted(v)}: must be at most {hi:g}{u}")
    return x


def whole(v: Any, flag: str, lo: int, hi: int) -> int:
    """A whole number within ``lo``..``hi``."""
    t = _first_line(v) if not isinstance(v, int) or isinstance(v, bool) else str(v)
    try:
        n = int(t)
    except ValueError:
        raise InputError(f"{flag} {quoted(t)}: must be a whole number from {lo} to {hi}") from None
    if not lo <= n <= hi:
        raise InputError(f"{flag} {quoted(t)}: must be a whole number from {lo} to {hi}")
    return n


def whole_list(v: Any, flag: str, lo: int, hi: int, *, unique: bool = True) -> list[int]:
    """``"1,4,16"`` -> ``[1, 4, 16]`` (``unique``: repeats dropped, order kept)."""
    if isinstance(v, (list, tuple)):
        items = [str(x) for x in v]
    else:
        items = [t.strip() for t in str(v).split(",")]
    if not [t for t in items if t]:
        raise InputError(f"{flag} {quoted(v)}: give whole numbers from {lo} to {hi}, comma separated")
    out = []
    for t in items:
        try:
            n = int(t)
        except ValueError:
            raise InputError(f"{flag} {quoted(v)}: {quoted(t)} is not a whole number (from {lo} to {hi}, "
                             "comma separated)") from None
        if not lo <= n <= hi:
            raise InputError(f"{flag} {quoted(v)}: {quoted(n)} is outside {lo}..{hi}")
        out.append(n)
    return list(dict.fromkeys(out)) if unique else out


def dims(v: Any, flag: str = "--input-shape") -> list[int]:
    """One item's dimensions, every one kept (``3,224,224`` is three), each >= 1, the item bounded."""
    out = whole_list(v, flag, 1, MAX_ITEM_ELEMENTS, unique=False)
    if len(out) > 8:
        raise InputError(f"{flag} {quoted(v)}: at most 8 dimensions")
    if math.prod(out) > MAX_ITEM_ELEMENTS:
        raise InputError(f"{flag} {quoted(v)}: {math.prod(out):,} elements per item; at most "
                         f"{MAX_ITEM_ELEMENTS:,}")
    return out


def cpus(v: Any, flag: str = "--client-cpus") -> list[int]:
    """CPU ids this process may run on (``0,1`` or ``0-3``)."""
    allowed = sorted(os.sched_getaffinity(0))
    text = ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
    ids: list[int] = []
    for part in [p.strip() for p in text.split(",")]:
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise InputError(f"{flag} {quoted(text)}: CPU ids like 0,1 or 0-3") from None
        if a > b or b - a > 4096:
            raise InputError(f"{flag} {quoted(text)}: {quoted(part)} is not a range of CPUs")
        ids += range(a, b + 1)
    missing = [c for c in dict.fromkeys(ids) if c not in allowed]
    if missing:
        have = f"{allowed[0]}-{allowed[-1]}" if allowed == list(range(allowed[0], allowed[-1] + 1)) else \
            ",".join(map(str, allowed))
        raise InputError(f"{flag} {quoted(text)}: {missing[0]} is not a CPU this machine lets bench use "
                         f"({have})")
    return list(dict.fromkeys(ids))


# --------------------------------------------------------------------------- typed option sets

_Window = Annotated[int, Field(ge=0, le=1500)]


def _recordable(windows: list[int]) -> list[int]:
    """Windows a tuning may choose, and so record: only those the triton role accepts (a record it refuses
    fails every later provision and audit until removed by hand)."""
    bad = [w for w in windows if not WINDOW_MIN <= w <= WINDOW_MAX]
    if bad:
        raise ValueError(f"--windows {quoted(','.join(map(str, windows)))}: {quoted(bad[0])} µs is outside {WINDOW_MIN}-"
                         f"{WINDOW_MAX} µs, the windows the triton role accepts (its "
                         "triton_max_queue_delay_microseconds); give windows in that range")
    return windows


class _Options(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


class RepeatOptions(_Options):
    """How each point is repeated (:mod:`bringup.latency.repeats`): ``--repeats``, ``--stability``,
    ``--max-windows``."""

    repeats: int = Field(3, ge=1, le=100)
    stability_pct: float = Field(10.0, gt=0, le=1000)
    max_windows: int = Field(0, ge=0, le=1000)

    @model_validator(mode="after")
    def _enough(self):
        if self.max_windows and self.max_windows < self.repeats:
            raise ValueError(f"--max-windows {self.max_windows} is below --repeats {self.repeats}: a point needs "
                             f"at least {self.repeats} windows (0: twice --repeats)")
        return self


class BenchOptions(RepeatOptions):
    """``invoke bench``'s sweep and client."""

    batches: list[Annotated[int, Field(ge=1, le=MAX_BATCH)]] = Field(default_factory=lambda: [1, 2, 4, 8],
                                                                      min_length=1)
    concurrency: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] = Field(
        default_factory=lambda: [1, 4, 16, 64], min_length=1)
    windows: list[Literal["deployed"] | _Window | None] = Field(default_factory=lambda: ["deployed"], min_length=1)
    warmup_s: float = Field(2.0, ge=0, le=600)
    duration_s: float = Field(5.0, gt=0, le=3600)
    processes: int = Field(0, ge=0, le=MAX_PROCESSES)
    client_cpus: list[int] | None = None
    cpu_limit: float = Field(0.85, gt=0, le=1)
    microbatch_us: int | None = Field(None, ge=1, le=1000)
    microbatch_max: int = Field(8, ge=1, le=MAX_BATCH)

    @field_validator("client_cpus")
    @classmethod
    def _cpus(cls, v):
        return None if v is None else cpus(v)


class FollowOptions(_Options):
    """``tune-window --follow``: the controller's pace and bounds."""

    interval_s: float = Field(10.0, ge=0.1, le=86400)
    steps: int | None = Field(None, ge=1, le=10_000_000)
    seconds: float | None = Field(None, gt=0, le=366 * 86400)
    http_port: int | None = Field(None, ge=1, le=65535)
    metrics_port: int | None = Field(None, ge=1, le=65535)


class TuneWindowOptions(_Options):
    target_p95_ms: float = Field(..., gt=0, le=3_600_000)
    windows: list[int] = Field(..., min_length=1)

    @field_validator("windows")
    @classmethod
    def _windows(cls, v: list[int]) -> list[int]:
        return _recordable(v)


class TuneOptions(_Options):
    """``invoke tune``: what is searched, under which load, within which budget."""

    target_p95_ms: float = Field(..., gt=0, le=3_600_000)
    budget_s: float = Field(600.0, gt=0, le=24 * 3600)
    instances: list[Annotated[int, Field(ge=1, le=4)]] = Field(default_factory=lambda: [1, 2, 3, 4], min_length=1)
    max_batches: list[Annotated[int, Field(ge=1, le=MAX_BATCH)]] | None = None
    windows: list[int] = Field(default_factory=lambda: [200, 400, 800, 1200, 1500], min_length=1)

    @field_validator("windows")
    @classmethod
    def _windows(cls, v: list[int]) -> list[int]:
        return _recordable(v)


def read(cls: type[BaseModel], flags: dict[str, str], **values: Any) -> Any:
    """``cls(**values)``, a refusal as one line naming the flag (``flags``: field -> flag) and what was given."""
    try:
        return cls(**values)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        loc = [x for x in err["loc"] if isinstance(x, str)]
        name = loc[0] if loc else ""
        flag = flags.get(name, "--" + name.replace("_", "-"))
        given = values.get(name)
        idx = [x for x in err["loc"] if isinstance(x, int)]
        what = err.get("input") if idx else given
        shown = ",".join(map(str, given)) if isinstance(given, (list, tuple)) else given
        kind, ctx = err["type"], err.get("ctx") or {}
        msg = {"finite_number": "must be a finite number",
               "greater_than_equal": f"must be at least {ctx.get('ge')}",
               "greater_than": f"must be above {ctx.get('gt')}",
               "less_than_equal": f"must be at most {ctx.get('le')}",
               "less_than": f"must be below {ctx.get('lt')}",
               "too_short": "must not be empty"}.get(kind)
        if kind == "value_error":
            raise InputError(str(ctx.get("error") or err["msg"]).removeprefix("Value error, ")) from None
        if msg is None:
            msg = err["msg"][:1].lower() + err["msg"][1:]
        item = f" ({what!r})" if idx and what != shown else ""
        raise InputError(f"{flag} {quoted(shown)}{item}: {msg}") from None
