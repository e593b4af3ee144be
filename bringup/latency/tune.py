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

__all__ = ["WINDOW_MIN", "WINDOW_MAX", "STEP", "TIGHTEN", "next_window", "pick", "settle", "TuneSettings",
           "run_tune", "verdict", "choose", "simpler", "SEARCH", "TIE", "point_cost_s"]

#: Which search ``invoke tune`` runs, and why (printed and kept in the result).
SEARCH = ("staged search, one knob at a time in the order of its effect at a fixed load (coordinate descent): "
          "1) instances per GPU at a mid window, since they set how many batches run at once, the throughput "
          "ceiling; 2) max_batch_size and the preferred sizes with the best instance count, since they set what "
          "one execution carries; 3) the window with both, since at a steady load the queue fills batches "
          "whatever the window (the H200 run: p95 34.9-39.7 ms over 200-1200 µs), so it is the fine step. "
          "Each stage starts from the best configuration so far; a configuration already measured is not "
          "measured again")


TIE = ("two configurations whose results overlap within their spread (min-max of the repeated windows: items/s "
       "when both meet the target, p95 when both miss) are a tie, broken by the simpler one: fewer instances, then "
       "the smaller max_batch_size, then the shorter window; the chosen one is measured again at the end and its "
       "figure is that median, not the search's best sample")


def simpler(a: dict, b: dict) -> bool:
    """Whether serving ``a`` is simpler than ``b`` (fewer instances, smaller max batch, shorter window)."""
    def key(sv: dict) -> tuple:
        return (sv.get("instance_count") or 0, sv.get("max_batch_size") or 0, sv.get("window_us") or 0,
                len(sv.get("preferred_batch_size") or ()))
    return key(a) < key(b)


def choose(a: dict | None, b: dict, target_ms: float, serving=lambda r: r["tried_serving"],
           name=lambda r: r.get("tried") or "") -> tuple[dict | None, str]:
    """The better of rows ``a`` (the best so far) and ``b``, and a note when they tie within their spread.

    Meeting the target first, then throughput; when both miss, the lower p95.  When the figure that decides
    (items/s when both meet, p95 when both miss) overlaps within the rows' min-max (:func:`.repeats.overlap`),
    the two cannot be told apart: the simpler serving wins (:func:`simpler`) and the note says so.
    """
    from .repeats import overlap, spread_text

    if not _valid(b):
        return a, ""
    if a is None:
        return b, ""
    am, bm = a["p95_ms"] <= target_ms, b["p95_ms"] <= target_ms
    if am != bm:
        return (b if bm else a), ""
    key = "items_per_s" if bm else "p95_ms"
    plain = (b if b["items_per_s"] > a["items_per_s"] else a) if bm else (b if b["p95_ms"] < a["p95_ms"] else a)
    if not overlap(a, b, key):
        return plain, ""
    win = b if simpler(serving(b), serving(a)) else a
    lose = a if win is b else b
    unit = "items/s" if bm else "ms p95"

    def fig(r):
        return spread_text(r, key) or (f"{r[key]:,.0f}" if bm else f"{r[key]:.1f}")

    note = (f"{name(win)} and {name(lose)} tie ({fig(win)} against {fig(lose)} {unit}, overlapping within the "
            f"spread): the simpler, {name(win)}, is kept")
    return win, note


def _basis(r: dict) -> str:
    """"median of 3 windows (p95 12.0-12.4 ms)", and UNSTABLE with why when the windows did not agree."""
    from .repeats import repeated, spread_text

    if not repeated(r):
        return "one window (no spread)"
    text = f"median of {r['spread']['repeats']} windows (p95 {spread_text(r)} ms, {spread_text(r, 'items_per_s')} items/s)"
    return text + (f", UNSTABLE: {r.get('unstable_why')}" if r.get("unstable") else "")


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
    """The best window of a sweep: meets ``target_ms`` at the most items/s (client-bound points never count).

    A window whose items/s overlap the best one's within their spread (min-max of the repeated windows) ties
    with it, and the shortest of the tied windows is chosen (the note says so).  The choice is measured again
    by the caller and :func:`settle` makes that median the figure.
    """
    from .repeats import overlap, span

    by: dict = {}
    for r in doc["points"]:
        by.setdefault(r["window_us"], []).append(r)
    table = []
    for w, rows in by.items():
        good = [r for r in rows if _valid(r)]
        worst = max((r["p95_ms"] for r in rows if r["p95_ms"] is not None), default=None)
        spans = {k: [x for x in (span(r, k) for r in rows) if x] for k in ("p95_ms", "items_per_s")}
        table.append({"window_us": w, "p95_ms": worst, "items_per_s": min((r["items_per_s"] for r in rows),
                                                                           default=0.0),
                      "spread": {k: {"min": min(x[0] for x in v), "max": max(x[1] for x in v)}
                                 for k, v in spans.items() if v},
                      "unstable": any(r.get("unstable") for r in rows),
                      "client_bound": any(r["client_bound"] for r in rows),
                      "reloaded": any(r.get("reloaded") for r in rows),
                      "meets": worst is not None and len(good) == len(rows) and worst <= target_ms,
                      "avg_batch": max(((r.get("triton") or {}).get("avg_batch") or 0) for r in rows)})
    meeting = [t for t in table if t["meets"]]
    best = max(meeting, key=lambda t: t["items_per_s"]) if meeting else None
    tie = ""
    if best:
        tied = [t for t in meeting if t is best or overlap(t, best, "items_per_s")]
        shortest = min(tied, key=lambda t: t["window_us"])
        if shortest is not best:
            tie = (f"{shortest['window_us']} µs ties with {best['window_us']} µs (items/s overlapping within the "
                   f"spread): the shorter window is kept")
            best = shortest
        why = (f"{best['window_us']} µs: p95 {best['p95_ms']:.1f} ms meets {target_ms:g} ms at "
               f"{best['items_per_s']:.0f} items/s" + (f"; {tie}" if tie else ""))
    else:
        low = min((t for t in table if t["p95_ms"] is not None), key=lambda t: t["p95_ms"], default=None)
        why = f"no window met p95 {target_ms:g} ms at this load" + (
            f" (lowest: {low['window_us']} µs, p95 {low['p95_ms']:.1f} ms)" if low else "")
    return {"target_p95_ms": target_ms, "windows": table, "chosen_window_us": best["window_us"] if best else None,
            "tie": tie, "why": why}


def settle(tune: dict, final: list[dict], target_ms: float) -> dict:
    """``tune`` (:func:`pick`'s) with the chosen window measured again (``final``: its rows, one per load): the
    figure is their median, and a window that misses the target when measured again is not chosen."""
    if tune.get("chosen_window_us") is None or not final:
        return tune
    w = tune["chosen_window_us"]
    verdicts = [verdict(r, target_ms) for r in final]
    worst = max(final, key=lambda r: r["p95_ms"] if r.get("p95_ms") is not None else float("inf"))
    out = {**tune, "final": final}
    if all(v == "meets" for v in verdicts):
        out["why"] = (f"{w} µs: p95 {worst['p95_ms']:.1f} ms meets {target_ms:g} ms at "
                      f"{min(r['items_per_s'] for r in final):.0f} items/s when measured again, {_basis(worst)}"
                      + (f"; {tune['tie']}" if tune.get("tie") else ""))
    else:
        p95 = "-" if worst.get("p95_ms") is None else f"{worst['p95_ms']:.1f} ms"
        out["chosen_window_us"] = None
        out["why"] = (f"no window met p95 {target_ms:g} ms when measured again: {w} µs, the sweep's best, gave "
                      f"p95 {p95} ({', '.join(dict.fromkeys(verdicts))}), {_basis(worst)}")
    return out


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

    repeats: int = 3                         # windows per configuration (bringup.latency.repeats)
    stability_pct: float = 10.0
    max_windows: int = 0

    def resolved_processes(self) -> int:
        from .bench import BenchSettings

        return BenchSettings(processes=self.processes, client_cpus=self.client_cpus).resolved_processes()

    def rule(self):
        from .repeats import Rule

        return Rule(self.repeats, self.stability_pct, self.max_windows)


#: What a point costs beyond its warm-up and steady window (starting the clients' point, reading Triton).
POINT_OVERHEAD_S = 0.5
#: A reload's cost before one was timed.
FIRST_RELOAD_GUESS_S = 5.0


def point_cost_s(s: TuneSettings) -> float:
    """What measuring one configuration costs at least: its first window, and the repeats after it."""
    from .bench import REWARM_S

    again = min(s.warmup_s, REWARM_S) + s.duration_s + POINT_OVERHEAD_S
    return s.warmup_s + s.duration_s + POINT_OVERHEAD_S + (s.repeats - 1) * again


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


def run_tune(target, s: TuneSettings, *, keep: bool = True, on_point=None, on_stage=None,
             clock=time.monotonic, stop=None, trial=None) -> dict:
    """Search the serving configuration of ``target``'s model under ``s``'s load, within ``s.budget_s``.

    Each configuration is loaded through Triton's model control API and measured by one point.  At the
    end the chosen configuration (the most items/s meeting the target) is left serving when ``keep``;
    otherwise, or when none met the target, or on any failure, the model's own configuration is loaded
    back.  Returns the result document.

    ``stop`` (a :class:`bringup.ssh.stop.Stop`): once a signal asked it, no configuration is loaded, the point
    in flight is dropped (its client processes killed), the model's own configuration is loaded back, and
    :class:`~bringup.ssh.stop.Interrupted` says so in one line.  Triton lost mid-search is
    :class:`~.override.TritonUnreachable`, one line too (:class:`~.override.Override`).

    ``trial``: a callable ``trial(config)`` giving the :class:`~.trial.TrialMark` of this search (``config``:
    the model's own, as Triton serves it), written on the host before the first other configuration is loaded
    and removed once the own one serves again; the chosen one left serving keeps it until the caller recorded it.
    """
    from ..errors import InputError
    from .bench import check_server, measure_point
    from .loadgen import LoadGenerator, Point
    from .override import Override

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
    ties: list[str] = []
    final: dict | None = None
    stopped = ""
    best: dict | None = None
    best_cfg = start
    inp = target.input
    cost = point_cost_s(s)

    def left() -> float:
        return s.budget_s - (clock() - t0)

    served = Override(client, target, config, stop, what="the search", unit="configuration(s)",
                      measured=lambda: len(rows), unsaved="nothing recorded",
                      trial=trial(config) if trial is not None else None)

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
                    # Room is kept for the chosen configuration's measurement again at the end.
                    if stopped or (rows and left() < reload_est + cost + back + back + cost):
                        stopped = stopped or f"the budget ({s.budget_s / 60:g} min) was reached in stage {stage}"
                        skipped.append(sv.label())
                        continue
                    reload_s = apply(sv)
                    row = measure_point(lg, Point(s.batch, s.concurrency, sv.window_us), s.rule(),
                                        window_us=sv.window_us, deployed=sv == base)
                    row.update(stage=stage, stage_name=name, tried=sv.label(), tried_serving=sv.model_dump(),
                               reload_s=round(reload_s, 2), verdict=verdict(row, s.target_ms))
                    rows.append(row)
                    measured[sv] = row
                    winner, tie = choose(best, row, s.target_ms)
                    if tie:
                        ties.append(tie)
                    if winner is row:
                        best, best_cfg = row, sv
                    if on_point:
                        on_point(row)
            if best is not None and best["p95_ms"] <= s.target_ms:
                # The search's best is one sample of a noisy machine: measured again, its median is the figure.
                apply(best_cfg)
                final = measure_point(lg, Point(s.batch, s.concurrency, best_cfg.window_us), s.rule(),
                                      window_us=best_cfg.window_us, deployed=best_cfg == base)
                final.update(stage="final", stage_name="the chosen configuration measured again",
                             tried=best_cfg.label(), tried_serving=best_cfg.model_dump(), reload_s=0.0,
                             verdict=verdict(final, s.target_ms))
                if on_point:
                    on_point(final)
            meeting = final is not None and final["verdict"] == "meets"
            chosen = best_cfg if meeting else None
            if keep and chosen is not None:
                apply(chosen)
            elif current != base:
                apply(base)
    elapsed = clock() - t0
    finished = datetime.now(timezone.utc)
    grid = (len(s.instances) * max(1, len(s.max_batches or [allowed, allowed // 2, allowed // 4]) * 2)
            * len(s.windows)) if allowed else len(s.instances)
    tie_text = f"; {'; '.join(ties)}" if ties else ""
    if chosen is not None:
        why = (f"{chosen.label()}: p95 {final['p95_ms']:.1f} ms meets {s.target_ms:g} ms at "
               f"{final['items_per_s']:.0f} items/s (Triton batch {(final.get('triton') or {}).get('avg_batch')}), "
               f"{_basis(final)}{tie_text}")
    elif final is not None:
        why = (f"no configuration met p95 {s.target_ms:g} ms when measured again: the search's best, "
               f"{best_cfg.label()} (p95 {best['p95_ms']:.1f} ms), gave {final['verdict']} at "
               f"p95 {final['p95_ms'] if final['p95_ms'] is None else round(final['p95_ms'], 1)} ms, "
               f"{_basis(final)}{tie_text}")
    elif best is not None:
        why = (f"no configuration met p95 {s.target_ms:g} ms at this load (concurrency {s.concurrency} × batch "
               f"{s.batch}); the lowest p95 was {best['p95_ms']:.1f} ms, with {best_cfg.label()}{tie_text}")
    else:
        why = (f"no configuration met p95 {s.target_ms:g} ms at this load: no point gave a verdict "
               "(client-bound, errors or reloads)")
    settings = {"batch": s.batch, "concurrency": s.concurrency, "instances": s.instances,
                "max_batches": s.max_batches, "windows": s.windows, "budget_s": s.budget_s,
                "warmup_s": s.warmup_s, "duration_s": s.duration_s, "processes": s.resolved_processes(),
                "client_cpus": s.client_cpus, "cpu_limit": s.cpu_limit, "keep": keep, "repeats": s.repeats,
                "stability_pct": s.stability_pct, "max_windows": s.rule().most}
    inp_doc = None if inp is None else {"name": inp.name, "datatype": inp.datatype, "dims": inp.dims}
    return {
        "kind": "bringup-tune", "version": 1, "host": target.host, "url": target.url, "model": target.model,
        "input": inp_doc, "target_p95_ms": s.target_ms, "slo_p95_ms": s.target_ms,
        "started": started.isoformat(timespec="seconds"), "finished": finished.isoformat(timespec="seconds"),
        "settings": settings, "deployed": base.model_dump(), "deployed_label": base.label(),
        "deployed_config": config,   # the model's own, as Triton served it: what to load back
        "search": {"strategy": SEARCH, "ties": TIE, "tied": ties, "configurations_measured": len(rows),
                   "full_grid": grid,
                   "budget_s": s.budget_s, "elapsed_s": round(elapsed, 1), "stopped": stopped, "skipped": skipped,
                   "reloads": len(reloads), "reload_s_max": round(max(reloads), 2) if reloads else None},
        "points": rows, "final": final,
        "chosen": None if chosen is None else {**chosen.model_dump(), "label": chosen.label(),
                                               "p95_ms": final["p95_ms"], "items_per_s": final["items_per_s"],
                                               "spread": final.get("spread"), "unstable": final.get("unstable"),
                                               "search_p95_ms": best["p95_ms"],
                                               "search_items_per_s": best["items_per_s"],
                                               "avg_batch": (final.get("triton") or {}).get("avg_batch")},
        "applied": bool(keep and chosen is not None), "why": why,
    }
