"""A real Triton on this machine, from PyPI's nvidia-pytriton wheel, for the latency tests.

The wheel (fetched once into ``.sandbox/wheels/`` by :mod:`harness.triton_image`) holds
``tritonserver`` 2.51 and the Python backend.  It is unzipped under
``.sandbox/pytriton-local/`` and run directly: ``LD_LIBRARY_PATH`` points at its
bundled libraries and the backend stub of this Python's version is copied into
``backends/python``.  The stub initializes an isolated interpreter (PYTHONPATH
is not read), so the test models put ``$PYTHONPATH`` on ``sys.path``
themselves to find numpy.

Only 127.0.0.1 is used; ports are free ones.
"""
from __future__ import annotations

import os
import signal
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

from ..example import free_ports
from ..triton_image import wheel_path

REPO = Path(__file__).resolve().parents[2]

ROOT = REPO / ".sandbox" / "pytriton-local"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"

MODEL_PY = '''"""Bench test model: OUTPUT0 = 2 * INPUT0 + 1; one execute() per batch Triton forms."""
import os
import sys

sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

import time  # noqa: E402

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

SLEEP_S = {sleep_s!r}


class TritonPythonModel:
    def execute(self, requests):
        if SLEEP_S:
            time.sleep(SLEEP_S)
        out = []
        for r in requests:
            # DLPack both ways: the stub's numpy bridge was built against numpy 1 and
            # hands numpy 2 an empty buffer.
            x = np.from_dlpack(pb_utils.get_input_tensor_by_name(r, "INPUT0"))
            y = np.ascontiguousarray(x * 2 + 1, dtype=np.float32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("OUTPUT0", y)]))
        return out
'''


def write_model(repo: Path, name: str, *, sleep_s: float = 0.0, max_batch: int = 8, dims: int = 4,
                window_us: int | None = 800, instances: int = 1) -> None:
    """A Python-backend model taking ``INPUT0`` FP32 [dims]; ``window_us`` None: no dynamic batching."""
    d = repo / name
    (d / "1").mkdir(parents=True, exist_ok=True)
    (d / "1" / "model.py").write_text(MODEL_PY.format(sleep_s=sleep_s))
    batching = "" if window_us is None else f"dynamic_batching {{ max_queue_delay_microseconds: {window_us} }}\n"
    (d / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch}\n'
        f'input [{{name: "INPUT0", data_type: TYPE_FP32, dims: [{dims}]}}]\n'
        f'output [{{name: "OUTPUT0", data_type: TYPE_FP32, dims: [{dims}]}}]\n'
        f'instance_group [{{count: {instances}, kind: KIND_CPU}}]\n' + batching)


def server_root() -> Path:
    """The unzipped wheel with this Python's backend stub in place (cached)."""
    stub = ROOT / "pytriton" / "tritonserver" / "backends" / "python" / "triton_python_backend_stub"
    if stub.exists():
        return ROOT
    whl = wheel_path()
    tmp = ROOT.with_name(ROOT.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(whl) as z:
        z.extractall(tmp)
    tree = tmp / "pytriton" / "tritonserver"
    for p in [tree / "bin" / "tritonserver", tree / "python_backend_stubs" / PY / "triton_python_backend_stub"]:
        p.chmod(0o755)
    shutil.copy2(tree / "python_backend_stubs" / PY / "triton_python_backend_stub",
                 tree / "backends" / "python" / "triton_python_backend_stub")
    shutil.rmtree(ROOT, ignore_errors=True)
    tmp.rename(ROOT)
    return ROOT


def env() -> dict:
    import numpy

    e = dict(os.environ)
    e["LD_LIBRARY_PATH"] = str(ROOT / "nvidia_pytriton.libs")
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(numpy.__file__))
    return e


def usable() -> str | None:
    """Why this machine cannot run the local Triton, or None."""
    root = server_root()
    stub = root / "pytriton" / "tritonserver" / "backends" / "python" / "triton_python_backend_stub"
    out = subprocess.run(["ldd", str(stub)], capture_output=True, text=True, env=env()).stdout
    missing = [ln.split()[0] for ln in out.splitlines() if "not found" in ln]
    return f"backend stub for Python {PY} lacks {', '.join(missing)}" if missing else None


class LocalTriton:
    """``tritonserver`` on free 127.0.0.1 ports in explicit model-control mode, every model loaded."""

    def __init__(self, repo: Path, log: Path, cpus: list[int] | None = None, args: tuple[str, ...] = ()):
        self.repo, self.log_path, self.cpus, self.args = repo, log, cpus, tuple(args)
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "LocalTriton":
        root = server_root()
        tree = root / "pytriton" / "tritonserver"
        cmd = [str(tree / "bin" / "tritonserver"), f"--model-repository={self.repo}",
               f"--backend-directory={tree / 'backends'}", f"--http-port={self.http_port}",
               f"--grpc-port={self.grpc_port}", f"--metrics-port={self.metrics_port}",
               "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
               "--model-control-mode=explicit", "--load-model=*", "--exit-timeout-secs=5", *self.args]
        self._log = open(self.log_path, "wb")
        cpus = self.cpus
        # A session of its own: its Python backend's stub processes are ended with it (__exit__), also after a
        # test killed the server itself (they outlived it, orphaned, holding a CPU's memory and shm regions).
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env(),
                                     start_new_session=True,
                                     preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v2/health/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.__exit__()
        raise RuntimeError(f"tritonserver not ready in 60 s: {self.log()[-2000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            try:  # whatever of its session is left (the backend's stubs)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._log.close()
