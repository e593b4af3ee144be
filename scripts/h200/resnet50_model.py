"""Triton Python-backend model: torchvision ResNet-50 (weights=None), FP16, channels_last, on the instance's GPU,
made to behave like a TensorRT engine of fixed shapes: one CUDA graph per batch size.

``initialize`` captures a CUDA graph for every batch size 1..max_batch_size (static input and output
buffers, one memory pool shared by all of them, captured from the largest down); ``execute`` copies the
batch Triton formed into the static input of its size and replays that graph: no Python per layer, no
kernel launches one by one.  The eager path stays as an option to compare: the config parameter
``mode`` (``graph``, the default, or ``eager``), else the environment's ``H200_MODEL_MODE``.

Where CUDA (or PyTorch) is missing, the model falls back to a CPU stand-in that costs a fixed time per batch
(:class:`StandIn`: 2 ms + 0.25 ms per image, logits of zeros) and says so in Triton's log: the scripts and
bringup's commands can be run end to end on a machine without a GPU, and no number of it is a GPU's.

Tensors cross the backend through DLPack (the stub's numpy bridge was built against numpy 1).  The stub runs
an isolated interpreter, so $PYTHONPATH is put on sys.path here to find torch.  :class:`Net` is importable
without Triton (``scripts/h200/inprocess.py`` measures the same code in-process).
"""
import os
import sys

sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

import json  # noqa: E402
import time  # noqa: E402

try:  # noqa: SIM105 - the stub has it; inprocess.py imports Net without Triton
    import triton_python_backend_utils as pb_utils  # noqa: E402
except ImportError:
    pb_utils = None

MODES = ("graph", "eager")


def cuda_problem() -> str | None:
    """Why the GPU path cannot run here (None: it can)."""
    try:
        import torch
    except ImportError as e:
        return f"PyTorch is not importable ({e})"
    if not torch.cuda.is_available():
        return "CUDA is not available to PyTorch"
    try:
        import torchvision  # noqa: F401
    except ImportError as e:
        return f"torchvision is not importable ({e})"
    return None


class StandIn:
    """The CPU stand-in: a fixed cost per batch (2 ms + 0.25 ms per image), FP16 logits of zeros."""

    mode = "cpu-stand-in"
    BASE_S, PER_ITEM_S = 0.002, 0.00025

    def __init__(self, max_batch: int, device_id: int = 0, mode: str = "graph"):
        self.max_batch = max_batch
        self.why = cuda_problem()

    def run(self, x):
        """``x``: a numpy array or a sequence of them (rows first); returns numpy logits [n, 1000]."""
        import numpy as np

        n = sum(int(a.shape[0]) for a in x) if isinstance(x, (list, tuple)) else int(x.shape[0])
        time.sleep(self.BASE_S + self.PER_ITEM_S * n)
        return np.zeros((n, 1000), dtype=np.float16)


class Net:
    """ResNet-50 FP16 on one GPU, eager or replayed from one CUDA graph per batch size."""

    def __init__(self, max_batch: int, device_id: int = 0, mode: str = "graph", sizes=None):
        import torch
        import torchvision

        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        self.torch, self.mode, self.max_batch = torch, mode, int(max_batch)
        self.device = torch.device("cuda", device_id)
        torch.cuda.set_device(self.device)
        # One intra-op thread per instance: several stubs, tritonserver and the clients share the CPUs.
        torch.set_num_threads(1)
        torch.backends.cudnn.benchmark = True
        torch.manual_seed(0)
        m = torchvision.models.resnet50(weights=None).eval().half().to(self.device)
        self.model = m.to(memory_format=torch.channels_last)
        self.sizes = sorted(set(sizes or range(1, self.max_batch + 1)))
        self.graphs, self.static_in, self.static_out = {}, {}, {}
        t0 = time.perf_counter()
        with torch.inference_mode():
            # Warm-up of every size on a side stream (cudnn picks its kernels now), then the captures.
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for b in self.sizes:
                    x = self._input(b)
                    for _ in range(2):
                        self.model(x)
            torch.cuda.current_stream(self.device).wait_stream(side)
            torch.cuda.synchronize(self.device)
            if mode == "graph":
                pool = None
                for b in sorted(self.sizes, reverse=True):     # largest first: the smaller reuse its pool
                    g = torch.cuda.CUDAGraph()
                    self.static_in[b] = self._input(b)
                    with torch.cuda.graph(g, pool=pool):
                        self.static_out[b] = self.model(self.static_in[b])
                    pool = g.pool() if pool is None else pool
                    self.graphs[b] = g
                torch.cuda.synchronize(self.device)
        self.init_s = time.perf_counter() - t0

    def _input(self, b: int):
        torch = self.torch
        return torch.randn(b, 3, 224, 224, device=self.device,
                           dtype=torch.float16).contiguous(memory_format=torch.channels_last)

    def size_for(self, n: int) -> int:
        """The captured batch size that holds ``n`` rows (the next one up: padded, as an engine profile)."""
        for b in self.sizes:
            if b >= n:
                return b
        raise ValueError(f"a batch of {n} is above max_batch_size {self.max_batch}")

    def run(self, x):
        """``x``: a CUDA or CPU tensor [n, 3, 224, 224] FP16 (or a list of them); returns CPU logits [n, 1000]."""
        torch = self.torch
        with torch.inference_mode():
            if isinstance(x, (list, tuple)):
                x = torch.cat([t.to(self.device, non_blocking=True) for t in x]) if len(x) > 1 else x[0]
            n = int(x.shape[0])
            if self.mode == "eager":
                y = self.model(x.to(self.device, non_blocking=True).contiguous(memory_format=torch.channels_last))
                return y.cpu()
            b = self.size_for(n)
            self.static_in[b][:n].copy_(x, non_blocking=True)
            self.graphs[b].replay()
            return self.static_out[b][:n].cpu()


def build(max_batch: int, device_id: int = 0, mode: str = "graph"):
    """The GPU net when CUDA is there, else the CPU stand-in (its ``why`` says what is missing)."""
    return StandIn(max_batch, device_id, mode) if cuda_problem() else Net(max_batch, device_id, mode)


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        params = {k: (v or {}).get("string_value") for k, v in (cfg.get("parameters") or {}).items()}
        mode = params.get("mode") or os.environ.get("H200_MODEL_MODE") or "graph"
        max_batch = int(cfg.get("max_batch_size", 16)) or 1
        self.net = build(max_batch, int(args.get("model_instance_device_id", 0) or 0), mode)
        name = args.get("model_instance_name", "resnet50")
        if isinstance(self.net, StandIn):
            print(f"{name}: CPU stand-in (fixed cost per batch), no GPU number: {self.net.why}", flush=True)
        else:
            print(f"{name}: {self.net.mode} mode, batch sizes 1..{max_batch}, ready in {self.net.init_s:.1f} s",
                  flush=True)

    def execute(self, requests):
        tensors = [pb_utils.get_input_tensor_by_name(r, "input") for r in requests]
        if isinstance(self.net, StandIn):
            import numpy as np

            xs = [np.from_dlpack(t) for t in tensors]
            sizes = [int(x.shape[0]) for x in xs]
            y = self.net.run(xs)
            out, row = [], 0
            for n in sizes:
                part = np.ascontiguousarray(y[row:row + n])
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("logits", part)]))
                row += n
            return out
        torch = self.net.torch
        xs = [torch.from_dlpack(t) for t in tensors]
        sizes = [int(x.shape[0]) for x in xs]
        y = self.net.run(xs)
        out, row = [], 0
        for n in sizes:
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("logits", y[row:row + n].contiguous())]))
            row += n
        return out
