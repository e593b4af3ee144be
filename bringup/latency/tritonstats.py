"""Triton's own view of a window: its statistics API, read before and after."""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ModelStats", "read_stats", "reload_seen", "counts_agree"]


@dataclass
class ModelStats:
    """Cumulative counters of one model (all versions summed); subtract two for a window."""

    success: int = 0           # requests that succeeded
    fail: int = 0
    inference_count: int = 0   # items (a batch-8 request counts 8)
    execution_count: int = 0   # model executions: batches Triton formed
    queue_ns: int = 0
    compute_input_ns: int = 0
    compute_infer_ns: int = 0
    compute_output_ns: int = 0
    request_ns: int = 0        # success.ns: request time inside Triton

    def __sub__(self, other: "ModelStats") -> "ModelStats":
        return ModelStats(**{k: v - getattr(other, k) for k, v in asdict(self).items()})

    def view(self) -> dict:
        """Per-window derived numbers: the batch Triton formed, queue and compute per request."""
        req = self.success or 0
        per = (lambda ns: round(ns / req / 1e3, 1) if req else None)
        return {
            "requests": self.success, "failed": self.fail, "items": self.inference_count,
            "executions": self.execution_count,
            "avg_batch": round(self.inference_count / self.execution_count, 2) if self.execution_count else None,
            "queue_us": per(self.queue_ns),
            "compute_us": per(self.compute_input_ns + self.compute_infer_ns + self.compute_output_ns),
            "server_us": per(self.request_ns),
        }


#: The largest counter read (Triton's are uint64; the gRPC JSON prints them as text).
COUNTER_MAX = 2 ** 64 - 1


def _count(v: object, what: str) -> int:
    """A counter of Triton's statistics (an ``int``, or its decimal text as the gRPC JSON prints uint64): a
    whole number 0..2^64-1, else :class:`~bringup.errors.BringupError` naming it (NaN, -5, 1e308, 10^400 or
    ``"many"`` is no counter: never subtracted into a window's figures, never a traceback)."""
    from ..errors import BringupError
    from ..untrusted import Unreadable, number, text_number

    try:
        if isinstance(v, str):
            return int(text_number(v, lo=0, hi=COUNTER_MAX, integer=True, what=what))
        return int(number(v, lo=0, hi=COUNTER_MAX, integer=True, what=what))
    except Unreadable as e:
        raise BringupError(f"Triton's statistics are unreadable: {e}") from None


def _n(d: dict, *path) -> int:
    for p in path:
        d = (d if isinstance(d, dict) else {}).get(p, {})
    return _count(d or 0, ".".join(path))


def read_stats(client, model: str) -> ModelStats:
    """The model's counters now, through a sync ``tritonclient.grpc`` client."""
    doc = client.get_inference_statistics(model_name=model, as_json=True)
    s = ModelStats()
    for m in (doc.get("model_stats", []) if isinstance(doc, dict) else []):
        if not isinstance(m, dict) or m.get("name") != model:
            continue
        st = m.get("inference_stats", {})
        s.success += _n(st, "success", "count")
        s.fail += _n(st, "fail", "count")
        s.request_ns += _n(st, "success", "ns")
        s.queue_ns += _n(st, "queue", "ns")
        s.compute_input_ns += _n(st, "compute_input", "ns")
        s.compute_infer_ns += _n(st, "compute_infer", "ns")
        s.compute_output_ns += _n(st, "compute_output", "ns")
        s.inference_count += _count(m.get("inference_count", 0) or 0, "inference_count")
        s.execution_count += _count(m.get("execution_count", 0) or 0, "execution_count")
    return s


def reload_seen(reads: list, answered: int, config_before: dict, config_after: dict) -> str:
    """Why a point spanned a reload of the model ("" when it did not).

    Triton's statistics API restarts a model's counters when the model is reloaded (a new window, another
    configuration, by this tool or by another).  Three signs, any of which is enough: a counter read lower
    than the read before it; fewer successful requests counted over the point than the clients had
    answered (Triton cannot answer a request it does not count); the served configuration differing
    before and after.
    """
    for a, b in zip(reads, reads[1:]):
        if b.success < a.success or b.inference_count < a.inference_count or b.execution_count < a.execution_count:
            return "Triton's statistics restarted (a counter went down)"
    if reads[-1].success - reads[0].success < answered:
        return (f"Triton counted {reads[-1].success - reads[0].success} requests over the point, fewer than the "
                f"{answered} the clients had answered: its statistics restarted")
    if config_before and config_after and config_before != config_after:
        return "the model's configuration changed during the point"
    return ""


def counts_agree(total: ModelStats, answered: tuple[int, int], open_: tuple[int, int]) -> bool:
    """Whether Triton's counters over a point (``total``) match what its clients sent: every request answered
    (``answered``: requests, items) is counted; one still in flight when its deadline passed (``open_``) may be
    counted (Triton answered it after the client gave up) or not yet, so the counts agree within those."""
    return (answered[0] <= total.success <= answered[0] + open_[0]
            and answered[1] <= total.inference_count <= answered[1] + open_[1])
