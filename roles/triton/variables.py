"""The triton role's variables (:class:`Vars`, with every default in :data:`DEFAULTS`) and the checks of its
two folders (:func:`check_folders`): the model repository and the stack folder are Triton's own."""
from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from bringup.hardware import topology
from bringup.errors import InputError
from bringup.hardware.gpu_profiles import MAX_BATCH, MAX_INSTANCES, BatchSizes, ProfileVars
from bringup.latency.window_tuner import WINDOW_MAX, WINDOW_MIN
from bringup.resources import image
from bringup.inventory.vars import AbsPath, RoleVars, Spec, defaults_of, key_matching, want

#: The batching window's range (µs): the window tuner's bounds, so that ``invoke tune`` and the controller
#: record only windows this role accepts (one range, the engine's).
DELAY_MIN, DELAY_MAX = WINDOW_MIN, WINDOW_MAX

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_WORD = r"^[A-Za-z0-9_]+$"
_CPUSET = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_PORT = Annotated[int, Field(ge=1, le=65535)]


class Tensor(Spec):
    """An ``input`` or ``output`` of a model."""

    name: str = want(..., "needs a name of letters, digits, '_', '.', '-'", pattern=_NAME.pattern)
    data_type: str = want(..., "must be a Triton type like TYPE_FP16", pattern=_WORD)
    dims: list[int] = want(..., "a list of sizes (-1 for variable)", min_length=1)

    @field_validator("dims")
    @classmethod
    def _dims(cls, v: list[int]) -> list[int]:
        if not all(d > 0 or d == -1 for d in v):
            raise ValueError("a list of sizes (-1 for variable)")
        return v


_TENSORS = "a list of {name, data_type, dims} is required"


class Model(Spec):
    """An entry of ``triton_models``."""

    platform: str | None = want(None, "letters, digits and '_' only", pattern=_WORD)
    backend: str | None = want(None, "letters, digits and '_' only", pattern=_WORD)
    max_batch_size: int = want(8, f"must be a whole number from 1 to {MAX_BATCH}", ge=1, le=MAX_BATCH)
    input: list[Tensor] = want(..., _TENSORS, min_length=1)
    output: list[Tensor] = want(..., _TENSORS, min_length=1)
    instance_count: int | None = want(None, f"must be a whole number from 1 to {MAX_INSTANCES} (Triton instances "
                                            "per GPU)", ge=1, le=MAX_INSTANCES)
    preferred_batch_size: BatchSizes | None = want(None, f"a list of sizes from 1 to {MAX_BATCH}")
    max_queue_delay_microseconds: int | None = want(None, f"must be within {DELAY_MIN}-{DELAY_MAX}",
                                                    ge=DELAY_MIN, le=DELAY_MAX)
    response_cache: bool = False
    extra: str = want("", "protobuf text to append, as a string")

    @model_validator(mode="after")
    def _served(self) -> "Model":
        if not (self.platform or self.backend):
            raise ValueError("set platform (tensorrt_plan, onnxruntime_onnx, ...) or backend")
        return self


class Ports(Spec):
    http: _PORT
    grpc: _PORT
    metrics: _PORT


class Vars(ProfileVars, image.ImageVars, topology.PlannerVars, RoleVars):
    triton_model_repository: AbsPath = "/data/models"
    models_dir: str = ""
    triton_models: dict[key_matching(_NAME.pattern, "model name must be letters, digits, '_', '.', '-'"), Model] = want(
        {}, "must be a mapping of model name to its settings")
    triton_max_queue_delay_microseconds: int | None = want(
        None, f"must be within {DELAY_MIN}-{DELAY_MAX}", ge=DELAY_MIN, le=DELAY_MAX)
    triton_image: str = want("nvcr.io/nvidia/tritonserver:24.06-py3",
                             "an image reference like nvcr.io/nvidia/tritonserver:24.06-py3", pattern=r"^[\w.\-/:@]+$")
    triton_image_id: str | None = want(None, "sha256:<64 hex digits>", pattern=r"^sha256:[0-9a-f]{64}$")
    triton_shm_size: Any = want("1g", "a size like 1g or 512m")
    triton_cpuset: Any = want("", "a CPU list like 4-7,20-23")
    triton_ports: Ports = want({"http": 8000, "grpc": 8001, "metrics": 8002}, "a mapping with http, grpc and metrics")
    triton_cache_size: int = want(268435456, "must be a whole number >= 1", ge=1)
    triton_ready_timeout: int = want(180, "must be within 1-3600", ge=1, le=3600)
    #: A rolling run's health gate after each host (``health``): seconds for Triton and every model to be ready.
    rollout_health_timeout: int = want(120, "must be within 1-3600", ge=1, le=3600)
    triton_stack_dir: AbsPath = "/opt/triton"
    triton_container: str = want("triton", "letters, digits, '_', '.', '-'", pattern=_NAME.pattern)
    triton_extra_args: list[Annotated[str, Field(pattern=r"^--")]] = want(
        [], "a list of tritonserver flags like --log-verbose=1")

    @field_validator("triton_shm_size")
    @classmethod
    def _shm(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, str)) or not re.match(r"^\d+[kmg]?$", str(v), re.I):
            raise ValueError("a size like 1g or 512m")
        return v

    @field_validator("triton_cpuset")
    @classmethod
    def _cpuset(cls, v: Any) -> Any:
        # None or "" leave it to the planner; 0 is CPU 0 (it used to drop the pin), false is no CPU list.
        if v is None or v == "":
            return ""
        if isinstance(v, bool) or not isinstance(v, (int, str)) or not _CPUSET.match(str(v)):
            raise ValueError("a CPU list like 4-7,20-23 (empty: the planner's CPUs)")
        return str(v)


DEFAULTS = defaults_of(Vars)


#: System folders: never a model repository or a stack folder, nor (first list) anything under them.
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                 "/sys", "/usr")
_SYSTEM = {"/", "/home", "/lost+found", "/media", "/mnt", "/opt", "/root", "/snap", "/srv", "/tmp", "/var"}
#: Under these a folder needs a level of its own: /var/lib or /home/ann are not Triton's.
_SHARED_PARENTS = ("/var", "/home")
_EXAMPLE = {"triton_model_repository": "/data/models", "triton_stack_dir": "/opt/triton"}


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def folder(vars: dict, key: str) -> str:
    """``key``'s folder, normalized; a system folder (or one too shallow to be Triton's own) is refused."""
    v = vars.get(key)
    if not isinstance(v, str) or not v.startswith("/") or "\n" in v:
        raise InputError(f"{key} {v!r}: must be an absolute path")
    p = posixpath.normpath(v)
    p = "/" + p.lstrip("/")
    parent = posixpath.dirname(p)
    fix = f"set {key} to a folder of its own, like {_EXAMPLE[key]}"
    if p in _SYSTEM or any(_inside(p, t) for t in _SYSTEM_TREES) or parent in _SHARED_PARENTS:
        raise InputError(f"{key} {v!r}" + (f" (that is {p})" if p != (v.rstrip("/") or "/") else "")
                         + f" is a system directory (like /, /etc, /usr, /var/lib or a home): other software keeps "
                         f"files there; {fix}")
    if parent == "/":
        raise InputError(f"{key} {v!r} is a system directory or too shallow (a top-level folder "
                         f"may hold anything); {fix}")
    return p


def check_folders(vars: dict) -> None:
    repo, stack = folder(vars, "triton_model_repository"), folder(vars, "triton_stack_dir")
    if _inside(repo, stack):
        raise InputError(f"triton_model_repository {vars['triton_model_repository']!r} lies in triton_stack_dir "
                         f"{stack}, where bringup keeps the last good revision; set it to a folder of its own, "
                         "like /data/models")
    if _inside(stack, repo):
        raise InputError(f"triton_stack_dir {vars['triton_stack_dir']!r} lies in the model repository {repo}, "
                         "which Triton serves; set it to a folder of its own, like /opt/triton")
