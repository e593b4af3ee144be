"""The benchmark's figures (matplotlib, imported only when a figure is drawn): p95 and items/s against concurrency
(:func:`bench_figure`), the window tuner's log, the window sweep, and ``invoke tune``'s configurations.  Cut from
bringup/latency/results.py (issue 43 item 2): drawing apart from the result's files, tables and verdict.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

from ..process import command

__all__ = ["png_of", "figure_png", "plot_doc", "bench_figure", "plot_window_log", "plot_window_sweep", "plot_tune_window",
           "plot_tune"]


def _series(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in doc["points"]:
        mb = f", client micro-batch {r['microbatch_us']} µs" if r.get("microbatch_us") else ""
        out.setdefault(f"{r['window']}, batch {r['batch']}{mb}", []).append(r)
    return out


def _has(rows: list[dict], *keys: str) -> list[dict]:
    """The rows whose ``keys`` all hold a value: a point where no request finished (``p95_ms: None``, "no point was
    measured") is left off a line, its bars and its marks, never handed to matplotlib as None."""
    return [r for r in rows if all(r.get(k) is not None for k in keys)]


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


def _save(fig, path) -> None:
    """The figure as a PNG at ``path``, written as every page is (:func:`bringup.outfile.write_atomic`): drawn in
    memory, then a temporary file renamed over the name, never opened there (matplotlib's own savefig(path) wrote
    through a link planted under the name, and waited for ever on a FIFO).  A ``BytesIO`` (:func:`png_of`) is
    drawn into."""
    from ..outfile import write_atomic

    buf = path if isinstance(path, io.BytesIO) else io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    if buf is not path:
        write_atomic(path, buf.getvalue())


def png_of(plot: Callable[..., Any], *args: Any) -> bytes:
    """What ``plot(*args, path)`` (one of this module's plot_* functions) draws, as PNG bytes: for a figure written
    with the files that go with it, all or none (:func:`bringup.outfile.write_set`)."""
    buf = io.BytesIO()
    plot(*args, buf)
    return buf.getvalue()


def figure_png(plot: Callable[..., Any], *args: Any, name: str, written: str,
               warn: Callable[[str], None] | None = None) -> bytes | None:
    """:func:`png_of`, or None when the figure cannot be drawn: a measured result is never lost to its figure.  The
    failure is ``warn``'s one WARN line naming the figure (``name``) and what is written without it (``written``),
    its reason masked and printable; on stderr when no ``warn`` is given."""
    try:
        return png_of(plot, *args)
    except Exception as e:  # noqa: BLE001 -- whatever drawing raises, the JSON and CSV are still written
        from ..errors import printable
        from ..secrets import MASK

        why = printable(MASK.mask(f"{type(e).__name__}: {e}")).replace("\n", " ")[:300]
        said = f"WARN {printable(name)}: not drawn ({why}); {written} written without it"
        if warn is None:
            import sys

            print(said, file=sys.stderr)
        else:
            warn(said)
        return None


def plot_doc(doc: dict, path: Path) -> Path:
    """p95 and QPS (items/s) against concurrency, one line per window and request batch (:func:`bench_figure`)."""
    fig = bench_figure(doc)  # sets the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt

    _save(fig, path)
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
        lat, qps = _has(rows, "p95_ms"), _has(rows, "items_per_s")
        line = ax1.errorbar([r["concurrency"] for r in lat], [r["p95_ms"] for r in lat], yerr=_yerr(lat, "p95_ms"),
                            marker="o", capsize=3, label=label).lines[0]
        ax2.errorbar([r["concurrency"] for r in qps], [r["items_per_s"] for r in qps], yerr=_yerr(qps, "items_per_s"),
                     marker="o", capsize=3, color=line.get_color(), label=label)
        shaky = [r for r in rows if r.get("unstable")]
        if shaky:
            for ax, key in ((ax1, "p95_ms"), (ax2, "items_per_s")):
                ax.scatter([r["concurrency"] for r in _has(shaky, key)], [r[key] for r in _has(shaky, key)],
                           marker="x", s=90, color="orange", zorder=6)
        bound = [r for r in rows if r["client_bound"]]
        if bound:
            for ax, key in ((ax1, "p95_ms"), (ax2, "items_per_s")):
                ax.scatter([r["concurrency"] for r in _has(bound, key)], [r[key] for r in _has(bound, key)], s=140,
                           facecolors="none", edgecolors="red", linewidths=1.5, zorder=5)
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
    _save(fig, path)
    plt.close(fig)
    return path


def plot_window_sweep(ax_p95, rows: list[dict], target_ms: float | None, chosen_window: int | None,
                      title: str = "") -> None:
    """p95 (left axis) and items/s (right axis) against the window, one point per window tried, the target
    line and the chosen window marked: the window sweep drawn against what it varies."""
    rows = sorted(_has(rows, "window_us", "p95_ms", "items_per_s"), key=lambda r: r["window_us"])
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
    _save(fig, path)
    plt.close(fig)
    return path



def _short(sv: dict) -> str:
    w = "off" if sv.get("window_us") is None else f"{sv['window_us']}µs"
    pref = ",".join(map(str, sv.get("preferred_batch_size") or ()))
    return f"{sv['instance_count']}i mb{sv['max_batch_size']} [{pref}] {w}"



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
        rows = [r for r in _has(doc["points"], "p95_ms", "items_per_s") if r["stage"] == stage]
        if not rows:
            continue
        ax.errorbar([r["items_per_s"] for r in rows], [r["p95_ms"] for r in rows], xerr=_yerr(rows, "items_per_s"),
                    yerr=_yerr(rows, "p95_ms"), fmt="o", color=colors[stage], markersize=6, capsize=2,
                    elinewidth=0.8, label=f"stage {names[stage]}", zorder=3)
        for r in rows:
            ax.annotate(_short(r["tried_serving"]), (r["items_per_s"], r["p95_ms"]), fontsize=6,
                        xytext=(4, 3), textcoords="offset points")
    bad = [r for r in _has(doc["points"], "p95_ms", "items_per_s") if not r["verdict"] in ("meets", "misses")]
    if bad:
        ax.scatter([r["items_per_s"] for r in bad], [r["p95_ms"] for r in bad], s=160, facecolors="none",
                   edgecolors="red", linewidths=1.5, zorder=4, label="no verdict (client-bound, reload, errors)")
    _target_line(ax, doc["target_p95_ms"], [r["p95_ms"] for r in doc["points"] if r.get("p95_ms") is not None])
    ch = doc.get("chosen")
    if ch and _has([ch], "p95_ms", "items_per_s"):
        fin = _has([doc["final"]] if doc.get("final") else [], "p95_ms", "items_per_s")
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
    _save(fig, path)
    plt.close(fig)
    return path
