"""The Markdown block of an H200 latency run for docs/examples/h200-latency.md, from its saved results.

    python3 scripts/h200/latency_md.py --tune TUNE.json --bench BENCH.json [--checklist LINE.md] [--inprocess IN.json]

Every figure is a point's median over its repeated windows with the min-max beside it (issue 35); a point whose
windows did not agree is marked unstable; tune's ties and its chosen configuration measured again are shown
as the result says them.  Reads only; prints the block.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bringup.latency.repeats import repeated, spread_text  # noqa: E402
from bringup.latency.results import load_text  # noqa: E402


def _fig(r: dict, key: str, fmt: str) -> str:
    v = r.get(key)
    if v is None:
        return "-"
    rng = spread_text(r, key)
    return fmt.format(v) + (f" ({rng})" if rng else "")


def _windows(r: dict) -> str:
    sp = r.get("spread") or {}
    return f"{sp.get('repeats', 1)}/{sp.get('windows', 1)}"


def tune_block(doc: dict) -> list[str]:
    s, ch = doc["search"], doc.get("chosen")
    out = [f"## `invoke tune --target-p95-ms {doc['target_p95_ms']:g} --concurrency {doc['settings']['concurrency']} "
           f"--batch {doc['settings']['batch']} --repeats {doc['settings'].get('repeats', 1)}`", "",
           f"{s['configurations_measured']} configurations measured of a {s['full_grid']}-configuration grid in "
           f"{s['elapsed_s']:.0f} s of a {s['budget_s'] / 60:g} min budget ({s['reloads']} reloads"
           + (f", the longest {s['reload_s_max']:.0f} s" if s.get("reload_s_max") else "") + ")"
           + (f"; stopped: {s['stopped']} ({len(s['skipped'])} not tried)" if s["stopped"] else "") + ". "
           f"Each configuration: {doc['settings'].get('repeats', 1)} windows of {doc['settings']['duration_s']:g} s "
           f"agreeing within {doc['settings'].get('stability_pct', '-')} % (at most "
           f"{doc['settings'].get('max_windows', '-')}); figures are their median (min-max).", "",
           "![p95 against throughput, every configuration, with the spread; the window sweep](h200-tune/tune.png)",
           "", "| stage | configuration | p95 ms | items/s | windows | Triton batch | verdict |",
           "|---|---|---|---|---|---|---|"]
    rows = doc["points"] + ([doc["final"]] if doc.get("final") else [])
    for r in rows:
        sv, chosen = r["tried_serving"], ""
        if ch and all(sv[k] == ch[k] for k in ("instance_count", "max_batch_size", "window_us")) \
                and list(sv["preferred_batch_size"]) == list(ch["preferred_batch_size"]):
            chosen = ": chosen"
        stage = "again" if r["stage"] == "final" else str(r["stage"])
        label = r.get("config") or r["tried"]
        if r["stage"] == "final":
            label = f"**{label}** (measured again)"
        verdict = r["verdict"] + (" (unstable)" if r.get("unstable") else "") + chosen
        out.append(f"| {stage} | {label} | {_fig(r, 'p95_ms', '{:.1f}')} | {_fig(r, 'items_per_s', '{:,.0f}')} | "
                   f"{_windows(r)} | {(r.get('triton') or {}).get('avg_batch', '-')} | {verdict} |")
    out.append("")
    for t in s.get("tied") or []:
        out.append(f"- tie: {t}")
    out.append(f"- result: {doc['why']}")
    beside = load_text(doc, rows)
    if beside:
        out.append(f"- during the measurement: {beside}")
    return out


def bench_block(doc: dict) -> list[str]:
    st = doc["settings"]
    out = ["## The chosen configuration against no dynamic batching", "",
           f"`invoke bench --host {doc['host']} --window-us none,deployed --batch 1 --concurrency "
           f"{','.join(map(str, st['concurrency']))} --warmup {st['warmup_s']:g} --duration {st['duration_s']:g} "
           f"--processes {st['processes']} --repeats {st.get('repeats', 1)}` (at most {st.get('max_windows', '-')} "
           f"windows per point, agreeing within {st.get('stability_pct', '-')} %)", "",
           "![p95 and throughput: median, bars min-max of the windows](h200-tune/bench.png)", "",
           "| window | conc | p95 ms median (min-max) | items/s median (min-max) | windows | Triton batch | note |",
           "|---|---|---|---|---|---|---|"]
    for r in doc["points"]:
        notes = []
        if r.get("unstable"):
            notes.append(f"unstable: {r.get('unstable_why')}")
        if r.get("client_bound"):
            notes.append("client-bound")
        if r.get("errors"):
            notes.append(f"{r['errors']} errors")
        out.append(f"| {r['window']} | {r['concurrency']} | {_fig(r, 'p95_ms', '{:.1f}')} | "
                   f"{_fig(r, 'items_per_s', '{:,.0f}')} | {_windows(r)} | "
                   f"{(r.get('triton') or {}).get('avg_batch', '-')} | {'; '.join(notes)} |")
    out.append("")
    beside = load_text(doc)
    if beside:
        out.append(f"- during the measurement: {beside}")
    acc = doc.get("acceptance") or {}
    if acc:
        out.append(f"- the result's own acceptance: {acc['status']} {acc['seen']}")
    if not all(repeated(r) for r in doc["points"]):
        out.append("- some points rest on one window (no spread)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", type=Path)
    ap.add_argument("--bench", type=Path)
    ap.add_argument("--checklist", type=Path)
    ap.add_argument("--inprocess", type=Path)
    a = ap.parse_args(argv)
    lines: list[str] = []
    if a.tune and a.tune.exists():
        lines += tune_block(json.loads(a.tune.read_text())) + [""]
    if a.bench and a.bench.exists():
        lines += bench_block(json.loads(a.bench.read_text())) + [""]
    if a.checklist and a.checklist.exists():
        lines += ["The checklist's latency line (it reads the bench result):", "", "```",
                  a.checklist.read_text().strip(), "```", ""]
    if a.inprocess and a.inprocess.exists():
        ip = json.loads(a.inprocess.read_text())
        lines += [f"In-process on {ip.get('device')} (`scripts/h200/inprocess.py`) at batch {ip.get('batch')} (Triton "
                  f"formed {ip.get('triton_avg_batch')}): eager {ip.get('eager_ms')} ms ({ip.get('eager_items_per_s')}/s), "
                  f"graph {ip.get('graph_ms')} ms ({ip.get('graph_items_per_s')}/s); the service's "
                  f"{ip.get('service_items_per_s')}/s (the bench's median) is {ip.get('share_of_eager', 0):.0%} of eager and "
                  f"{ip.get('share_of_graph', 0):.0%} of the graph.", ""]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
