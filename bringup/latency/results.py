"""A benchmark's result: the terminal table, JSON/CSV/PNG under reports/, and the acceptance verdict.

Files of one run: ``reports/bench/<host>-<UTC stamp>.{json,csv,png}``.  The
checklist reads the newest JSON of a host (:func:`latest`) and turns it into
the latency line with :func:`acceptance`.
"""
from __future__ import annotations

import csv
import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["point_row", "build_doc", "write_all", "render_table", "latest", "acceptance", "window_label",
           "plot_window_log",
           "REPORT_DIR"]

REPORT_DIR = Path("reports") / "bench"
KIND = "bringup-bench"

CSV_FIELDS = ["window", "deployed", "batch", "concurrency", "microbatch_us", "requests", "errors", "p50_ms",
              "p95_ms", "p99_ms", "mean_ms", "rps", "items_per_s", "triton_avg_batch", "triton_queue_us",
              "triton_compute_us", "triton_server_us", "client_batch_rows", "client_loop_cpu_max",
              "client_loop_lag_ms_max", "client_cpu_total", "client_cpus", "client_bound", "client_bound_why", "counts_agree"]


def window_label(window_us: int | None, deployed: bool) -> str:
    w = "no dynamic batching" if window_us is None else f"{window_us} µs"
    return f"deployed ({w})" if deployed else w


def point_row(res, *, window_us: int | None, deployed: bool) -> dict[str, Any]:
    """One point of the sweep as a flat JSON object."""
    p = res.point
    tri = res.triton or {}
    return {
        "window": window_label(window_us, deployed), "window_us": window_us, "deployed": deployed,
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


def _csv_row(r: dict) -> dict:
    tri = r.get("triton") or {}
    return {
        **{k: r.get(k) for k in ("window", "deployed", "batch", "concurrency", "microbatch_us", "requests",
                                 "errors", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "rps", "items_per_s",
                                 "client_cpus", "client_bound", "client_bound_why", "counts_agree")},
        "triton_avg_batch": tri.get("avg_batch"), "triton_queue_us": tri.get("queue_us"),
        "triton_compute_us": tri.get("compute_us"), "triton_server_us": tri.get("server_us"),
        "client_batch_rows": (r.get("client_batches") or {}).get("avg_rows"),
        "client_loop_cpu_max": max(r.get("client_loop_cpu") or [0.0]),
        "client_cpu_total": round(sum(r.get("client_cpu") or []), 3),
        "client_loop_lag_ms_max": max(r.get("client_loop_lag_ms") or [0.0]),
    }


def write_all(doc: dict, out_dir: Path | str = REPORT_DIR, plot: bool = True) -> dict[str, Path]:
    """JSON, CSV and (when matplotlib is there) a PNG of the run; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(doc["finished"]).strftime("%Y%m%dT%H%M%SZ")
    base = out_dir / f"{doc['host']}-{stamp}"
    paths = {"json": base.with_suffix(".json"), "csv": base.with_suffix(".csv")}
    paths["json"].write_text(json.dumps(doc, indent=2) + "\n")
    with open(paths["csv"], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in doc["points"]:
            w.writerow(_csv_row(r))
    if plot:
        paths["png"] = base.with_suffix(".png")
        plot_doc(doc, paths["png"])
    return paths


def _series(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in doc["points"]:
        mb = f", client micro-batch {r['microbatch_us']} µs" if r.get("microbatch_us") else ""
        out.setdefault(f"{r['window']}, batch {r['batch']}{mb}", []).append(r)
    return out


def plot_doc(doc: dict, path: Path) -> Path:
    """p95 and QPS (items/s) against concurrency, one line per window and request batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for label, rows in _series(doc).items():
        rows = sorted(rows, key=lambda r: r["concurrency"])
        xs = [r["concurrency"] for r in rows]
        line, = ax1.plot(xs, [r["p95_ms"] for r in rows], marker="o", label=label)
        ax2.plot(xs, [r["items_per_s"] for r in rows], marker="o", color=line.get_color(), label=label)
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
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=7)
    fig.suptitle(f"{doc['host']}: {doc['model']} ({doc['finished']}; red rings: client-bound points)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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


def _f(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def render_table(doc: dict, console) -> None:
    """The guide's table per window: batch, concurrency, p50/p95/p99, QPS, and Triton's view."""
    from rich.table import Table
    from rich.text import Text

    by_window: dict[str, list[dict]] = {}
    for r in doc["points"]:
        by_window.setdefault(r["window"], []).append(r)
    for window, rows in by_window.items():
        t = Table(title=f"{doc['host']} · {doc['model']} · window {window}", box=None, title_justify="left")
        for col in ("batch", "conc", "p50 ms", "p95 ms", "p99 ms", "req/s", "items/s", "Triton batch",
                    "queue µs", "compute µs", "client CPU", "note"):
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
            if r["client_bound"]:
                notes.append("[bold red]client-bound[/] " + ref(r["client_bound_why"]))
            if r["errors"]:
                notes.append(f"[red]{r['errors']} errors[/] " + ref(str(r["error_sample"])))
            if r["counts_agree"] is False:
                notes.append("[yellow]counts differ from Triton's[/] " + ref("Triton counted other requests too: another client may have been sending"))
            cpu = f"{max(r['client_loop_cpu'] or [0]):.0%} max loop"
            t.add_row(str(r["batch"]), str(r["concurrency"]), _f(r["p50_ms"]), _f(r["p95_ms"]), _f(r["p99_ms"]),
                      _f(r["rps"], "{:.0f}"), _f(r["items_per_s"], "{:.0f}"), _f(tri.get("avg_batch"), "{:.2f}"),
                      _f(tri.get("queue_us"), "{:.0f}"), _f(tri.get("compute_us"), "{:.0f}"), cpu,
                      "; ".join(notes))
        console.print(t)
        for i, text in enumerate(footnotes, 1):
            console.print(f"  [{i}] {text}", markup=False, highlight=False)
    acc = doc.get("acceptance") or {}
    if acc:
        style = {"PASS": "green", "FAIL": "red", "WARN": "yellow"}.get(acc["status"], "")
        console.print(Text.assemble((acc["status"], style), f" latency acceptance: {acc['seen']}"))


# --------------------------------------------------------------------------- acceptance

def latest(host: str, reports: Path | str = REPORT_DIR) -> tuple[dict, Path] | None:
    """The newest benchmark result of ``host`` under ``reports``, or None."""
    best = None
    for p in Path(reports).glob(f"{host}-*.json"):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("kind") != KIND or doc.get("host") != host:
            continue
        if best is None or doc.get("finished", "") > best[0].get("finished", ""):
            best = (doc, p)
    return best


def _load_text(r: dict) -> str:
    mb = f", client micro-batch {r['microbatch_us']} µs" if r.get("microbatch_us") else ""
    return (f"concurrency {r['concurrency']} × batch {r['batch']} ({r['items_per_s']:.0f} items/s, "
            f"window {r['window']}{mb})")


def acceptance(doc: dict, slo: float | None, load: dict | None = None) -> dict:
    """PASS/FAIL/WARN of one result against ``latency_slo_p95_ms``.

    Only points of the model as deployed count (a window sweep's other windows
    are not what the host serves), and never client-bound or failing ones.
    With ``load`` ({concurrency, batch}) that point decides; otherwise the host
    passes at the heaviest throughput whose p95 meets the SLO, and fails when
    no measured load meets it.
    """
    when = doc.get("finished", "?")
    pts = [r for r in doc.get("points", []) if r.get("p95_ms") is not None]
    deployed = [r for r in pts if r.get("deployed")] or pts
    good = [r for r in deployed if not r["client_bound"] and not r["errors"]]
    out = {"status": "WARN", "measured": when, "slo_p95_ms": slo, "point": None}
    if not good:
        why = "every point was client-bound or failed" if deployed else "no point measured"
        out["seen"] = f"measured {when}, but {why}: not a server latency"
        return out
    if load:
        match = [r for r in good if r["concurrency"] == int(load.get("concurrency", -1))
                 and r["batch"] == int(load.get("batch", 1))]
        if not match:
            out["seen"] = f"measured {when}, but not at the acceptance load {load}"
            return out
        r = match[0]
    else:
        meeting = [r for r in good if slo is not None and r["p95_ms"] <= slo]
        r = max(meeting, key=lambda r: r["items_per_s"]) if meeting else min(good, key=lambda r: r["p95_ms"])
    out["point"] = {k: r[k] for k in ("window", "batch", "concurrency", "p95_ms", "items_per_s", "microbatch_us")}
    if slo is None:
        out["seen"] = f"p95 {r['p95_ms']:.1f} ms at {_load_text(r)}, measured {when}; no latency_slo_p95_ms set"
        return out
    ok = r["p95_ms"] <= slo
    out["status"] = "PASS" if ok else "FAIL"
    rel = "≤" if ok else ">"
    best = "" if ok or load else " (lowest p95 measured)"
    out["seen"] = f"p95 {r['p95_ms']:.1f} ms {rel} SLO {slo:g} ms at {_load_text(r)}{best}, measured {when}"
    return out
