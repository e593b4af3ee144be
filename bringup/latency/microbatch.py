"""Client micro-batching: the guide's ``client_microbatch.py``, done right.

Callers ``await batcher.infer(x)`` with their own request (``x`` has the batch
dimension first, usually 1 row).  Requests arriving within ``window_us`` of the
first pending one are stacked into one Triton request of at most ``max_batch``
rows; each caller gets its own rows of every output back through its own
future.  An idle batcher therefore adds at most its window to a lone request,
and a full batch goes out at once without waiting for the window.

Everything runs on the caller's asyncio loop with ``tritonclient.grpc.aio``:
no threads, no global queue.  Latency is recorded per request (submit ->
result) and per batch (rows, requests, wait in the window, round trip).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from .tritongrpc import deadline_passed

__all__ = ["MicroBatcher", "BatchRecord", "MAX_WINDOW_US"]

#: The guide's rule: the client window stays at or below 1 ms.
MAX_WINDOW_US = 1000


@dataclass
class BatchRecord:
    rows: int          # items in the Triton request
    requests: int      # caller requests merged into it
    wait_s: float      # first request's arrival -> send
    rtt_s: float       # send -> response
    ok: bool


class MicroBatcher:
    """Merge concurrent requests for one model into batches of at most ``max_batch`` rows."""

    def __init__(self, client, model: str, input_name: str, datatype: str, *, window_us: int = 600,
                 max_batch: int = 8, model_version: str = "", record: bool = True, timeout=None):
        if not 0 < int(window_us) <= MAX_WINDOW_US:
            raise ValueError(f"micro-batch window {window_us} µs: must be 1..{MAX_WINDOW_US}")
        if int(max_batch) < 1:
            raise ValueError(f"micro-batch max_batch {max_batch}: must be >= 1")
        self.client, self.model, self.input_name, self.datatype = client, model, input_name, datatype
        self.model_version = model_version
        self.window_s = int(window_us) / 1e6
        self.max_batch = int(max_batch)
        self.record = record
        #: Seconds a request sent now may take (a function of nothing, called at each send), None: unbounded.
        self.timeout = timeout
        self._pending: list[tuple[np.ndarray, asyncio.Future, float]] = []
        self._rows = 0
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: set[asyncio.Task] = set()
        #: (submit time, latency seconds) per caller request that succeeded.
        self.requests: list[tuple[float, float]] = []
        self.batches: list[BatchRecord] = []
        self.sent = 0        # Triton requests sent
        self.sent_ok = 0     # ... that succeeded
        self.rows_ok = 0     # items in those
        self.sent_expired = 0  # ... that had no answer by their deadline (gRPC DEADLINE_EXCEEDED)
        self.rows_expired = 0  # items in those

    async def infer(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """One request (``x``: batch dimension first); returns its rows of every output."""
        loop = asyncio.get_running_loop()
        n = int(x.shape[0])
        if not 1 <= n <= self.max_batch:
            raise ValueError(f"a request of {n} rows does not fit a batch of at most {self.max_batch}")
        if self._rows + n > self.max_batch:
            self._flush()
        fut = loop.create_future()
        t0 = loop.time()
        self._pending.append((x, fut, t0))
        self._rows += n
        if self._rows >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_at(t0 + self.window_s, self._flush)
        out = await fut
        if self.record:
            self.requests.append((t0, loop.time() - t0))
        return out

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        items, self._pending, self._rows = self._pending, [], 0
        task = asyncio.get_running_loop().create_task(self._send(items))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _send(self, items) -> None:
        from tritonclient.grpc.aio import InferInput

        loop = asyncio.get_running_loop()
        t_send = loop.time()
        data = items[0][0] if len(items) == 1 else np.concatenate([x for x, _, _ in items], axis=0)
        inp = InferInput(self.input_name, list(data.shape), self.datatype)
        inp.set_data_from_numpy(data)
        self.sent += 1
        try:
            res = await self.client.infer(self.model, [inp], model_version=self.model_version,
                                          **({"client_timeout": self.timeout()} if self.timeout else {}))
            names = [o.name for o in res.get_response().outputs]
            outs = {name: res.as_numpy(name) for name in names}
        except Exception as e:  # noqa: BLE001 - every caller of the batch gets the error
            if deadline_passed(e):
                self.sent_expired += 1
                self.rows_expired += int(data.shape[0])
            for _, fut, _ in items:
                if not fut.done():
                    fut.set_exception(e)
            ok = False
        else:
            self.sent_ok += 1
            self.rows_ok += int(data.shape[0])
            row = 0
            for x, fut, _ in items:
                n = int(x.shape[0])
                if not fut.done():
                    fut.set_result({k: v[row:row + n] for k, v in outs.items()})
                row += n
            ok = True
        if self.record:
            self.batches.append(BatchRecord(int(data.shape[0]), len(items), t_send - items[0][2],
                                            loop.time() - t_send, ok))

    async def drain(self) -> None:
        """Send what is pending now and wait for every batch in flight."""
        self._flush()
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
