"""``invoke bench``: the acceptance sweep against one host's Triton."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..errors import InputError
from .override import TritonUnreachable, exc_text
from .target import ModelInput, Target

__all__ = ["BenchSettings", "TritonUnreachable", "check_server", "run_sweep", "measure_point", "REWARM_S"]

#: Warm-up of a point's windows after its first: the server, the channels and the clients are warm already;
#: only the closed loop is started again.
REWARM_S = 1.0


@dataclass
class BenchSettings:
    batches: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    windows: list = field(default_factory=lambda: ["deployed"])   # "deployed", None or µs
    warmup_s: float = 2.0
    duration_s: float = 5.0
    processes: int = 0            # 0: min(8, CPUs)
    client_cpus: list[int] | None = None
    cpu_limit: float = 0.85
    microbatch_us: int | None = None
    microbatch_max: int = 8
    repeats: int = 3              # windows that must agree (bringup.latency.repeats)
    stability_pct: float = 10.0
    max_windows: int = 0          # 0: 2 x repeats

    def rule(self):
        from .repeats import Rule

        return Rule(self.repeats, self.stability_pct, self.max_windows)

    def resolved_processes(self) -> int:
        if self.processes:
            return self.processes
        n = len(self.client_cpus) if self.client_cpus else len(os.sched_getaffinity(0))
        return max(1, min(8, n))


def check_server(target: Target) -> tuple[object, dict]:
    """A sync client of a live Triton that serves the model, and the model's config."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(target.url)
    try:
        live = client.is_server_live(client_timeout=10)
    except InferenceServerException as e:
        client.close()
        raise TritonUnreachable(f"Triton at {target.url} (host {target.host}): {exc_text(e)}") from None
    if not live:
        client.close()
        raise TritonUnreachable(f"Triton at {target.url} (host {target.host}) is not live")
    try:
        ready = client.is_model_ready(target.model)
    except InferenceServerException:
        ready = False
    if not ready:
        try:
            names = sorted(m["name"] for m in client.get_model_repository_index(as_json=True).get("models", []))
        except InferenceServerException:
            names = []
        client.close()
        raise InputError(f"model {target.model!r} is not ready on {target.host} ({target.url}); "
                         f"Triton has: {', '.join(names) or 'no models'}")
    config = client.get_model_config(target.model, as_json=True)["config"]
    from .serving import serving_of

    try:  # the window and serving the sweep labels its points with: read once here, named if unreadable
        serving_of(config)
    except ValueError as e:  # window_tuner.Unreadable is one: a window of 2 s, a config of another shape
        client.close()
        raise InputError(f"model {target.model!r} on {target.host} ({target.url}): {e}") from None
    if target.input is None:
        meta = client.get_model_metadata(target.model, as_json=True)
        if not meta.get("inputs"):
            client.close()
            raise InputError(f"model {target.model!r} on {target.host} declares no input to send; give --input-name, --input-shape and --dtype")
        first = meta["inputs"][0]
        dims = [int(d) for d in first["shape"]]
        if int(config.get("max_batch_size", 0) or 0) > 0:
            dims = dims[1:]
        if any(d < 0 for d in dims):
            client.close()
            raise InputError(f"model {target.model}: input {first['name']} has variable dims {dims}; "
                             "give --input-shape")
        target.input = ModelInput(first["name"], first["datatype"], dims)
        target.input.numpy_dtype  # noqa: B018 - validates
    if target.max_batch_size is None:
        target.max_batch_size = int(config.get("max_batch_size", 0) or 0)
    return client, config


def measure_point(lg, point, rule, *, window_us, deployed: bool, on_window=None) -> dict:
    """One point of a sweep or a search: windows repeated by ``rule`` (:mod:`.repeats`), their median row with
    its spread, and what else loaded the machine meanwhile (:mod:`.hostload`)."""
    from .hostload import Watch
    from .repeats import combine, measure
    from .results import point_row

    watch = Watch()
    watch.start()

    def window(i: int) -> dict:
        res = lg.run(point, warmup_s=None if i == 0 else min(lg.warmup_s, REWARM_S))
        return point_row(res, window_us=window_us, deployed=deployed)

    try:
        windows = measure(window, rule, on_window)
    except BaseException:
        watch.stop()          # its nvidia-smi reads end with the point, whatever ended it
        raise
    row = combine(windows, rule)
    row["host_load"] = watch.stop(client_cpu=sum(row.get("client_cpu") or []))
    return row


def run_sweep(target: Target, s: BenchSettings, on_point=None, stop=None, trial=None) -> dict:
    """Every (window, batch, concurrency) point; the model's own config is restored afterwards.

    ``stop`` (a :class:`bringup.ssh.stop.Stop`): once a signal asked it, the point in flight is dropped, the
    model's own configuration is loaded back, and :class:`~bringup.ssh.stop.Interrupted` says so in one line.
    ``trial``: ``trial(config)`` gives the sweep's :class:`~.trial.TrialMark` (see :func:`.tune.run_tune`).
    """
    from .loadgen import LoadGenerator, Point
    from .override import Override
    from .results import build_doc
    from .window import window_of, with_window

    if stop is not None:
        stop.check("before Triton was contacted")
    client, config = check_server(target)
    mbs = target.max_batch_size or 0
    biggest = max(s.batches) if not s.microbatch_us else max(max(s.batches), s.microbatch_max)
    if mbs and biggest > mbs:
        client.close()
        raise InputError(f"request batch {biggest} is above {target.model}'s max_batch_size {mbs}")
    if not mbs and biggest > 1:
        client.close()
        raise InputError(f"{target.model} does not batch (max_batch_size 0): use --batch 1")
    if s.microbatch_us and s.microbatch_max < max(s.batches):
        client.close()
        raise InputError(f"--microbatch-max {s.microbatch_max} is below the request batch {max(s.batches)}")
    deployed_window = window_of(config)
    started = datetime.now(timezone.utc)
    rows: list[dict] = []
    inp = target.input
    with Override(client, target, config, stop, what="the sweep", unit="point(s)", measured=lambda: len(rows),
                  unsaved="no report written", trial=trial(config) if trial is not None else None) as served, \
            LoadGenerator(target.url, target.model, inp.name, inp.datatype, inp.dims, inp.numpy_dtype,
                          processes=s.resolved_processes(), warmup_s=s.warmup_s, duration_s=s.duration_s,
                          cpus=s.client_cpus, cpu_limit=s.cpu_limit, stop=stop) as lg:
        for w in s.windows:
            deployed = w == "deployed"
            if not deployed:
                served.load(with_window(config, w), f"the window {w} µs")
            elif served.serving is not None:
                served.load(config, None)
            window_us = deployed_window if deployed else w
            for b in s.batches:
                for c in s.concurrency:
                    row = measure_point(lg, Point(b, c, w, s.microbatch_us, s.microbatch_max), s.rule(),
                                        window_us=window_us, deployed=deployed)
                    rows.append(row)
                    if on_point:
                        on_point(row)
        lg.close()
        if served.serving is not None:
            served.load(config, None)
    settings = {"batches": s.batches, "concurrency": s.concurrency,
                "windows": [("deployed" if w == "deployed" else w) for w in s.windows],
                "deployed_window_us": deployed_window, "warmup_s": s.warmup_s, "duration_s": s.duration_s,
                "processes": s.resolved_processes(), "client_cpus": s.client_cpus, "cpu_limit": s.cpu_limit,
                "microbatch_us": s.microbatch_us, "microbatch_max": s.microbatch_max if s.microbatch_us else None,
                "repeats": s.repeats, "stability_pct": s.stability_pct, "max_windows": s.rule().most}
    return build_doc(target, settings, rows, started, datetime.now(timezone.utc))
