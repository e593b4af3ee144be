"""Closed-loop load over several client processes, and Triton's view of the same window.

A point of the sweep is (window, request batch, concurrency).  ``concurrency``
coroutines are spread over up to ``processes`` client processes (spawned once,
reused for every point); each coroutine sends its next request as soon as the
last one returned.  Every process starts at the same instant
(``CLOCK_MONOTONIC`` is one clock for all processes of the machine), warms up,
then records a steady window: only requests sent and answered inside it count
for p50/p95/p99 and QPS.

Beside the client's numbers each point carries Triton's: its statistics are
read when the window opens and closes (the batch sizes Triton formed, queue
and compute time per request), and once before the load and once after the
last answer, so that every request the clients sent can be matched to one
Triton counted (``counts_agree``).

Each process reports the CPU time of its event-loop thread and of the whole
process during the window, and how late a 1 ms timer fired on its loop.  A
point is **client-bound** when any loop thread was busy for ``cpu_limit`` of
the window (default 85 %), the client processes together used 90 % of the
CPUs they may run on, or a loop's timer ran late by LAG_MIN_MS and 10 % of the
point's p95 beyond its lateness when idle (the client was short of CPU, whoever took it): its latency is
then the load generator's, not the server's, and it is reported as such.

The client processes belong to the parent alone: each runs in a process group of its own (a Ctrl-C at the
terminal reaches the parent only, which decides), ignores SIGINT and SIGTERM, and dies with the parent
(``PR_SET_PDEATHSIG``: a parent killed outright leaves no client running).  Given a
:class:`~bringup.ssh.stop.Stop`, every wait of the parent is cut in :data:`~bringup.ssh.stop.AWAKE_S` steps: once a
stop is requested the point in flight is dropped, the client process groups are killed, and
:class:`~bringup.ssh.stop.Interrupted` is raised.
"""
from __future__ import annotations

import asyncio
import math
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..child import end_leader, own_group
from ..ssh.stop import AWAKE_S, closes
from ..errors import BringupError
from . import tritongrpc
from .tritongrpc import answer, deadline_passed, load_args, request_error
from .tritonstats import counts_agree, reload_seen

if TYPE_CHECKING:
    from ..ssh.stop import Stop

__all__ = ["Point", "PointResult", "LoadGenerator", "percentile", "split", "reload_seen"]

#: A loop thread busy this share of the window is saturated.
CPU_LIMIT = 0.85
#: Client processes together using this share of their CPUs are saturated.
TOTAL_CPU_LIMIT = 0.90
#: The event-loop probe's timer, and the lag (p95) that marks a client as starved: at least
#: LAG_MIN_MS and LAG_SHARE of the point's p95.
LAG_TICK_S = 0.001
LAG_MIN_MS, LAG_SHARE = 2.0, 0.10
INFER_GRACE_S = 10.0  # s (or the window's length) a request in flight past the window is waited: a mute Triton


@dataclass
class Point:
    batch: int
    concurrency: int
    window_us: int | None | str = "deployed"   # "deployed": the model as it was loaded
    microbatch_us: int | None = None           # client micro-batching window, None: off
    microbatch_max: int = 8


@dataclass
class PointResult:
    point: Point
    duration_s: float
    processes: int
    requests: int = 0            # client requests answered inside the window
    errors: int = 0
    unfinished: int = 0          # in flight at the window's end, no answer by its deadline: not measured, no error
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    rps: float = 0.0             # client requests per second
    items_per_s: float = 0.0     # items (request batch x requests) per second
    loop_cpu: list[float] = field(default_factory=list)    # per process, share of one core
    proc_cpu: list[float] = field(default_factory=list)
    loop_lag_ms: list[float] = field(default_factory=list)  # per process, p95 of its timer lateness
    idle_lag_ms: float = 0.0     # the same on an idle loop, measured at start (the machine's timer slack)
    client_cpus: int = 1
    client_bound: bool = False
    client_bound_why: str = ""
    triton: dict = field(default_factory=dict)      # the window: avg batch, queue/compute per request
    sent_total: int = 0          # Triton requests the clients sent, warm-up and drain included
    sent_items_total: int = 0
    triton_total: dict = field(default_factory=dict)  # Triton's counters over the same span
    counts_agree: bool | None = None
    client_batches: dict = field(default_factory=dict)  # micro-batching: rows per Triton request
    error_sample: str = ""
    config_before: dict = field(default_factory=dict, repr=False)  # the model's config as served, before/after
    config_after: dict = field(default_factory=dict, repr=False)
    reloaded: bool = False       # Triton reloaded the model during the point: its statistics restarted
    reloaded_why: str = ""


#: Seconds a point waits for Triton's counters to catch up with the answers its clients had (see run()).
STATS_SETTLE_S = 3.0


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (``q`` in 0..100)."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def split(total: int, parts: int) -> list[int]:
    """``total`` coroutines over ``parts`` processes, as evenly as possible."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# --------------------------------------------------------------------------- worker process

async def _run_point(cfg: dict, cmd: dict) -> dict:
    from tritonclient.grpc.aio import InferenceServerClient, InferInput

    from .microbatch import MicroBatcher

    loop = asyncio.get_running_loop()
    conc, batch = cmd["concurrency"], cmd["batch"]
    t_go, t_start, t_end = cmd["t_go"], cmd["t_start"], cmd["t_end"]
    rng = np.random.default_rng(os.getpid())
    data = rng.standard_normal((batch, *cfg["dims"])).astype(cfg["np_dtype"]) if conc else None
    lat: list[float] = []
    errors: list[str] = []
    counters = {"sent": 0, "ok": 0, "items_ok": 0, "unfinished": 0}
    cpu = {}

    def mark(key):
        cpu[key] = (time.thread_time(), time.process_time(), time.monotonic())

    client = InferenceServerClient(cfg["url"], channel_args=load_args(cfg["answer_max"]))
    bound = (lambda: max(0.0, t_end - time.monotonic()) + cfg["grace_s"])  # noqa: E731
    mb = MicroBatcher(client, cfg["model"], cfg["input"], cfg["datatype"], window_us=cmd["microbatch_us"],
                      max_batch=cmd["microbatch_max"], record=False, timeout=bound) if cmd.get("microbatch_us") \
        else None

    async def one(i):
        inp = InferInput(cfg["input"], list(data.shape), cfg["datatype"])
        inp.set_data_from_numpy(data)
        await asyncio.sleep(max(0.0, t_go - time.monotonic()))
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            try:
                if mb is not None:
                    await mb.infer(data)
                else:
                    counters["sent"] += 1
                    await client.infer(cfg["model"], [inp], client_timeout=bound())
                    counters["ok"] += 1
                    counters["items_ok"] += batch
            except Exception as e:  # noqa: BLE001 - counted and sampled, the point goes on
                if time.monotonic() >= t_end and deadline_passed(e):  # its own deadline, past the window's end
                    counters["unfinished"] += 1
                    continue
                if len(errors) < 3:
                    errors.append(request_error(e, cfg["answer_max"]))
                else:
                    errors.append("")
                await asyncio.sleep(0.01)
                continue
            t1 = time.monotonic()
            if t0 >= t_start and t1 <= t_end:
                lat.append(t1 - t0)

    lags: list[float] = []

    async def lag_probe():
        # How late a 1 ms timer fires: a starved or saturated client process shows it first.
        await asyncio.sleep(max(0.0, t_start - time.monotonic()))
        while time.monotonic() < t_end:
            t = time.monotonic()
            await asyncio.sleep(LAG_TICK_S)
            lags.append(time.monotonic() - t - LAG_TICK_S)

    try:
        if conc:
            loop.call_at(loop.time() + (t_start - time.monotonic()), mark, "start")
            loop.call_at(loop.time() + (t_end - time.monotonic()), mark, "end")
            await asyncio.gather(lag_probe(), *(one(i) for i in range(conc)))
            if mb is not None:
                await mb.drain()
                counters.update(sent=mb.sent, ok=mb.sent_ok, items_ok=mb.rows_ok)
    finally:
        await client.close()
    win = {}
    if "start" in cpu and "end" in cpu:
        (a_th, a_pr, a_t), (b_th, b_pr, b_t) = cpu["start"], cpu["end"]
        wall = max(1e-9, b_t - a_t)
        win = {"loop_cpu": (b_th - a_th) / wall, "proc_cpu": (b_pr - a_pr) / wall}
    lags.sort()
    win["loop_lag_p95_ms"] = round(percentile(lags, 95) * 1e3, 3) if lags else 0.0
    # Triton requests (a micro-batch is one) with no answer by their deadline: Triton may count them or not.
    counters["open"], counters["open_items"] = ((mb.sent_expired, mb.rows_expired) if mb is not None else
                                                (counters["unfinished"], counters["unfinished"] * batch))
    return {"lat": lat, "errors": len(errors), "error_sample": next((e for e in errors if e), ""),
            **counters, **win, "batches": None if mb is None else _rows_hist(mb)}


def _rows_hist(mb) -> dict:
    """Rows per Triton request the micro-batcher formed (the whole point, warm-up included)."""
    return {"triton_requests": mb.sent_ok, "rows": mb.rows_ok,
            "avg_rows": round(mb.rows_ok / mb.sent_ok, 2) if mb.sent_ok else None}


async def _idle_lag(ticks: int = 200) -> float:
    """p95 lateness (ms) of a 1 ms timer on an idle loop: the machine's own timer slack
    (about 1 ms on a busy 2-core Linux box, 0.2 ms on the H200 machine), subtracted before judging a loaded loop."""
    lags = []
    for _ in range(ticks):
        t = time.monotonic()
        await asyncio.sleep(LAG_TICK_S)
        lags.append(time.monotonic() - t - LAG_TICK_S)
    lags.sort()
    return round(percentile(lags, 95) * 1e3, 3)


PR_SET_PDEATHSIG = 1


def _owned_by(parent: int) -> None:
    """This client process belongs to ``parent`` alone: a process group of its own (a terminal's Ctrl-C, sent
    to the foreground group, reaches the parent only), SIGINT and SIGTERM ignored (the parent ends it), and
    SIGKILL when the parent dies, however it dies."""
    own_group()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's closed pipe still ends the worker
        pass
    if os.getppid() != parent:     # the parent died before the death signal was asked for
        os._exit(0)


def _worker(conn, cfg: dict) -> None:
    _owned_by(cfg["parent"])
    if cfg.get("cpus"):
        os.sched_setaffinity(0, cfg["cpus"])
    try:
        try:
            import tritonclient.grpc.aio  # noqa: F401 - imported once, before the first point
        except Exception as e:  # noqa: BLE001
            conn.send({"fatal": f"{type(e).__name__}: {e}"})
            return
        conn.send({"ready": os.getpid(), "idle_lag_ms": asyncio.run(_idle_lag())})
        while True:
            cmd = conn.recv()
            if cmd is None:
                return
            try:
                conn.send(asyncio.run(_run_point(cfg, cmd)))
            except Exception as e:  # noqa: BLE001 - reported to the parent as the point's error
                conn.send({"fatal": f"{type(e).__name__}: {e}"})
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return   # the parent is gone: nothing to report to, nobody to report it


# --------------------------------------------------------------------------- parent

def _kill_group(pid: int) -> None:
    """SIGKILL client process ``pid``'s process group (its own, see :func:`_owned_by`: whatever it started
    goes too), and the process itself (killed before it made its group).  ``pid`` is a child not yet
    reaped, so neither number can name another process or group."""
    end_leader(pid)


class LoadGenerator:
    """``processes`` client processes against one model; ``run(point)`` measures one point."""

    #: The run's stop (None: the waits are plain); whether a point is in flight (its clients cannot be told to
    #: end: they are not reading); whether the statistics client was let go.
    stop: Stop | None = None
    _busy = False
    _closed = False

    def __init__(self, url: str, model: str, input_name: str, datatype: str, dims: list[int], np_dtype: str,
                 *, processes: int = 4, warmup_s: float = 2.0, duration_s: float = 5.0,
                 cpus: list[int] | None = None, cpu_limit: float = CPU_LIMIT, stop: Stop | None = None):
        self.url, self.model = url, model
        self.stop = stop
        self.processes = max(1, int(processes))
        self.warmup_s, self.duration_s = float(warmup_s), float(duration_s)
        self.cpu_limit = float(cpu_limit)
        self.cpus = sorted(cpus) if cpus else None
        self.client_cpus = len(self.cpus) if self.cpus else len(os.sched_getaffinity(0))
        self._cfg = {"url": url, "model": model, "input": input_name, "datatype": datatype, "dims": list(dims),
                     "np_dtype": np_dtype, "cpus": self.cpus,
                     "parent": os.getpid(), "grace_s": max(INFER_GRACE_S, self.duration_s),
                     "answer_max": tritongrpc.ANSWER_MAX}
        self._procs: list = []
        self._conns: list = []
        self.idle_lag_ms = 0.0
        from .tritongrpc import client as triton_client

        self._stats_client = triton_client(url)
        # A second signal closes it: a read of a Triton that answers nothing (stopped, wedged) ends there.
        self._release = closes(stop, self._stats_client.close)
        self._cfg["answer_max"] = tritongrpc.answer_bound(self.config())  # what the model's outputs declare

    def __enter__(self):
        ctx = mp.get_context("spawn")
        for _ in range(self.processes):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(child, self._cfg), daemon=True)
            p.start()
            self._procs.append(p)
            self._conns.append(parent)
        for c in self._conns:
            try:
                msg = self._recv(c, "while its client processes started")
            except EOFError:
                msg = {"fatal": "a client process exited while starting"}
            if "fatal" in msg:
                self.close()
                raise RuntimeError(f"client process: {msg['fatal']}")
            self.idle_lag_ms = max(self.idle_lag_ms, msg.get("idle_lag_ms", 0.0))
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """End the client processes: told to when idle, killed (their process groups) when a point is in
        flight (a stop) or they do not end within 5 s."""
        busy = self._busy
        for c in self._conns if not busy else []:
            try:
                c.send(None)
            except (BrokenPipeError, OSError):
                pass
        for p in self._procs:
            if not busy:
                p.join(timeout=5)
            if p.is_alive() or busy:
                _kill_group(p.pid)
                p.join(timeout=5)
        for c in self._conns:
            c.close()
        self._procs, self._conns = [], []
        if not self._closed:
            self._closed = True
            self._release()

    def _check(self, where: str) -> None:
        if self.stop is not None and self.stop.requested:
            self._busy = True      # whatever they are doing, they are killed
            self.close()
            self.stop.check(where)

    def _sleep_until(self, t: float, where: str) -> None:
        """Sleep until monotonic ``t``, in steps that let a stop end the wait."""
        while True:
            self._check(where)
            left = t - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, AWAKE_S) if self.stop is not None else left)

    def _recv(self, conn, where: str):
        """A client process's next message, waited for in steps that let a stop end the wait."""
        while self.stop is not None and not conn.poll(AWAKE_S):
            self._check(where)
        self._check(where)
        return conn.recv()

    def stats(self):
        from .tritonstats import read_stats

        return read_stats(self._stats_client, self.model)

    def config(self) -> dict:
        """The model's configuration as Triton serves it now ({} when it cannot say)."""
        from tritonclient.utils import InferenceServerException

        try:
            return answer(self._stats_client.get_model_config(self.model, as_json=True), "config",
                          f"model {self.model!r}")
        except (InferenceServerException, BringupError):
            return {}

    def run(self, point: Point, warmup_s: float | None = None) -> PointResult:
        """One steady window of ``point`` after ``warmup_s`` (default: the generator's warm-up)."""
        n = min(self.processes, point.concurrency)
        shares = split(point.concurrency, n) + [0] * (self.processes - n)
        cfg_before = self.config()
        before = self.stats()
        t_go = time.monotonic() + 0.3
        t_start = t_go + (self.warmup_s if warmup_s is None else warmup_s)
        t_end = t_start + self.duration_s
        where = "during a point (dropped)"
        self._check(where)
        self._busy = True
        try:
            for c, share in zip(self._conns, shares):
                c.send({"concurrency": share, "batch": point.batch, "t_go": t_go, "t_start": t_start,
                        "t_end": t_end, "microbatch_us": point.microbatch_us, "microbatch_max": point.microbatch_max})
        except OSError:
            raise RuntimeError("a client process exited between points") from None
        self._sleep_until(t_start, where)
        at_start = self.stats()
        self._sleep_until(t_end, where)
        at_end = self.stats()
        try:
            replies = [self._recv(c, where) for c in self._conns]
        except EOFError:
            raise RuntimeError("a client process exited during a point") from None
        self._busy = False
        after = self.stats()
        cfg_after = self.config()
        fatal = [r["fatal"] for r in replies if "fatal" in r]
        if fatal:
            raise RuntimeError(f"client process failed: {fatal[0]}")
        active = [r for r, s in zip(replies, shares) if s]
        res = self._result(point, n, active, at_end - at_start, after - before)
        # Triton counts a request once its response is out: on a loaded machine the last answers can reach the
        # clients before they reach the statistics. Let the counters settle before reading a shortfall as a
        # reload (a counter that went down is a reload at once).
        deadline = time.monotonic() + STATS_SETTLE_S
        settled = after
        while (settled.success - before.success < res.sent_total and settled.success >= after.success
               and time.monotonic() < deadline):
            time.sleep(0.05)
            settled = self.stats()
        if settled is not after:
            after = settled
            res = self._result(point, n, active, at_end - at_start, after - before)
        res.config_before, res.config_after = cfg_before, cfg_after
        res.reloaded_why = reload_seen([before, at_start, at_end, after], res.sent_total, cfg_before, cfg_after)
        res.reloaded = bool(res.reloaded_why)
        if res.reloaded:
            # Triton's view spans a restart of its counters: neither the window's nor the total's numbers hold.
            res.triton, res.counts_agree = {}, None
        return res

    def _result(self, point: Point, n: int, replies: list[dict], window, total) -> PointResult:
        lat = sorted(x * 1e3 for r in replies for x in r["lat"])
        d = self.duration_s
        res = PointResult(point, d, n, client_cpus=self.client_cpus)
        res.requests = len(lat)
        res.errors = sum(r["errors"] for r in replies)
        res.error_sample = next((r["error_sample"] for r in replies if r["error_sample"]), "")
        unfinished = sum(r.get("unfinished", 0) for r in replies)
        if any(r["ok"] for r in replies):
            res.unfinished = unfinished
        else:  # Triton answered nothing in the point: its requests' deadlines passing are errors (a mute Triton)
            res.errors += unfinished
            res.error_sample = res.error_sample or f"{unfinished} request(s) had no answer by their deadline"
        if lat:
            res.p50_ms, res.p95_ms, res.p99_ms = (round(percentile(lat, q), 3) for q in (50, 95, 99))
            res.mean_ms = round(sum(lat) / len(lat), 3)
        res.rps = round(len(lat) / d, 1)
        res.items_per_s = round(len(lat) * point.batch / d, 1)
        res.loop_cpu = [round(r.get("loop_cpu", 0.0), 3) for r in replies]
        res.proc_cpu = [round(r.get("proc_cpu", 0.0), 3) for r in replies]
        why = []
        busiest = max(res.loop_cpu, default=0.0)
        if busiest >= self.cpu_limit:
            why.append(f"a client event loop was busy {busiest:.0%} of the window")
        res.loop_lag_ms = [r.get("loop_lag_p95_ms", 0.0) for r in replies]
        res.idle_lag_ms = self.idle_lag_ms
        lag = max(res.loop_lag_ms, default=0.0) - self.idle_lag_ms
        if res.p95_ms is not None and lag >= LAG_MIN_MS and lag >= LAG_SHARE * res.p95_ms:
            why.append(f"a client event loop ran {lag:.1f} ms later than when idle (p95): the client was "
                       "short of CPU")
        used = sum(res.proc_cpu)
        if used >= TOTAL_CPU_LIMIT * self.client_cpus:
            why.append(f"client processes used {used:.2f} of {self.client_cpus} CPU(s)")
        res.client_bound, res.client_bound_why = bool(why), "; ".join(why)
        res.triton = window.view()
        res.sent_total = sum(r["ok"] for r in replies)
        res.sent_items_total = sum(r["items_ok"] for r in replies)
        res.triton_total = total.view()
        opened = (sum(r.get("open", 0) for r in replies), sum(r.get("open_items", 0) for r in replies))
        res.counts_agree = counts_agree(total, (res.sent_total, res.sent_items_total), opened)
        mbs = [r["batches"] for r in replies if r.get("batches")]
        if mbs:
            reqs, rows = sum(m["triton_requests"] for m in mbs), sum(m["rows"] for m in mbs)
            res.client_batches = {"triton_requests": reqs, "rows": rows,
                                  "avg_rows": round(rows / reqs, 2) if reqs else None}
        return res
