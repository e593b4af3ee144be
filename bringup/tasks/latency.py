"""``invoke bench``, ``tune-window`` and ``tune``: a host's Triton latency and its serving configuration
(:mod:`bringup.latency`).

Every option is taken as text and checked by :mod:`bringup.latency.options` before anything is contacted:
a value that does not hold is one ``error:`` line, exit 1 (never Invoke's traceback, never a run with NaN).
The flags' help and readers the three tasks share are in :mod:`.latency_flags`.
"""
from __future__ import annotations

from pathlib import Path

from invoke import Exit

from ..errors import BringupError, InputError, Unreachable
from ..outfile import write_set
from ..process import command
from ..ssh.stop import Interrupted
from .context import console as new_console
from .context import REPEATED, VAULT, fail, interrupted, interruptible, unreachable
from .context import task  # Invoke's @task, an empty flag value refused first
from .latency_flags import (FLAGS, FOLLOW_STOPPING, HELP, REPEAT_FLAGS, STOPPING, address_flag, client_flags, ending,
                            given, load_lists, port_flag, repeat_flags, resolve_target, target_goal, window_list)

__all__ = ["bench", "tune_window", "tune"]

#: The largest follow log read back for its plot (a line per interval: days of following are megabytes).
LOG_PLOTTED_MAX = 64 << 20


@task(iterable=REPEATED, auto_shortflags=False, help=HELP)
def bench(c, host=None, model=None, batch="1,2,4,8", concurrency="1,4,16,64", window_us=None, warmup="2",
          duration="5", processes="0", client_cpus=None, cpu_limit="0.85", microbatch_us=None, microbatch_max="8",
          address=None, grpc_port=None, input_name=None, input_shape=None, dtype=None, inventory=None,
          set_=None, out="reports/bench", no_plot=False, vault_password_file=None, vault_id=None, repeats="3",
          stability="10", max_windows="0"):
    """Closed-loop latency sweep against a host's Triton: p50/p95/p99, QPS, Triton's view; reports/bench/."""
    from ..latency.bench import BenchSettings, run_sweep
    from ..latency.options import BenchOptions, out_folder, read, whole
    from ..latency.results import point_text, render_table, write_all

    console = new_console()
    with interruptible(console, STOPPING) as stop:
        with ending(stop):
            if not host:
                raise InputError("bench takes one --host")
            o = read(BenchOptions, FLAGS, **load_lists(batch, concurrency),
                     windows=window_list(window_us) if given(window_us) else ["deployed"],
                     **client_flags(warmup, duration, processes, client_cpus, cpu_limit),
                     microbatch_us=whole(microbatch_us, "--microbatch-us", 1, 1000) if given(microbatch_us) else None,
                     microbatch_max=whole(microbatch_max, "--microbatch-max", 1, 1 << 16),
                     **repeat_flags(repeats, stability, max_windows))
            out_dir = out_folder(out)
            _, _, target = resolve_target(inventory, set_, (vault_password_file, vault_id), host, model, address_flag(address),
                                   port_flag(grpc_port, "--grpc-port"),
                                   input_name=input_name, input_shape=input_shape, dtype=dtype)
            s = BenchSettings(**o.model_dump())
            n_points = len(s.windows) * len(s.batches) * len(s.concurrency)
            console.print(f"bench {target.host}: {target.model} at {target.url}, {n_points} point(s) of "
                          f"{s.repeats} to {s.rule().most} window(s) of {s.warmup_s:g}+{s.duration_s:g} s (agreeing "
                          f"within {s.stability_pct:g} %), {s.resolved_processes()} client process(es)",
                          style="dim")

            def progress(row):
                console.print(f"  {row['window']} batch {row['batch']} conc {row['concurrency']}: {point_text(row)}",
                              style="dim", markup=False, highlight=False)

            doc = run_sweep(target, s, on_point=progress, stop=stop)
        with ending(stop):  # a folder under a result's name: one line, never a traceback after measuring
            paths = write_all(doc, out_dir, plot=not no_plot, warn=lambda said: _say_index(console, said))
        render_table(doc, console)
        console.print("report: " + ", ".join(str(p) for p in paths.values()), style="dim")


@task(name="tune-window", iterable=REPEATED, auto_shortflags=False, help={
    **{k: HELP[k] for k in ("host", "inventory", "set", *VAULT, "model", "warmup", "duration", "processes",
                             "client-cpus", "address", "grpc-port", "out", *REPEAT_FLAGS)},
    "target-p95-ms": "the p95 target in ms (default: the inventory's latency_slo_p95_ms)",
    "windows": "windows to try in µs, comma separated (default 200,400,600,800,1000,1500); windows whose "
               "items/s overlap within the spread tie and the shorter is kept; the chosen one is measured again",
    "batch": "request batch of the fixed load (default 1)",
    "concurrency": "requests in flight of the fixed load (default 64)",
    "follow": "continuous mode: every --interval read Triton's p95 and queue time under the traffic it has "
              "(no load generated) and step the window by the guide's rule, within the serving configuration "
              f"in force ({command('tune')}'s); Ctrl-C stops",
    "interval": "--follow: seconds between steps (default 10, at least 0.1)",
    "steps": "--follow: stop after this many intervals",
    "for": "--follow: stop after this many seconds",
    "record": "--follow: bringup's record on the host of the window in force, a *.json file in a folder named "
              "bringup (default /etc/bringup/triton-window.json, which provision reads); another file is refused",
    "http-port": "--follow: Triton's HTTP port instead of triton_ports.http",
    "metrics-port": "--follow: Triton's metrics port instead of triton_ports.metrics"})
def tune_window(c, host=None, target_p95_ms=None, windows="200,400,600,800,1000,1500", batch="1",
                concurrency="64", model=None, warmup="2", duration="5", processes="0", client_cpus=None,
                address=None, grpc_port=None, inventory=None, set_=None, out="reports/bench", follow=False,
                interval="10", steps=None, for_=None, record=None, http_port=None, metrics_port=None,
                vault_password_file=None, vault_id=None, repeats="3", stability="10", max_windows="0"):
    """Window tuning: one-shot sweep under a fixed load, or --follow: the guide's controller on live traffic."""
    from dataclasses import replace
    from datetime import datetime

    from ..latency.bench import BenchSettings, run_sweep
    from ..latency.options import BenchOptions, FollowOptions, TuneWindowOptions, number, out_folder, read, whole
    from ..latency.plots import figure_png, plot_tune_window
    from ..latency.results import remember, result_json
    from ..latency.results import point_text
    from ..latency.trial import trial_path
    from ..latency.tune import pick, settle
    from ..latency.window_tuner import RECORD, record_path_problem

    console = new_console()
    with interruptible(console, FOLLOW_STOPPING if follow else STOPPING) as stop:
        with ending(stop):
            if not host:
                raise InputError("tune-window takes one --host")
            ws = [w for w in window_list(windows, "--windows") if w not in (None, "deployed")]
            if not ws:
                raise InputError(f"--windows {windows!r}: give windows in µs")
            load = load_lists(batch, concurrency)
            client = client_flags(warmup, duration, processes, client_cpus, "0.85")
            rep = repeat_flags(repeats, stability, max_windows)
            fo = read(FollowOptions, FLAGS, interval_s=number(interval, "--interval"),
                      steps=whole(steps, "--steps", 1, 10_000_000) if given(steps) else None,
                      seconds=number(for_, "--for") if given(for_) else None,
                      http_port=port_flag(http_port, "--http-port"), metrics_port=port_flag(metrics_port, "--metrics-port"))
            out_dir = out_folder(out)
            path = str(record) if given(record) else RECORD
            why = record_path_problem(path)
            if why:
                raise InputError(f"--record {path}: {why}")
            from ..ssh.sshconfig import Routes

            routes = Routes()  # the host's route worked out once: checked, then connected with
            inv_host, hv, target = resolve_target(inventory, set_, (vault_password_file, vault_id), host,
                                           model if model or not follow else "",
                                           address_flag(address), port_flag(grpc_port, "--grpc-port"), routes)
            goal = read(TuneWindowOptions, FLAGS, target_p95_ms=target_goal(target_p95_ms, target), windows=ws).target_p95_ms
            if follow:
                _follow(console, inv_host, hv, target.address, [model] if model else [], goal, fo, path, out_dir,
                        stop, routes)
                return
            s = BenchSettings(**read(BenchOptions, FLAGS, **load, windows=ws, **client, **rep).model_dump())
            console.print(f"tune-window {target.host}: {target.model}, windows {ws} µs at batch {s.batches} "
                          f"× concurrency {s.concurrency}, target p95 {goal:g} ms", style="dim")

            def progress(row):
                console.print(f"  window {row['window_us']} µs: {point_text(row)}, Triton batch "
                              f"{(row.get('triton') or {}).get('avg_batch')}", style="dim", markup=False,
                              highlight=False)

            # The trial record (bringup.latency.trial) on the host while other windows serve, as tune writes it.
            conn = _record_at(inv_host, path, check=False, routes=routes)
            try:
                if (back := _undo_trial(conn, trial_path(path), target)) is not None:
                    console.print(back, style="yellow", markup=False, highlight=False)
                trial = _trials(conn, trial_path(path), target.model, "tune-window")
                doc = run_sweep(target, s, on_point=progress, stop=stop, trial=trial)
            except BaseException:
                conn.close()
                raise
            doc["kind"] = "bringup-tune-window"
            doc["slo_p95_ms"] = goal
            doc["tune"] = pick(doc, goal)
            if doc["tune"]["chosen_window_us"] is not None:
                # The sweep's best is one set of windows among many: the chosen window is measured again.
                w = doc["tune"]["chosen_window_us"]
                console.print(f" {w} µs chosen ({doc['tune']['why']}); measured again", style="dim", markup=False,
                              highlight=False)
                try:
                    again = run_sweep(target, replace(s, windows=[w]), on_point=progress, stop=stop, trial=trial)
                finally:
                    conn.close()
                doc["tune"] = settle(doc["tune"], again["points"], goal)
            else:
                conn.close()
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromisoformat(doc["finished"]).strftime("%Y%m%dT%H%M%SZ")
        path = out_dir / f"{target.host}-tune-{stamp}.json"
        with ending(stop):  # a folder under a name: one line, never a traceback after measuring; both or none
            png = figure_png(plot_tune_window, doc, name=str(path.with_suffix(".png")), written=str(path),
                             warn=lambda said: _say_index(console, said))
            write_set([(path, result_json(doc))] + ([(path.with_suffix(".png"), png)] if png is not None else []))
        _say_index(console, remember(target.host, path))
        for t in doc["tune"]["windows"]:
            p95 = "-" if t["p95_ms"] is None else f"{t['p95_ms']:.1f} ms"
            rng = t.get("spread") or {}
            rng = (f" (p95 {rng['p95_ms']['min']:.1f}-{rng['p95_ms']['max']:.1f} ms, items/s "
                   f"{rng['items_per_s']['min']:,.0f}-{rng['items_per_s']['max']:,.0f})"
                   if "p95_ms" in rng and "items_per_s" in rng else "")
            console.print(f"window {t['window_us']:>5} µs: p95 {p95}, {t['items_per_s']:.0f} items/s{rng}, "
                          f"Triton batch {t['avg_batch']}{f'  meets {goal:g} ms' if t['meets'] else ''}"
                          f"{'  unstable' if t.get('unstable') else ''}"
                          f"{'  client-bound: no verdict' if t['client_bound'] else ''}"
                          f"{'  Triton reloaded: no verdict' if t.get('reloaded') else ''}")
        console.print(f"[bold]{doc['tune']['why']}[/]")
        console.print(f"report: {path}" + (f", {path.with_suffix('.png')}" if png is not None else ""), style="dim")
        if doc["tune"]["chosen_window_us"] is None:
            raise Exit(code=2)


def _say_index(console, said: str | None) -> None:
    """The index of results not updated (:func:`bringup.latency.results.remember`): its one WARN line."""
    if said:
        console.print(said, style="yellow", markup=False, highlight=False)


def _warn(console):
    """How the record step's notes reach the terminal (a config.pbtxt it did not rewrite): one WARN line each."""
    return lambda text: console.print(f"WARN: {text}", style="yellow", markup=False, highlight=False)


def _record_at(host, path: str, check: bool = True, routes=None):
    """A connection to ``host`` and the checked record path there (refused before any Triton is contacted)."""
    from ..ssh.connection import connect
    from ..latency.follow import check_remote_record

    try:
        t = connect(host, routes=routes)
    except Unreachable as e:
        raise unreachable(e) from None
    try:
        if check:
            check_remote_record(t, path)
    except BaseException:
        t.close()
        raise
    return t


def _trials(t, path: str, model: str, task: str):
    """``trial(config)``: the :class:`~bringup.latency.trial.TrialMark` of one search or sweep on ``t``'s host."""
    from datetime import datetime, timezone

    from ..latency.trial import TrialMark

    who, begun = f"{command(task)} from {_me()}", datetime.now(timezone.utc).isoformat(timespec="seconds")
    return lambda own: TrialMark(t, path, model, own, who, begun)


def _me() -> str:
    import os
    import socket

    return f"{socket.gethostname()} (pid {os.getpid()})"


def _undo_trial(t, path: str, target) -> str | None:
    """A trial record a tune cut short left on the host (SIGKILL: nothing loaded the own configuration back):
    the model's own configuration, as it names it, loaded again before anything is measured, and the record
    removed; the line that says so (None: no record).  One BringupError line when that fails."""
    from dataclasses import replace

    from ..latency.override import load_own
    from ..latency.trial import TrialMark, read_trial

    doc = read_trial(t, path)
    if doc is None:
        return None
    mark = TrialMark(t, path, doc["model"], doc["own_config"], "", "")
    mark.marked = True
    serving = str(doc.get("serving") or "a trial configuration")[:200]
    back = load_own(replace(target, model=doc["model"]), doc["own_config"], serving, mark)
    if mark.marked:   # not cleared: the own configuration did not load
        raise BringupError(f"a tune cut short left {doc['model']} serving {serving} ({path} on {t.host.name}); "
                           f"{back}")
    who = " ".join(str(doc.get("who") or "a tune").split())[:200]
    return (f"note: {who}, begun {str(doc.get('started') or '?')[:40]}, was cut short with a trial configuration of "
            f"{doc['model']} perhaps still loaded (the first it tried: {serving}; {path} on {t.host.name}): {back}")


def _follow(console, host, hv: dict, address: str, models: list, goal: float, fo, path: str, out: Path,
            stop, routes=None) -> None:
    """``tune-window --follow``: the host's controller from here, until --steps, --for or a signal (Ctrl-C,
    SIGTERM), which ends it between intervals: a window a step loaded is recorded before it ends."""
    import time
    from datetime import datetime, timezone

    from ..ssh.stop import AWAKE_S

    from ..latency.follow import follow, remote_record
    from ..latency.target import host_port
    from ..latency.window_tuner import TritonHTTP, TunerError, manifest_of
    from ..latency.window_tuner import Unreachable as TritonDown

    ports = hv.get("triton_ports") or {}
    hp, mp = fo.http_port or ports.get("http", 8000), fo.metrics_port or ports.get("metrics", 8002)
    at = host_port(address)
    api = TritonHTTP(f"http://{at}:{int(hp)}", f"http://{at}:{int(mp)}/metrics")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    log = out / f"{host.name}-window-{stamp}.jsonl"
    t = _record_at(host, path, routes=routes)
    ran = 0

    def pause(seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            stop.check("between intervals")
            time.sleep(min(left, AWAKE_S))
        stop.check("between intervals")

    try:
        ran = follow(api, models, goal, fo.interval_s, record=remote_record(t, path, hv.get("triton_model_repository"),
                                                                           manifest_of(hv.get("triton_stack_dir") or "/opt/triton"),
                                                                           warn=_warn(console)),
                     log_path=log, steps=fo.steps, seconds=fo.seconds, sleep=pause,
                     say=lambda text: console.print(text, markup=False, highlight=False))
    except Interrupted:
        console.print(f"stopped ({stop.name})", style="dim")
    except TritonDown as e:
        raise unreachable(e) from None
    except (BringupError, TunerError) as e:
        raise fail(e) from None
    finally:
        t.close()
    png = None
    if log.exists():
        from ..latency.plots import plot_window_log

        from ..userfile import read_capped

        # This run's own log, read back with a cap (a follow of days is megabytes): past it, no plot.
        try:
            text = read_capped(log, LOG_PLOTTED_MAX, ValueError, missing="", unreadable="", too_large="").decode(
                "utf-8", "replace")
            from ..untrusted import loads

            entries = [loads(ln, what="the window log", unique=True) for ln in text.splitlines() if ln.strip()]
        except ValueError:
            entries = []
        png = plot_window_log(entries, log.with_suffix(".png"), f"{host.name}: tune-window --follow") if entries \
            else None
    console.print(f"{ran} interval(s); log: {log}{f', {png}' if png else ''}; window recorded in {path} on "
                  f"{host.name}", style="dim")


@task(name="tune", iterable=REPEATED, auto_shortflags=False, help={
    **{k: HELP[k] for k in ("host", "inventory", "set", *VAULT, "model", "warmup", "duration", "processes",
                             "client-cpus", "cpu-limit", "address", "grpc-port", "out", "no-plot", *REPEAT_FLAGS)},
    "target-p95-ms": "the p95 target in ms (default: the inventory's latency_slo_p95_ms)",
    "batch": "request batch of the fixed load (default 1)",
    "concurrency": "requests in flight of the fixed load (default 64)",
    "instances": "instance counts per GPU to try, 1-4, comma separated (default 1,2,3,4)",
    "max-batch": "max_batch_size values to try, comma separated (default: the model's, its half and quarter)",
    "windows": "windows to try in µs in the last stage, comma separated (default 200,400,800,1200,1500; the "
               "middle one is the window of the first stages)",
    "budget": "minutes the search may take, reloads included (default 10): configurations left then are not "
              "tried",
    "record": "bringup's record on the host (default /etc/bringup/triton-window.json, which provision reads)",
    "no-record": "measure only: the model's own configuration serves again and nothing is recorded"})
def tune(c, host=None, target_p95_ms=None, model=None, batch="1", concurrency="64", instances="1,2,3,4",
         max_batch=None, windows="200,400,800,1200,1500", budget="10", warmup="2", duration="5", processes="0",
         client_cpus=None, cpu_limit="0.85", address=None, grpc_port=None, inventory=None, set_=None,
         out="reports/bench", no_plot=False, record=None, no_record=False, vault_password_file=None, vault_id=None,
         repeats="3", stability="10", max_windows="0"):
    """The serving configuration for a p95 target: instances, batch sizes and window, searched under a fixed load."""
    from datetime import datetime, timezone

    from ..latency.bench import TritonUnreachable
    from ..latency.follow import remote_record
    from ..latency.options import BenchOptions, TuneOptions, number, out_folder, read, whole_list
    from ..latency.override import load_own
    from ..latency.results import remember
    from ..latency.tune_report import render_tune, write_tune
    from ..latency.trial import TrialMark, trial_path
    from ..latency.results import point_text
    from ..latency.tune import SEARCH, TIE, TuneSettings, point_cost_s, run_tune
    from ..latency.window_tuner import RECORD, TunerError, manifest_of, record_path_problem

    console = new_console()
    with interruptible(console, STOPPING) as stop:
        t = None
        try:
            if not host:
                raise InputError("tune takes one --host")
            load = load_lists(batch, concurrency)
            if len(load["batches"]) != 1 or len(load["concurrency"]) != 1:
                raise InputError("tune measures under one fixed load: give one --batch and one --concurrency")
            client = client_flags(warmup, duration, processes, client_cpus, cpu_limit)
            rep = repeat_flags(repeats, stability, max_windows)
            read(BenchOptions, FLAGS, **load, **client, **rep)
            budget_min = number(budget, "--budget", lo=0, lo_open=True, hi=24 * 60, unit="min")
            win = [w for w in window_list(windows, "--windows") if w not in (None, "deployed")]
            if not win:
                raise InputError(f"--windows {windows!r}: give windows in µs")
            inst = whole_list(instances, "--instances", -(1 << 31), 1 << 31)
            mbs = whole_list(max_batch, "--max-batch", -(1 << 31), 1 << 31) if given(max_batch) else None
            out_dir = out_folder(out)
            path = str(record) if given(record) else RECORD
            if not no_record:
                why = record_path_problem(path)
                if why:
                    raise InputError(f"--record {path}: {why}")
            # The target after the flags: the inventory is read, nothing contacted yet.
            from ..ssh.sshconfig import Routes

            routes = Routes()  # the host's route worked out once: checked, then connected with
            inv_host, hv, target = resolve_target(inventory, set_, (vault_password_file, vault_id), host, model,
                                           address_flag(address), port_flag(grpc_port, "--grpc-port"), routes)
            o = read(TuneOptions, FLAGS, target_p95_ms=target_goal(target_p95_ms, target), budget_s=budget_min * 60,
                     instances=inst, max_batches=mbs, windows=win)
            s = TuneSettings(target_ms=o.target_p95_ms, batch=load["batches"][0], concurrency=load["concurrency"][0],
                             instances=o.instances, max_batches=o.max_batches, windows=o.windows, budget_s=o.budget_s,
                             **client, **rep)
            if s.budget_s < 2 * point_cost_s(s):
                raise InputError(f"--budget {budget_min:g} min is shorter than one configuration and the chosen "
                                 f"one's measurement again ({2 * point_cost_s(s):.1f} s: warm-up, {s.repeats} steady "
                                 "window(s) each and reading Triton)")
            # Connected even with --no-record: the trial record (bringup.latency.trial) is written on the host
            # before any other configuration is loaded, and a tune cut short earlier is undone first.
            t = _record_at(inv_host, path, check=not no_record, routes=routes)
            trials = trial_path(path)
            if (back := _undo_trial(t, trials, target)) is not None:
                console.print(back, style="yellow", markup=False, highlight=False)
            who, begun = f"{command('tune')} from {_me()}", datetime.now(timezone.utc).isoformat(timespec="seconds")
            marks: list = []

            def trial(own: dict):
                marks.append(TrialMark(t, trials, target.model, own, who, begun))
                return marks[0]

            console.print(f"tune {target.host}: {target.model} at {target.url}, target p95 {s.target_ms:g} ms at "
                          f"concurrency {s.concurrency} × batch {s.batch}, budget {s.budget_s / 60:g} min, "
                          f"{s.resolved_processes()} client process(es)", style="dim")
            console.print(f"search: {SEARCH}", style="dim", markup=False, highlight=False)
            console.print(f"each configuration: {s.repeats} to {s.rule().most} window(s) agreeing within "
                          f"{s.stability_pct:g} %; {TIE}", style="dim", markup=False, highlight=False)

            def stage(n, name, best, todo):
                console.print(f" stage {n} ({name}) from {best.label()}: {len(todo)} configuration(s) to try",
                              style="dim", markup=False, highlight=False)

            def progress(row):
                again = " (the chosen configuration measured again)" if row["stage"] == "final" else ""
                console.print(f"  {row.get('config') or row['tried']}{again}: reload {row['reload_s']:.1f} s, "
                              f"{point_text(row)}, Triton batch {(row.get('triton') or {}).get('avg_batch')}: "
                              f"{row['verdict']}", style="dim", markup=False, highlight=False)

            doc = run_tune(target, s, keep=not no_record, on_point=progress, on_stage=stage, stop=stop,
                           trial=trial)
        except Interrupted as e:
            if t:
                t.close()
            raise interrupted(stop, e) from None
        except TritonUnreachable as e:
            if t:
                t.close()
            raise unreachable(e) from None
        except BringupError as e:
            if t:
                t.close()
            raise fail(e) from None
        with ending(stop):  # a folder under a result's name: one line, never a traceback after measuring
            paths = write_tune(doc, out_dir, plot=not no_plot, warn=lambda said: _say_index(console, said))
        _say_index(console, remember(target.host, paths["json"]))
        render_tune(doc, console)
        console.print(f"[bold]{doc['why']}[/]")
        ch = doc["chosen"]
        mark = marks[0] if marks else None
        try:
            if ch and doc["applied"]:
                if ch["window_us"] is None:   # what nothing records is not left serving
                    console.print("not recorded: the model has no dynamic batching to record a window of; "
                                  + load_own(target, doc["deployed_config"], ch["label"], mark), style="dim")
                else:
                    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
                    serving = {k: ch[k] for k in ("instance_count", "max_batch_size", "preferred_batch_size")}
                    remote_record(t, path, hv.get("triton_model_repository"),
                                  manifest_of(hv.get("triton_stack_dir") or "/opt/triton"), warn=_warn(console))(
                        target.model, ch["window_us"], f"{command('tune')}: {doc['why']}", when, serving)
                    if mark is not None:
                        mark.clear()   # what serves is recorded: no trial any more
                    console.print(f"serving {ch['label']}; recorded in {path} on {target.host}", markup=False,
                                  highlight=False)
                    for pin in _pins(hv, target.model):
                        console.print(f"note: the inventory pins {pin}: a provision restores the pin", style="yellow",
                                      markup=False, highlight=False)
        except (TunerError, BringupError, Unreachable) as e:
            # Left serving but not recorded: nothing would say it (the audit would see it); the model's own back.
            said = f"{e}; not recorded, so {load_own(target, doc['deployed_config'], ch['label'], mark)}"
            raise (unreachable if isinstance(e, Unreachable) else fail)(said) from None
        finally:
            if t:
                t.close()
        console.print("report: " + ", ".join(str(p) for p in paths.values()), style="dim")
        if stop.requested:
            raise interrupted(stop, f"{stop.name} came once the search was over: its result was written"
                                    f"{' and recorded' if ch and doc['applied'] else ''} all the same")
        if ch is None:
            raise Exit(code=2)


def _pins(hv: dict, model: str) -> list[str]:
    """What the inventory pins of ``model``'s serving configuration (a provision renders the pin, not the record)."""
    spec = (hv.get("triton_models") or {}).get(model) or {}
    out = [f"triton_models.{model}.{k}" for k in ("instance_count", "preferred_batch_size",
                                                   "max_queue_delay_microseconds") if spec.get(k) is not None]
    if spec.get("max_queue_delay_microseconds") is None and hv.get("triton_max_queue_delay_microseconds") is not None:
        out.append("triton_max_queue_delay_microseconds")
    return out
