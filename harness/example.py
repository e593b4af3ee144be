"""The sandbox's example Triton service: a CPU model, the Triton TEST DOUBLE image, a latency target.

``invoke sandbox`` ends the way a rack bring-up does: Triton serving a model,
a short benchmark, and the checklist's latency line.  The model is
``example_models/classify`` (Python backend, a fixed cost per batch so that
dynamic batching shows); the image is :func:`harness.triton_image.build_triton_image`'s
CPU build of tritonserver 2.51, pushed into the host's Docker over SSH like
any image on an air-gapped rack.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

MODELS = Path(__file__).resolve().parent / "example_models"

#: ``triton_models`` of the example: 64 FP32 features in, 8 scores out, batches up to 16.
TRITON_MODELS: dict[str, Any] = {"classify": {
    "backend": "python", "max_batch_size": 16, "instance_count": 1, "preferred_batch_size": [4, 8, 16],
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [64]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [8]}],
}}

#: The short benchmark's sweep (``invoke bench`` options): about a minute in all, each point 3 windows (issue 35).
#: The sandbox host is a container of the machine that also runs the client (and, in CI, other jobs): windows
#: agreeing within 25 % count as stable here, not the 10 % an acceptance run on a rack asks.
BENCH = {"batch": "1,4", "concurrency": "1,8", "warmup": 1.0, "duration": 3.0, "processes": 1, "repeats": "3",
         "stability": "25"}


def cpu_split() -> tuple[str, str]:
    """Triton's CPU and the benchmark client's, as the guide separates them: the last CPU serves, the rest load.

    Both run on this machine (the sandbox host is a container of it); on one CPU they share it ("", "").
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return "", ""
    return str(cpus[-1]), ",".join(str(c) for c in cpus[:-1])


def example_vars(image: str, project: Path, triton_cpus: str = "") -> dict[str, Any]:
    """Inventory variables that serve the example model from ``image`` on ``triton_cpus`` (empty: any);
    its files are copied under ``project``."""
    dest = Path(project) / "models"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(MODELS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return {
        "triton_image": image, "image_transfer": "push", "triton_shm_size": "256m",
        "models_dir": str(dest), "triton_models": TRITON_MODELS, "triton_ready_timeout": 120,
        "triton_cpuset": triton_cpus,
        # The guide's target; a 4 ms CPU model meets it easily at the sandbox's load.
        "latency_slo_p95_ms": 50,
    }


def free_ports(n: int) -> list[int]:
    """``n`` TCP ports free on 127.0.0.1 now (held open together while chosen, so they differ)."""
    import socket

    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
