"""``invoke tune``'s result: the JSON and CSV (one row per configuration tried), its figure and its terminal table.
Cut from bringup/latency/results.py (issue 43 item 2): the serving search's report apart from the bench's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .hostload import load_text
from .plots import plot_tune
from .results import SPREAD_FIELDS, _f, _spread_cells, write_json_csv
from .verdict import REPORT_DIR

__all__ = ["write_tune", "render_tune", "TUNE_CSV"]

TUNE_CSV = ["stage", "tried", "config", "instance_count", "max_batch_size", "preferred_batch_size", "window_us",
            "reload_s", "p50_ms", "p95_ms", "p99_ms", "items_per_s", *SPREAD_FIELDS, "triton_avg_batch", "triton_queue_us",
            "triton_compute_us", "verdict", "client_bound", "reloaded", "errors", "chosen"]



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


def write_tune(doc: dict, out_dir: Path | str = REPORT_DIR, plot: bool = True,
               warn: Callable[[str], None] | None = None) -> dict[str, Path]:
    """``invoke tune``'s result: JSON, CSV (one row per configuration tried) and the PNG; a figure that cannot be
    drawn is ``warn``'s one line, the JSON and CSV written without it."""
    final = [doc["final"]] if doc.get("final") else []
    _, paths = write_json_csv(doc, out_dir, "-tune-serving", TUNE_CSV,
                              (_tune_csv_row(doc, r) for r in doc["points"] + final),
                              figure=plot_tune if plot else None, warn=warn)
    return paths



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
