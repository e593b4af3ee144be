"""What ``invoke bench``, ``tune-window`` and ``tune`` share: their flags' help, the flags read and checked into
the bench's options (each bad value one ``error:`` line naming its flag), the inventory host resolved to a Triton
target, and how the three end early.  Cut from bringup/tasks/latency.py (issue 43 item 2): the tasks' input apart
from what each task does; not a task itself, so the rule "a task never imports another task" holds.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import BringupError, InputError
from ..ssh.stop import Interrupted, Stop
from .context import VAULT, fail, interrupted, options, prepared, unreachable

__all__ = ["STOPPING", "FOLLOW_STOPPING", "HELP", "REPEAT_FLAGS", "FLAGS", "ending", "given", "window_list",
           "client_flags", "repeat_flags", "load_lists", "address_flag", "port_flag", "resolve_target", "target_goal"]

#: What the first SIGINT/SIGTERM stops in these tasks (a second abandons loading the model's own
#: configuration back, when Triton does not answer).
STOPPING = ("the point in flight is dropped and its client processes killed, the model's own configuration "
            "is loaded back ({name} again abandons that)")
#: The same for ``tune-window --follow``, whose steps are recorded as they are taken.
FOLLOW_STOPPING = "the interval in progress finishes (a window it loads is recorded), no other starts"

HELP = {
    **options("inventory", "set", *VAULT),
    "host": "one host of the inventory (its ansible_host and triton_ports.grpc are used)",
    "model": "model to load (default: the only one of triton_models)",
    "batch": "request batch sizes, comma separated (default the guide's 1,2,4,8)",
    "concurrency": "requests in flight, comma separated (default 1,4,16,64)",
    "window-us": "batching windows to sweep by reloading the model: 'deployed', 'none' (no dynamic "
                 "batching) or µs, comma separated; needs Triton in explicit model-control mode",
    "warmup": "seconds of warm-up per point (default 2)",
    "duration": "seconds of the steady window per point (default 5)",
    "processes": "client processes (default: min(8, CPUs))",
    "client-cpus": "CPUs the client processes may run on, e.g. 0,1 or 0-3 (default: all)",
    "cpu-limit": "share of a core at which a client event loop counts as saturated (default 0.85)",
    "microbatch-us": "client micro-batching window in µs (1..1000); off by default",
    "microbatch-max": "client micro-batch rows at most (default 8)",
    "address": "Triton's address instead of the host's ansible_host",
    "grpc-port": "Triton's gRPC port instead of triton_ports.grpc",
    "input-name": "input tensor name (for a model outside triton_models)",
    "input-shape": "one item's dims, e.g. 3,224,224",
    "dtype": "input data type (FP16, FP32, TYPE_FP16, ...)",
    "out": "folder for JSON, CSV and PNG (default reports/bench; the checklist finds results in any folder)",
    "no-plot": "skip the PNG",
    "repeats": "steady windows per point that must agree; the point reports their median and spread "
               "(default 3, for acceptance runs; 1: one window, no spread)",
    "stability": "% within which those windows' p95 and items/s must agree, (max-min)/median, else the point "
                 "is unstable (default 10, perf_analyzer's)",
    "max-windows": "windows per point at most while they do not agree: the time bound (default 0: twice "
                   "--repeats)",
}
REPEAT_FLAGS = ("repeats", "stability", "max-windows")

#: pydantic field -> the flag that set it, for one-line refusals.
FLAGS = {"batches": "--batch", "concurrency": "--concurrency", "windows": "--window-us", "warmup_s": "--warmup",
          "duration_s": "--duration", "processes": "--processes", "client_cpus": "--client-cpus",
          "cpu_limit": "--cpu-limit", "microbatch_us": "--microbatch-us", "microbatch_max": "--microbatch-max",
          "interval_s": "--interval", "steps": "--steps", "seconds": "--for", "http_port": "--http-port",
          "metrics_port": "--metrics-port", "target_p95_ms": "--target-p95-ms", "budget_s": "--budget",
          "instances": "--instances", "max_batches": "--max-batch", "repeats": "--repeats",
          "stability_pct": "--stability", "max_windows": "--max-windows"}


@contextmanager
def ending(stop: Stop):
    """How bench and tune-window end early, each in one line: a signal (its exit code, 130 or 143), Triton
    out of reach (4), bad input or a failure (1)."""
    from ..latency.bench import TritonUnreachable

    try:
        yield
    except Interrupted as e:
        raise interrupted(stop, e) from None
    except TritonUnreachable as e:
        raise unreachable(e) from None
    except BringupError as e:
        raise fail(e) from None


def given(v) -> bool:
    return v is not None and str(v).strip() != ""


def window_list(text, flag: str = "--window-us") -> list:
    """``deployed``, ``none``/``off`` or µs 0..1500, comma separated."""
    from ..latency.options import quoted, whole

    out: list = []
    for t in [t.strip() for t in str(text).split(",")]:
        if t.lower() == "deployed":
            out.append("deployed")
        elif t.lower() in ("none", "off"):
            out.append(None)
        else:
            try:
                out.append(whole(t, flag, 0, 1500))
            except InputError:
                raise InputError(f"{flag} {quoted(text)}: {quoted(t)} is not 'deployed', 'none' or whole µs within 0..1500") \
                    from None
    return list(dict.fromkeys(out))


def client_flags(warmup, duration, processes, client_cpus, cpu_limit) -> dict:
    from ..latency.options import MAX_PROCESSES, cpus, number, whole

    return {"warmup_s": number(warmup, "--warmup"), "duration_s": number(duration, "--duration"),
            "processes": whole(processes, "--processes", 0, MAX_PROCESSES),
            "client_cpus": cpus(client_cpus) if given(client_cpus) else None,
            "cpu_limit": number(cpu_limit, "--cpu-limit")}


def repeat_flags(repeats, stability, max_windows) -> dict:
    """``--repeats``, ``--stability`` and ``--max-windows``, checked together."""
    from ..latency.options import RepeatOptions, number, read, whole

    return read(RepeatOptions, FLAGS, repeats=whole(repeats, "--repeats", 1, 100),
                stability_pct=number(stability, "--stability", lo=0, lo_open=True, hi=1000, unit="%"),
                max_windows=whole(max_windows, "--max-windows", 0, 1000)).model_dump()


def load_lists(batch, concurrency) -> dict:
    from ..latency.options import MAX_BATCH, MAX_CONCURRENCY, whole_list

    return {"batches": whole_list(batch, "--batch", 1, MAX_BATCH),
            "concurrency": whole_list(concurrency, "--concurrency", 1, MAX_CONCURRENCY)}


def address_flag(address):
    if not given(address):
        return None
    from ..inventory.addresses import address_problem
    from ..errors import printable

    a = str(address).strip()
    if a.startswith("[") and a.endswith("]"):  # [::1], as in a URL: the address inside
        a = a[1:-1]
    why = address_problem(a) if a.isprintable() and len(a) <= 255 else "not a host name or IP address"
    if why:
        # The value as data: escaped (a byte that was not UTF-8, a newline), never a second line of output.
        raise InputError(f"--address '{printable(a)}': {why}")
    return a


def port_flag(v, flag: str):
    from ..latency.options import whole

    return whole(v, flag, 1, 65535) if given(v) else None


def resolve_target(inventory, set_, vault, host, hv_model, address, grpc_port, routes=None, **inp):
    """The host, its Triton variables and the target; ``routes``: the run's (:class:`~bringup.ssh.sshconfig.Routes`),
    which keeps the host's route for its connection."""
    from ..latency.target import resolve

    _, chosen, _, _, role_vars = prepared(inventory, set_, host, None, None, "triton", vault=vault, routes=routes)
    hv = role_vars[chosen[0].name]
    return chosen[0], hv, resolve(chosen[0], hv, model=hv_model, address=address, grpc_port=grpc_port, **inp)


def target_goal(target_p95_ms, target) -> float:
    from ..latency.options import number

    goal = target_p95_ms if given(target_p95_ms) else target.slo_p95_ms
    if goal is None:
        raise InputError("give --target-p95-ms or set latency_slo_p95_ms in the inventory")
    return number(goal, "--target-p95-ms" if given(target_p95_ms) else "latency_slo_p95_ms", lo=0, lo_open=True,
                  hi=3_600_000, unit="ms")
