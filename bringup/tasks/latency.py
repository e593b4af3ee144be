"""``invoke bench`` and ``tune-window``: a host's Triton latency and its batching window (:mod:`bringup.latency`)."""
from __future__ import annotations

import json
from pathlib import Path

from invoke import Exit, task

from ..errors import BringupError, InputError, Unreachable
from .context import console as new_console
from .context import fail, options, prepared, unreachable

__all__ = ["bench", "tune_window"]

_HELP = {
    **options("inventory", "set"),
    "host": "one host of the inventory (its ansible_host and triton_ports.grpc are used)",
    "model": "model to load (default: the only one of triton_models)",
    "batch": "request batch sizes, comma separated (default the guide's 1,2,4,8)",
    "concurrency": "requests in flight, comma separated (default 1,4,16,64)",
    "window-us": "batching windows to sweep by reloading the model: 'deployed', 'none' (no dynamic "
                 "batching) or µs, comma separated; needs Triton in explicit model-control mode",
    "warmup": "seconds of warm-up per point (default 2)",
    "duration": "seconds of the steady window per point (default 5)",
    "processes": "client processes (default: min(8, CPUs))",
    "client-cpus": "CPUs the client processes may run on, e.g. 0,1 (default: all)",
    "cpu-limit": "share of a core at which a client event loop counts as saturated (default 0.85)",
    "microbatch-us": "client micro-batching window in µs (1..1000); off by default",
    "microbatch-max": "client micro-batch rows at most (default 8)",
    "address": "Triton's address instead of the host's ansible_host",
    "grpc-port": "Triton's gRPC port instead of triton_ports.grpc",
    "input-name": "input tensor name (for a model outside triton_models)",
    "input-shape": "one item's dims, e.g. 3,224,224",
    "dtype": "input data type (FP16, FP32, TYPE_FP16, ...)",
    "out": "folder for JSON, CSV and PNG (default reports/bench)",
    "no-plot": "skip the PNG",
}


def _windows(text) -> list:
    from ..latency.target import parse_windows

    out: list = []
    rest = []
    for t in str(text).split(","):
        if t.strip().lower() == "deployed":
            out.append("deployed")
        elif t.strip():
            rest.append(t.strip())
            out.append(None if t.strip().lower() in ("none", "off") else parse_windows(t.strip())[0])
    if rest:
        parse_windows(",".join(rest))
    return out or ["deployed"]


@task(iterable=["set_"], auto_shortflags=False, help=_HELP)
def bench(c, host=None, model=None, batch="1,2,4,8", concurrency="1,4,16,64", window_us=None, warmup=2.0,
          duration=5.0, processes=0, client_cpus=None, cpu_limit=0.85, microbatch_us=None, microbatch_max=8,
          address=None, grpc_port=None, input_name=None, input_shape=None, dtype=None, inventory="hosts",
          set_=None, out="reports/bench", no_plot=False):
    """Closed-loop latency sweep against a host's Triton: p50/p95/p99, QPS, Triton's view; reports/bench/."""
    from ..latency.bench import BenchSettings, TritonUnreachable, run_sweep
    from ..latency.results import render_table, write_all
    from ..latency.target import parse_int_list, resolve

    console = new_console()
    try:
        if not host:
            raise InputError("bench takes one --host")
        _, chosen, _, _, role_vars = prepared(inventory, set_, host, None, None, "triton")
        target = resolve(chosen[0], role_vars[chosen[0].name], model=model, address=address,
                         grpc_port=grpc_port, input_name=input_name, input_shape=input_shape, dtype=dtype)
        try:
            warm, dur, lim = float(warmup), float(duration), float(cpu_limit)
        except (TypeError, ValueError):
            raise InputError("--warmup, --duration and --cpu-limit are numbers") from None
        if warm < 0 or dur <= 0 or not 0 < lim <= 1:
            raise InputError("--warmup >= 0, --duration > 0 and 0 < --cpu-limit <= 1")
        mb = parse_int_list(microbatch_us, "microbatch-us")[0] if microbatch_us not in (None, "") else None
        if mb is not None and mb > 1000:
            raise InputError(f"--microbatch-us {mb}: the client window is at most 1000 µs")
        s = BenchSettings(batches=parse_int_list(batch, "batch"), concurrency=parse_int_list(concurrency,
                          "concurrency"), windows=_windows(window_us) if window_us else ["deployed"],
                          warmup_s=warm, duration_s=dur, processes=parse_int_list(processes, "processes", 0)[0],
                          client_cpus=parse_int_list(client_cpus, "client-cpus", 0) if client_cpus else None,
                          cpu_limit=lim, microbatch_us=mb,
                          microbatch_max=parse_int_list(microbatch_max, "microbatch-max")[0])
        n_points = len(s.windows) * len(s.batches) * len(s.concurrency)
        console.print(f"bench {target.host}: {target.model} at {target.url}, {n_points} point(s) of "
                      f"{s.warmup_s:g}+{s.duration_s:g} s, {s.resolved_processes()} client process(es)",
                      style="dim")

        def progress(row):
            flag = " client-bound" if row["client_bound"] else ""
            p95 = "-" if row["p95_ms"] is None else f"{row['p95_ms']:.1f} ms"
            console.print(f"  {row['window']} batch {row['batch']} conc {row['concurrency']}: p95 {p95}, "
                          f"{row['items_per_s']:.0f} items/s{flag}", style="dim")

        doc = run_sweep(target, s, on_point=progress)
    except TritonUnreachable as e:
        raise unreachable(e) from None
    except BringupError as e:
        raise fail(e) from None
    paths = write_all(doc, Path(out), plot=not no_plot)
    render_table(doc, console)
    console.print("report: " + ", ".join(str(p) for p in paths.values()), style="dim")


@task(name="tune-window", iterable=["set_"], auto_shortflags=False, help={
    **{k: _HELP[k] for k in ("host", "inventory", "set", "model", "warmup", "duration", "processes",
                             "client-cpus", "address", "grpc-port", "out")},
    "target-p95-ms": "the p95 target in ms (default: the inventory's latency_slo_p95_ms)",
    "windows": "windows to try in µs, comma separated (default 200,400,600,800,1000,1500)",
    "batch": "request batch of the fixed load (default 1)",
    "concurrency": "requests in flight of the fixed load (default 64)",
    "follow": "continuous mode: every --interval read Triton's p95 and queue time under the traffic it has "
              "(no load generated) and step the window by the guide's rule; Ctrl-C stops",
    "interval": "--follow: seconds between steps (default 10)",
    "steps": "--follow: stop after this many intervals",
    "for": "--follow: stop after this many seconds",
    "record": "--follow: the file on the host recording the window in force (default "
              "/etc/bringup/triton-window.json, which provision reads)",
    "http-port": "--follow: Triton's HTTP port instead of triton_ports.http",
    "metrics-port": "--follow: Triton's metrics port instead of triton_ports.metrics"})
def tune_window(c, host=None, target_p95_ms=None, windows="200,400,600,800,1000,1500", batch="1",
                concurrency="64", model=None, warmup=2.0, duration=5.0, processes=0, client_cpus=None,
                address=None, grpc_port=None, inventory="hosts", set_=None, out="reports/bench", follow=False,
                interval=10.0, steps=None, for_=None, record=None, http_port=None, metrics_port=None):
    """Window tuning: one-shot sweep under a fixed load, or --follow: the guide's controller on live traffic."""
    from datetime import datetime

    from ..latency.bench import BenchSettings, TritonUnreachable, run_sweep
    from ..latency.results import plot_doc
    from ..latency.target import parse_int_list, parse_windows, resolve
    from ..latency.tune import pick

    console = new_console()
    try:
        if not host:
            raise InputError("tune-window takes one --host")
        _, chosen, _, _, role_vars = prepared(inventory, set_, host, None, None, "triton")
        hv = role_vars[chosen[0].name]
        target = resolve(chosen[0], hv, model=model if model or not follow else "", address=address,
                         grpc_port=grpc_port)
        goal = target_p95_ms if target_p95_ms is not None else target.slo_p95_ms
        try:
            goal = float(goal)
        except (TypeError, ValueError):
            raise InputError("give --target-p95-ms or set latency_slo_p95_ms in the inventory") from None
        if goal <= 0:
            raise InputError(f"--target-p95-ms {goal:g}: must be above 0")
        if follow:
            _follow(console, chosen[0], hv, target.address, [model] if model else [], goal, interval, steps, for_,
                    record, http_port, metrics_port, Path(out))
            return
        ws = [w for w in parse_windows(windows) if w is not None]
        if not ws:
            raise InputError("--windows: give windows in µs")
        s = BenchSettings(batches=parse_int_list(batch, "batch"), concurrency=parse_int_list(concurrency,
                          "concurrency"), windows=ws, warmup_s=float(warmup), duration_s=float(duration),
                          processes=parse_int_list(processes, "processes", 0)[0],
                          client_cpus=parse_int_list(client_cpus, "client-cpus", 0) if client_cpus else None)
        console.print(f"tune-window {target.host}: {target.model}, windows {ws} µs at batch {s.batches} "
                      f"× concurrency {s.concurrency}, target p95 {goal:g} ms", style="dim")

        def progress(row):
            console.print(f"  window {row['window_us']} µs: p95 {row['p95_ms']} ms, {row['items_per_s']:.0f} "
                          f"items/s, Triton batch {(row.get('triton') or {}).get('avg_batch')}"
                          + (" client-bound" if row["client_bound"] else ""), style="dim")

        doc = run_sweep(target, s, on_point=progress)
    except TritonUnreachable as e:
        raise unreachable(e) from None
    except BringupError as e:
        raise fail(e) from None
    doc["kind"] = "bringup-tune-window"
    doc["slo_p95_ms"] = goal
    doc["tune"] = pick(doc, goal)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(doc["finished"]).strftime("%Y%m%dT%H%M%SZ")
    path = out_dir / f"{target.host}-tune-{stamp}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    plot_doc(doc, path.with_suffix(".png"))
    for t in doc["tune"]["windows"]:
        console.print(f"window {t['window_us']:>5} µs: p95 {t['p95_ms']} ms, {t['items_per_s']:.0f} items/s, "
                      f"Triton batch {t['avg_batch']}{'  meets' if t['meets'] else ''}"
                      f"{'  client-bound: no verdict' if t['client_bound'] else ''}")
    console.print(f"[bold]{doc['tune']['why']}[/]")
    console.print(f"report: {path}, {path.with_suffix('.png')}", style="dim")
    if doc["tune"]["chosen_window_us"] is None:
        raise Exit(code=2)


def _follow(console, host, hv: dict, address: str, models: list, goal: float, interval, steps, seconds, record,
            http_port, metrics_port, out: Path) -> None:
    """``tune-window --follow``: the host's controller from here, until --steps, --for or Ctrl-C."""
    from datetime import datetime, timezone

    from ..connection import connect
    from ..latency.follow import follow, remote_record
    from ..latency.window_tuner import RECORD, TritonHTTP, TunerError, manifest_of
    from ..latency.window_tuner import Unreachable as TritonDown

    try:
        ivl = float(interval)
        n = int(steps) if steps not in (None, "") else None
        secs = float(seconds) if seconds not in (None, "") else None
    except (TypeError, ValueError):
        raise InputError("--interval and --for are seconds, --steps a whole number") from None
    if ivl <= 0 or (n is not None and n < 1) or (secs is not None and secs <= 0):
        raise InputError("--interval and --for must be above 0, --steps at least 1")
    ports = hv.get("triton_ports") or {}
    hp, mp = http_port or ports.get("http", 8000), metrics_port or ports.get("metrics", 8002)
    api = TritonHTTP(f"http://{address}:{int(hp)}", f"http://{address}:{int(mp)}/metrics")
    path = record or RECORD
    if not str(path).startswith("/"):
        raise InputError(f"--record {path!r}: an absolute path on the host")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log = out / f"{host.name}-window-{stamp}.jsonl"
    try:
        t = connect(host)
    except Unreachable as e:
        raise unreachable(e) from None
    ran = 0
    try:
        ran = follow(api, models, goal, ivl, record=remote_record(t, path, hv.get("triton_model_repository"),
                                                                 manifest_of(hv.get("triton_stack_dir") or "/opt/triton")),
                     log_path=log, steps=n, seconds=secs,
                     say=lambda text: console.print(text, markup=False, highlight=False))
    except KeyboardInterrupt:
        console.print("stopped (Ctrl-C)", style="dim")
    except TritonDown as e:
        raise unreachable(e) from None
    except (BringupError, TunerError) as e:
        raise fail(e) from None
    finally:
        t.close()
    png = None
    if log.exists():
        from ..latency.results import plot_window_log

        entries = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
        png = plot_window_log(entries, log.with_suffix(".png"), f"{host.name}: tune-window --follow") if entries \
            else None
    console.print(f"{ran} interval(s); log: {log}{f', {png}' if png else ''}; window recorded in {path} on "
                  f"{host.name}", style="dim")
