"""scripts/h200-tune.sh end to end on this machine (no GPU): the plumbing of the H200 proof.

The script serves ``scripts/h200/resnet50_model.py`` from the pytriton wheel's tritonserver; without CUDA the
model falls back to its CPU stand-in and the script says so.  Checked: every file the device run brings back,
that ``invoke tune`` ran its stages and left its choice serving (the bench's "deployed" points are labelled
with it), that the bench compared it against no dynamic batching, that the in-process measurement used the
batch size Triton formed and computed the service's share from the same numbers, and the checklist line.
No speed is asserted.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO, free_ports
from .local_triton_fixture import require_local_triton

pytestmark = pytest.mark.integration


def test_the_h200_tune_script_runs_whole_on_the_cpu_stand_in(tmp_path):
    lt = require_local_triton()
    out, work = tmp_path / "out", tmp_path / "work"
    http, grpc, metrics = free_ports(3)
    env = {**os.environ, "OUT": str(out), "WORK": str(work), "SKIP_PIP": "1", "QUICK": "1",
           "TRITON_TREE": str(lt.server_root()), "HTTP_PORT": str(http), "GRPC_PORT": str(grpc),
           "METRICS_PORT": str(metrics), "STUB_PY": lt.PY, "PATH": f"{Path(sys.executable).parent}:"
           + os.environ.get("PATH", "")}
    cp = subprocess.run(["bash", "scripts/h200-tune.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=480)
    log = (out / "run.log").read_text() if (out / "run.log").exists() else cp.stdout
    assert cp.returncode == 0, log[-4000:] + cp.stderr[-2000:]
    # The files a device run brings back (8 at most), and the fallback said.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["run.log", "tune.json", "tune.png", "tune.csv", "bench.json", "bench.png", "inprocess.json",
         "h200-latency.md"])
    assert "NO GPU HERE" in log and "not a GPU's" in log
    # invoke tune: its stages ran through the model control API and its verdict is the exit status it gave.
    tune = json.loads((out / "tune.json").read_text())
    assert tune["kind"] == "bringup-tune" and tune["target_p95_ms"] == 30
    assert {p["stage"] for p in tune["points"]} >= {1} and len(tune["points"]) >= 2
    assert {p["tried_serving"]["instance_count"] for p in tune["points"]} >= {1, 2} or tune["search"]["stopped"]
    rc = 0 if tune["chosen"] else 2
    assert f"tune exit {rc}" in log
    # The bench: no dynamic batching against the configuration serving after tune (its choice, when it made one).
    bench = json.loads((out / "bench.json").read_text())
    windows = {p["window_us"] is None for p in bench["points"]}
    assert windows == {True, False}
    deployed = [p for p in bench["points"] if p["deployed"]]
    assert deployed and all(p["counts_agree"] for p in bench["points"])
    if tune["chosen"]:
        assert {p["config"] for p in deployed} == {tune["chosen"]["label"]}
        rec = json.loads((work / "bringup" / "triton-window.json").read_text())["resnet50"]
        assert rec["instance_count"] == tune["chosen"]["instance_count"]
    # In-process: the stand-in (said), at the batch Triton formed at the tuned concurrency, the share computed.
    ip = json.loads((out / "inprocess.json").read_text())
    assert ip["device"].startswith("CPU stand-in")
    point = next(p for p in deployed if p["concurrency"] == ip["concurrency"])
    assert ip["batch"] == max(1, min(16, round(point["triton"]["avg_batch"])))
    assert ip["service_items_per_s"] == point["items_per_s"]
    assert ip["share_of_eager"] == round(ip["service_items_per_s"] / ip["eager_items_per_s"], 3)
    # Every point of both rests on repeated windows: median and spread (issue 35), and the chosen configuration
    # was measured again.
    for p in tune["points"] + bench["points"]:
        assert p["spread"]["repeats"] == 3 and p["spread"]["p95_ms"]["min"] <= p["p95_ms"] <= p["spread"]["p95_ms"]["max"]
    if tune["chosen"]:
        assert tune["final"]["stage"] == "final" and tune["chosen"]["p95_ms"] == tune["final"]["p95_ms"]
    # The Markdown block for the example page: the checklist found the bench result in the --out folder, and
    # the tables carry the spread.
    md = (out / "h200-latency.md").read_text()
    assert "latency acceptance (p95)" in md and "not measured" not in md
    assert "p95 ms median (min-max)" in md and "| windows |" in md and md in log


def test_the_model_falls_back_to_its_cpu_stand_in_and_pads_to_a_captured_size():
    sys.path.insert(0, str(REPO / "scripts" / "h200"))
    try:
        import resnet50_model as rm
    finally:
        sys.path.pop(0)
    import numpy as np

    if rm.cuda_problem() is None:
        pytest.skip("CUDA is here: the fallback is not what runs")
    net = rm.build(16)
    assert isinstance(net, rm.StandIn) and net.why
    y = net.run([np.zeros((3, 3, 224, 224), np.float16), np.zeros((1, 3, 224, 224), np.float16)])
    assert y.shape == (4, 1000) and y.dtype == np.float16
    # The graph path's choice of a captured size (no GPU needed for the rule itself).
    g = rm.Net.__new__(rm.Net)
    g.sizes, g.max_batch = [1, 2, 4, 8, 16], 16
    assert [g.size_for(n) for n in (1, 3, 5, 16)] == [1, 4, 8, 16]
    with pytest.raises(ValueError, match="above max_batch_size 16"):
        g.size_for(17)
