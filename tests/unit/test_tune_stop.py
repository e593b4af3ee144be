"""A signal or a lost Triton in the middle of ``invoke tune``'s search, a tune-window sweep or a bench
(issue 34 item 10): the model's own configuration is loaded back and one line says so; the client processes
belong to the tool alone.

Triton here is a stand-in that records every load (the real one: tests/integration/test_tune_interrupt_local.py);
the client processes are real ones, spawned as the load generator spawns them.
"""
from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from bringup.errors import BringupError
from bringup.latency import bench as bench_mod
from bringup.latency import loadgen as loadgen_mod
from bringup.latency.bench import BenchSettings, TritonUnreachable, run_sweep
from bringup.latency.serving import serving_of
from bringup.latency.target import ModelInput, Target
from bringup.latency.tune import TuneSettings, run_tune
from bringup.ssh.stop import Interrupted, Stop

OWN = {"name": "add", "max_batch_size": 8, "instance_group": [{"kind": "KIND_CPU", "count": 1}],
       "dynamic_batching": {"preferred_batch_size": [2, 4, 8], "max_queue_delay_microseconds": 800}}


def Gone(msg: str) -> Exception:
    """What tritonclient raises when Triton does not answer (or refuses)."""
    from tritonclient.utils import InferenceServerException

    return InferenceServerException(msg)


class Triton:
    """A stand-in for tritonclient's sync client: the configuration it serves, and every load."""

    def __init__(self):
        self.serving = json.loads(json.dumps(OWN))
        self.loads: list[dict] = []
        self.live = True
        self.closed = False

    def load_model(self, model, config=None, client_timeout=None):
        if not self.live:
            raise Gone("failed to connect to all addresses")
        self.serving = json.loads(config)
        self.loads.append(self.serving)

    def is_model_ready(self, model):
        return True

    def is_server_live(self, client_timeout=None):
        if not self.live:
            raise Gone("failed to connect to all addresses")
        return True

    def close(self):
        self.closed = True


class Load:
    """A stand-in for LoadGenerator: each point calls ``during`` (the test's fault) and measures nothing."""

    during = staticmethod(lambda lg: None)

    def __init__(self, *a, stop=None, **kw):
        self.stop = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def run(self, point, warmup_s=None):
        type(self).during(self)
        if self.stop is not None:
            self.stop.check("during a point (dropped)")
        raise AssertionError("the fault should have ended the point")


@pytest.fixture
def triton(monkeypatch):
    t = Triton()
    monkeypatch.setattr(bench_mod, "check_server", lambda target: (t, json.loads(json.dumps(OWN))))
    monkeypatch.setattr(loadgen_mod, "LoadGenerator", Load)
    return t


TARGET = Target("local-01", "127.0.0.1", 8001, "add", max_batch_size=8, input=ModelInput("INPUT0", "FP32", [4]))


def _tune(stop, **kw):
    s = TuneSettings(target_ms=10, instances=[3, 1], windows=[400], budget_s=600, warmup_s=0.1, duration_s=0.1,
                     processes=1)
    return run_tune(TARGET, s, stop=stop, **kw)


@pytest.mark.reliability(item=34, fault="SIGTERM during a point of `invoke tune`'s search (stand-in Triton)",
                         checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_point_loads_the_models_own_configuration_back_and_says_so(triton, sig):
    stop = Stop()
    Load.during = staticmethod(lambda lg: stop.request(sig))
    with pytest.raises(Interrupted) as e:
        _tune(stop)
    # The first configuration was loaded (3 instances, 400 µs), then the model's own, once.
    assert serving_of(triton.loads[0]).instance_count == 3 and serving_of(triton.loads[0]).window_us == 400
    assert triton.loads[1:] == [OWN] and triton.serving == OWN
    assert str(e.value) == (f"interrupted by {sig.name} during a point (dropped) after 0 configuration(s) measured: "
                            "add serves its own configuration again; nothing recorded")
    assert triton.closed and stop.exit_code == 128 + sig


def test_a_signal_before_the_search_loads_nothing(triton):
    stop = Stop()
    stop.request(signal.SIGTERM)
    with pytest.raises(Interrupted, match="before Triton was contacted"):
        _tune(stop)
    assert triton.loads == []


def test_a_second_signal_while_the_own_configuration_is_loaded_back_says_what_may_still_serve(triton):
    stop = Stop()
    Load.during = staticmethod(lambda lg: stop.request(signal.SIGTERM))
    real_load = triton.load_model

    def load(model, config=None, client_timeout=None):
        if json.loads(config) == OWN:        # the restore: a second signal comes, the client is closed
            stop.request(signal.SIGTERM)
            raise Gone("Cannot invoke RPC on closed channel!")
        real_load(model, config)

    triton.load_model = load
    with pytest.raises(Interrupted) as e:
        _tune(stop)
    assert str(e.value).endswith("SIGTERM again abandoned loading add's own configuration back: Triton may still "
                                 "serve 3 instances, max batch 8, preferred [2, 4, 8], window 400 µs until it starts "
                                 "again; nothing recorded"), e.value


def test_a_refused_load_back_is_said_with_what_still_serves_and_the_way_back(triton):
    stop = Stop()
    Load.during = staticmethod(lambda lg: stop.request(signal.SIGTERM))
    real_load = triton.load_model

    def load(model, config=None, client_timeout=None):
        if json.loads(config) == OWN:
            raise Gone("load failed for model 'add': out of memory")
        real_load(model, config)

    triton.load_model = load
    with pytest.raises(Interrupted) as e:
        _tune(stop)
    assert str(e.value) == (
        "interrupted by SIGTERM during a point (dropped) after 0 configuration(s) measured: loading add's own "
        "configuration back failed (Triton refused to reload add with a new batching window: load failed for model "
        "'add': out of memory): Triton may still serve 3 instances, max batch 8, preferred [2, 4, 8], window 400 µs; "
        "it loads the model's own configuration from its repository when it starts again, or once its config.pbtxt "
        "is touched and POST /v2/repository/models/add/load is sent (Triton reloads a model without an override only "
        "when its files changed); nothing recorded")


def test_two_signals_while_a_read_waits_on_a_wedged_triton_end_it_saying_what_may_still_serve(triton):
    """Triton stopped (SIGSTOP, wedged): a read in a point waits; the first signal cannot end it, the second
    closes the clients, whose call then fails; the line is the signal's, never 'unreachable'."""
    stop = Stop()

    def wedged(lg):
        stop.request(signal.SIGTERM)
        stop.request(signal.SIGTERM)      # ... and the client closed under the read
        triton.live = False
        raise ValueError("Cannot invoke RPC on closed channel!")

    Load.during = staticmethod(wedged)
    with pytest.raises(Interrupted) as e:
        _tune(stop)
    assert str(e.value) == ("interrupted by SIGTERM twice after 0 configuration(s) measured: SIGTERM again abandoned "
                            "loading add's own configuration back: Triton may still serve 3 instances, max batch 8, "
                            "preferred [2, 4, 8], window 400 µs until it starts again; nothing recorded")


@pytest.mark.reliability(item=34, fault="the Triton being tuned stops answering, or fails while answering, in "
                                        "the middle of a point (stand-in Triton)",
                         checks=("one clear line", "exit code"))
@pytest.mark.parametrize("live, said, raised, line", [
    (False, "failed to connect to all addresses; last error: UNAVAILABLE", TritonUnreachable,
     "Triton at 127.0.0.1:8001 (host local-01) stopped answering during the search (after 0 configuration(s) "
     "measured) (failed to connect to all addresses; last error: UNAVAILABLE); when it starts again it loads add's "
     "own configuration from its repository"),
    (True, "Request for unknown model: 'add' has no available versions", BringupError,
     "Triton at 127.0.0.1:8001 (host local-01) failed during the search (after 0 configuration(s) measured): Request "
     "for unknown model: 'add' has no available versions; add serves its own configuration again"),
], ids=["gone", "failing"])
def test_a_triton_lost_or_failing_mid_search_is_one_line(triton, live, said, raised, line):
    def fault(lg):
        triton.live = live
        raise Gone(said)

    Load.during = staticmethod(fault)
    with pytest.raises(raised) as e:
        _tune(Stop())
    assert str(e.value) == line
    # A Triton gone is given nothing more (its next start serves the model's own); one that answers is.
    assert triton.loads[1:] == ([] if not live else [OWN])


def test_a_signal_mid_window_sweep_loads_the_models_own_window_back(triton):
    stop = Stop()
    Load.during = staticmethod(lambda lg: stop.request(signal.SIGTERM))
    with pytest.raises(Interrupted) as e:
        run_sweep(TARGET, BenchSettings(batches=[1], concurrency=[4], windows=[400, 1200], processes=1), stop=stop)
    assert [serving_of(c).window_us for c in triton.loads] == [400, 800] and triton.serving == OWN
    assert str(e.value) == ("interrupted by SIGTERM during a point (dropped) after 0 point(s) measured: add serves "
                            "its own configuration again; no report written")


# --------------------------------------------------------------------------- the client processes


def _worker_probe(conn, parent):
    """What a client process is made of, reported to the test (run in a spawned process, as the workers)."""
    loadgen_mod._owned_by(parent)
    conn.send({"pgid": os.getpgid(0), "pid": os.getpid(), "int": signal.getsignal(signal.SIGINT),
               "term": signal.getsignal(signal.SIGTERM)})
    conn.recv()


def test_a_client_process_is_the_tools_alone_and_dies_with_it():
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_worker_probe, args=(child, os.getpid()), daemon=True)
    p.start()
    try:
        got = parent.recv()
        # Its own process group (a terminal's Ctrl-C reaches the tool only), deaf to SIGINT and SIGTERM.
        assert got["pgid"] == got["pid"] == p.pid != os.getpgid(0)
        assert got["int"] == signal.SIG_IGN and got["term"] == signal.SIG_IGN
        os.kill(p.pid, signal.SIGTERM)
        p.join(0.5)
        assert p.is_alive()
        # The tool kills its group.
        loadgen_mod._kill_group(p.pid)
        p.join(10)
        assert p.exitcode == -signal.SIGKILL
    finally:
        if p.is_alive():
            p.kill()


def test_a_stop_while_the_clients_start_kills_them_and_raises():
    stop = Stop()
    lg = loadgen_mod.LoadGenerator("127.0.0.1:1", "add", "INPUT0", "FP32", [4], "float32", processes=2, stop=stop)
    procs = lg._procs
    threading.Timer(0.3, stop.request, args=(signal.SIGTERM,)).start()
    with pytest.raises(Interrupted, match="while its client processes started"):
        with lg:
            pass
    assert len(procs) == 2 and [p.exitcode for p in procs] == [-signal.SIGKILL] * 2


# --------------------------------------------------------------------------- the host's window tuner service


@pytest.mark.reliability(item=34, fault="SIGTERM (systemctl stop) to the host's window tuner service while a step "
                                        "reloads the model", checks=("no hang",))
def test_the_window_tuner_service_ends_between_steps_so_a_loaded_window_is_recorded():
    from bringup.latency.window_tuner import Stopping, run

    stopping = Stopping()
    done = []

    class Step:
        model = "add"

        def step(self):
            # systemctl stop comes while the window is reloaded: the step still records it.
            stopping.handle(signal.SIGTERM)
            done.append("reloaded and recorded")

    with pytest.raises(KeyboardInterrupt):
        run([Step()], 0.05, sleep=stopping.pause)
    assert done == ["reloaded and recorded"]     # the step in flight finished, no other started
    # A signal during the wait ends the wait.
    stopping = Stopping()
    threading.Timer(0.2, stopping.handle, args=(signal.SIGTERM,)).start()
    with pytest.raises(KeyboardInterrupt):
        stopping.pause(3600)
