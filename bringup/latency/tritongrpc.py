"""The one client of Triton's gRPC API on the control machine outside the load itself (bench's and tune's first
look, the statistics and configuration read around each point, the model's own configuration loaded back).

A Triton that answers ``is_server_live`` and then nothing (wedged, or hostile) held ``invoke bench`` for ever:
tritonclient's calls wait without end unless given ``client_timeout``, and neither SIGINT nor SIGTERM ended the
wait.  :func:`client` gives every call of the API a deadline (:data:`CALL_S`, unless the caller gives its own)
and caps what one answer may hold (:data:`ANSWER_MAX`: a configuration or statistics answer is kilobytes;
tritonclient's default takes 2 GiB).  A call past its deadline raises tritonclient's own
``InferenceServerException`` ("Deadline Exceeded"), which every caller already handles (a load is given
:data:`LOAD_S`: Triton answers it once the new configuration serves).

:func:`answer` reads one JSON answer's part (``"config"``): an answer without it (an empty message, which
tritonclient's JSON form leaves out) is one line, not a KeyError.
"""
from __future__ import annotations

import inspect
from typing import Any

from ..errors import BringupError, printable

__all__ = ["CALL_S", "ANSWER_MAX", "ANSWER_CEIL", "client", "answer", "answer_bound", "Bounded", "deadline_passed",
           "load_args", "request_error"]

#: Seconds one call of Triton's API (live, ready, index, config, metadata, statistics) may take whole.
CALL_S = 10.0
#: Seconds a load or unload of a model may take unless its caller gives its own (Triton answers once the new
#: configuration serves: a large TensorRT engine takes minutes).
LOAD_S = 600.0
#: The largest answer of one call read (bytes).
ANSWER_MAX = 64 << 20


class Bounded:
    """A ``tritonclient.grpc.InferenceServerClient`` whose every call that takes ``client_timeout`` gets one
    (:data:`CALL_S` when the caller gives none; :data:`LOAD_S` for a load or unload)."""

    def __init__(self, inner: Any, call_s: float | None = None):
        self._inner, self._call_s = inner, CALL_S if call_s is None else call_s

    def __getattr__(self, name: str) -> Any:
        f = getattr(self._inner, name)
        if not callable(f):
            return f
        try:
            timed = "client_timeout" in inspect.signature(f).parameters
        except (TypeError, ValueError):
            timed = False
        if not timed:
            return f

        bound = LOAD_S if name in ("load_model", "unload_model") else self._call_s

        def call(*args: Any, client_timeout: float | None = None, **kwargs: Any) -> Any:
            return f(*args, client_timeout=client_timeout or bound, **kwargs)

        return call


def client(url: str, call_s: float | None = None) -> Bounded:
    """A sync gRPC client of the Triton at ``url`` (``host:port``), its calls bounded in time and size."""
    import tritonclient.grpc as grpcclient

    ka = grpcclient.KeepAliveOptions()  # tritonclient's own, as its default channel has them
    args = [("grpc.max_send_message_length", ANSWER_MAX), ("grpc.max_receive_message_length", ANSWER_MAX),
            ("grpc.keepalive_time_ms", ka.keepalive_time_ms), ("grpc.keepalive_timeout_ms", ka.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", ka.keepalive_permit_without_calls),
            ("grpc.http2.max_pings_without_data", ka.http2_max_pings_without_data)]
    return Bounded(grpcclient.InferenceServerClient(url, channel_args=args), call_s)


def answer(doc: Any, key: str, what: str) -> dict:
    """``doc[key]`` of a JSON answer of Triton's API when it is an object; else BringupError naming ``what``."""
    part = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(part, dict):
        raise BringupError(f"{printable(what)}: Triton's answer has no {key} (an empty or foreign answer)")
    return part


def deadline_passed(e: BaseException) -> bool:
    """Whether ``e`` is a call's own gRPC deadline passing (``DEADLINE_EXCEEDED``), not an answer of Triton's."""
    status = e.status() if callable(getattr(e, "status", None)) else ""
    return "DEADLINE_EXCEEDED" in str(status) or "Deadline Exceeded" in str(e)


#: The most one inference answer of a load may hold where the model's outputs do not say (a dimension of -1, text
#: outputs): real outputs reach hundreds of MiB (segmentation logits [1,150,512,512] fp32: 157 MB); gRPC's own
#: limit is 2 GiB.
ANSWER_CEIL = 1 << 30
_DTYPE_BYTES = {"BOOL": 1, "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "BF16": 2, "INT32": 4,
                "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}


def answer_bound(config: Any) -> int:
    """The bound of one inference answer of the model whose configuration is ``config``: twice what its declared
    outputs hold at its largest batch, and 1 MiB, at least :data:`ANSWER_MAX`; :data:`ANSWER_CEIL` where the
    outputs do not say (a variable dimension, text, no configuration)."""
    outputs = config.get("output") if isinstance(config, dict) else None
    if not isinstance(outputs, list) or not outputs:
        return ANSWER_CEIL
    total = 0
    for out in outputs:
        dims = out.get("dims") if isinstance(out, dict) else None
        size = _DTYPE_BYTES.get(str(out.get("data_type", "")).removeprefix("TYPE_")) if isinstance(out, dict) else None
        if size is None or not isinstance(dims, list) or not all(
                isinstance(d, (int, str)) and str(d).isdigit() and len(str(d)) <= 12 for d in dims):
            return ANSWER_CEIL  # (int64 dims come as text in the JSON form; -1 is a variable one)
        n = size
        for d in dims:
            n *= int(d)
        total += n
    batch = config.get("max_batch_size", 0)
    batch = int(batch) if isinstance(batch, int) and not isinstance(batch, bool) and 0 < batch <= 1 << 20 else 1
    return max(ANSWER_MAX, min(ANSWER_CEIL, 2 * total * batch + (1 << 20)))


def load_args(answer_max: int = ANSWER_MAX) -> list[tuple[str, int]]:
    """The channel of a load's client process (bench, tune): what it sends (its own requests) unbounded, each
    inference answer at most ``answer_max`` bytes.  tritonclient's default was none: a hostile or broken Triton's
    answer of gigabytes was held in every client process; a larger one is refused by gRPC before it is read and
    counts as an error of its point (:func:`request_error` says it)."""
    return [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", int(answer_max))]


def request_error(e: BaseException, answer_max: int = ANSWER_MAX) -> str:
    """One line for a failed request of a load: an answer over the bound said as such, else the exception's own
    words on one line."""
    status = e.status() if callable(getattr(e, "status", None)) else ""
    if "RESOURCE_EXHAUSTED" in str(status) and "larger than max" in str(e):
        return (f"Triton's answer was larger than {answer_max >> 20} MiB (not read: an answer bigger than any "
                "model output of one request)")
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]
