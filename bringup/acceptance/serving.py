"""Whether a host is busy serving: ``invoke accept`` refuses to load GPUs that Triton is serving requests on.

Two reads on the host, three seconds apart, of Triton's metrics (``triton_ports.metrics``, ``/metrics``):
``nv_inference_request_success`` (every model and version summed) rising, or requests waiting in its queues
(``nv_inference_pending_request_count``), means requests are being served; an idle Triton beside another
program computing on the GPUs refuses too.
Where the metrics port does not answer, the GPUs' compute processes (``nvidia-smi --query-compute-apps``)
decide: a process on a GPU (Triton whose metrics are off, or another job) is a load the acceptance run would
share the GPUs with.  Pure: the texts in, the reason to refuse (or None) out.
"""
from __future__ import annotations

__all__ = ["METRIC", "PENDING", "TRITON_PROCESSES", "UNREACHABLE", "request_count", "compute_apps", "refusal"]

METRIC = "nv_inference_request_success"
#: Requests waiting in Triton's queues now (a slow trickle shows here before the success count rises).
PENDING = "nv_inference_pending_request_count"
#: Triton's own processes on a GPU: its server and its Python backend's stubs.
TRITON_PROCESSES = ("tritonserver", "triton_python_backend_stub")
#: What the host's read prints instead of the metrics text when the port does not answer.
UNREACHABLE = "# bringup: unreachable"


#: The largest request count read (2^63: a 64-bit counter); NaN, +Inf, -5 or 1e308 is no count Triton keeps.
COUNT_MAX = float(2 ** 63)


def _samples(text: str, metric: str) -> list[float] | None:
    """``metric``'s (or ``metric_total``'s) values in a Prometheus text; None when the text is not Triton's metrics
    (unreachable, not Prometheus text).  :class:`bringup.untrusted.Unreadable` where a value is no count (NaN,
    +Inf, negative, absurdly large) or a series is printed twice (one name and label set: a double-scraped or
    doubled text, whose sum doubles its count and whose rise is no request served)."""
    from prometheus_client.parser import text_string_to_metric_families

    from ..untrusted import Unreadable, number

    if not text.strip() or text.startswith(UNREACHABLE):
        return None
    seen: set = set()
    values = []
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name not in (metric, metric + "_total"):
                    continue
                series = (metric, tuple(sorted(s.labels.items())))
                if series in seen:
                    shown = ",".join(f"{k}={v!r}" for k, v in series[1])
                    raise Unreadable(f"{metric}{{{shown[:80]}}} printed twice")
                seen.add(series)
                values.append(float(number(s.value, lo=0, hi=COUNT_MAX, what=metric)))
    except Unreadable:
        raise  # a ValueError too: not "no metrics text"
    except (ValueError, TypeError, IndexError):
        return None
    return values


def request_count(text: str, metric: str = METRIC) -> float | None:
    """The sum of ``metric`` (``nv_inference_request_success``) in a Prometheus text; None when the text is not
    Triton's metrics (unreachable, not Prometheus text, no such family) or a value is no count (NaN, +Inf,
    negative, absurdly large, a series twice: never read as "idle")."""
    from ..untrusted import Unreadable

    try:
        values = _samples(text, metric)
    except Unreadable:
        return None
    return float(sum(values)) if values else None


def unreadable_count(text: str, metric: str = METRIC) -> str | None:
    """Why ``metric``'s samples in ``text`` are no counts (NaN, +Inf, negative, absurdly large, a series printed
    twice), or None (no such sample, not Prometheus text, or every value a count)."""
    from ..untrusted import Unreadable

    try:
        _samples(text, metric)
    except Unreadable as e:
        return str(e)
    return None


def compute_apps(text: str) -> list[tuple[str, str]]:
    """``nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader`` → ``[(pid, name)]``."""
    out = []
    for ln in text.splitlines():
        cells = [c.strip() for c in ln.split(",")]
        if len(cells) >= 2 and cells[0].isdigit():
            out.append((cells[0], cells[1]))
    return out


def refusal(first: str, second: str, apps: str, port: int, window_s: float) -> str | None:
    """Why the host must not be loaded now (one clause, the caller adds the host and ``--force``), or None."""
    a, b = request_count(first), request_count(second)
    procs = compute_apps(apps)
    if a is not None and b is not None:
        if b > a:
            return (f"Triton is serving requests ({METRIC} rose by {b - a:g} in {window_s:g} s on its metrics port "
                    f"{port})")
        if b < a:
            # A counter only rises: one that fell (Triton restarted between the reads, or a read that is not the
            # other's) tells nothing of the requests served in between, never "idle".
            return _no_counts(port, f"{METRIC} fell from {a:g} to {b:g} in {window_s:g} s: a restart between the "
                                    "reads, or a read not Triton's")
        bad = unreadable_count(second, PENDING)
        if bad:  # NaN, +Inf, -3 or 1e308 queued read as "nothing queued": the GPUs were loaded
            return _no_counts(port, bad)
        pending = request_count(second, PENDING)
        if pending:
            return f"Triton holds {pending:g} request(s) in its queues ({PENDING} on its metrics port {port})"
        others = [(p, n) for p, n in procs if not any(t in n for t in TRITON_PROCESSES)]
        if others:
            # Triton is idle, but another program computes on the GPUs: the load would slow it, and it the figures.
            names = ", ".join(f"{n} (pid {p})" for p, n in others[:5]) + (" …" if len(others) > 5 else "")
            return f"the GPUs are in use by {names}, beside an idle Triton"
        return None  # Triton answers and serves nothing: idle, the load disturbs no one
    bad = unreadable_count(first) or unreadable_count(second) or unreadable_count(second, PENDING)
    if bad:
        # The port answered, with values no Triton counts: whether it serves cannot be told, so nothing is loaded.
        return _no_counts(port, bad)
    if procs:
        names = ", ".join(f"{n} (pid {p})" for p, n in procs[:5]) + (" …" if len(procs) > 5 else "")
        return (f"the GPUs are in use by {names} and Triton's metrics port {port} did not answer, so whether "
                "requests are being served cannot be told")
    return None


def _no_counts(port: int, bad: str) -> str:
    return (f"Triton's metrics port {port} answered values that are no counts ({bad}), so whether requests are being "
            "served cannot be told")
