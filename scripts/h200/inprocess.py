"""The model's own rate in-process, at the batch size Triton formed, beside what the service reached.

    python3 scripts/h200/inprocess.py --bench BENCH.json [--tune TUNE.json] [--concurrency 64] --out OUT.json

Reads the bench result (the sweep with the chosen configuration), takes its point of the chosen configuration
at ``--concurrency`` (batch-1 requests), rounds the batch Triton formed there (its statistics API's average) to
a whole size, and times the same code Triton runs (:class:`resnet50_model.Net`) on this GPU at that size: eager
and replayed as a CUDA graph, compute only (input already on the GPU, nothing copied back), after a warm-up.
Writes the rates and the share of each the service reached, and prints a Markdown table.  Without CUDA it
times the CPU stand-in instead and says so: no number of it is a GPU's.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import resnet50_model as rm  # noqa: E402


def service_point(bench: dict, concurrency: int) -> dict:
    """The deployed (chosen) configuration's point at ``concurrency``, batch 1."""
    pts = [p for p in bench["points"] if p.get("deployed") and p["concurrency"] == concurrency and p["batch"] == 1]
    if not pts:
        raise SystemExit(f"no deployed point at concurrency {concurrency} x batch 1 in the bench result")
    return pts[0]


def time_it(fn, sync, reps: int) -> float:
    for _ in range(max(3, reps // 5)):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t) / reps


def measure(batch: int, max_batch: int, reps: int = 100) -> dict:
    """Seconds per batch of ``batch`` images: eager and graph (GPU), or the stand-in's (no CUDA)."""
    why = rm.cuda_problem()
    if why:
        import numpy as np

        s = rm.StandIn(max_batch)
        x = np.zeros((batch, 3, 224, 224), np.float16)
        dt = time_it(lambda: s.run(x), lambda: None, max(10, reps // 5))
        return {"device": f"CPU stand-in ({why})", "eager_s": dt, "graph_s": dt}
    import torch

    out = {"device": torch.cuda.get_device_name(0)}
    sizes = sorted({batch, max_batch})
    for mode in ("eager", "graph"):
        net = rm.Net(max_batch, 0, mode, sizes=sizes)
        x = net._input(batch)
        if mode == "eager":
            def fn(net=net, x=x):
                with torch.inference_mode():
                    net.model(x)
        else:
            with torch.inference_mode():  # the graph's input is an inference tensor: written only in that mode
                net.static_in[batch].copy_(x)
            fn = net.graphs[batch].replay
        out[f"{mode}_s"] = time_it(fn, torch.cuda.synchronize, reps)
        del net
        torch.cuda.empty_cache()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", required=True, help="the bench result JSON (chosen configuration vs none)")
    p.add_argument("--tune", help="the tune result JSON (for its chosen configuration's label)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    bench = json.loads(Path(a.bench).read_text())
    pt = service_point(bench, a.concurrency)
    formed = (pt.get("triton") or {}).get("avg_batch") or 1.0
    b = max(1, min(a.max_batch, round(formed)))
    m = measure(b, a.max_batch, a.reps)
    service = pt["items_per_s"]
    res = {"device": m["device"], "concurrency": a.concurrency, "service_items_per_s": service,
           "service_p95_ms": pt["p95_ms"], "service_config": pt.get("config"), "triton_avg_batch": formed,
           "batch": b, "eager_ms": round(m["eager_s"] * 1e3, 3), "graph_ms": round(m["graph_s"] * 1e3, 3),
           "eager_items_per_s": round(b / m["eager_s"], 1), "graph_items_per_s": round(b / m["graph_s"], 1)}
    res["share_of_eager"] = round(service / res["eager_items_per_s"], 3)
    res["share_of_graph"] = round(service / res["graph_items_per_s"], 3)
    if a.tune:
        tune = json.loads(Path(a.tune).read_text())
        res["tune_chosen"] = (tune.get("chosen") or {}).get("label")
        res["tune_why"] = tune.get("why")
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"| device | served as | conc | service items/s | p95 ms | Triton batch | in-process batch {b} eager | "
          f"graph | share of eager | share of graph |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {res['device']} | {res['service_config']} | {a.concurrency} | {service:.0f} | {pt['p95_ms']:.1f} | "
          f"{formed:.2f} | {res['eager_ms']:.2f} ms ({res['eager_items_per_s']:.0f}/s) | {res['graph_ms']:.2f} ms "
          f"({res['graph_items_per_s']:.0f}/s) | {res['share_of_eager']:.0%} | {res['share_of_graph']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
