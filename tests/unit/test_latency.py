"""Pure parts of the latency tools: argument parsing, percentiles, acceptance, the window controller."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.checklist.pages import latency_checks
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
    # Three windows that agreed exactly: a verdict rests on repeated windows (issue 35).
    return {"window": f"{window_us} µs", "window_us": window_us, "deployed": deployed, "batch": batch,
            "concurrency": conc, "p95_ms": p95, "items_per_s": items, "client_bound": bound, "errors": errors,
            "microbatch_us": None, "triton": {"avg_batch": 2.0},
            "spread": {"repeats": 3, "p95_ms": {"min": p95, "max": p95, "pct": 0.0},
                       "items_per_s": {"min": items, "max": items, "pct": 0.0}}}


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
    # The measured value and the target, both (it printed "800 µs meets p95 50 ms": the target as if measured).
    assert r["why"] == "800 µs: p95 35.0 ms meets 50 ms at 1900 items/s"
    none = pick(doc, 5)
    assert none["chosen_window_us"] is None
    assert none["why"] == "no window met p95 5 ms at this load (lowest: 1000 µs, p95 10.0 ms)"
    # A point across a reload is no verdict either.
    reloaded = {"points": [{**_pt(20, 800, window_us=200), "reloaded": True}]}
    assert pick(reloaded, 50)["chosen_window_us"] is None


def test_config_override():
    cfg = {"name": "m", "dynamic_batching": {"max_queue_delay_microseconds": "800", "preferred_batch_size": [2]}}
    assert window_of(cfg) == 800
    assert window_of(with_window(cfg, None)) is None and "dynamic_batching" in cfg
    assert with_window(cfg, 300)["dynamic_batching"] == {"max_queue_delay_microseconds": 300,
                                                         "preferred_batch_size": [2]}
    assert window_of(with_window({"name": "m"}, 0)) == 0


# --------------------------------------------------------------------------- the continuous controller

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triton"


def test_summary_parsing_on_real_triton_metrics():
    from bringup.latency.window_tuner import TunerError, parse_summary

    text = (FIXTURES / "metrics-2.51-summary.txt").read_text()
    # 50 requests of the 5 ms model: p95 as Triton's summary says it, and its cumulative count.
    assert parse_summary(text, "add") == (11790.0, 50)
    assert parse_summary(text, "add", quantile="0.5") == (7896.0, 50)
    # A model nobody called: Triton prints Nan for its quantiles.
    assert parse_summary(text, "idle") == (None, 0)
    assert parse_summary(text, "absent") == (None, 0)
    # Two versions: the worse p95, the summed count.
    extra = text.replace('model="add",version="1"', 'model="add",version="2"').replace("11790", "20000")
    assert parse_summary(text + extra, "add") == (20000.0, 100)
    # Triton without --metrics-config=summary_latencies=true exports no summary: one line saying so.
    counters_only = "\n".join(ln for ln in text.splitlines() if "summary" not in ln)
    with pytest.raises(TunerError, match="summary_latencies=true"):
        parse_summary(counters_only, "add")


def test_stats_counters_on_real_triton_statistics():
    from bringup.latency.window_tuner import stats_counters

    doc = json.loads((FIXTURES / "stats-2.51-add.json").read_text())
    assert stats_counters(doc, "add") == (50, 50502775)
    assert stats_counters(doc, "other") == (0, 0)


def test_queue_rising_needs_a_sustained_breach_and_more_queue_time():
    from bringup.latency.window_tuner import queue_rising

    prev = {"p95_ms": 70.0, "queue_us": 1000.0}
    assert queue_rising(prev, 72.0, 1200.0, 50)
    assert not queue_rising(prev, 72.0, 1030.0, 50)                       # within 5 %: not rising
    assert not queue_rising(prev, 72.0, 900.0, 50)                        # falling
    assert not queue_rising({"p95_ms": 40.0, "queue_us": 1000.0}, 72.0, 2000.0, 50)   # first breach only
    assert not queue_rising(prev, 45.0, 2000.0, 50)                       # no breach now
    assert not queue_rising(None, 72.0, 2000.0, 50)
    assert not queue_rising(prev, 72.0, None, 50)


class _Triton:
    """Triton's answers, from the captured texts, moved by what a test says happened in an interval."""

    def __init__(self, window=800):
        self.text = (FIXTURES / "metrics-2.51-summary.txt").read_text()
        self.count, self.p95_us, self.ok, self.queue_ns = 50, 11790, 50, 50502775
        self.config = {"name": "add", "dynamic_batching": {"max_queue_delay_microseconds": window}}
        self.loads = []

    def interval(self, requests, p95_ms=None, queue_us=0.0):
        self.count += requests
        self.ok += requests
        self.queue_ns += int(requests * queue_us * 1000)
        if p95_ms is not None:
            self.p95_us = int(p95_ms * 1000)

    def metrics(self):
        count = 'nv_inference_request_summary_us_count{model="add",version="1"} '
        return self.text.replace(count + "50\n", f"{count}{self.count}\n").replace("} 11790", f"}} {self.p95_us}")

    def stats(self, model):
        return self.ok, self.queue_ns

    def config_of(self, model):
        return json.loads(json.dumps(self.config))

    def load(self, model, config):
        self.loads.append(config["dynamic_batching"]["max_queue_delay_microseconds"])
        self.config = config
        self.ok = self.queue_ns = 0          # Triton's statistics restart with the reloaded model


def _controller(t, target=50, window=800):
    from bringup.latency.window_tuner import Controller

    api = type("Api", (), {"metrics": lambda s: t.metrics(), "stats": lambda s, m: t.stats(m),
                           "config": lambda s, m: t.config_of(m), "load": lambda s, m, c: t.load(m, c)})()
    records = []
    c = Controller(api, "add", target, record=lambda *a: records.append(a))
    assert c.prime() == window
    return c, records


def test_controller_steps_skips_quiet_intervals_and_tightens_on_a_rising_queue():
    t = _Triton()
    c, records = _controller(t)
    # No request in the interval: no step, whatever the (sliding) p95 still says.
    e = c.step()
    assert e["action"] == "none" and "no traffic" in e["why"] and t.loads == [] and e["new_window_us"] == 800
    t.interval(100, p95_ms=20, queue_us=300)
    e = c.step()
    assert (e["old_window_us"], e["new_window_us"], e["requests"], e["queue_us"]) == (800, 850, 100, 300.0)
    assert "p95 20.0 ms" in e["why"] and t.loads == [850] and records[-1][:2] == ("add", 850)
    # After the reload Triton's statistics restart: the next interval's queue time is its own.
    t.interval(100, p95_ms=70, queue_us=1000)
    e = c.step()
    assert (e["new_window_us"], e["queue_us"], e["action"]) == (800, 1000.0, "narrowed")
    # A second breach with queue time up by more than 5 %: 150 µs at once.
    t.interval(100, p95_ms=75, queue_us=1500)
    e = c.step()
    assert (e["new_window_us"], e["action"]) == (650, "tightened") and "queue time rising" in e["why"]
    assert t.loads == [850, 800, 650] and [r[1] for r in records] == [850, 800, 650]


def test_controller_keeps_the_bounds_and_does_not_reload_there():
    from bringup.latency.window_tuner import WINDOW_MAX, WINDOW_MIN

    for start, p95, bound in ((WINDOW_MIN, 90, WINDOW_MIN), (WINDOW_MAX, 5, WINDOW_MAX)):
        t = _Triton(window=start)
        c, records = _controller(t, window=start)
        for _ in range(3):
            t.interval(50, p95_ms=p95, queue_us=500 if p95 < 50 else 5000)
            e = c.step()
            assert e["new_window_us"] == bound and e["action"] == "kept" and "bound" in e["why"]
        assert t.loads == [] and records == []


def test_log_line_names_the_p95_and_the_move():
    from bringup.latency.window_tuner import line

    e = {"time": "2026-01-01T00:00:00+00:00", "model": "add", "p95_ms": 61.25, "queue_us": 812.4, "requests": 40,
         "old_window_us": 800, "new_window_us": 750, "why": "p95 61.2 ms > 50 ms"}
    assert line(e) == ("2026-01-01T00:00:00+00:00 add: p95 61.2 ms, queue 812 µs/request, 40 requests: "
                       "window 800 -> 750 µs (p95 61.2 ms > 50 ms)")


def test_tuned_window_is_what_provision_renders_and_a_pin_wins():
    import roles.triton as T
    from bringup.errors import BringupError
    from bringup.facts.triton import parse_triton_window
    from bringup.latency.window_tuner import config_text, record_text
    from bringup.engine.templates import Templates

    render = Templates(Path(__file__).resolve().parents[2] / "templates").render
    spec = {"backend": "python", "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}
    v = {**T.DEFAULTS, "triton_models": {"add": spec, "other": spec}}
    deployed = T.model_configs(v, {}, render)["add"]
    assert "max_queue_delay_microseconds: 800" in deployed                   # nothing tuned: 800
    # The tuner steps to 1150: its record (through the fact's parser) and its rewrite of the file on disk ...
    fact = parse_triton_window(record_text("", "add", 1150, "p95 20.0 ms <= 50 ms", "2026-01-01T00:00:00+00:00"))
    assert fact == {"windows": {"add": 1150}, "configs": {}, "error": None}
    on_disk = config_text(deployed, 1150)
    # ... are exactly what the role renders from that fact: the next provision changes nothing.
    tuned = T.model_configs(v, {"triton.window": fact}, render)
    assert tuned["add"] == on_disk and "max_queue_delay_microseconds: 800" in tuned["other"]
    # An inventory value pins the window over the record.
    pinned = T.model_configs({**v, "triton_max_queue_delay_microseconds": 400}, {"triton.window": fact}, render)
    assert "max_queue_delay_microseconds: 400" in pinned["add"]
    # A corrupt record is one line, unless a pin makes it irrelevant.
    bad = parse_triton_window("{not json")
    assert bad["windows"] == {} and "not JSON" in bad["error"]
    with pytest.raises(BringupError, match="triton-window.json is not JSON.*pin triton_max_queue_delay"):
        T.model_configs(v, {"triton.window": bad}, render)
    assert "400" in T.model_configs({**v, "triton_max_queue_delay_microseconds": 400},
                                    {"triton.window": bad}, render)["add"]
    assert parse_triton_window("") is None
    assert "window_us" in parse_triton_window('{"add": {"window_us": "x"}}')["error"]
    # A file the role did not render (no window line) is left alone.
    assert config_text('name: "m"\n', 900) is None


def test_a_tuned_config_stays_one_the_triton_role_shipped(tmp_path):
    """The tuner rewrites config.pbtxt and its sha256 in the role's manifest, so the next provision's tree
    plan is a no-op, and a config of a model later removed is still bringup's to remove (not "edited")."""
    import hashlib

    from bringup.latency.window_tuner import manifest_of, write_local_config
    from bringup.resources.tree import Tree, format_manifest

    repo, stack = tmp_path / "models", tmp_path / "stack"
    (repo / "add" / "1").mkdir(parents=True)
    stack.mkdir()
    cfg = ('name: "add"\ndynamic_batching {\n  # The batching window: the role default.\n'
           '  max_queue_delay_microseconds: 800\n}\n')
    (repo / "add" / "config.pbtxt").write_text(cfg)
    model = b"print('model')\n"
    (repo / "add" / "1" / "model.py").write_bytes(model)
    sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
    manifest = manifest_of(str(stack))
    Path(manifest).write_text(format_manifest({"add/config.pbtxt": sha(cfg.encode()), "add/1/model.py": sha(model)},
                                              str(repo)))
    assert write_local_config(str(repo), "add", 950, manifest)
    tuned = (repo / "add" / "config.pbtxt").read_bytes()
    assert b"max_queue_delay_microseconds: 950" in tuned and sha(tuned) in Path(manifest).read_text()
    # What the tree reads on the host, and its plan when the role now wants the tuned config: nothing to do.
    listing = "\n".join(["type=dir", f"f={sha(tuned)}  ./add/config.pbtxt", f"f={sha(model)}  ./add/1/model.py",
                         "manifest=yes"] + [f"m={ln}" for ln in Path(manifest).read_text().splitlines()])
    tree = Tree(str(repo), {"add/1/model.py": (model, False)}, keep={"add/config.pbtxt": sha(tuned)},
                manifest=manifest)
    assert not tree.plan(listing).changed
    # The model goes away: its tuned config is bringup's, so it goes too (not kept as someone's edit).
    gone = Tree(str(repo), {}, manifest=manifest).plan(listing)
    assert "add/config.pbtxt" in gone.changes and "add/1/model.py" in gone.changes
    # A manifest that does not list the file (someone else's config) is left as it was.
    Path(manifest).write_text(format_manifest({}, str(repo)))
    before = Path(manifest).read_text()
    assert write_local_config(str(repo), "add", 1000, manifest) and Path(manifest).read_text() == before


def test_a_tuned_serving_config_is_what_provision_renders_reloads_in_place_and_a_pin_wins():
    """invoke tune records instances, max_batch_size and preferred sizes beside the window; the host's
    config.pbtxt is rewritten to exactly what the role renders from that record (the next provision changes
    nothing), the revision ignores them (a change reloads, never restarts), the inventory's pins win, and the
    window controller's later steps keep the configuration."""
    import roles.triton as T
    from bringup.facts.triton import parse_triton_window
    from bringup.latency.window_tuner import config_text, read_record, record_text
    from bringup.engine.templates import Templates

    render = Templates(Path(__file__).resolve().parents[2] / "templates").render
    spec = {"backend": "python", "max_batch_size": 16,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}
    v = {**T.DEFAULTS, "gpu_profile": "l40s", "triton_models": {"add": spec}}
    facts = {"nvidia.smi": [{"index": 0}, {"index": 1}]}
    deployed = T.model_configs(v, facts, render)["add"]
    assert "count: 2 gpus: [ 0, 1 ]" in deployed and "preferred_batch_size: [ 2, 4, 8, 16 ]" in deployed
    serving = {"instance_count": 3, "max_batch_size": 8, "preferred_batch_size": [8]}
    text = record_text("", "add", 400, "invoke tune: ...", "2026-01-01T00:00:00+00:00", serving)
    fact = parse_triton_window(text)
    assert fact["configs"] == {"add": serving} and fact["windows"] == {"add": 400}
    on_disk = config_text(deployed, 400, serving)
    tuned = T.model_configs(v, {**facts, "triton.window": fact}, render)["add"]
    assert tuned == on_disk
    assert "count: 3 gpus: [ 0, 1 ]" in tuned and "max_batch_size: 8" in tuned
    assert "preferred_batch_size: [ 8 ]" in tuned and "max_queue_delay_microseconds: 400" in tuned
    # The revision is the same: a provision after tune reloads nothing new and recreates no container.
    from roles.triton.configs import revision_text
    assert revision_text(tuned) == revision_text(deployed)
    # The window controller's step later keeps the configuration in the record.
    stepped = read_record(record_text(text, "add", 450, "p95 3.0 ms <= 50 ms", "2026-01-02T00:00:00+00:00"))
    assert stepped["add"]["window_us"] == 450 and {k: stepped["add"][k] for k in serving} == serving
    # Pins: the entry's instance_count and preferred sizes win, the tuned max_batch_size never exceeds the entry's.
    pinned = {**v, "triton_models": {"add": {**spec, "instance_count": 1, "preferred_batch_size": [2, 4]}}}
    p = T.model_configs(pinned, {**facts, "triton.window": fact}, render)["add"]
    assert "count: 1 gpus" in p and "preferred_batch_size: [ 2, 4 ]" in p and "max_batch_size: 8" in p
    small = {**v, "triton_models": {"add": {**spec, "max_batch_size": 4}}}
    assert "max_batch_size: 4" in T.model_configs(small, {**facts, "triton.window": fact}, render)["add"]
    # A malformed serving entry is the record's error, as a bad window is.
    bad = parse_triton_window('{"add": {"window_us": 400, "instance_count": "3"}}')
    assert bad["configs"] == {} and "malformed serving configuration" in bad["error"]
    # A config the role did not render is never rewritten.
    assert config_text('name: "m"\nmax_queue_delay_microseconds: 5\n', 900, serving) is None


def test_the_bench_plot_labels_only_what_was_measured(tmp_path):
    # Issue 25: two points (1 and 8 in flight) were drawn under ticks 2^0..2^3, and the title named red rings
    # for client-bound points that were not there.
    import matplotlib.pyplot as plt

    from bringup.latency.results import bench_figure, plot_doc

    doc = {"host": "h1", "model": "m", "finished": "2026-01-01T00:00:00+00:00",
           "points": [_pt(10, 300, conc=1), _pt(40, 1200, conc=8)]}
    fig = bench_figure(doc)
    fig.canvas.draw()
    for ax in fig.axes:
        assert list(ax.get_xticks()) == [1, 8]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "8"]
        assert not [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
    assert "red rings" not in fig._suptitle.get_text()
    plt.close(fig)
    doc["points"].append(_pt(5, 9000, conc=64, bound=True))
    fig = bench_figure(doc)
    fig.canvas.draw()
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "8", "64"]
    assert "red rings: client-bound points" in fig._suptitle.get_text()
    plt.close(fig)
    assert plot_doc(doc, tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------- hostile numbers from Triton (the
# controller of tune-window --follow and the host's bringup-window-tuner service): unreadable, one line, no step

def _hostile_interval(t, c, records):
    """One interval whose numbers the test spoiled: run as tune-window --follow and the service run it (one
    line to ``on_error``), then what was said, loaded and recorded."""
    from bringup.latency.window_tuner import run

    said = []
    assert run([c], 0.0, steps=1, sleep=lambda s: None, on_error=lambda m, e: said.append(f"{m}: {e}")) == 1
    assert len(said) == 1 and "\n" not in said[0], said
    assert t.loads == [] and records == []           # no reload, nothing recorded: the window kept
    return said[0]


@pytest.mark.reliability(item=40, fault="Triton's p95 +Inf, 1e308, -1e308, -5 or text (tune-window --follow: the window "
                         "moved and the model reloaded on it)", variants=5, checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("p95, why", [
    ("+Inf", "'+Inf' is not a number"), ("1e308", "'1e308' is out of range (0..3.6e+09)"),
    ("-1e308", "'-1e308' is out of range (0..3.6e+09)"), ("-5", "'-5' is out of range (0..3.6e+09)"),
    ("abc", "'abc' is not a number")])
def test_a_hostile_p95_is_unreadable_and_no_step_is_taken(p95, why):
    t = _Triton()
    c, records = _controller(t)
    t.interval(100, queue_us=300)
    t.p95_us = p95
    assert _hostile_interval(t, c, records) == (
        f"add: Triton's metrics: add's p95 (nv_inference_request_summary_us quantile 0.95, µs) {why}")
    # The controller goes on: its baselines taken afresh, the next interval with readable numbers steps again.
    t.p95_us = 20_000
    assert c.step()["action"] == "none"
    t.interval(100, queue_us=300)
    e = c.step()
    assert (e["old_window_us"], e["new_window_us"]) == (800, 850) and t.loads == [850]


@pytest.mark.reliability(item=40, fault="Triton's request _count NaN, +Inf, text, 1e308, -5 or 1.5 (tune-window "
                         "--follow: a traceback, or 10^308 requests)", variants=6,
                         checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("count, why", [
    ("NaN", "'NaN' is not a number"), ("+Inf", "'+Inf' is not a number"), ("abc", "'abc' is not a number"),
    ("1e308", "'1e308' is out of range (0..1.84467e+19)"), ("-5", "'-5' is out of range (0..1.84467e+19)"),
    ("1.5", "'1.5' is not a whole number")])
def test_a_hostile_request_count_is_unreadable_and_no_step_is_taken(count, why):
    t = _Triton()
    c, records = _controller(t)
    t.interval(100, p95_ms=90, queue_us=300)
    t.count = count
    assert _hostile_interval(t, c, records) == (
        f"add: Triton's metrics: add's request count (nv_inference_request_summary_us_count) {why}")


def test_tritons_own_numbers_still_read():
    from bringup.latency.window_tuner import parse_summary, window_of

    text = (FIXTURES / "metrics-2.51-summary.txt").read_text()
    count = 'nv_inference_request_summary_us_count{model="add",version="1"} '
    assert parse_summary(text.replace(count + "50", count + "18446744073709551615"), "add") == \
        (11790.0, 18446744073709551615)
    assert parse_summary(text.replace("} 11790", "} 1.179e+04"), "add") == (11790.0, 50)
    assert parse_summary(text.replace(count + "50", count + "5e+01"), "add") == (11790.0, 50)
    assert window_of({"dynamic_batching": {}}) == 0 and window_of({"name": "m"}) is None
    assert window_of({"dynamic_batching": {"max_queue_delay_microseconds": "800"}}) == 800  # the gRPC form


@pytest.mark.reliability(item=40, fault="Triton's statistics not a document of model_stats objects ([1], "
                         "{'model_stats': [1]}): an AttributeError traceback", variants=5,
                         checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("doc, why", [
    ([1], "the answer [1] is not a JSON object"),
    ({"model_stats": [1, "x"]}, "model_stats[0] 1 is not a JSON object"),
    ({"model_stats": {"name": "add"}}, "model_stats {'name': 'add'} is not a list"),
    ({"model_stats": [{"name": "add", "inference_stats": [1]}]}, "inference_stats [1] is not a JSON object"),
    ({"model_stats": [{"name": "add", "inference_stats": {"queue": [1]}}]}, "queue [1] is not a JSON object")])
def test_a_statistics_document_of_another_shape_is_one_line(doc, why):
    from bringup.latency.window_tuner import TunerError, stats_counters

    with pytest.raises(TunerError) as e:
        stats_counters(doc, "add")
    assert str(e.value) == f"Triton's statistics of add: {why}"
    t = _Triton()
    c, records = _controller(t)
    t.interval(100, p95_ms=90, queue_us=300)
    t.stats = lambda model: stats_counters(doc, model)
    assert _hostile_interval(t, c, records) == f"add: Triton's statistics of add: {why}"


@pytest.mark.reliability(item=40, fault="Triton's model config with a window of -5, 'abc', 1e308 or 4000 digits, "
                         "or dynamic_batching [1] (tune-window --follow: loaded, or a traceback)", variants=7,
                         checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("config, why", [
    ({"dynamic_batching": {"max_queue_delay_microseconds": -5}}, "-5 is out of range (0..3.6e+09)"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": "abc"}}, "'abc' is not a number"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": 1e308}}, "1e+308 is out of range (0..3.6e+09)"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": int("9" * 4000)}},
     "an integer of about 4000 digits is out of range (0..3.6e+09)"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": 800.5}}, "800.5 is not a whole number"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": True}}, "True is not a number"),
    ({"dynamic_batching": [1]}, "dynamic_batching [1] is not a JSON object")])
def test_a_hostile_window_is_one_line_and_never_loaded(config, why):
    from bringup.latency.window_tuner import TunerError, window_of

    where = "Triton's model config:" + ("" if "dynamic_batching [1]" in why else " max_queue_delay_microseconds")
    with pytest.raises(TunerError) as e:
        window_of(config)
    assert str(e.value) == f"{where} {why}"
    t = _Triton()
    c, records = _controller(t)
    t.interval(100, p95_ms=90, queue_us=300)
    t.config = config
    assert _hostile_interval(t, c, records) == f"add: {where} {why}"
    # Read first (prime): the same line, nothing loaded.
    from bringup.latency.window_tuner import Controller

    api = type("Api", (), {"metrics": lambda s: t.metrics(), "stats": lambda s, m: t.stats(m),
                           "config": lambda s, m: t.config_of(m), "load": lambda s, m, cf: t.load(m, cf)})()
    with pytest.raises(TunerError, match="^Triton's model config"):
        Controller(api, "add", 50).prime()
    assert t.loads == []


def test_a_config_or_index_that_is_no_object_is_one_line():
    from bringup.latency.window_tuner import TunerError, window_of, tunable

    with pytest.raises(TunerError, match=r"^Triton's model config: the answer \[1\] is not a JSON object$"):
        window_of([1])
    api = type("Api", (), {"ready_models": lambda s: __import__("bringup.latency.window_tuner", fromlist=["x"])
                           .ready_of({"a": 1}), "config": lambda s, m: {}})()
    with pytest.raises(TunerError, match=r"^Triton's repository index: the answer \{'a': 1\} is not a list$"):
        tunable(api, [])


def test_triton_json_with_a_key_given_twice_is_refused():
    from bringup.latency.window_tuner import TunerError, loads_bounded

    with pytest.raises(TunerError, match="given twice"):
        loads_bounded(b'{"dynamic_batching": {"max_queue_delay_microseconds": 800, '
                      b'"max_queue_delay_microseconds": -5}}', "config")
    with pytest.raises(TunerError, match="digits"):
        loads_bounded(b'{"v": ' + b"9" * 4000 + b"}", "config")


@pytest.mark.parametrize("value", [0, 5, 2 ** 64 - 1, 2 ** 64, -1, 1.5, 2.0, 1e308, float("nan"), float("inf"),
                                   True, "12", None, [1]])
def test_the_hosts_copy_of_the_guarded_number_reader_agrees_with_bringups(value):
    """window_tuner.py runs on hosts alone (standard library only): its reader of Triton's numbers is a copy of
    bringup.untrusted.number, held to it here."""
    from bringup.latency.window_tuner import TunerError, number as host_number
    from bringup.untrusted import Unreadable, number

    for integer in (False, True):
        try:
            want = ("ok", number(value, lo=0, hi=2 ** 64 - 1, integer=integer, what="x"))
        except Unreadable as e:
            want = ("unreadable", str(e).split(" is ")[-1])
        try:
            got = ("ok", host_number(value, lo=0, hi=2 ** 64 - 1, integer=integer, what="x"))
        except TunerError as e:
            got = ("unreadable", str(e).split(" is ")[-1])   # why, in the same words (the value shown as given)
        assert got == want and type(got[1]) is type(want[1])


def test_follow_says_a_hostile_interval_in_one_line_and_logs_and_plots_only_readable_numbers(tmp_path):
    from bringup.latency.follow import follow
    from bringup.latency.plots import plot_window_log

    t = _Triton()
    api = type("Api", (), {"metrics": lambda s: t.metrics(), "stats": lambda s, m: t.stats(m),
                           "config": lambda s, m: t.config_of(m), "load": lambda s, m, c: t.load(m, c)})()
    said, records = [], []

    def sleep(_s):
        t.interval(100, queue_us=300)
        t.p95_us = "1e308" if len(said) == 1 else 20_000
        if len(said) == 2:
            t.config = {"dynamic_batching": {"max_queue_delay_microseconds": 1e308}}

    log = tmp_path / "w.jsonl"
    assert follow(api, ["add"], 50, 0.0, record=lambda *a: records.append(a), log_path=log, steps=2, seconds=None,
                  say=said.append, sleep=sleep) == 2
    assert said[1:] == [
        "add: interval skipped, window kept: Triton's metrics: add's p95 (nv_inference_request_summary_us quantile 0.95, µs) "
        "'1e308' is out of range (0..3.6e+09)",
        "add: interval skipped, window kept: Triton's model config: max_queue_delay_microseconds 1e+308 is out of range "
        "(0..3.6e+09)"]
    assert t.loads == [] and records == [] and not log.exists()
    e = {"time": "2026-01-01T00:00:00+00:00", "model": "add", "target_p95_ms": 50.0, "p95_ms": 20.0,
         "new_window_us": 850}
    assert plot_window_log([e], tmp_path / "w.png").read_bytes()[:4] == b"\x89PNG"


def test_a_served_window_of_seconds_is_read_and_stepped_back_into_range():
    # A window of seconds is a window Triton serves (a misconfiguration the controller must be able to mend), not
    # an unreadable value: read, then stepped back into WINDOW_MIN..WINDOW_MAX (a review found it skipped forever).
    from bringup.latency.window_tuner import WINDOW_MAX, next_window, window_of

    w = window_of({"dynamic_batching": {"max_queue_delay_microseconds": "2000000"}})
    assert w == 2_000_000
    assert next_window(w, 80.0, 50.0)[0] == WINDOW_MAX

