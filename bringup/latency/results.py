"""A benchmark's result: the terminal table, JSON/CSV/PNG under reports/, and the acceptance verdict.

Files of one run: ``reports/bench/<host>-<UTC stamp>.{json,csv,png}``.  The
checklist reads the newest JSON of a host (:func:`latest`) and turns it into
the latency line with :func:`acceptance`.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from ..outfile import write_atomic
from ..process import command
from ..untrusted import loads

__all__ = ["point_row", "point_text", "build_doc", "write_all", "render_table", "latest", "acceptance", "window_label",
           "plot_window_log", "plot_window_sweep", "bench_figure", "remember", "REPORT_DIR", "INDEX"]

REPORT_DIR = Path("reports") / "bench"
KIND = "bringup-bench"

#: The spread of a point (issue 35): the min-max of its windows, how many, the spread in %, unstable or not.
SPREAD_FIELDS = ["p95_ms_min", "p95_ms_max", "p95_spread_pct", "items_per_s_min", "items_per_s_max",
                 "items_per_s_spread_pct", "repeats", "windows", "unstable"]

CSV_FIELDS = ["window", "deployed", "batch", "concurrency", "microbatch_us", "requests", "errors", "p50_ms",
              "p95_ms", *SPREAD_FIELDS, "p99_ms", "mean_ms", "rps", "items_per_s", "triton_avg_batch", "triton_queue_us",
              "triton_compute_us", "triton_server_us", "client_batch_rows", "client_loop_cpu_max",
              "client_loop_lag_ms_max", "client_cpu_total", "client_cpus", "client_bound", "client_bound_why",
              "counts_agree", "reloaded", "config"]


def window_label(window_us: int | None, deployed: bool) -> str:
    w = "no dynamic batching" if window_us is None else f"{window_us} µs"
    return f"deployed ({w})" if deployed else w


def point_row(res, *, window_us: int | None, deployed: bool) -> dict[str, Any]:
    """One point of the sweep as a flat JSON object, labelled with the configuration Triton served (read
    from its config API at the point's end; ``window_us`` is what the sweep meant to serve, used only when
    Triton could not say)."""
    from .serving import label_of, serving_of
    from .window_tuner import window_of

    p = res.point
    tri = res.triton or {}
    before, after = getattr(res, "config_before", {}) or {}, getattr(res, "config_after", {}) or {}
    served = after or before
    if served:
        window_us = window_of(served)
    config = label_of(served)
    if before and after and label_of(before) != label_of(after):
        config = f"{label_of(before)} → {label_of(after)}"
    return {
        "window": window_label(window_us, deployed), "window_us": window_us, "deployed": deployed,
        "config": config, "serving": serving_of(served).record() | {"window_us": window_us} if served else None,
        "reloaded": bool(getattr(res, "reloaded", False)), "reloaded_why": getattr(res, "reloaded_why", ""),
        "batch": p.batch, "concurrency": p.concurrency, "microbatch_us": p.microbatch_us,
        "microbatch_max": p.microbatch_max if p.microbatch_us else None,
        "requests": res.requests, "errors": res.errors, "error_sample": res.error_sample,
        "p50_ms": res.p50_ms, "p95_ms": res.p95_ms, "p99_ms": res.p99_ms, "mean_ms": res.mean_ms,
        "rps": res.rps, "items_per_s": res.items_per_s, "duration_s": res.duration_s,
        "processes": res.processes, "client_cpus": res.client_cpus,
        "client_loop_cpu": res.loop_cpu, "client_cpu": res.proc_cpu, "client_loop_lag_ms": res.loop_lag_ms,
        "client_idle_lag_ms": res.idle_lag_ms,
        "client_bound": res.client_bound, "client_bound_why": res.client_bound_why,
        "triton": tri, "client_batches": res.client_batches,
        "sent_total": res.sent_total, "sent_items_total": res.sent_items_total,
        "triton_total": res.triton_total, "counts_agree": res.counts_agree,
    }


def build_doc(target, settings: dict, rows: list[dict], started: datetime, finished: datetime) -> dict:
    inp = target.input
    doc = {
        "kind": KIND, "version": 1, "host": target.host, "url": target.url, "model": target.model,
        "input": None if inp is None else asdict(inp), "slo_p95_ms": target.slo_p95_ms,
        "started": started.isoformat(timespec="seconds"), "finished": finished.isoformat(timespec="seconds"),
        "settings": settings, "points": rows,
    }
    doc["acceptance"] = acceptance(doc, target.slo_p95_ms)
    return doc


def _spread_cells(r: dict) -> dict:
    """The CSV cells of a point's spread; a row saved without spread has one window and its own value."""
    from .repeats import span

    sp = r.get("spread") or {}
    out = {"repeats": sp.get("repeats", 1), "windows": sp.get("windows", 1), "unstable": bool(r.get("unstable"))}
    for k in ("p95_ms", "items_per_s"):
        lo_hi = span(r, k)
        out[f"{k}_min"], out[f"{k}_max"] = lo_hi if lo_hi else (None, None)
        out[f"{k.removesuffix('_ms')}_spread_pct"] = (sp.get(k) or {}).get("pct", 0.0 if lo_hi else None)
    return out


def point_text(r: dict) -> str:
    """One point in a line: the median p95 and items/s with their spread, and what makes it no verdict."""
    from .repeats import repeated, spread_text

    if r.get("p95_ms") is None:
        text = "no answer measured"
    else:
        text = f"p95 {r['p95_ms']:.1f} ms"
        if repeated(r):
            sp = r["spread"]
            text += (f" (median of {sp['repeats']} windows, {spread_text(r)} ms)")
        text += f", {r['items_per_s']:,.0f} items/s"
        if repeated(r):
            text += f" ({spread_text(r, 'items_per_s')})"
    if r.get("unstable"):
        text += f" UNSTABLE: {r.get('unstable_why', '')}"
    if r.get("client_bound"):
        text += " client-bound"
    if r.get("reloaded"):
        text += " (Triton reloaded during this point)"
    return text


def _csv_row(r: dict) -> dict:
    tri = r.get("triton") or {}
    return {
        **_spread_cells(r),
        **{k: r.get(k) for k in ("window", "deployed", "config", "batch", "concurrency", "microbatch_us",
                                 "requests", "errors", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "rps", "items_per_s",
                                 "client_cpus", "client_bound", "client_bound_why", "counts_agree", "reloaded")},
        "triton_avg_batch": tri.get("avg_batch"), "triton_queue_us": tri.get("queue_us"),
        "triton_compute_us": tri.get("compute_us"), "triton_server_us": tri.get("server_us"),
        "client_batch_rows": (r.get("client_batches") or {}).get("avg_rows"),
        "client_loop_cpu_max": max(r.get("client_loop_cpu") or [0.0]),
        "client_cpu_total": round(sum(r.get("client_cpu") or []), 3),
        "client_loop_lag_ms_max": max(r.get("client_loop_lag_ms") or [0.0]),
    }


def write_json_csv(doc: dict, out_dir: Path | str, tag: str, fields: list[str], rows) -> tuple[Path, dict]:
    """``<out>/<host><tag>-<UTC stamp>.json`` (the document) and ``.csv`` (``rows``); the base path and both."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(doc["finished"]).strftime("%Y%m%dT%H%M%SZ")
    base = out_dir / f"{doc['host']}{tag}-{stamp}"
    paths = {"json": base.with_suffix(".json"), "csv": base.with_suffix(".csv")}
    write_atomic(paths["json"], json.dumps(doc, indent=2) + "\n")
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
    write_atomic(paths["csv"], buf.getvalue())
    return base, paths


def write_all(doc: dict, out_dir: Path | str = REPORT_DIR, plot: bool = True) -> dict[str, Path]:
    """JSON, CSV and (when matplotlib is there) a PNG of the run; returns the paths."""
    base, paths = write_json_csv(doc, out_dir, "", CSV_FIELDS, (_csv_row(r) for r in doc["points"]))
    if plot:
        paths["png"] = base.with_suffix(".png")
        plot_doc(doc, paths["png"])
    remember(doc["host"], paths["json"])
    return paths


#: Where the results of every ``--out`` folder are listed, so the checklist finds them (per host, newest last).
INDEX = REPORT_DIR / "index.json"
INDEX_KEEP = 50


def remember(host: str, path: Path, index: Path | None = None) -> None:
    """List ``path`` (a result JSON of ``host``) in the index the checklist reads, whatever folder it is in.

    Written through a temporary file and a rename; an unreadable index is started anew, and a failure to
    write it never fails the benchmark that already wrote its result (the result's own path is printed).
    """
    import os
    import tempfile

    index = Path(index or INDEX)
    try:
        try:
            doc = loads(index.read_bytes(), what="the index", max_bytes=16 << 20)
            doc = doc if isinstance(doc, dict) else {}
        except (OSError, ValueError):
            doc = {}
        entries = [p for p in doc.get(host, []) if isinstance(p, str)] if isinstance(doc.get(host), list) else []
        entry = str(Path(path).resolve())
        doc[host] = ([p for p in entries if p != entry] + [entry])[-INDEX_KEEP:]
        index.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".index.", dir=index.parent)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, index)
    except OSError:
        pass


def _series(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in doc["points"]:
        mb = f", client micro-batch {r['microbatch_us']} µs" if r.get("microbatch_us") else ""
        out.setdefault(f"{r['window']}, batch {r['batch']}{mb}", []).append(r)
    return out


def _yerr(rows: list[dict], key: str):
    """Error bars from each point's spread (min-max around the median); zero for a point without spread."""
    from .repeats import span

    lo, hi = [], []
    for r in rows:
        s, v = span(r, key), r.get(key)
        if s is None or v is None:
            lo.append(0.0)
            hi.append(0.0)
        else:
            lo.append(max(0.0, v - s[0]))
            hi.append(max(0.0, s[1] - v))
    return [lo, hi]


def plot_doc(doc: dict, path: Path) -> Path:
    """p95 and QPS (items/s) against concurrency, one line per window and request batch (:func:`bench_figure`)."""
    fig = bench_figure(doc)  # sets the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bench_figure(doc: dict):
    """The figure of :func:`plot_doc`: ticks at the concurrencies measured, no others, and the red rings
    named only when some point was client-bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    measured = sorted({r["concurrency"] for r in doc["points"]})
    client_bound = any(r["client_bound"] for r in doc["points"])
    for label, rows in _series(doc).items():
        rows = sorted(rows, key=lambda r: r["concurrency"])
        xs = [r["concurrency"] for r in rows]
        line = ax1.errorbar(xs, [r["p95_ms"] for r in rows], yerr=_yerr(rows, "p95_ms"), marker="o", capsize=3,
                            label=label).lines[0]
        ax2.errorbar(xs, [r["items_per_s"] for r in rows], yerr=_yerr(rows, "items_per_s"), marker="o", capsize=3,
                     color=line.get_color(), label=label)
        shaky = [r for r in rows if r.get("unstable")]
        if shaky:
            for ax, key in ((ax1, "p95_ms"), (ax2, "items_per_s")):
                ax.scatter([r["concurrency"] for r in shaky], [r[key] for r in shaky], marker="x", s=90,
                           color="orange", zorder=6)
        bound = [r for r in rows if r["client_bound"]]
        if bound:
            for ax, key in ((ax1, "p95_ms"), (ax2, "items_per_s")):
                ax.scatter([r["concurrency"] for r in bound], [r[key] for r in bound], s=140, facecolors="none",
                           edgecolors="red", linewidths=1.5, zorder=5)
    if doc.get("slo_p95_ms"):
        ax1.axhline(doc["slo_p95_ms"], color="grey", linestyle="--", linewidth=1,
                    label=f"SLO p95 {doc['slo_p95_ms']:g} ms")
    for ax, title, unit in ((ax1, "p95 latency", "ms"), (ax2, "throughput", "items/s")):
        ax.set_xscale("log", base=2)
        # A tick per concurrency measured: the log axis alone labels powers of 2 that were never run.
        ax.set_xticks(measured, [f"{c:g}" for c in measured])
        ax.minorticks_off()
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=7)
    rings = "; red rings: client-bound points" if client_bound else ""
    if any(r.get("unstable") for r in doc["points"]):
        rings += "; orange crosses: unstable points (windows did not agree)"
    if any(r.get("spread") for r in doc["points"]):
        rings += "; bars: min-max of the windows, dots: their median"
    notes = rings.removeprefix("; ").replace("; ", "\n")
    fig.suptitle(f"{doc['host']}: {doc['model']} ({doc['finished']})" + (f"\n{notes}" if notes else ""),
                 fontsize=9)
    fig.tight_layout()
    return fig


def plot_window_log(entries: list[dict], path: Path, title: str = "") -> Path:
    """The window tuner's intervals over time: Triton's p95 against the target, and the window it set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from datetime import datetime

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    for model in dict.fromkeys(e["model"] for e in entries):
        rows = [e for e in entries if e["model"] == model]
        t0 = datetime.fromisoformat(entries[0]["time"])
        xs = [(datetime.fromisoformat(e["time"]) - t0).total_seconds() for e in rows]
        line, = ax1.plot(xs, [e["p95_ms"] for e in rows], marker="o", label=f"{model} p95")
        ax1.step(xs, [e["target_p95_ms"] for e in rows], where="post", linestyle="--", color=line.get_color(),
                 alpha=0.6, label=f"{model} target")
        ax2.step(xs, [e["new_window_us"] for e in rows], where="post", marker="o", color=line.get_color(),
                 label=model)
    ax1.set_ylabel("ms")
    ax1.set_title("Triton's p95 (metrics summary) per interval")
    ax2.set_ylabel("µs")
    ax2.set_title("batching window after the interval's step (200-1500 µs)")
    ax2.set_xlabel("seconds")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_window_sweep(ax_p95, rows: list[dict], target_ms: float | None, chosen_window: int | None,
                      title: str = "") -> None:
    """p95 (left axis) and items/s (right axis) against the window, one point per window tried, the target
    line and the chosen window marked: the window sweep drawn against what it varies."""
    rows = sorted([r for r in rows if r.get("window_us") is not None and r.get("p95_ms") is not None],
                  key=lambda r: r["window_us"])
    xs = [r["window_us"] for r in rows]
    ax_q = ax_p95.twinx()
    ax_p95.errorbar(xs, [r["p95_ms"] for r in rows], yerr=_yerr(rows, "p95_ms"), marker="o", capsize=3,
                    color="tab:blue", label="p95 (median, min-max)")
    ax_q.errorbar(xs, [r["items_per_s"] for r in rows], yerr=_yerr(rows, "items_per_s"), marker="s", capsize=3,
                  color="tab:orange", label="items/s (median, min-max)")
    bound = [r for r in rows if r.get("client_bound") or r.get("reloaded")]
    if bound:
        ax_p95.scatter([r["window_us"] for r in bound], [r["p95_ms"] for r in bound], s=160, facecolors="none",
                       edgecolors="red", linewidths=1.5, zorder=5, label="no verdict (client-bound/reload)")
    _target_line(ax_p95, target_ms, [r["p95_ms"] for r in rows])
    if chosen_window is not None:
        ax_p95.axvline(chosen_window, color="green", linestyle=":", linewidth=1.5, label=f"chosen {chosen_window} µs")
    ax_p95.set_xlabel("batching window (µs)")
    ax_p95.set_ylabel("p95 (ms)", color="tab:blue")
    ax_q.set_ylabel("items/s", color="tab:orange")
    ax_p95.set_title(title or "the window sweep")
    ax_p95.grid(True, alpha=0.3)
    h1, l1 = ax_p95.get_legend_handles_labels()
    h2, l2 = ax_q.get_legend_handles_labels()
    ax_p95.legend(h1 + h2, l1 + l2, fontsize=7, loc="best")


def _target_line(ax, target_ms: float | None, p95s: list[float]) -> None:
    """The target as a dashed line; a target far above every point is named in the corner instead of
    squashing the points to the bottom of the plot."""
    if not target_ms:
        return
    top = max(p95s, default=0.0) * 1.3
    if p95s and target_ms > 2 * top:
        ax.set_ylim(0, top)
        ax.text(0.01, 0.98, f"target p95 {target_ms:g} ms (above this view)", transform=ax.transAxes,
                fontsize=8, va="top", color="grey")
        return
    ax.axhline(target_ms, color="grey", linestyle="--", linewidth=1, label=f"target p95 {target_ms:g} ms")
    ax.set_ylim(0, max(top, target_ms * 1.15))


def plot_tune_window(doc: dict, path: Path) -> Path:
    """``tune-window``'s one-shot sweep: p95 and items/s against the window, per load (batch x concurrency)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = list(dict.fromkeys((r["batch"], r["concurrency"]) for r in doc["points"]))
    fig, axes = plt.subplots(1, len(loads), figsize=(7 * len(loads), 4.8), squeeze=False)
    tune = doc.get("tune") or {}
    for ax, (b, c) in zip(axes[0], loads):
        rows = [r for r in doc["points"] if (r["batch"], r["concurrency"]) == (b, c)]
        plot_window_sweep(ax, rows, doc.get("slo_p95_ms"), tune.get("chosen_window_us"),
                          f"batch {b} × concurrency {c}")
    fig.suptitle(f"{doc['host']}: {doc['model']}, tune-window ({doc['finished']}): {tune.get('why', '')}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def load_text(doc: dict, rows: list[dict] | None = None) -> str:
    """What else ran during the measurement (:mod:`.hostload`): the busiest point's reading, said once."""
    from .hostload import describe

    loads = [r.get("host_load") for r in (rows if rows is not None else doc.get("points", [])) if r.get("host_load")]
    if not loads:
        return ""
    worst = max(loads, key=lambda h: (h.get("other_cpu_pct") or 0, h.get("loadavg_1m") or 0,
                                      len(h.get("gpu_other_processes") or [])))
    others = sorted({p for h in loads for p in (h.get("gpu_other_processes") or [])})
    if others:
        worst = {**worst, "gpu_other_processes": others}
    return describe(worst)


def _f(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def render_table(doc: dict, console) -> None:
    """The guide's table per window: batch, concurrency, p50/p95/p99, QPS, and Triton's view."""
    from rich.table import Table
    from rich.text import Text

    from .repeats import spread_text

    by_window: dict[str, list[dict]] = {}
    for r in doc["points"]:
        by_window.setdefault(r["window"], []).append(r)
    for window, rows in by_window.items():
        served = list(dict.fromkeys(r["config"] for r in rows if r.get("config")))
        t = Table(title=f"{doc['host']} · {doc['model']} · window {window}"
                  + (f" · served as {served[0]}" if len(served) == 1 else ""), box=None, title_justify="left")
        for col in ("batch", "conc", "p50 ms", "p95 ms", "p95 min-max", "p99 ms", "req/s", "items/s",
                    "items/s min-max", "windows", "Triton batch", "queue µs", "compute µs", "client CPU", "note"):
            t.add_column(col, justify="left" if col == "note" else "right", no_wrap=col != "note")
        # Long reasons go under the table as numbered notes: a cell too narrow for them is unreadable.
        footnotes: list[str] = []

        def ref(text: str) -> str:
            if text not in footnotes:
                footnotes.append(text)
            return f"[{footnotes.index(text) + 1}]"

        for r in rows:
            tri = r.get("triton") or {}
            notes = []
            if r.get("microbatch_us"):
                notes.append(f"client micro-batch {r['microbatch_us']} µs → "
                             f"{_f((r.get('client_batches') or {}).get('avg_rows'), '{:.2f}')} rows")
            if r.get("unstable"):
                notes.append("[bold yellow]unstable[/] " + ref(r.get("unstable_why") or "the windows did not agree"))
            if r["client_bound"]:
                notes.append("[bold red]client-bound[/] " + ref(r["client_bound_why"]))
            if r["errors"]:
                notes.append(f"[red]{r['errors']} errors[/] " + ref(str(r["error_sample"])))
            if r.get("reloaded"):
                notes.append("[yellow]Triton reloaded during this point[/] " + ref(
                    f"{r.get('reloaded_why') or 'its statistics restarted'}: Triton's view of this point is "
                    "left out and the point is no verdict"))
            elif r["counts_agree"] is False:
                notes.append("[yellow]counts differ from Triton's[/] " + ref("Triton counted more requests than "
                                                                              "the clients sent: another client was "
                                                                              "sending too"))
            cpu = f"{max(r['client_loop_cpu'] or [0]):.0%} max loop"
            sp = r.get("spread") or {}
            t.add_row(str(r["batch"]), str(r["concurrency"]), _f(r["p50_ms"]), _f(r["p95_ms"]),
                      spread_text(r) or "-", _f(r["p99_ms"]), _f(r["rps"], "{:.0f}"), _f(r["items_per_s"], "{:.0f}"),
                      spread_text(r, "items_per_s") or "-",
                      f"{sp.get('repeats', 1)}/{sp.get('windows', 1)}", _f(tri.get("avg_batch"), "{:.2f}"),
                      _f(tri.get("queue_us"), "{:.0f}"), _f(tri.get("compute_us"), "{:.0f}"), cpu,
                      "; ".join(notes))
        console.print(t)
        for i, text in enumerate(footnotes, 1):
            console.print(f"  [{i}] {text}", markup=False, highlight=False)
    console.print("windows: used/measured per point (the last ones, agreeing within "
                  f"{(doc.get('settings') or {}).get('stability_pct', '-')} %); p95 and items/s are their medians",
                  style="dim", markup=False, highlight=False)
    beside = load_text(doc)
    if beside:
        console.print(f"during the measurement: {beside}", markup=False, highlight=False)
    acc = doc.get("acceptance") or {}
    if acc:
        style = {"PASS": "green", "FAIL": "red", "WARN": "yellow"}.get(acc["status"], "")
        console.print(Text.assemble((acc["status"], style), f" latency acceptance: {acc['seen']}"))


# --------------------------------------------------------------------------- acceptance

def latest(host: str, reports: Path | str = REPORT_DIR) -> tuple[dict, Path] | None:
    """The newest benchmark result of ``host`` under ``reports``, or listed in ``reports``' index (results
    written with ``bench --out`` elsewhere), or None."""
    best = None
    candidates = list(Path(reports).glob(f"{host}-*.json"))
    try:
        listed = loads((Path(reports) / INDEX.name).read_bytes(), what="the index", max_bytes=16 << 20).get(host) or []
        candidates += [Path(p) for p in listed if isinstance(p, str)]
    except (OSError, ValueError, AttributeError):
        pass
    for p in dict.fromkeys(candidates):
        try:
            if p.stat().st_size > 64 << 20:
                continue
            # NaN as json.dumps writes it is read (acceptance() refuses it where it would judge it).
            doc = loads(p.read_bytes(), what=str(p), max_bytes=64 << 20, nan=True)
        except (OSError, ValueError):  # Unreadable too: nested without end, 100,000 digits, NaN
            continue
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") != KIND or doc.get("host") != host:
            continue
        if best is None or doc.get("finished", "") > best[0].get("finished", ""):
            best = (doc, p)
    return best


def _load_text(r: dict) -> str:
    mb = f", client micro-batch {r['microbatch_us']} µs" if r.get("microbatch_us") else ""
    served = f"; served as {r['config']}" if r.get("config") else ""
    return (f"concurrency {r['concurrency']} × batch {r['batch']} ({r['items_per_s']:.0f} items/s, "
            f"window {r['window']}{mb}{served})")


#: What a saved point's figures can be: a p95 of up to a day in ms, a rate of up to 10^12 items/s, loads up to 10^6.
_POINT_RANGES = {"p95_ms": (0, 86_400_000), "p50_ms": (0, 86_400_000), "p99_ms": (0, 86_400_000),
                 "items_per_s": (0, 1e12), "concurrency": (0, 1e6), "batch": (0, 1e6)}


def _unreadable(doc: Any) -> str | None:
    """Why a saved bench result cannot be judged (None: it can): dated in the future beyond the clock-skew
    allowance, or a point's figure not a finite number in its range."""
    from datetime import timezone

    from ..untrusted import future, number

    if not isinstance(doc, dict) or not isinstance(doc.get("points", []), list):
        return "not a result document"
    try:
        when = datetime.fromisoformat(str(doc.get("finished")))
    except ValueError:
        when = None  # shown as it is (the line says when it was measured); only a time ahead is refused
    when = when if when is None or when.tzinfo else when.replace(tzinfo=timezone.utc)
    if when is not None and future(when):
        return f"finished {doc['finished']} lies in the future: not a result measured yet"
    for i, r in enumerate(doc.get("points", [])):
        if not isinstance(r, dict):
            return f"point {i} is not an object"
        try:
            for key, (lo, hi) in _POINT_RANGES.items():
                if r.get(key) is not None:
                    number(r[key], lo=lo, hi=hi, what=f"point {i}'s {key}")
                spread = (r.get("spread") or {}).get(key) if isinstance(r.get("spread") or {}, dict) else None
                if spread is not None:
                    for end in ("min", "max"):
                        number(spread.get(end) if isinstance(spread, dict) else spread, lo=lo, hi=hi,
                               what=f"point {i}'s {key} {end}")
        except ValueError as e:
            return str(e)
    return None


def acceptance(doc: dict, slo: float | None, load: dict | None = None) -> dict:
    """PASS/FAIL/WARN of one result against ``latency_slo_p95_ms``, on each point's **median** p95.

    Only points of the model as deployed count (a window sweep's other windows
    are not what the host serves), and never client-bound or failing ones.
    With ``load`` ({concurrency, batch}) that point decides; otherwise the host
    passes at the heaviest throughput whose p95 meets the SLO over its whole
    spread (a point unstable, or whose spread straddles the SLO, only when no
    point meets it outright), and fails when no measured load meets it.

    A point that is **unstable** (its windows did not agree, :mod:`.repeats`)
    or whose min-max p95 has the SLO inside it is WARN, not PASS/FAIL: another
    run could give the other verdict.  A result saved with one window per point
    (``--repeats 1``, or before spreads were kept) is WARN too: one sample of a
    shared machine is no verdict (the H200's 17.0 and 12.4 ms an hour apart);
    it says the median it would have judged.  ``kind`` says which: ``measured``,
    ``unstable``, ``inside``, ``single``, ``no-slo``, ``no-point``.
    """
    from .repeats import repeated, span

    when = doc.get("finished", "?")
    bad = _unreadable(doc)
    if bad:
        # Figures no bench measures (NaN, -1 ms, 1e308 items/s) or a result dated ahead: never a verdict.
        return {"status": "WARN", "measured": when, "slo_p95_ms": slo, "point": None, "kind": "unreadable",
                "seen": f"not checked: the saved result is unreadable ({bad})"}
    pts = [r for r in doc.get("points", []) if r.get("p95_ms") is not None]
    deployed = [r for r in pts if r.get("deployed")] or pts
    good = [r for r in deployed if not r["client_bound"] and not r["errors"] and not r.get("reloaded")]
    out = {"status": "WARN", "measured": when, "slo_p95_ms": slo, "point": None, "kind": "no-point"}
    if not good:
        why = "every point was client-bound, failed or spanned a reload" if deployed else "no point measured"
        out["seen"] = f"measured {when}, but {why}: not a server latency"
        return out

    def sure(r) -> bool:    # meets the SLO whatever window of it another run would repeat
        return not r.get("unstable") and span(r, "p95_ms")[1] <= slo

    if load:
        match = [r for r in good if r["concurrency"] == int(load.get("concurrency", -1))
                 and r["batch"] == int(load.get("batch", 1))]
        if not match:
            out["seen"] = f"measured {when}, but not at the acceptance load {load}"
            return out
        r = match[0]
    else:
        robust = [r for r in good if slo is not None and sure(r)]
        meeting = [r for r in good if slo is not None and r["p95_ms"] <= slo]
        r = (max(robust, key=lambda r: r["items_per_s"]) if robust else
             max(meeting, key=lambda r: r["items_per_s"]) if meeting else min(good, key=lambda r: r["p95_ms"]))
    lo, hi = span(r, "p95_ms")
    out["point"] = {k: r.get(k) for k in ("window", "batch", "concurrency", "p95_ms", "items_per_s", "microbatch_us",
                                          "config", "unstable")}
    out["point"].update(p95_min_ms=lo, p95_max_ms=hi, repeats=(r.get("spread") or {}).get("repeats", 1))
    basis = (f"median of {r['spread']['repeats']} windows, p95 {lo:.1f}-{hi:.1f} ms" if repeated(r) else
             "one window per point: no spread known")
    beside = load_text(doc, [r])
    beside = f"; during it: {beside}" if beside else ""
    if slo is None:
        out["kind"] = "no-slo"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms ({basis}) at {_load_text(r)}, measured {when}; "
                       "no latency_slo_p95_ms set")
        return out
    if r.get("unstable"):
        out["kind"] = "unstable"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms against SLO {slo:g} ms at {_load_text(r)} is UNSTABLE: "
                       f"{r.get('unstable_why') or 'its windows did not agree'}; no verdict, measured {when}{beside}")
        return out
    if repeated(r) and lo <= slo < hi:
        out["kind"] = "inside"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms ({basis}): the SLO {slo:g} ms lies inside the spread at "
                       f"{_load_text(r)}; another run could pass or fail, measured {when}{beside}")
        return out
    ok = r["p95_ms"] <= slo
    if not repeated(r):
        out["kind"] = "single"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms {'≤' if ok else '>'} SLO {slo:g} ms on {basis} at "
                       f"{_load_text(r)}: one sample is no verdict, measured {when}{beside}")
        return out
    out["kind"] = "measured"
    out["status"] = "PASS" if ok else "FAIL"
    rel = "≤" if ok else ">"
    best = "" if ok or load else " (lowest p95 measured)"
    out["seen"] = f"p95 {r['p95_ms']:.1f} ms {rel} SLO {slo:g} ms ({basis}) at {_load_text(r)}{best}, measured {when}"
    return out


# --------------------------------------------------------------------------- invoke tune

TUNE_CSV = ["stage", "tried", "config", "instance_count", "max_batch_size", "preferred_batch_size", "window_us",
            "reload_s", "p50_ms", "p95_ms", "p99_ms", "items_per_s", *SPREAD_FIELDS, "triton_avg_batch", "triton_queue_us",
            "triton_compute_us", "verdict", "client_bound", "reloaded", "errors", "chosen"]


def _short(sv: dict) -> str:
    w = "off" if sv.get("window_us") is None else f"{sv['window_us']}µs"
    pref = ",".join(map(str, sv.get("preferred_batch_size") or ()))
    return f"{sv['instance_count']}i mb{sv['max_batch_size']} [{pref}] {w}"


def _is_chosen(doc: dict, r: dict) -> bool:
    ch, sv = doc.get("chosen"), r["tried_serving"]
    return bool(ch) and all(sv[k] == ch[k] for k in ("instance_count", "max_batch_size", "window_us")) \
        and list(sv["preferred_batch_size"]) == list(ch["preferred_batch_size"])


def _tune_csv_row(doc: dict, r: dict) -> dict:
    sv, tri = r["tried_serving"], r.get("triton") or {}
    return {**_spread_cells(r), "stage": r["stage"], "tried": r["tried"], "config": r.get("config"),
            "instance_count": sv["instance_count"], "max_batch_size": sv["max_batch_size"],
            "preferred_batch_size": " ".join(map(str, sv["preferred_batch_size"])), "window_us": sv["window_us"],
            "reload_s": r["reload_s"], "p50_ms": r["p50_ms"], "p95_ms": r["p95_ms"], "p99_ms": r["p99_ms"],
            "items_per_s": r["items_per_s"], "triton_avg_batch": tri.get("avg_batch"),
            "triton_queue_us": tri.get("queue_us"), "triton_compute_us": tri.get("compute_us"),
            "verdict": r["verdict"], "client_bound": r["client_bound"], "reloaded": r.get("reloaded"),
            "errors": r["errors"], "chosen": _is_chosen(doc, r)}


def write_tune(doc: dict, out_dir: Path | str = REPORT_DIR, plot: bool = True) -> dict[str, Path]:
    """``invoke tune``'s result: JSON, CSV (one row per configuration tried) and the PNG."""
    final = [doc["final"]] if doc.get("final") else []
    base, paths = write_json_csv(doc, out_dir, "-tune-serving", TUNE_CSV,
                                 (_tune_csv_row(doc, r) for r in doc["points"] + final))
    if plot:
        paths["png"] = base.with_suffix(".png")
        plot_tune(doc, paths["png"])
    return paths


def plot_tune(doc: dict, path: Path) -> Path:
    """Left: p95 against throughput for every configuration tried (by stage), the target line, the chosen
    point marked.  Right: the window sweep (stage 3) against the window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, axw) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 2]})
    colors = {1: "tab:blue", 2: "tab:purple", 3: "tab:orange"}
    names = {1: "1: instances", 2: "2: batch sizes", 3: "3: window"}
    for stage in (1, 2, 3):
        rows = [r for r in doc["points"] if r["stage"] == stage and r.get("p95_ms") is not None]
        if not rows:
            continue
        ax.errorbar([r["items_per_s"] for r in rows], [r["p95_ms"] for r in rows], xerr=_yerr(rows, "items_per_s"),
                    yerr=_yerr(rows, "p95_ms"), fmt="o", color=colors[stage], markersize=6, capsize=2,
                    elinewidth=0.8, label=f"stage {names[stage]}", zorder=3)
        for r in rows:
            ax.annotate(_short(r["tried_serving"]), (r["items_per_s"], r["p95_ms"]), fontsize=6,
                        xytext=(4, 3), textcoords="offset points")
    bad = [r for r in doc["points"] if r.get("p95_ms") is not None and not r["verdict"] in ("meets", "misses")]
    if bad:
        ax.scatter([r["items_per_s"] for r in bad], [r["p95_ms"] for r in bad], s=160, facecolors="none",
                   edgecolors="red", linewidths=1.5, zorder=4, label="no verdict (client-bound, reload, errors)")
    _target_line(ax, doc["target_p95_ms"], [r["p95_ms"] for r in doc["points"] if r.get("p95_ms") is not None])
    ch = doc.get("chosen")
    if ch:
        fin = [doc["final"]] if doc.get("final") else []
        if fin:
            ax.errorbar([ch["items_per_s"]], [ch["p95_ms"]], xerr=_yerr(fin, "items_per_s"), yerr=_yerr(fin, "p95_ms"),
                        fmt="none", ecolor="black", capsize=4, zorder=5)
        ax.scatter([ch["items_per_s"]], [ch["p95_ms"]], marker="*", s=420, color="gold", edgecolors="black",
                   zorder=6, label=f"chosen: {ch['label']} (measured again: median, min-max)")
    ax.set_xlabel("throughput (items/s)")
    ax.set_ylabel("p95 (ms)")
    ax.set_title(f"every configuration tried at concurrency {doc['settings']['concurrency']} × batch "
                 f"{doc['settings']['batch']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    # The window sweep: stage 3 and the point of the stage before it at the same instances and batch sizes.
    same = {(r["tried_serving"]["instance_count"], r["tried_serving"]["max_batch_size"],
             tuple(r["tried_serving"]["preferred_batch_size"])) for r in doc["points"] if r["stage"] == 3}
    sweep = [r for r in doc["points"] if (r["tried_serving"]["instance_count"], r["tried_serving"]["max_batch_size"],
                                          tuple(r["tried_serving"]["preferred_batch_size"])) in same]
    if sweep:
        plot_window_sweep(axw, sweep, doc["target_p95_ms"], ch["window_us"] if ch else None,
                          "stage 3: the window with the best instances and batch sizes")
    else:
        axw.text(0.5, 0.5, "no window sweep (budget reached, or the model does not batch)", ha="center",
                 va="center", fontsize=9, transform=axw.transAxes)
        axw.set_axis_off()
    s = doc["search"]
    fig.suptitle(f"{doc['host']}: {doc['model']}, {command('tune')} ({doc['finished']}; {s['configurations_measured']} "
                 f"configurations in {s['elapsed_s']:.0f} s of a {s['budget_s'] / 60:g} min budget)\n{doc['why']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_tune(doc: dict, console) -> None:
    """The configurations tried, one row each, and the verdict."""
    from rich.table import Table

    t = Table(title=f"{doc['host']} · {doc['model']} · tune for p95 {doc['target_p95_ms']:g} ms at concurrency "
                    f"{doc['settings']['concurrency']} × batch {doc['settings']['batch']}", box=None,
              title_justify="left")
    from .repeats import spread_text

    for col in ("stage", "configuration", "reload s", "p95 ms", "p95 min-max", "items/s", "items/s min-max",
                "Triton batch", "queue µs", "compute µs", "verdict"):
        t.add_column(col, justify="left" if col in ("configuration", "verdict") else "right")
    for r in doc["points"] + ([doc["final"]] if doc.get("final") else []):
        tri = r.get("triton") or {}
        mark = " ★" if _is_chosen(doc, r) else ""
        t.add_row(str(r["stage"]), (r.get("config") or r["tried"]) + mark, _f(r["reload_s"]), _f(r["p95_ms"]),
                  spread_text(r) or "-", _f(r["items_per_s"], "{:.0f}"), spread_text(r, "items_per_s") or "-",
                  _f(tri.get("avg_batch"), "{:.2f}"), _f(tri.get("queue_us"), "{:.0f}"),
                  _f(tri.get("compute_us"), "{:.0f}"), r["verdict"] + (" (unstable)" if r.get("unstable") else ""))
    console.print(t)
    for tie in (doc["search"].get("tied") or []):
        console.print(f"tie: {tie}", markup=False, highlight=False)
    beside = load_text(doc, doc["points"] + ([doc["final"]] if doc.get("final") else []))
    if beside:
        console.print(f"during the measurement: {beside}", markup=False, highlight=False)
    s = doc["search"]
    console.print(f"search: {s['configurations_measured']} configuration(s) measured of a full grid of "
                  f"{s['full_grid']}, {s['reloads']} reload(s), {s['elapsed_s']:.0f} s of {s['budget_s']:.0f} s"
                  + (f"; stopped: {s['stopped']} ({len(s['skipped'])} not tried)" if s["stopped"] else ""),
                  markup=False, highlight=False)
