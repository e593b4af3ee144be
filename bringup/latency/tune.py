"""The batching window against a p95 target: the guide's controller step, and a one-shot sweep.

The guide's rule (every interval, default 10 s): p95 below the target -> window
+50 µs, above -> -50 µs, clamped to 200..1500 µs; a breach while Triton's queue
time per request rises tightens by 150 µs at once.  :func:`next_window` is that
step; it lives in :mod:`.window_tuner`, the stdlib-only controller shipped to
hosts.  :func:`pick` is the one-shot mode: of a sweep of windows under a fixed
load, the window that meets the target at the highest throughput.
"""
from __future__ import annotations

from .window_tuner import STEP, TIGHTEN, WINDOW_MAX, WINDOW_MIN, next_window

__all__ = ["WINDOW_MIN", "WINDOW_MAX", "STEP", "TIGHTEN", "next_window", "pick"]


def pick(doc: dict, target_ms: float) -> dict:
    """The best window of a sweep: meets ``target_ms`` at the most items/s (client-bound points never count)."""
    by: dict = {}
    for r in doc["points"]:
        by.setdefault(r["window_us"], []).append(r)
    table = []
    for w, rows in by.items():
        good = [r for r in rows if not r["client_bound"] and not r["errors"] and r["p95_ms"] is not None]
        worst = max((r["p95_ms"] for r in rows if r["p95_ms"] is not None), default=None)
        table.append({"window_us": w, "p95_ms": worst, "items_per_s": min((r["items_per_s"] for r in rows),
                                                                           default=0.0),
                      "client_bound": any(r["client_bound"] for r in rows),
                      "meets": worst is not None and len(good) == len(rows) and worst <= target_ms,
                      "avg_batch": max(((r.get("triton") or {}).get("avg_batch") or 0) for r in rows)})
    meeting = [t for t in table if t["meets"]]
    best = max(meeting, key=lambda t: t["items_per_s"]) if meeting else None
    return {"target_p95_ms": target_ms, "windows": table, "chosen_window_us": best["window_us"] if best else None,
            "why": (f"{best['window_us']} µs meets p95 {target_ms:g} ms at {best['items_per_s']:.0f} items/s"
                    if best else f"no window met p95 {target_ms:g} ms at this load")}
