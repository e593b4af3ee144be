"""Triton facts: the batching window the host's window tuner recorded."""
from __future__ import annotations

from typing import Any

from ..ssh.command import sh
from ..latency.window_tuner import RECORD as WINDOW_RECORD
from .helpers import json_object
from .base import Fact

__all__ = ["TritonWindow", "parse_triton_window", "WINDOW_RECORD"]

# WINDOW_RECORD is written by the window tuner (on the host, or through ``tune-window --follow``) and read
# here by the triton role, so that a provision keeps the tuned window.


#: The longest batching window read from the record, in microseconds (Triton's max_queue_delay_microseconds; a
#: window of a minute is no latency tuning), and the largest instance count or batch size (Triton's int32).
WINDOW_MAX_US = 60_000_000
SERVED_MAX = 2**31 - 1


def parse_triton_window(output: str) -> dict[str, Any] | None:
    """The record ``{model: {window_us, when, why, [instance_count, max_batch_size, preferred_batch_size]}}`` →
    ``{"windows": {model: window_us}, "configs": {model: {the serving keys recorded}}, "error": None}``.

    No file (empty output) is None: nothing was tuned.  A file that is not
    such a record gives no windows and ``error``, one line saying what is
    wrong; the triton role refuses to guess from it (parsers never raise: one
    odd file must not cost the other facts).
    """
    if not output.strip():
        return None
    if output.startswith(_NOT_A_FILE):
        return {"windows": {}, "configs": {}, "error": f"{WINDOW_RECORD} is {output[len(_NOT_A_FILE):].strip()}, "
                                                       "not the tuner's record (a JSON file)"}
    doc, error = json_object(output)
    if doc is None:
        return {"windows": {}, "configs": {}, "error": f"{WINDOW_RECORD} is not JSON ({error})"
                if error != "not a JSON object" else
                f"{WINDOW_RECORD} is not a JSON object of model -> {{window_us, ...}}"}
    out: dict[str, int] = {}
    configs: dict[str, dict] = {}
    for model, rec in doc.items():
        w = rec.get("window_us") if isinstance(rec, dict) else None
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= WINDOW_MAX_US:
            return {"windows": {}, "configs": {},
                    "error": f"{WINDOW_RECORD}: model {model!r} has no whole window_us ({w!r})"}
        out[str(model)] = w
        # What `invoke tune` chose beside the window: instances per GPU, max_batch_size, preferred sizes.
        served = {k: rec[k] for k in ("instance_count", "max_batch_size", "preferred_batch_size") if k in rec}
        whole = (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= SERVED_MAX)
        if not all(whole(served[k]) for k in ("instance_count", "max_batch_size") if k in served) or (
                "preferred_batch_size" in served and not (isinstance(served["preferred_batch_size"], list)
                                                          and all(whole(p) for p in served["preferred_batch_size"]))):
            return {"windows": {}, "configs": {},
                    "error": f"{WINDOW_RECORD}: model {model!r} has a malformed serving configuration ({served!r})"}
        if served:
            configs[str(model)] = served
    return {"windows": out, "configs": configs, "error": None}


#: What the command prints instead of the record when its path is a folder or another file that is not a
#: regular one (a FIFO would hold ``cat`` forever): named, not read as "nothing tuned".
_NOT_A_FILE = "bringup-record-not-a-file:"


class TritonWindow(Fact):
    name = "triton.window"
    command = sh(f"if [ -f %s ]; then cat -- %s; elif [ -d %s ]; then echo '{_NOT_A_FILE} a folder'; "
                 f"elif [ -e %s ]; then echo '{_NOT_A_FILE} not a regular file'; fi",
                 *[WINDOW_RECORD] * 4)
    process = staticmethod(parse_triton_window)
