"""bench's first look at Triton (bringup.latency.bench.check_server): a model config whose window or shape the
sweep cannot label its points with, or a model that declares no input, is one line (InputError), never a
traceback later in the sweep.  Triton's gRPC client is replaced by a stand-in answering as a server would."""
import pytest

from bringup.errors import InputError
from bringup.latency import bench
from bringup.latency.target import Target


class _Client:
    config: dict = {}
    meta: dict = {}
    closed = False

    def __init__(self, url, **kwargs):
        self.url = url

    def is_server_live(self, client_timeout=None):
        return True

    def is_model_ready(self, model):
        return True

    def get_model_config(self, model, as_json=False):
        return {"config": self.config}

    def get_model_metadata(self, model, as_json=False):
        return self.meta

    def close(self):
        type(self).closed = True


@pytest.fixture
def client(monkeypatch):
    import tritonclient.grpc as grpcclient

    class C(_Client):
        pass

    monkeypatch.setattr(grpcclient, "InferenceServerClient", C)
    return C


def _target():
    return Target(host="h1", address="127.0.0.1", grpc_port=8001, model="m")


@pytest.mark.parametrize("config, said", [
    ({"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": "99999999999"}},
     "max_queue_delay_microseconds"),
    ({"max_batch_size": 8, "dynamic_batching": [1]}, "dynamic_batching"),
])
def test_a_config_the_sweep_cannot_read_is_one_line(client, config, said):
    client.config = config
    with pytest.raises(InputError) as e:
        bench.check_server(_target())
    assert str(e.value).startswith("model 'm' on h1 (127.0.0.1:8001): ") and said in str(e.value)
    assert "\n" not in str(e.value) and client.closed


def test_a_model_without_inputs_is_one_line(client):
    client.config = {"max_batch_size": 0}
    client.meta = {"inputs": []}
    with pytest.raises(InputError, match="declares no input to send; give --input-name"):
        bench.check_server(_target())


def test_a_readable_config_goes_on(client):
    client.config = {"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": "500"}}
    client.meta = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": ["-1", "4"]}]}
    c, config = bench.check_server(_target())
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == "500"
    assert c.url == "127.0.0.1:8001"
