"""The batching window of a running Triton: read it, and reload the model with another.

Triton's model control API (``load`` with a config override) swaps the model's
configuration in place: the new version is loaded beside the old one, which
serves until the swap, so no request is dropped.  Triton allows it only when
started with ``--model-control-mode=explicit``.
"""
from __future__ import annotations

import json
import time

from ..errors import BringupError
from .window_tuner import window_of, with_window

__all__ = ["current_config", "window_of", "with_window", "load_config", "WindowError"]


class WindowError(BringupError):
    """Triton refused the config override (not in explicit mode, or a bad config)."""


def current_config(client, model: str) -> dict:
    """The model's configuration as Triton serves it (JSON form)."""
    from .tritongrpc import answer

    return answer(client.get_model_config(model, as_json=True), "config", f"model {model!r}")


def load_config(client, model: str, config: dict, timeout: float | None = None) -> None:
    """Reload ``model`` with ``config`` and wait until it is ready, ``timeout`` seconds in all (default
    :data:`~bringup.latency.tritongrpc.LOAD_S`): the load's own gRPC deadline is that bound, so a model that
    loads for minutes (a large TensorRT engine) is waited for, and one that takes longer is said as not loaded
    within it, never as refused."""
    from tritonclient.utils import InferenceServerException

    from .tritongrpc import LOAD_S, deadline_passed

    timeout = LOAD_S if timeout is None else timeout
    deadline = time.monotonic() + timeout
    try:
        client.load_model(model, config=json.dumps(config), client_timeout=timeout)
    except InferenceServerException as e:
        msg = str(e.message() if hasattr(e, "message") else e).strip()
        if deadline_passed(e):
            raise WindowError(f"{model} not loaded within {timeout:.0f} s (Triton may still be loading it)") \
                from None
        hint = " (start Triton with --model-control-mode=explicit)" if "explicit" in msg or "not allowed" in msg \
            else ""
        raise WindowError(f"Triton refused to reload {model} with a new batching window: {msg}{hint}") from None
    while not client.is_model_ready(model):
        if time.monotonic() > deadline:
            raise WindowError(f"{model} not ready {timeout:.0f} s after reloading it")
        time.sleep(0.2)
