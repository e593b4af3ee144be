"""Repeated measurement windows of one point, perf_analyzer's stability rule, and the spread they give.

One steady window of a few seconds is one sample of a noisy machine: on the H200 the same configuration gave
p95 17.0 ms at 5,109 images/s in one run and 12.4 ms at 6,569 an hour later (issue 35).  So a point of
``bench``, ``tune`` and ``tune-window`` is measured as perf_analyzer measures: windows are repeated until
the last ``repeats`` of them agree, their p95 and their throughput each within ``stability_pct`` of their
median ((max - min) / median), or until ``max_windows`` were measured (the time bound: at most
``max_windows`` x (warm-up + window) per point).  The point then reports the **median** of those last
``repeats`` windows and their **spread** (min-max) of p95 and of items/s, and is **unstable** when the
spread stays above the threshold.

Defaults: 3 windows (perf_analyzer judges its last 3 measurements), 10 % (its ``--stability-percentage``),
at most 2 x ``repeats`` windows (6: perf_analyzer allows 10 trials of a point; 6 keeps the default sweep's
16 points within about 12 minutes at the default 2 + 5 s).

Pure: :func:`measure` takes the function that measures one window, :func:`combine` turns windows into the
point's row, :func:`overlap` says whether two rows cannot be told apart within their spreads.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

__all__ = ["REPEATS", "STABILITY_PCT", "Rule", "spread_of", "agree", "measure", "combine", "span", "overlap",
           "spread_text", "repeated"]

#: Windows whose agreement a point needs (perf_analyzer's last 3 measurements).
REPEATS = 3
#: The largest spread, in % of the median, of p95 and of throughput over those windows (perf_analyzer's 10 %).
STABILITY_PCT = 10.0
#: The figures judged for stability, and shown with their spread.
KEYS = ("p95_ms", "items_per_s")


@dataclass(frozen=True)
class Rule:
    """How many windows a point needs to agree (``repeats``), within which spread, and how many at most."""

    repeats: int = REPEATS
    stability_pct: float = STABILITY_PCT
    max_windows: int = 0            # 0: 2 x repeats

    @property
    def most(self) -> int:
        return max(self.repeats, self.max_windows or 2 * self.repeats)


def spread_of(values: list[float]) -> dict | None:
    """``{median, min, max, pct}`` of ``values`` (``pct``: (max - min) / median in %), None when empty."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    med = statistics.median(vals)
    lo, hi = min(vals), max(vals)
    pct = 0.0 if hi == lo else (round((hi - lo) / med * 100, 1) if med else None)
    return {"median": round(med, 3), "min": round(lo, 3), "max": round(hi, 3), "pct": pct}


def agree(windows: list[dict], pct: float) -> bool:
    """Whether ``windows`` agree: p95 and items/s each within ``pct`` % of their median, every window answered."""
    for k in KEYS:
        s = spread_of([w.get(k) for w in windows])
        if s is None or len([w for w in windows if w.get(k) is not None]) < len(windows):
            return False
        if s["pct"] is None or s["pct"] > pct:
            return False
    return True


def measure(window: Callable[[int], dict], rule: Rule, on_window: Callable[[int, dict], None] | None = None
            ) -> list[dict]:
    """Windows measured by ``window(i)`` until the last ``rule.repeats`` agree or ``rule.most`` were measured."""
    out: list[dict] = []
    while True:
        row = window(len(out))
        out.append(row)
        if on_window:
            on_window(len(out), row)
        if len(out) >= rule.repeats and agree(out[-rule.repeats:], rule.stability_pct):
            return out
        if len(out) >= rule.most:
            return out


def combine(windows: list[dict], rule: Rule) -> dict:
    """The point's row from its windows: the median of the last ``rule.repeats``, their spread, and whether the
    point is unstable.

    The row is the window whose p95 is the median one (its Triton view and counts belong together), with
    p50/p95/p99, req/s and items/s replaced by the medians of the windows used; errors are summed, a point is
    client-bound when any window used was, and spanned a reload when any window measured did or the served
    configuration differs from its first window to its last (labelled "before → after").
    """
    used = windows[-rule.repeats:]
    answered = sorted((w for w in used if w.get("p95_ms") is not None), key=lambda w: w["p95_ms"])
    base = dict(answered[(len(answered) - 1) // 2] if answered else used[-1])
    for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "rps", "items_per_s"):
        s = spread_of([w.get(k) for w in used])
        if s is not None:
            base[k] = round(s["median"], 3 if k.endswith("_ms") else 1)
    base["errors"] = sum(w.get("errors") or 0 for w in used)
    base["unfinished"] = sum(w.get("unfinished") or 0 for w in used)
    bound = [w for w in used if w.get("client_bound")]
    base["client_bound"] = bool(bound)
    base["client_bound_why"] = bound[0].get("client_bound_why", "") if bound else ""
    agrees = [w.get("counts_agree") for w in used]
    base["counts_agree"] = None if None in agrees else all(agrees)
    # A reload in any window measured, used or not, or another configuration from one window to the next:
    # the point measured more than one thing and is no verdict.
    reloaded = [w for w in windows if w.get("reloaded")]
    start = str(windows[0].get("config") or "").split(" → ")[0]
    end = str(windows[-1].get("config") or "").split(" → ")[-1]
    if start and end and start != end:
        base["config"], base["window_us"] = f"{start} → {end}", windows[-1].get("window_us")
    if reloaded or (start and end and start != end):
        base["reloaded"] = True
        base["reloaded_why"] = (reloaded[0].get("reloaded_why", "") if reloaded else
                                f"the served configuration changed between the point's windows ({start}, then {end})")
        base["triton"], base["counts_agree"] = {}, None
    else:
        base["reloaded"], base["reloaded_why"] = False, ""
    spread = {k: spread_of([w.get(k) for w in used]) for k in KEYS}
    stable = len(used) >= 2 and agree(used, rule.stability_pct)
    base["spread"] = {
        "repeats": len(used), "windows": len(windows), "stability_pct": rule.stability_pct,
        "max_windows": rule.most, **spread,
        "samples": [{"p95_ms": w.get("p95_ms"), "items_per_s": w.get("items_per_s"),
                     "client_bound": bool(w.get("client_bound")), "used": i >= len(windows) - len(used),
                     **_counts(w)}
                    for i, w in enumerate(windows)],
    }
    base["unstable"] = len(used) >= 2 and not stable
    base["unstable_why"] = "" if not base["unstable"] else _why(spread, rule, len(used), len(windows))
    return base


def _counts(w: dict) -> dict:
    """One window's request counts, kept per window so that Triton's counters can be reconciled with the bench
    (the point's row is its median window's): the requests measured, those the clients sent (warm-up and drain
    included) and the requests and items Triton counted over the same span, and whether they agreed."""
    tri = w.get("triton_total") if isinstance(w.get("triton_total"), dict) else {}
    return {"requests": w.get("requests"), "sent": w.get("sent_total"), "sent_items": w.get("sent_items_total"),
            "triton_requests": tri.get("requests"), "triton_items": tri.get("items"),
            "counts_agree": w.get("counts_agree")}


def _why(spread: dict, rule: Rule, used: int, measured: int) -> str:
    parts = []
    for k, name, unit, fmt in (("p95_ms", "p95", " ms", "{:.1f}"), ("items_per_s", "items/s", "", "{:,.0f}")):
        s = spread.get(k)
        if s is None:
            parts.append(f"no {name} in every window")
        elif s["pct"] is None or s["pct"] > rule.stability_pct:
            pct = "?" if s["pct"] is None else f"{s['pct']:.0f} %"
            parts.append(f"{name} {fmt.format(s['min'])}-{fmt.format(s['max'])}{unit} ({pct})")
    return (f"the last {used} of {measured} window(s) did not agree within {rule.stability_pct:g} %: "
            + ", ".join(parts))


def repeated(row: dict) -> bool:
    """Whether ``row`` rests on two or more windows (a result saved before issue 35 has no spread)."""
    return bool(row.get("spread")) and (row["spread"].get("repeats") or 0) >= 2


def span(row: dict, key: str) -> tuple[float, float] | None:
    """``(min, max)`` of ``key`` over the row's windows; a row without spread is its one value."""
    s = (row.get("spread") or {}).get(key)
    if s:
        return s["min"], s["max"]
    v = row.get(key)
    return None if v is None else (float(v), float(v))


def overlap(a: dict, b: dict, key: str) -> bool:
    """Whether rows ``a`` and ``b`` cannot be told apart on ``key``: their min-max ranges meet."""
    sa, sb = span(a, key), span(b, key)
    return sa is not None and sb is not None and sa[0] <= sb[1] and sb[0] <= sa[1]


def spread_text(row: dict, key: str = "p95_ms") -> str:
    """``"12.4-17.0"`` (p95, one decimal) or ``"5,109-6,569"`` (items/s); "" without spread."""
    s = (row.get("spread") or {}).get(key) if repeated(row) else None
    if not s:
        return ""
    fmt = "{:.1f}" if key.endswith("_ms") else "{:,.0f}"
    return f"{fmt.format(s['min'])}-{fmt.format(s['max'])}"
