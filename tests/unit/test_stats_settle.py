"""A bench point does not read Triton's lagging counters as a reload (seen on the loaded CI run of 0a3a95f).

Triton counts a request once its response is out; on a loaded machine the last answers reach the clients
before the statistics. The point waits (up to STATS_SETTLE_S) for the counters before it calls a
shortfall a reload; a counter that really restarted is still a reload at once.
"""
from __future__ import annotations

from bringup.latency.loadgen import LoadGenerator, Point
from bringup.latency.tritonstats import ModelStats


class _Conn:
    def send(self, msg):
        pass

    def recv(self):
        return {"lat": [0.01] * 10, "errors": 0, "error_sample": "", "ok": 10, "items_ok": 10}


def _gen(reads: list[ModelStats]) -> LoadGenerator:
    g = LoadGenerator.__new__(LoadGenerator)
    g.processes, g.warmup_s, g.duration_s, g.client_cpus, g.cpu_limit, g.idle_lag_ms = 1, 0.0, 0.05, 1, 0.85, 0.0
    g._conns = [_Conn()]
    it = iter(reads)
    last = [reads[-1]]

    def stats():
        last[0] = next(it, last[0])
        return last[0]

    g.stats = stats
    g.config = lambda: {}
    return g


def s(n: int) -> ModelStats:
    return ModelStats(success=n, inference_count=n, execution_count=n)


def test_lagging_counters_settle_instead_of_reading_as_a_reload():
    # before, at start, at end, after (2 answers not counted yet), then the counters catch up.
    res = _gen([s(0), s(0), s(8), s(8), s(9), s(10)]).run(Point(batch=1, concurrency=1))
    assert not res.reloaded and res.counts_agree, (res.reloaded_why, res.counts_agree)


def test_a_counter_that_went_down_is_still_a_reload():
    res = _gen([s(50), s(50), s(3), s(10)]).run(Point(batch=1, concurrency=1))
    assert res.reloaded and "went down" in res.reloaded_why, res.reloaded_why
