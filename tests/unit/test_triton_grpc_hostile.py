"""Issue 40 items 3 and 6 for Triton's gRPC API as bench and tune read it on the control machine (their first
look, the statistics read around each point): a real gRPC server on 127.0.0.1 that answers ``is_server_live``
and then nothing, answers an empty configuration, a metadata input without a shape or with an item of 10^19
elements, or a configuration larger than the cap.  Each ends in one line within the call's deadline; before,
the first hung for ever (SIGINT and SIGTERM did not end it), the second was a KeyError traceback and the third
a client process's "array is too big" after the sweep began."""
from __future__ import annotations

import threading
import time
from concurrent import futures

import pytest

from bringup.errors import BringupError, InputError
from bringup.latency import tritongrpc
from bringup.latency.bench import TritonUnreachable, check_server
from bringup.latency.target import Target
from tests.unit.test_saved_reads import _bounded

grpc = pytest.importorskip("grpc")
pytest.importorskip("tritonclient.grpc")


class HostileTriton:
    """A Triton gRPC server on 127.0.0.1 whose answer to ``hang`` never comes and whose other answers are
    ``answers``' (a method name -> response message, or a function of the request and context giving it) or a
    sound one."""

    def __init__(self, hang: str = "", **answers):
        from tritonclient.grpc import model_config_pb2 as mc
        from tritonclient.grpc import service_pb2 as pb
        from tritonclient.grpc import service_pb2_grpc as sg

        released = self.released = threading.Event()
        sound = {
            "ServerLive": pb.ServerLiveResponse(live=True),
            "ModelReady": pb.ModelReadyResponse(ready=True),
            "ModelConfig": pb.ModelConfigResponse(config=mc.ModelConfig(name="m", max_batch_size=8)),
            "ModelMetadata": pb.ModelMetadataResponse(name="m", inputs=[
                pb.ModelMetadataResponse.TensorMetadata(name="in", datatype="FP32", shape=[-1, 4])]),
            "ModelStatistics": pb.ModelStatisticsResponse(),
            "RepositoryIndex": pb.RepositoryIndexResponse(),
            "ModelInfer": pb.ModelInferResponse(model_name="m"),
        }
        sound.update(answers)

        def method(name):
            def answer(self, request, context):
                if name == hang:
                    released.wait(120)
                return sound[name](request, context) if callable(sound[name]) else sound[name]
            return answer

        servicer = type("S", (sg.GRPCInferenceServiceServicer,), {n: method(n) for n in sound})
        self.server = grpc.server(futures.ThreadPoolExecutor(8))
        sg.add_GRPCInferenceServiceServicer_to_server(servicer(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def __enter__(self) -> Target:
        self.server.start()
        return Target(host="h1", address="127.0.0.1", grpc_port=self.port, model="m")

    def __exit__(self, *exc) -> None:
        self.released.set()
        self.server.stop(0)


def _within(seconds: float, fn):
    """``({"value": fn()} or {"error": what it raised}, seconds taken)``; a test failure past ``seconds``."""
    start = time.monotonic()
    try:
        box = {"value": _bounded(fn, seconds)}
    except AssertionError:
        raise
    except BaseException as e:  # noqa: BLE001 - handed to the test
        box = {"error": e}
    return box, time.monotonic() - start


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(tritongrpc, "CALL_S", 1.0)


@pytest.mark.reliability(item=40, fault="Triton's gRPC API answers is_server_live, then nothing (model ready, "
                         "configuration, metadata)", variants=3, checks=("one clear line", "exit code", "no hang"))
@pytest.mark.parametrize("hang", ["ModelReady", "ModelConfig", "ModelMetadata"])
def test_a_triton_that_stops_answering_is_unreachable_within_the_deadline(quick, hang):
    with HostileTriton(hang) as target:
        box, took = _within(20, lambda: check_server(target))
    e = box.get("error")
    assert isinstance(e, TritonUnreachable), box
    assert str(e) == f"Triton at 127.0.0.1:{target.grpc_port} (host h1) did not answer within 1 s (wedged, or not " \
                     "Triton)"
    assert took < 10


@pytest.mark.reliability(item=40, fault="Triton's statistics never answer in the middle of a point",
                         variants=1, checks=("no hang",))
def test_statistics_that_never_come_end_within_the_deadline(quick):
    from tritonclient.utils import InferenceServerException

    from bringup.latency.loadgen import LoadGenerator

    with HostileTriton("ModelStatistics") as target:
        lg = LoadGenerator(target.url, "m", "in", "FP32", [4], "float32", processes=1)  # no process started yet
        box, took = _within(20, lg.stats)
        lg._stats_client.close()
    assert isinstance(box.get("error"), InferenceServerException) and "Deadline" in str(box["error"]), box
    assert took < 10


def _answers():
    from tritonclient.grpc import model_config_pb2 as mc
    from tritonclient.grpc import service_pb2 as pb

    def meta(**kw):
        return pb.ModelMetadataResponse(name="m", inputs=[pb.ModelMetadataResponse.TensorMetadata(**kw)])

    return {
        "empty configuration": ({"ModelConfig": pb.ModelConfigResponse()}, "Triton's answer has no config"),
        "input without name, type or shape": ({"ModelMetadata": meta()}, "no name, data type and shape"),
        "input of 10^19 elements": ({"ModelMetadata": meta(name="in", datatype="FP32",
                                                           shape=[-1, 99999999999, 99999999])},
                                    "not an item bench sends"),
        "input of 9 dimensions": ({"ModelMetadata": meta(name="in", datatype="FP32", shape=[-1] + [1] * 9)},
                                  "no name, data type and shape"),
        "input of a zero dimension": ({"ModelMetadata": meta(name="in", datatype="FP32", shape=[-1, 0])},
                                      "not an item bench sends"),
        "configuration past the cap": ({"ModelConfig": pb.ModelConfigResponse(config=mc.ModelConfig(
            name="m", max_batch_size=8, backend="x" * (2 << 20)))}, "larger than max"),
    }


ANSWERS = ["empty configuration", "input without name, type or shape", "input of 10^19 elements",
           "input of 9 dimensions", "input of a zero dimension", "configuration past the cap"]


@pytest.mark.reliability(item=40, fault="Triton's gRPC answers: an empty configuration, an input without a shape "
                         "or of 10^19 elements, an answer past the cap", variants=len(ANSWERS),
                         checks=("one clear line",))
@pytest.mark.parametrize("case", ANSWERS)
def test_an_answer_bench_cannot_use_is_one_line(quick, monkeypatch, case):
    monkeypatch.setattr(tritongrpc, "ANSWER_MAX", 1 << 20)
    answers, said = _answers()[case]
    with HostileTriton(**answers) as target:
        box, _ = _within(20, lambda: check_server(target))
    e = box.get("error")
    assert isinstance(e, (BringupError, TritonUnreachable)), box
    assert said in str(e) and "\n" not in str(e)
    if case != "configuration past the cap":
        assert isinstance(e, InputError)


def test_a_sound_triton_still_reads(quick):
    with HostileTriton() as target:
        box, _ = _within(20, lambda: check_server(target))
    client, config = box["value"]
    client.close()
    assert config["max_batch_size"] == 8 and target.input.dims == [4] and target.input.datatype == "FP32"


@pytest.mark.reliability(item=40, fault="Triton takes bench's requests and never answers them", variants=2,
                         checks=("no hang",))
@pytest.mark.parametrize("microbatch_us", [None, 500])
def test_requests_never_answered_end_the_point_after_its_grace(monkeypatch, microbatch_us):
    """Before, a client process waited on its first request for ever, and bench with it."""
    from bringup.latency import loadgen
    from bringup.latency.loadgen import LoadGenerator, Point

    monkeypatch.setattr(loadgen, "INFER_GRACE_S", 1.0, raising=False)
    with HostileTriton("ModelInfer") as target:
        with LoadGenerator(target.url, "m", "in", "FP32", [4], "float32", processes=1, warmup_s=0.2,
                           duration_s=0.5) as lg:
            box, took = _within(40, lambda: lg.run(Point(1, 1, microbatch_us=microbatch_us, microbatch_max=1)))
    res = box.get("value")
    assert res is not None, box
    assert res.requests == 0 and res.errors >= 1 and took < 30


@pytest.mark.reliability(item=40, fault="Triton answers bench's and tune's inference requests with an answer larger "
                                        "than the bound (gigabytes held in each client process before)", variants=2,
                         checks=("one clear line",))
@pytest.mark.parametrize("microbatch_us", [None, 500])
def test_an_inference_answer_past_the_bound_is_an_error_of_the_point_not_read(monkeypatch, microbatch_us):
    """Before, the client processes' channel took answers of any size (max_receive_message_length -1)."""
    from tritonclient.grpc import model_config_pb2 as mc
    from tritonclient.grpc import service_pb2 as pb

    from bringup.latency.loadgen import LoadGenerator, Point

    assert tritongrpc.ANSWER_MAX == 64 << 20
    monkeypatch.setattr(tritongrpc, "ANSWER_MAX", 1 << 20)   # the same floor, smaller: a 2 MiB answer passes it
    big = pb.ModelInferResponse(model_name="m", raw_output_contents=[b"\0" * (2 << 20)])
    declared = pb.ModelConfigResponse(config=mc.ModelConfig(name="m", max_batch_size=8, output=[  # 16 bytes a batch
        mc.ModelOutput(name="out", data_type=mc.TYPE_FP32, dims=[4])]))
    with HostileTriton(ModelInfer=big, ModelConfig=declared) as target:
        with LoadGenerator(target.url, "m", "in", "FP32", [4], "float32", processes=1, warmup_s=0.2,
                           duration_s=0.5) as lg:
            box, took = _within(40, lambda: lg.run(Point(1, 1, microbatch_us=microbatch_us, microbatch_max=1)))
    res = box.get("value")
    assert res is not None, box
    assert res.requests == 0 and res.errors >= 1 and res.p95_ms is None, res
    assert res.error_sample.startswith("Triton's answer was larger than 1 MiB (not read"), res.error_sample
    assert "\n" not in res.error_sample and took < 30


@pytest.mark.reliability(item=40, fault="a request still in flight when the window ends gets no answer by its "
                                        "deadline (the window's end and the grace)", variants=2,
                         checks=("report written",))
@pytest.mark.parametrize("microbatch_us", [None, 500])
def test_a_request_in_flight_at_the_windows_end_is_not_measured_and_no_error(monkeypatch, microbatch_us):
    """Before, its DEADLINE_EXCEEDED after the window counted in ``errors``: the point had no verdict."""
    from tritonclient.grpc import service_pb2 as pb

    from bringup.latency import loadgen
    from bringup.latency.loadgen import LoadGenerator, Point

    monkeypatch.setattr(loadgen, "INFER_GRACE_S", 1.0, raising=False)
    first: list[float] = []
    gate = threading.Event()

    def infer(request, context):    # answers at once for 0.5 s, then holds the next request past its deadline
        first.append(time.monotonic())
        if time.monotonic() - first[0] > 0.5:
            gate.wait(5)
        return pb.ModelInferResponse(model_name="m")

    with HostileTriton(ModelInfer=infer) as target:
        with LoadGenerator(target.url, "m", "in", "FP32", [4], "float32", processes=1, warmup_s=0.2,
                           duration_s=0.5) as lg:
            box, took = _within(40, lambda: lg.run(Point(1, 1, microbatch_us=microbatch_us, microbatch_max=1)))
        gate.set()
    res = box.get("value")
    assert res is not None, box
    assert res.requests > 0 and res.p95_ms is not None, res
    assert res.errors == 0 and res.error_sample == "" and res.unfinished == 1, res
    assert took < 30


@pytest.mark.reliability(item=40, fault="a request in flight at the window's end: Triton counts it (answered after "
                                        "the client gave up) or not", variants=3,
                         checks=("report written",))
@pytest.mark.parametrize("counted,agree", [(0, True), (1, True), (2, False)])
def test_triton_counting_an_unanswered_request_or_not_keeps_the_counts_agreeing(counted, agree):
    """Before, Triton's count of a request the client had given up on (10 answered, 11 counted) was a disagreement."""
    from types import SimpleNamespace

    from bringup.latency.loadgen import LoadGenerator, Point

    lg = LoadGenerator("127.0.0.1:1", "m", "in", "FP32", [4], "float32", processes=1, duration_s=1.0)
    try:
        reply = {"lat": [0.01] * 10, "errors": 0, "error_sample": "", "sent": 11,
                 "ok": 10, "items_ok": 20, "unfinished": 1, "open": 1, "open_items": 2, "batches": None}
        view = SimpleNamespace(view=lambda: {}, success=10 + counted, inference_count=20 + 2 * counted)
        res = lg._result(Point(2, 1), 1, [reply], view, view)
    finally:
        lg._stats_client.close()
    assert (res.counts_agree, res.unfinished, res.errors) == (agree, 1, 0)


@pytest.mark.reliability(item=40, fault="a model slower than the grace per request; a configuration answer without "
                                        "its config object", variants=2, checks=("report written",))
def test_the_grace_covers_a_long_window_and_a_foreign_config_answer_is_no_configuration():
    from bringup.latency.loadgen import INFER_GRACE_S, LoadGenerator

    lg = LoadGenerator("127.0.0.1:1", "m", "in", "FP32", [4], "float32", processes=1, duration_s=30.0)
    short = LoadGenerator("127.0.0.1:1", "m", "in", "FP32", [4], "float32", processes=1, duration_s=2.0)
    try:
        assert lg._cfg["grace_s"] == 30.0 and short._cfg["grace_s"] == INFER_GRACE_S == 10.0
        for answer in ({"config": "not an object"}, [], {}):
            lg._stats_client = type("C", (), {"get_model_config": lambda self, m, as_json: answer,
                                              "close": lambda self: None})()
            assert lg.config() == {}, answer
    finally:
        lg._stats_client.close()
        short._stats_client.close()


@pytest.mark.parametrize("config, bound", [
    ({}, tritongrpc.ANSWER_CEIL),                                                   # no configuration: the ceiling
    ({"output": [{"data_type": "TYPE_FP32", "dims": ["4"]}]}, tritongrpc.ANSWER_MAX),  # small: the floor
    # segmentation logits [150,512,512] fp32 at batch 1 (157 MB): a fixed 64 MiB refused every answer of it
    ({"max_batch_size": 1, "output": [{"data_type": "TYPE_FP32", "dims": ["150", "512", "512"]}]},
     2 * 150 * 512 * 512 * 4 + (1 << 20)),
    ({"output": [{"data_type": "TYPE_FP32", "dims": ["-1", "4"]}]}, tritongrpc.ANSWER_CEIL),   # variable: ceiling
    ({"output": [{"data_type": "TYPE_STRING", "dims": ["1"]}]}, tritongrpc.ANSWER_CEIL),       # text: ceiling
    ({"max_batch_size": 64, "output": [{"data_type": "TYPE_FP32", "dims": ["9" * 12] * 9}]}, tritongrpc.ANSWER_CEIL),
    ({"output": "x"}, tritongrpc.ANSWER_CEIL),
])
def test_an_answers_bound_follows_what_the_model_declares(config, bound):
    assert tritongrpc.answer_bound(config) == bound
