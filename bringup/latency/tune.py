"""Serving configurations against a p95 target: the window's one-shot sweep, and ``invoke tune``'s search.

The guide's rule (every interval, default 10 s): p95 below the target -> window
+50 µs, above -> -50 µs, clamped to 200..1500 µs; a breach while Triton's queue
time per request rises tightens by 150 µs at once.  :func:`next_window` is that
step; it lives in :mod:`.window_tuner`, the stdlib-only controller shipped to
hosts.  :func:`pick` is the one-shot mode: of a sweep of windows under a fixed
load, the window that meets the target at the highest throughput.

:func:`run_tune` is ``invoke tune``: instances per GPU, ``max_batch_size``,
``preferred_batch_size`` and the window, under one fixed load, each
configuration loaded through Triton's model control API (a config override: no
restart, no request dropped) and measured by one bench point.  The search is
staged, one knob at a time in the order of its effect (:data:`SEARCH`), and
bounded by a time budget.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .serving import Serving, ladder, serving_of, with_serving
from .window_tuner import STEP, TIGHTEN, WINDOW_MAX, WINDOW_MIN, next_window

__all__ = ["WINDOW_MIN", "WINDOW_MAX", "STEP", "TIGHTEN", "next_window", "pick", "TuneSettings", "run_tune",
           "verdict", "SEARCH", "point_cost_s"]

#: Which search ``invoke tune`` runs, and why (printed and kept in the result).
SEARCH = ("staged search, one knob at a time in the order of its effect at a fixed load (coordinate descent): "
          "1) instances per GPU at a mid window, since they set how many batches run at once, the throughput "
          "ceiling; 2) max_batch_size and the preferred sizes with the best instance count, since they set what "
          "one execution carries; 3) the window with both, since at a steady load the queue fills batches "
          "whatever the window (the H200 run: p95 34.9-39.7 ms over 200-1200 µs), so it is the fine step. "
          "Each stage starts from the best configuration so far; a configuration already measured is not "
          "measured again")


def _valid(r: dict) -> bool:
    return (r.get("p95_ms") is not None and not r.get("client_bound") and not r.get("errors")
            and not r.get("reloaded"))


def verdict(r: dict, target_ms: float) -> str:
    """``meets``, ``misses`` or ``no verdict (why)`` of one measured point against the target."""
    if r.get("p95_ms") is None:
        return "no verdict (no answer measured)"
    if r.get("errors"):
        return f"no verdict ({r['errors']} errors)"
    if r.get("reloaded"):
        return "no verdict (Triton reloaded during the point)"
    if r.get("client_bound"):
        return "no verdict (client-bound)"
    return "meets" if r["p95_ms"] <= target_ms else "misses"


def pick(doc: dict, target_ms: float) -> dict:
    """The best window of a sweep: meets ``target_ms`` at the most items/s (client-bound points never count)."""
    by: dict = {}
    for r in doc["points"]:
        by.setdefault(r["window_us"], []).append(r)
    table = []
    for w, rows in by.items():
        good = [r for r in rows if _valid(r)]
        worst = max((r["p95_ms"] for r in rows if r["p95_ms"] is not None), default=None)
        table.append({"window_us": w, "p95_ms": worst, "items_per_s": min((r["items_per_s"] for r in rows),
                                                                           default=0.0),
                      "client_bound": any(r["client_bound"] for r in rows),
                      "reloaded": any(r.get("reloaded") for r in rows),
                      "meets": worst is not None and len(good) == len(rows) and worst <= target_ms,
                      "avg_batch": max(((r.get("triton") or {}).get("avg_batch") or 0) for r in rows)})
    meeting = [t for t in table if t["meets"]]
    best = max(meeting, key=lambda t: t["items_per_s"]) if meeting else None
    if best:
        why = (f"{best['window_us']} µs: p95 {best['p95_ms']:.1f} ms meets {target_ms:g} ms at "
               f"{best['items_per_s']:.0f} items/s")
    else:
        low = min((t for t in table if t["p95_ms"] is not None), key=lambda t: t["p95_ms"], default=None)
        why = f"no window met p95 {target_ms:g} ms at this load" + (
            f" (lowest: {low['window_us']} µs, p95 {low['p95_ms']:.1f} ms)" if low else "")
    return {"target_p95_ms": target_ms, "windows": table, "chosen_window_us": best["window_us"] if best else None,
            "why": why}


# --------------------------------------------------------------------------- invoke tune


@dataclass
class TuneSettings:
    target_ms: float
    batch: int = 1
    concurrency: int = 64
    instances: list[int] = field(default_factory=lambda: [1, 2, 3, 4])
    max_batches: list[int] | None = None     # None: the model's max_batch_size, its half and its quarter
    windows: list[int] = field(default_factory=lambda: [200, 400, 800, 1200, 1500])
    budget_s: float = 600.0
    warmup_s: float = 2.0
    duration_s: float = 5.0
    processes: int = 0
    client_cpus: list[int] | None = None
    cpu_limit: float = 0.85

    def resolved_processes(self) -> int:
        from .bench import BenchSettings

        return BenchSettings(processes=self.processes, client_cpus=self.client_cpus).resolved_processes()


#: What a point costs beyond its warm-up and steady window (starting the clients' point, reading Triton).
POINT_OVERHEAD_S = 0.5
#: A reload's cost before one was timed.
FIRST_RELOAD_GUESS_S = 5.0


def point_cost_s(s: TuneSettings) -> float:
    return s.warmup_s + s.duration_s + POINT_OVERHEAD_S


def _mid(windows: list[int]) -> int:
    ws = sorted(windows)
    return ws[len(ws) // 2]


def _stage_candidates(stage: int, best: Serving, allowed_mbs: int, s: TuneSettings) -> list[Serving]:
    if stage == 1:
        return [best.model_copy(update={"instance_count": n}) for n in s.instances]
    if stage == 2:
        if not allowed_mbs:
            return []
        sizes = s.max_batches or sorted({allowed_mbs, allowed_mbs // 2, allowed_mbs // 4}, reverse=True)
        out = []
        for mbs in sizes:
            if mbs < max(1, s.batch) or mbs > allowed_mbs:
                continue
            for pref in (ladder(mbs), (mbs,)):
                out.append(best.model_copy(update={"max_batch_size": mbs, "preferred_batch_size": pref}))
        return out
    if not allowed_mbs:
        return []
    return [best.model_copy(update={"window_us": w}) for w in s.windows]


def _better(a: dict | None, b: dict, target_ms: float) -> bool:
    """Whether row ``b`` beats row ``a``: meeting the target first, then throughput; else the lower p95."""
    if not _valid(b):
        return False
    if a is None:
        return True
    am, bm = a["p95_ms"] <= target_ms, b["p95_ms"] <= target_ms
    if am != bm:
        return bm
    return b["items_per_s"] > a["items_per_s"] if bm else b["p95_ms"] < a["p95_ms"]


def run_tune(target, s: TuneSettings, *, keep: bool = True, on_point=None, on_stage=None,
             clock=time.monotonic, stop=None) -> dict:
    """Search the serving configuration of ``target``'s model under ``s``'s load, within ``s.budget_s``.

    Each configuration is loaded through Triton's model control API and measured by one point.  At the
    end the chosen configuration (the most items/s meeting the target) is left serving when ``keep``;
    otherwise, or when none met the target, or on any failure, the model's own configuration is loaded
    back.  Returns the result document.

    ``stop`` (a :class:`bringup.stop.Stop`): once a signal asked it, no configuration is loaded, the point
    in flight is dropped (its client processes killed), the model's own configuration is loaded back, and
    :class:`~bringup.stop.Interrupted` says so in one line.  Triton lost mid-search is
    :class:`~.override.TritonUnreachable`, one line too (:class:`~.override.Override`).
    """
    from ..errors import InputError
    from .bench import check_server
    from .loadgen import LoadGenerator, Point
    from .override import Override
    from .results import point_row

    if stop is not None:
        stop.check("before Triton was contacted")
    t0 = clock()
    started = datetime.now(timezone.utc)
    client, config = check_server(target)
    base = serving_of(config)
    allowed = base.max_batch_size
    if allowed and s.batch > allowed:
        client.close()
        raise InputError(f"request batch {s.batch} is above {target.model}'s max_batch_size {allowed}")
    if not allowed and s.batch > 1:
        client.close()
        raise InputError(f"{target.model} does not batch (max_batch_size 0): use --batch 1")
    if s.max_batches and allowed and max(s.max_batches) > allowed:
        client.close()
        raise InputError(f"--max-batch {max(s.max_batches)} is above what {target.model} allows "
                         f"(max_batch_size {allowed} in its own configuration)")
    start = base.model_copy(update={"window_us": _mid(s.windows) if allowed else None,
                                    "preferred_batch_size": base.preferred_batch_size or ladder(allowed)})
    if not allowed:
        start = start.model_copy(update={"preferred_batch_size": ()})
    current = base
    measured: dict[Serving, dict] = {}
    rows: list[dict] = []
    reloads: list[float] = []
    skipped: list[str] = []
    stopped = ""
    best: dict | None = None
    best_cfg = start
    inp = target.input
    cost = point_cost_s(s)

    def left() -> float:
        return s.budget_s - (clock() - t0)

    served = Override(client, target, config, stop, what="the search", unit="configuration(s)",
                      measured=lambda: len(rows), unsaved="nothing recorded")

    def apply(sv: Serving) -> float:
        nonlocal current
        if sv == current:
            return 0.0
        a = clock()
        served.load(*((config, None) if sv == base else (with_serving(config, sv), sv.label())))
        current = sv
        dt = clock() - a
        reloads.append(dt)
        return dt

    with served:
        with LoadGenerator(target.url, target.model, inp.name, inp.datatype, inp.dims, inp.numpy_dtype,
                           processes=s.resolved_processes(), warmup_s=s.warmup_s, duration_s=s.duration_s,
                           cpus=s.client_cpus, cpu_limit=s.cpu_limit, stop=stop) as lg:
            for stage, name in ((1, "instances"), (2, "batch sizes"), (3, "window")):
                todo = [c for c in dict.fromkeys(_stage_candidates(stage, best_cfg, allowed, s))
                        if c not in measured]
                if on_stage:
                    on_stage(stage, name, best_cfg, todo)
                for sv in todo:
                    reload_est = 0.0 if sv == current else (max(reloads) if reloads else FIRST_RELOAD_GUESS_S)
                    back = max(reloads) if reloads else FIRST_RELOAD_GUESS_S
                    if stopped or (rows and left() < reload_est + cost + back):
                        stopped = stopped or f"the budget ({s.budget_s / 60:g} min) was reached in stage {stage}"
                        skipped.append(sv.label())
                        continue
                    reload_s = apply(sv)
                    res = lg.run(Point(s.batch, s.concurrency, sv.window_us))
                    row = point_row(res, window_us=sv.window_us, deployed=sv == base)
                    row.update(stage=stage, stage_name=name, tried=sv.label(), tried_serving=sv.model_dump(),
                               reload_s=round(reload_s, 2), verdict=verdict(row, s.target_ms))
                    rows.append(row)
                    measured[sv] = row
                    if _better(best, row, s.target_ms):
                        best, best_cfg = row, sv
                    if on_point:
                        on_point(row)
            meeting = best is not None and best["p95_ms"] <= s.target_ms
            chosen = best_cfg if meeting else None
            if keep and chosen is not None:
                apply(chosen)
            elif current != base:
                apply(base)
    elapsed = clock() - t0
    finished = datetime.now(timezone.utc)
    grid = (len(s.instances) * max(1, len(s.max_batches or [allowed, allowed // 2, allowed // 4]) * 2)
            * len(s.windows)) if allowed else len(s.instances)
    if chosen is not None:
        why = (f"{chosen.label()}: p95 {best['p95_ms']:.1f} ms meets {s.target_ms:g} ms at "
               f"{best['items_per_s']:.0f} items/s (Triton batch {(best.get('triton') or {}).get('avg_batch')})")
    elif best is not None:
        why = (f"no configuration met p95 {s.target_ms:g} ms at this load (concurrency {s.concurrency} × batch "
               f"{s.batch}); the lowest p95 was {best['p95_ms']:.1f} ms, with {best_cfg.label()}")
    else:
        why = (f"no configuration met p95 {s.target_ms:g} ms at this load: no point gave a verdict "
               "(client-bound, errors or reloads)")
    settings = {"batch": s.batch, "concurrency": s.concurrency, "instances": s.instances,
                "max_batches": s.max_batches, "windows": s.windows, "budget_s": s.budget_s,
                "warmup_s": s.warmup_s, "duration_s": s.duration_s, "processes": s.resolved_processes(),
                "client_cpus": s.client_cpus, "cpu_limit": s.cpu_limit, "keep": keep}
    inp_doc = None if inp is None else {"name": inp.name, "datatype": inp.datatype, "dims": inp.dims}
    return {
        "kind": "bringup-tune", "version": 1, "host": target.host, "url": target.url, "model": target.model,
        "input": inp_doc, "target_p95_ms": s.target_ms, "slo_p95_ms": s.target_ms,
        "started": started.isoformat(timespec="seconds"), "finished": finished.isoformat(timespec="seconds"),
        "settings": settings, "deployed": base.model_dump(), "deployed_label": base.label(),
        "deployed_config": config,   # the model's own, as Triton served it: what to load back
        "search": {"strategy": SEARCH, "configurations_measured": len(rows), "full_grid": grid,
                   "budget_s": s.budget_s, "elapsed_s": round(elapsed, 1), "stopped": stopped, "skipped": skipped,
                   "reloads": len(reloads), "reload_s_max": round(max(reloads), 2) if reloads else None},
        "points": rows,
        "chosen": None if chosen is None else {**chosen.model_dump(), "label": chosen.label(),
                                               "p95_ms": best["p95_ms"], "items_per_s": best["items_per_s"],
                                               "avg_batch": (best.get("triton") or {}).get("avg_batch")},
        "applied": bool(keep and chosen is not None), "why": why,
    }
