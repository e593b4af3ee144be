"""What ``--host X`` means to the benchmark: Triton's address, and the model's input."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from .options import dims as item_dims

__all__ = ["Target", "ModelInput", "resolve", "parse_int_list", "parse_windows", "DTYPES"]

#: Triton config data types -> the wire names the clients use.
DTYPES = {"TYPE_FP16": "FP16", "TYPE_FP32": "FP32", "TYPE_FP64": "FP64", "TYPE_INT8": "INT8",
          "TYPE_INT16": "INT16", "TYPE_INT32": "INT32", "TYPE_INT64": "INT64", "TYPE_UINT8": "UINT8",
          "TYPE_BF16": "BF16", "TYPE_BOOL": "BOOL"}
NUMPY = {"FP16": "float16", "FP32": "float32", "FP64": "float64", "INT8": "int8", "INT16": "int16",
         "INT32": "int32", "INT64": "int64", "UINT8": "uint8", "BOOL": "bool"}


@dataclass
class ModelInput:
    name: str
    datatype: str            # wire name: FP16, FP32, ...
    dims: list[int]          # one item, without the batch dimension

    @property
    def numpy_dtype(self) -> str:
        if self.datatype not in NUMPY:
            raise InputError(f"input {self.name}: data type {self.datatype} is not supported by bench")
        return NUMPY[self.datatype]


@dataclass
class Target:
    host: str
    address: str
    grpc_port: int
    model: str
    max_batch_size: int | None = None
    input: ModelInput | None = None      # None: ask the server's model metadata
    slo_p95_ms: float | None = None
    vars: dict = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return f"{host_port(self.address)}:{self.grpc_port}"


def host_port(address: str) -> str:
    """``address`` as the host part of ``host:port`` and of a URL: an IPv6 address in brackets (``[::1]``), a
    name or an IPv4 address as it is."""
    return f"[{address}]" if ":" in address else address


def parse_int_list(text, what: str, lo: int = 1) -> list[int]:
    """``"1,4,16"`` -> ``[1, 4, 16]``; anything else is one clear error."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    out = []
    for t in items:
        try:
            v = int(t)
        except ValueError:
            raise InputError(f"--{what} {text!r}: a comma separated list of whole numbers >= {lo}") from None
        if v < lo:
            raise InputError(f"--{what} {text!r}: {v} is below {lo}")
        out.append(v)
    if not out:
        raise InputError(f"--{what} {text!r}: empty")
    return list(dict.fromkeys(out))


def parse_windows(text) -> list[int | None]:
    """``--window-us none,200,800``: ``None`` is no dynamic batching; numbers are µs (0..1500)."""
    out: list[int | None] = []
    for t in [t.strip() for t in str(text).split(",") if t.strip()]:
        if t.lower() in ("none", "off"):
            out.append(None)
            continue
        try:
            v = int(t)
        except ValueError:
            raise InputError(f"--window-us {text!r}: 'none' or whole microseconds, comma separated") from None
        if not 0 <= v <= 1500:
            raise InputError(f"--window-us {text!r}: {v} is outside 0..1500 µs")
        out.append(v)
    if not out:
        raise InputError(f"--window-us {text!r}: empty")
    return out


def _input_from_spec(spec: dict, model: str) -> ModelInput | None:
    ins = spec.get("input") or []
    if not ins:
        return None
    first = ins[0]
    dt = str(first.get("data_type", ""))
    if dt not in DTYPES:
        raise InputError(f"triton_models.{model}.input[0].data_type {dt!r}: bench knows {', '.join(DTYPES)}")
    return ModelInput(str(first["name"]), DTYPES[dt], [int(d) for d in first.get("dims", [])])


def resolve(host, triton_vars: dict, *, model: str | None = None, address: str | None = None,
            grpc_port: int | None = None, input_name: str | None = None, input_shape: str | None = None,
            dtype: str | None = None) -> Target:
    """The benchmark target of an inventory host, with its triton role variables merged."""
    models = triton_vars.get("triton_models") or {}
    if model is None:
        if len(models) != 1:
            names = ", ".join(sorted(models)) or "none in triton_models"
            raise InputError(f"host {host.name}: pick the model with --model ({names})")
        model = next(iter(models))
    spec = models.get(model) or {}
    ports = triton_vars.get("triton_ports") or {}
    try:
        port = int(grpc_port if grpc_port is not None else ports.get("grpc", 8001))
    except (TypeError, ValueError):
        raise InputError(f"host {host.name}: triton_ports.grpc {ports.get('grpc')!r} is not a port") from None
    if address is None:
        conn = host.connection
        address = conn.ansible_host or ("127.0.0.1" if conn.ansible_connection == "local" else host.name)
    inp = _input_from_spec(spec, model) if spec else None
    if input_name or input_shape or dtype:
        if not (input_name and input_shape and dtype) and inp is None:
            raise InputError("--input-name, --input-shape and --dtype go together for a model "
                             "outside triton_models")
        # Every dimension kept: 3,224,224 is three of them (a list of sizes, not a set of choices).
        dims = item_dims(input_shape) if input_shape else inp.dims
        dt = str(dtype).upper() if dtype else inp.datatype
        dt = DTYPES.get(dt, dt)
        inp = ModelInput(input_name or inp.name, dt, dims)
        inp.numpy_dtype  # noqa: B018 - validates
    slo = triton_vars.get("latency_slo_p95_ms", host.vars.get("latency_slo_p95_ms"))
    mbs = spec.get("max_batch_size")
    return Target(host.name, str(address), port, model, int(mbs) if mbs else None, inp,
                  float(slo) if slo is not None else None, host.vars)
