"""A benchmark's result: the terminal table and JSON/CSV/PNG under reports/.

Files of one run: ``reports/bench/<host>-<UTC stamp>.{json,csv,png}``.  The
checklist reads the newest JSON of a host (:func:`~bringup.latency.verdict.latest`) and turns it into
the latency line with :func:`~bringup.latency.verdict.acceptance`.  Beside this module: the verdict
(bringup/latency/verdict.py), the figures (bringup/latency/plots.py) and ``invoke tune``'s report
(bringup/latency/tune_report.py); the names callers import from here stay importable.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..outfile import out_folder, write_atomic, write_set
from ..secrets import MASK
from ..untrusted import loads
from .hostload import load_text
from .plots import bench_figure, figure_png, plot_doc, plot_tune_window, plot_window_log, plot_window_sweep
from .verdict import INDEX, INDEX_KEEP, KIND, REPORT_DIR, acceptance, latest

__all__ = ["point_row", "point_text", "build_doc", "write_all", "render_table", "latest", "acceptance", "window_label",
           "plot_window_log", "plot_window_sweep", "plot_tune_window", "plot_doc", "bench_figure", "remember",
           "load_text", "REPORT_DIR", "INDEX", "KIND"]


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
        "unfinished": getattr(res, "unfinished", 0),
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


def result_json(doc: dict) -> str:
    """A result's JSON as it is saved: every text through the run's masker (a vaulted ansible_host is the URL's
    host: never written into a report), numbers as they are."""
    return json.dumps(MASK.mask_obj(doc), indent=2) + "\n"


def write_json_csv(doc: dict, out_dir: Path | str, tag: str, fields: list[str], rows,
                   figure: Callable[..., Any] | None = None,
                   warn: Callable[[str], None] | None = None) -> tuple[Path, dict]:
    """``<out>/<host><tag>-<UTC stamp>.json`` (the document) and ``.csv`` (``rows``), and ``.png`` drawn by
    ``figure(doc, path)``, all or none; the base path and the paths.  A figure that cannot be drawn never
    loses the result: the JSON and CSV are written without it, and ``warn`` has one line naming the figure
    (:func:`~bringup.latency.plots.figure_png`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(doc["finished"]).strftime("%Y%m%dT%H%M%SZ")
    base = out_dir / f"{doc['host']}{tag}-{stamp}"
    paths = {"json": base.with_suffix(".json"), "csv": base.with_suffix(".csv")}
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    w.writerows(MASK.mask_obj(list(rows)))
    files: list[tuple[Path, str | bytes]] = [(paths["json"], result_json(doc)),
                                             (paths["csv"], buf.getvalue())]
    png = None
    if figure is not None:
        png = figure_png(figure, doc, name=str(base.with_suffix(".png")),
                         written=f"{paths['json']} and {paths['csv']}", warn=warn)
    if png is not None:
        paths["png"] = base.with_suffix(".png")
        files.append((paths["png"], png))
    # All or none: a folder under one of the names is one line, never a JSON kept without its CSV or figure.
    write_set(files)
    return base, paths


def write_all(doc: dict, out_dir: Path | str = REPORT_DIR, plot: bool = True,
              warn: Callable[[str], None] | None = None) -> dict[str, Path]:
    """JSON, CSV and (when matplotlib is there) a PNG of the run; returns the paths.  The index not updated is
    ``warn``'s one line (:func:`remember`)."""
    base, paths = write_json_csv(doc, out_dir, "", CSV_FIELDS, (_csv_row(r) for r in doc["points"]),
                                 figure=plot_doc if plot else None, warn=warn)
    said = remember(doc["host"], paths["json"])
    if said and warn is not None:
        warn(said)
    return paths




def remember(host: str, path: Path, index: Path | None = None) -> str | None:
    """List ``path`` (a result JSON of ``host``) in the index the checklist reads, whatever folder it is in.

    Written through a temporary file and a rename; a failure to update it never fails the benchmark that
    already wrote its result: it is returned as one WARN line naming the index and why (None: listed).  The
    index is read through :func:`bringup.userfile.read_capped` (opened without waiting, at most
    :data:`~bringup.latency.verdict.BENCH_MAX`, never through a link): a link, a pipe, a device, a folder, or a file this
    user may not read, is left as it is and named; a regular file that is no index (not JSON, not a mapping, over
    the cap) is started anew, and said so.  No
    temporary file is left behind on any path (:func:`bringup.outfile.write_atomic`).
    """
    from ..errors import printable
    from ..untrusted import Unreadable
    from ..userfile import read_capped
    from .verdict import BENCH_MAX

    index = Path(index or INDEX)
    where = printable(str(index))
    anew = ""
    try:
        # Its folder as an --out folder is checked: never through a link out of the working folder (reports -> /x
        # had the index made and written in /x/bench), never where nothing can be made.
        out_folder(index.parent, "the results index's folder", fix="bringup keeps its index in a folder of its own "
                                                                   "there, never written through a link: move it away")
    except InputError as e:
        return f"WARN {where}: not updated ({printable(str(e))[:300]}); {path} is not listed in it"
    try:
        # Never through a link (bringup writes the index by a rename): a link to a file only root may read (a
        # registry's credentials, JSON) had that file's text rewritten here beside the entry, mode 0644.
        data = read_capped(index, BENCH_MAX, Unreadable, missing="", unreadable="unreadable: ",
                           not_regular="not a regular file (a symbolic link, a pipe, a device or a folder)",
                           too_large=f"larger than {BENCH_MAX >> 20} MiB", follow=False)
    except Unreadable as e:
        if str(e) == "":
            data = None   # no index yet
        elif not str(e).startswith("larger than"):   # no regular file, or one this user may not read
            return (f"WARN {where}: {e}; left as it is and {path} not listed in it: move it away (the checklist "
                    "finds results of other --out folders through it)")
        else:
            data, anew = None, str(e)
    doc: dict = {}
    if data is not None:
        try:
            doc = loads(data, what="JSON", max_bytes=BENCH_MAX)
            if not isinstance(doc, dict):
                doc, anew = {}, "not a JSON object"
        except ValueError as e:
            doc, anew = {}, str(e)
    entries = [p for p in doc.get(host, []) if isinstance(p, str)] if isinstance(doc.get(host), list) else []
    entry = str(Path(path).resolve())
    doc[host] = ([p for p in entries if p != entry] + [entry])[-INDEX_KEEP:]
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(index, json.dumps(doc, indent=2, sort_keys=True) + "\n")   # no temporary file left on a fault
    except OSError as e:
        return (f"WARN {where}: not updated ({printable(str(e.strerror or e))}); {path} is not listed in it: "
                "make its folder writable")
    if anew:
        return (f"WARN {where}: was no index ({printable(anew)[:200]}): started anew with {path}; the results "
                "it listed are no longer found by the checklist unless they lie in reports/bench")
    return None


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
