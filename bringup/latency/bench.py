"""``invoke bench``: the acceptance sweep against one host's Triton."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..errors import BringupError, InputError
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
    """A sync client of a live Triton that serves the model, and the model's config.  Each call has a deadline
    (:mod:`.tritongrpc`): a Triton that stops answering after ``is_server_live`` is TritonUnreachable within it;
    an answer that is not one (no config, an input without a shape, an item larger than bench sends) is one
    InputError line."""
    from tritonclient.utils import InferenceServerException

    from .options import MAX_ITEM_ELEMENTS
    from .tritongrpc import CALL_S, answer, client as triton_client, deadline_passed

    where = f"Triton at {target.url} (host {target.host})"
    client = triton_client(target.url)

    def silent(e: Exception) -> TritonUnreachable:
        client.close()
        if deadline_passed(e):
            return TritonUnreachable(f"{where} did not answer within {CALL_S:g} s (wedged, or not Triton)")
        return TritonUnreachable(f"{where}: {exc_text(e)}")

    try:
        live = client.is_server_live()
    except InferenceServerException as e:
        raise silent(e) from None
    if not live:
        client.close()
        raise TritonUnreachable(f"{where} is not live")
    try:
        ready = client.is_model_ready(target.model)
    except InferenceServerException as e:
        if deadline_passed(e):
            raise silent(e) from None
        ready = False
    if not ready:
        try:
            index = client.get_model_repository_index(as_json=True)
        except InferenceServerException as e:
            if deadline_passed(e):
                raise silent(e) from None
            index = {}
        models = index.get("models") if isinstance(index, dict) else None
        names = sorted({str(m.get("name")) for m in models if isinstance(m, dict) and m.get("name")}
                       ) if isinstance(models, list) else []
        client.close()
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        raise InputError(f"model {target.model!r} is not ready on {target.host} ({target.url}); "
                         f"Triton has: {shown or 'no models'}")
    try:
        config = answer(client.get_model_config(target.model, as_json=True), "config",
                        f"model {target.model!r} on {target.host} ({target.url})")
        meta = client.get_model_metadata(target.model, as_json=True) if target.input is None else None
    except InferenceServerException as e:
        raise silent(e) from None
    except BringupError as e:
        client.close()
        raise InputError(str(e)) from None
    from .serving import serving_of

    try:  # the window and serving the sweep labels its points with: read once here, named if unreadable
        serving_of(config)
    except ValueError as e:  # window_tuner.Unreadable is one: a window of 2 s, a config of another shape
        client.close()
        raise InputError(f"model {target.model!r} on {target.host} ({target.url}): {e}") from None
    if target.input is None:
        inputs = meta.get("inputs") if isinstance(meta, dict) else None
        if not inputs or not isinstance(inputs, list):
            client.close()
            raise InputError(f"model {target.model!r} on {target.host} declares no input to send; give --input-name, --input-shape and --dtype")
        first = inputs[0] if isinstance(inputs[0], dict) else {}
        name, datatype, shape = first.get("name"), first.get("datatype"), first.get("shape")
        try:
            # int64 in the JSON form is text; at most 9 dimensions (the batch's and 8), each a whole number
            dims = [int(d) for d in shape] if isinstance(shape, list) and len(shape) <= 9 and all(
                isinstance(d, (int, str)) and str(d).lstrip("-").isdigit() and len(str(d)) <= 20 for d in shape) \
                else None
        except ValueError:
            dims = None
        if not isinstance(name, str) or not name or not isinstance(datatype, str) or dims is None:
            client.close()
            raise InputError(f"model {target.model!r} on {target.host}: Triton's metadata of its first input is "
                             "no name, data type and shape bench can send; give --input-name, --input-shape and "
                             "--dtype")
        if int(config.get("max_batch_size", 0) or 0) > 0:
            dims = dims[1:]
        if any(d < 0 for d in dims):
            client.close()
            raise InputError(f"model {target.model}: input {name} has variable dims {dims}; "
                             "give --input-shape")
        if any(d == 0 for d in dims) or len(dims) > 8 or math.prod(dims) > MAX_ITEM_ELEMENTS:
            client.close()
            raise InputError(f"model {target.model}: input {name} has dims {dims[:8]}: not an item bench sends "
                             f"(each dimension at least 1, at most 8 of them, {MAX_ITEM_ELEMENTS:,} elements); "
                             "give --input-shape")
        target.input = ModelInput(name, datatype, dims)
        try:
            target.input.numpy_dtype  # noqa: B018 - validates
        except InputError:
            client.close()
            raise
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
