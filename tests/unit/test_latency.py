"""Pure parts of the latency tools: argument parsing, percentiles, acceptance, the window controller."""
from __future__ import annotations

import json

import pytest

from bringup.checklist import latency_checks
from bringup.errors import InputError
from bringup.latency.loadgen import percentile, split
from bringup.latency.results import acceptance, latest
from bringup.latency.target import parse_int_list, parse_windows
from bringup.latency.tune import WINDOW_MAX, WINDOW_MIN, next_window, pick
from bringup.latency.window import window_of, with_window


def test_int_lists():
    assert parse_int_list("1, 4,16,4", "concurrency") == [1, 4, 16]
    for bad in ("1,x", "", "0", "-2", "1.5"):
        with pytest.raises(InputError, match="--concurrency"):
            parse_int_list(bad, "concurrency")


def test_windows():
    assert parse_windows("none,0,800") == [None, 0, 800]
    for bad in ("abc", "2000", ""):
        with pytest.raises(InputError, match="--window-us"):
            parse_windows(bad)


def test_percentile_and_split():
    v = list(range(1, 101))
    assert percentile(v, 50) == 50 and percentile(v, 95) == 95 and percentile(v, 99) == 99
    assert percentile([], 95) is None and percentile([7], 99) == 7
    assert split(10, 4) == [3, 3, 2, 2] and sum(split(64, 8)) == 64


def _pt(p95, items, *, conc=16, batch=1, bound=False, deployed=True, errors=0, window_us=800):
    return {"window": f"{window_us} µs", "window_us": window_us, "deployed": deployed, "batch": batch,
            "concurrency": conc, "p95_ms": p95, "items_per_s": items, "client_bound": bound, "errors": errors,
            "microbatch_us": None, "triton": {"avg_batch": 2.0}}


def test_acceptance_passes_at_the_heaviest_load_that_meets_the_slo():
    doc = {"finished": "2026-01-01T00:00:00+00:00",
           "points": [_pt(10, 300, conc=4), _pt(40, 1200, conc=16), _pt(90, 1500, conc=64),
                      _pt(5, 9000, conc=128, bound=True)]}
    a = acceptance(doc, 50)
    assert a["status"] == "PASS" and a["point"]["concurrency"] == 16 and "40.0 ms ≤ SLO 50 ms" in a["seen"]
    a = acceptance(doc, 50, load={"concurrency": 64, "batch": 1})
    assert a["status"] == "FAIL" and "90.0 ms > SLO" in a["seen"]
    a = acceptance(doc, 1)
    assert a["status"] == "FAIL" and a["point"]["p95_ms"] == 10 and "lowest p95" in a["seen"]
    # A client-bound point is never the verdict, however good it looks.
    only_bound = {"finished": "x", "points": [_pt(5, 9000, bound=True)]}
    assert acceptance(only_bound, 50)["status"] == "WARN"
    # A window sweep's other windows are not what the host serves.
    mixed = {"finished": "x", "points": [_pt(200, 100, deployed=True), _pt(10, 5000, deployed=False)]}
    assert acceptance(mixed, 50)["status"] == "FAIL"


def test_checklist_reads_the_newest_result(tmp_path):
    d = tmp_path / "bench"
    d.mkdir()
    for stamp, p95 in (("2026-01-01T00:00:00+00:00", 90), ("2026-02-01T00:00:00+00:00", 30)):
        doc = {"kind": "bringup-bench", "host": "h1", "finished": stamp, "points": [_pt(p95, 1000)]}
        (d / f"h1-{stamp[:10]}.json").write_text(json.dumps(doc))
    (d / "h1-tune-x.json").write_text(json.dumps({"kind": "bringup-tune-window", "host": "h1",
                                                  "finished": "2027", "points": []}))
    assert latest("h1", d)[0]["finished"].startswith("2026-02")
    line = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 50}, reports=d)[0]
    assert line.status == "PASS" and "p95 30.0 ms" in line.seen and "2026-02-01" in line.seen
    line = latency_checks({"inventory_hostname": "h2", "latency_slo_p95_ms": 50}, reports=d)[0]
    assert line.status == "WARN" and "not measured" in line.seen and "invoke bench --host h2" in line.fix


def test_window_controller_moves_the_right_way_within_bounds():
    assert next_window(800, 30, 50)[0] == 850
    assert next_window(800, 70, 50)[0] == 750
    assert next_window(800, 70, 50, queue_rising=True)[0] == 650
    assert next_window(WINDOW_MAX, 10, 50)[0] == WINDOW_MAX
    assert next_window(WINDOW_MIN, 99, 50, queue_rising=True)[0] == WINDOW_MIN


def test_pick_chooses_the_window_meeting_the_target_at_most_qps():
    doc = {"points": [_pt(20, 800, window_us=200), _pt(35, 1900, window_us=800), _pt(60, 2400, window_us=1500),
                      _pt(10, 9999, window_us=1000, bound=True)]}
    r = pick(doc, 50)
    assert r["chosen_window_us"] == 800
    assert pick(doc, 5)["chosen_window_us"] is None


def test_config_override():
    cfg = {"name": "m", "dynamic_batching": {"max_queue_delay_microseconds": "800", "preferred_batch_size": [2]}}
    assert window_of(cfg) == 800
    assert window_of(with_window(cfg, None)) is None and "dynamic_batching" in cfg
    assert with_window(cfg, 300)["dynamic_batching"] == {"max_queue_delay_microseconds": 300,
                                                         "preferred_batch_size": [2]}
    assert window_of(with_window({"name": "m"}, 0)) == 0
