"""Repeated windows, their spread, and the verdicts built on them (issue 35): no Triton, windows made up."""
from __future__ import annotations

import csv
import json

import pytest

from bringup.checklist.pages import latency_checks
from bringup.latency.hostload import busy_share, cpu_busy, describe, gpu_processes, gpu_util
from bringup.latency.repeats import Rule, agree, combine, measure, overlap, spread_of
from bringup.latency.results import acceptance, bench_figure, latest, write_all


def _w(p95, items, **kw):
    return {"window": "deployed (800 µs)", "window_us": 800, "deployed": True, "batch": 1, "concurrency": 64,
            "microbatch_us": None, "p50_ms": p95 / 2, "p95_ms": p95, "p99_ms": p95 * 1.2, "mean_ms": p95 / 2,
            "rps": items, "items_per_s": items, "errors": 0, "client_bound": False, "client_bound_why": "",
            "reloaded": False, "counts_agree": True, "triton": {"avg_batch": 4.0}, "client_loop_cpu": [0.2],
            "client_cpu": [0.3], "client_loop_lag_ms": [0.1], **kw}


def _feed(samples):
    it = iter(samples)
    return lambda i: _w(*next(it))


def test_windows_repeat_until_the_last_ones_agree_and_stop_at_the_bound():
    rule = Rule(repeats=3, stability_pct=10)
    # The first window is off (a cold cache); the next three agree: four windows, the last three used.
    ws = measure(_feed([(20, 4000), (12.0, 6500), (12.4, 6400), (12.2, 6450), (99, 1)]), rule)
    assert len(ws) == 4
    row = combine(ws, rule)
    assert row["p95_ms"] == 12.2 and row["items_per_s"] == 6450 and not row["unstable"]
    assert row["spread"]["p95_ms"] == {"median": 12.2, "min": 12.0, "max": 12.4, "pct": 3.3}
    assert row["spread"]["repeats"] == 3 and row["spread"]["windows"] == 4
    assert [s["used"] for s in row["spread"]["samples"]] == [False, True, True, True]
    # Never agreeing (the H200's 17.0 / 12.4 ms): stops at 2 x repeats and says unstable, with the figures.
    ws = measure(_feed([(17.0, 5109), (12.4, 6569)] * 5), rule)
    assert len(ws) == 6
    row = combine(ws, rule)
    assert row["unstable"] and "12.4-17.0 ms" in row["unstable_why"] and "10 %" in row["unstable_why"]
    assert row["p95_ms"] == 12.4   # median of 12.4, 17.0, 12.4
    # --max-windows bounds it; one window (--repeats 1) is never "unstable" and has no spread to speak of.
    assert len(measure(_feed([(17.0, 5109), (12.4, 6569)] * 5), Rule(3, 10, 4))) == 4
    one = combine(measure(_feed([(9, 100)]), Rule(1)), Rule(1))
    assert one["unstable"] is False and one["spread"]["repeats"] == 1


def test_a_window_without_an_answer_or_a_client_bound_one_is_carried_into_the_point():
    rule = Rule(3)
    row = combine([_w(10, 100), _w(10, 100, client_bound=True, client_bound_why="loop busy"), _w(10, 100)], rule)
    assert row["client_bound"] and row["client_bound_why"] == "loop busy"
    assert not agree([_w(10, 100), {**_w(10, 100), "p95_ms": None}], 10)
    assert spread_of([]) is None


def test_overlap_is_on_the_spread_and_a_row_without_one_is_its_value():
    a = combine([_w(10, 100), _w(11, 110), _w(12, 120)], Rule(3))
    b = combine([_w(11.5, 115), _w(13, 130), _w(14, 140)], Rule(3))
    c = combine([_w(20, 200), _w(21, 210), _w(22, 220)], Rule(3))
    assert overlap(a, b, "p95_ms") and overlap(a, b, "items_per_s") and not overlap(a, c, "p95_ms")
    assert overlap(_w(10, 100), _w(10, 100), "p95_ms") and not overlap(_w(10, 100), _w(10.1, 100), "p95_ms")


def _doc(points, finished="2026-12-04T10:00:00+00:00"):
    return {"kind": "bringup-bench", "version": 1, "host": "h1", "model": "m", "finished": finished,
            "slo_p95_ms": 15, "settings": {"stability_pct": 10}, "points": points}


def test_the_verdict_uses_the_median_and_warns_when_unstable_or_the_slo_is_inside_the_spread():
    rule = Rule(3)
    steady = combine([_w(12.0, 6500), _w(12.4, 6400), _w(12.2, 6450)], rule)
    a = acceptance(_doc([steady]), 15)
    assert a["status"] == "PASS" and "p95 12.2 ms ≤ SLO 15 ms" in a["seen"] and "12.0-12.4" in a["seen"]
    assert acceptance(_doc([steady]), 10)["status"] == "FAIL"
    # The SLO inside the min-max: the median alone would pass at 12.5, the spread says another run could fail.
    wide = combine([_w(12.0, 6500), _w(12.3, 6400), _w(13.0, 6100)], Rule(3, 10))
    assert not wide["unstable"]
    a = acceptance(_doc([wide]), 12.5)
    assert a["status"] == "WARN" and a["kind"] == "inside" and "inside the spread" in a["seen"]
    # Unstable: WARN whichever side of the SLO the median falls, with why.
    shaky = combine([_w(17.0, 5109), _w(12.4, 6569), _w(12.5, 6500)], rule)
    for slo in (30, 13, 5):
        a = acceptance(_doc([shaky]), slo)
        assert a["status"] == "WARN" and a["kind"] == "unstable" and "UNSTABLE" in a["seen"], (slo, a)
    # A point that meets the SLO over its whole spread is the verdict before a heavier, shakier one.
    light = combine([_w(5.0, 1000), _w(5.1, 1010), _w(5.2, 990)], rule) | {"concurrency": 16}
    a = acceptance(_doc([light, shaky]), 30)
    assert a["status"] == "PASS" and a["point"]["concurrency"] == 16


def test_the_checklist_line_carries_the_median_and_warns_on_the_spread(tmp_path):
    d = tmp_path / "bench"
    d.mkdir()
    shaky = combine([_w(17.0, 5109), _w(12.4, 6569), _w(12.5, 6500)], Rule(3))
    shaky["host_load"] = {"cpus": 2, "cpu_busy_pct": 100.0, "other_cpu_pct": 70.0, "loadavg_1m": 4.5,
                          "gpu_other_processes": ["python3 (pid 4242)"]}
    (d / "h1-a.json").write_text(json.dumps(_doc([shaky])))
    k = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 15}, reports=d)[0]
    assert k.status == "WARN" and "UNSTABLE" in k.seen and k.value == 12.5 and k.limit == 15 and k.unit == "ms"
    assert "--repeats 5" in k.fix
    # What else ran is said with it.
    assert "70 % by other processes" in k.seen and "python3 (pid 4242)" in k.seen


def test_a_result_saved_without_spread_still_loads_and_says_so(tmp_path):
    d = tmp_path / "bench"
    d.mkdir()
    old = _doc([{k: v for k, v in _w(12.0, 6500).items()}])     # a point as saved before issue 35
    (d / "h1-old.json").write_text(json.dumps(old))
    doc, _ = latest("h1", d)
    a = acceptance(doc, 15)
    # One sample is no verdict: WARN, the median it would have judged said, and how to get one.
    assert (a["status"], a["kind"]) == ("WARN", "single") and "no spread known" in a["seen"]
    assert "p95 12.0 ms ≤ SLO 15 ms" in a["seen"] and acceptance(doc, 10)["status"] == "WARN"
    k = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 15}, reports=d)[0]
    assert k.status == "WARN" and "--repeats 3" in k.fix
    paths = write_all(doc, tmp_path / "out", plot=True)       # CSV and plot of an old result
    row = next(csv.DictReader(open(paths["csv"])))
    assert row["p95_ms_min"] == row["p95_ms_max"] == "12.0" and row["repeats"] == "1"


def test_json_csv_and_plot_carry_the_spread(tmp_path):
    rule = Rule(3)
    pts = [combine([_w(10, 1000), _w(11, 1100), _w(12, 1200)], rule) | {"concurrency": 16},
           combine([_w(17.0, 5109), _w(12.4, 6569), _w(12.5, 6500)], rule)]
    doc = _doc(pts)
    paths = write_all(doc, tmp_path, plot=True)
    saved = json.loads(paths["json"].read_text())["points"]
    assert saved[0]["spread"]["p95_ms"]["min"] == 10 and saved[1]["unstable"] is True
    rows = list(csv.DictReader(open(paths["csv"])))
    assert (rows[0]["p95_ms_min"], rows[0]["p95_ms"], rows[0]["p95_ms_max"]) == ("10.0", "11.0", "12.0")
    assert rows[1]["unstable"] == "True" and float(rows[1]["p95_spread_pct"]) > 10
    fig = bench_figure(doc)
    ax1, ax2 = fig.axes
    bars = [c for c in ax1.containers if c.has_yerr]
    assert bars, "the p95 plot has no error bars"
    seg = bars[0].lines[2][0].get_segments()
    assert sorted((round(s[0][1], 1), round(s[1][1], 1)) for s in seg) == [(10.0, 12.0), (12.4, 17.0)]
    assert "unstable" in fig._suptitle.get_text()


def test_host_load_parsers_on_real_outputs():
    # /proc/stat's first lines from a 2-CPU Linux 6.x machine (this sandbox), and what the share comes to.
    a = cpu_busy("cpu  4705 356 584 3699176 2387 0 134 0 0 0\ncpu0 2352 178 292 1849588 1193 0 67 0 0 0\n")
    b = cpu_busy("cpu  4905 356 684 3699276 2387 0 134 0 0 0\n")
    assert busy_share(a, b) == pytest.approx(300 / 400)
    for damaged in ("", "cpu  x y z\n", "cpu 1 2\n", "intr 1 2 3\n"):
        assert cpu_busy(damaged) is None
    assert busy_share(None, b) is None
    # nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits (one GPU busy, one [N/A]).
    assert gpu_util("87\n[N/A]\n0\n") == [87, None, 0]  # each GPU in its place
    # --query-compute-apps=pid,process_name --format=csv,noheader: Triton's own processes are not "others".
    apps = ("2301, /opt/tritonserver/bin/tritonserver\n2388, /opt/tritonserver/backends/python/"
            "triton_python_backend_stub\n4242, python3\n")
    assert gpu_processes(apps) == ["python3 (pid 4242)"]
    assert gpu_processes("No running processes found\n") == [] and gpu_processes("") == []
    text = describe({"cpus": 2, "cpu_busy_pct": 96.0, "other_cpu_pct": 60.0, "loadavg_1m": 3.1,
                     "gpu_util_pct": [87], "gpu_other_processes": []})
    assert "60 % by other processes" in text and "load average 3.1 on 2 CPU(s)" in text
    assert "no other process on the GPUs" in text
    assert describe(None) == ""


def _cfg(p95s, items, inst=2, mbs=16, window=800, tried=None):
    row = combine([_w(p, i) for p, i in zip(p95s, items)], Rule(len(p95s)))
    sv = {"instance_count": inst, "max_batch_size": mbs, "preferred_batch_size": [2, 4, 8, 16], "window_us": window}
    return row | {"tried_serving": sv, "tried": tried or f"{inst} inst mb{mbs} {window}µs", "window_us": window}


def test_tune_breaks_a_tie_within_the_spread_by_the_simpler_configuration_and_says_so():
    from bringup.latency.tune import choose

    three = _cfg([15.0, 15.8, 16.5], [5300, 5507, 5600], inst=3, tried="3 instances")
    two = _cfg([16.0, 17.8, 18.0], [4899, 5000, 5350], inst=2, tried="2 instances")
    # Both meet 30 ms; 3 instances has the higher median, but the throughputs overlap: 2 instances is kept.
    win, note = choose(three, two, 30)
    assert win is two and "tie" in note and "the simpler, 2 instances, is kept" in note
    assert "5,300-5,600" in note and "4,899-5,350" in note
    # Apart beyond their spreads: the better one, no tie.
    far = _cfg([16.0, 17.8, 18.0], [4000, 4100, 4200], inst=1, tried="1 instance")
    assert choose(three, far, 30) == (three, "")
    # The same two as single samples (no spread) are not a tie: 5507 > 4899 decides (the old behaviour).
    one3 = _cfg([15.8], [5507], inst=3)
    one2 = _cfg([17.8], [4899], inst=2)
    assert choose(one3, one2, 30) == (one3, "")
    # Meeting the target beats missing it, whatever the spreads; both missing: the lower p95, ties on p95.
    assert choose(two, three, 16.9)[0] is three
    low = _cfg([40, 41, 42], [100, 100, 100], window=400, tried="400")
    high = _cfg([41, 43, 44], [100, 100, 100], window=1200, tried="1200")
    win, note = choose(high, low, 30)
    assert win is low and "ms p95" in note
    # A row without a verdict never wins.
    assert choose(three, {**two, "client_bound": True}, 30) == (three, "")


def test_tune_window_keeps_the_shorter_of_tied_windows_and_the_figure_measured_again():
    from bringup.latency.tune import pick, settle

    doc = {"points": [_cfg([20, 21, 22], [1900, 2000, 2100], window=400),
                      _cfg([24, 25, 27], [2050, 2150, 2200], window=800),
                      _cfg([30, 31, 33], [2500, 2600, 2700], window=1500)]}
    r = pick(doc, 32)
    assert r["chosen_window_us"] == 1500 and not r["tie"]
    r = pick(doc, 29)          # 400 and 800 meet; their items/s overlap: the shorter window
    assert r["chosen_window_us"] == 400 and "400 µs ties with 800 µs" in r["why"]
    again = [_cfg([21, 21.5, 22], [1950, 2000, 2050], window=400)]
    s = settle(r, again, 29)
    assert s["chosen_window_us"] == 400 and "21.5 ms" in s["why"] and "measured again" in s["why"]
    missed = settle(r, [_cfg([30, 31, 32], [1950, 2000, 2050], window=400)], 29)
    assert missed["chosen_window_us"] is None and "measured again" in missed["why"]


def test_the_h200_markdown_block_shows_medians_spreads_ties_and_the_measure_again(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    three = _cfg([15.0, 15.8, 16.5], [5300, 5507, 5600], inst=3, tried="3 instances") | {"stage": 1, "verdict": "meets"}
    final = three | {"stage": "final", "verdict": "meets"}
    tune = {"target_p95_ms": 30, "settings": {"concurrency": 64, "batch": 1, "repeats": 3, "duration_s": 3,
                                              "stability_pct": 10, "max_windows": 4},
            "search": {"configurations_measured": 1, "full_grid": 24, "elapsed_s": 200, "budget_s": 210,
                       "reloads": 2, "reload_s_max": 27, "stopped": "", "skipped": [],
                       "tied": ["2 instances and 3 instances tie (...): the simpler, 2 instances, is kept"]},
            "points": [three], "final": final, "why": "3 instances: p95 15.8 ms meets 30 ms",
            "chosen": {**three["tried_serving"]}}
    bench = _doc([combine([_w(17.0, 5109), _w(12.4, 6569), _w(12.5, 6500)], Rule(3))])
    bench["settings"] |= {"concurrency": [64], "warmup_s": 1, "duration_s": 3, "processes": 8, "repeats": 3,
                          "max_windows": 4}
    (tmp_path / "t.json").write_text(json.dumps(tune))
    (tmp_path / "b.json").write_text(json.dumps(bench))
    out = subprocess.run([sys.executable, str(repo / "scripts/h200/latency_md.py"), "--tune", str(tmp_path / "t.json"),
                          "--bench", str(tmp_path / "b.json")], capture_output=True, text=True, check=True).stdout
    assert "| 1 | 3 instances | 15.8 (15.0-16.5) | 5,507 (5,300-5,600) | 3/3 |" in out
    assert "| again | **3 instances** (measured again) |" in out and "meets: chosen" in out
    assert "- tie: 2 instances and 3 instances tie" in out
    assert "12.5 (12.4-17.0)" in out and "unstable: the last 3 of 3 window(s) did not agree" in out


def test_a_reload_in_any_window_even_one_left_out_makes_the_point_no_verdict():
    rule = Rule(3)
    a, b = "1 instance, window 800 µs", "1 instance, window 300 µs"
    ws = [_w(10, 100, config=f"{a} → {b}", reloaded=True, reloaded_why="a counter went down"),
          _w(5, 300, config=b, window_us=300), _w(5, 300, config=b, window_us=300), _w(5, 300, config=b, window_us=300)]
    row = combine(ws, rule)
    assert row["reloaded"] and row["reloaded_why"] == "a counter went down" and row["triton"] == {}
    assert row["config"] == f"{a} → {b}" and row["window_us"] == 300 and row["counts_agree"] is None
    # No reload seen by the counters, but another configuration served from one window to the next.
    row = combine([_w(10, 100, config=a), _w(10, 100, config=b), _w(10, 100, config=b)], rule)
    assert row["reloaded"] and "changed between the point's windows" in row["reloaded_why"]
    assert not combine([_w(10, 100, config=a)] * 3, rule)["reloaded"]


def test_the_watch_reads_nvidia_smi_while_the_point_runs_and_names_other_processes(tmp_path, monkeypatch):
    # A stand-in nvidia-smi on PATH answering as the real one does (formats as in the test above): the GPU busy
    # while the point runs, and a python3 beside Triton's server.
    import time

    from bringup.latency.hostload import Watch

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$1\" in\n --query-gpu=*) echo 80;;\n"
                   " --query-compute-apps=*) printf '2301, tritonserver\\n4242, python3\\n';;\nesac\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    w = Watch(poll_s=0.05)
    w.start()
    time.sleep(0.3)
    load = w.stop(client_cpu=0.5)
    assert load["gpu_util_pct"] == [80] and load["gpu_other_processes"] == ["python3 (pid 4242)"]
    assert load["cpus"] >= 1 and load["cpu_busy_pct"] is not None
    # No nvidia-smi: nothing said about GPUs rather than "no other process".
    monkeypatch.setenv("PATH", "/nonexistent")
    w = Watch()
    w.start()
    load = w.stop()
    assert "gpu_util_pct" not in load and "gpu_other_processes" not in load


def test_a_gpu_process_nvidia_smi_cannot_name_is_named_from_proc_before_it_is_judged():
    # The H200 VM's nvidia-smi printed "[No data]" for a process name during a bench (docs/examples/
    # h200-latency.md): it was counted as "another process on the GPUs" whatever it was.
    import os
    import sys

    from bringup.latency.hostload import local_name

    apps = "4286, [No data]\n4300, [Not Found]\n4400, [No data]\n"
    names = {"4286": "triton_python_backend_stub", "4300": "tritonserver", "4400": ""}
    assert gpu_processes(apps, names.get) == ["[No data] (pid 4400)"]
    assert gpu_processes(apps) == ["[No data] (pid 4286)", "[Not Found] (pid 4300)", "[No data] (pid 4400)"]
    # /proc of this machine: this very process, by its interpreter and script
    me = local_name(str(os.getpid()))
    assert me.split()[0].startswith(os.path.basename(sys.executable)[:6]) and local_name("999999999") == ""


def test_each_window_keeps_its_sent_and_triton_counted_requests(tmp_path):
    # Issue 41: a point of several windows kept only its median window's counts; Triton's counters over the whole
    # point could not be reconciled with the bench.  Each window's counts are now in the point's samples.
    ws = [_w(10 + i, 100, requests=1000 + i, sent_total=1040 + i, sent_items_total=1040 + i,
             triton_total={"requests": 1040 + i, "items": 1040 + i}, counts_agree=True) for i in range(3)]
    ws[0] = ws[0] | {"triton_total": {"requests": 1039, "items": 1039}, "counts_agree": False}
    row = combine(ws, Rule(3))
    got = [(s["requests"], s["sent"], s["triton_requests"], s["counts_agree"]) for s in row["spread"]["samples"]]
    assert got == [(1000, 1040, 1039, False), (1001, 1041, 1041, True), (1002, 1042, 1042, True)]
    assert sum(s["sent"] for s in row["spread"]["samples"]) == 3123 and row["counts_agree"] is False
    # In the bench's JSON as written.
    paths = write_all(_doc([row | {"concurrency": 16}]), tmp_path)
    saved = json.loads(paths["json"].read_text())["points"][0]["spread"]["samples"]
    assert [(s["sent"], s["sent_items"], s["triton_requests"], s["triton_items"]) for s in saved] == [
        (1040, 1040, 1039, 1039), (1041, 1041, 1041, 1041), (1042, 1042, 1042, 1042)]
    # A window measured without counts (a saved row of an older bench): None, never 0.
    old = combine([_w(10, 100)], Rule(1))["spread"]["samples"][0]
    assert old["sent"] is None and old["triton_requests"] is None


@pytest.mark.reliability(item=40, fault="the control machine's nvidia-smi utilization: [N/A] on one GPU, a Unicode "
                         "digit, 5,000 digits, 250 %", variants=4, checks=("one clear line",))
def test_gpu_utilization_keeps_each_gpu_in_its_place_and_never_raises(tmp_path, monkeypatch):
    """A non-number was left out, so the next GPU's figure took its column in the mean; '²' or 5,000 digits raised
    ValueError in the polling thread (a thread traceback in the middle of a bench)."""
    import time

    from bringup.latency.hostload import Watch

    assert gpu_util("²\n" + "9" * 5000 + "\n250\n40 %\n") == [None, None, None, 40]
    smi = tmp_path / "nvidia-smi"
    # GPU 0 unreadable in the first read, GPU 1 at 90: the mean of GPU 0 is its one readable figure (10), never 90.
    smi.write_text("#!/bin/sh\ncase \"$1\" in\n --query-gpu=*) if [ -e " + str(tmp_path / "once") + " ]; then "
                   "printf '10\\n90\\n'; else : >" + str(tmp_path / "once") + "; printf '[N/A]\\n90\\n'; fi;;\n"
                   " --query-compute-apps=*) :;;\nesac\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    w = Watch(poll_s=0.05)
    w.start()
    time.sleep(0.4)
    load = w.stop()
    assert load["gpu_util_pct"] == [10, 90], load
    assert "GPU utilization - %/90 %" in describe({"gpu_util_pct": [None, 90]})
