"""A TensorRT engine (a serialized plan) built on the host by ``trtexec`` in NVIDIA's TensorRT container.

A plan only runs on the GPU model and the TensorRT that built it, so it is
keyed: GPU model, compute capability, driver, CUDA, TensorRT version,
precision, shapes and the sha256 of the ONNX file (and of the INT8
calibration cache).  The key is written beside the plan
(``model.plan.key.json``); the engine is rebuilt only when a part of the key
changed, and the plan says which.

The build runs in one script: ``trtexec`` writes a temporary plan beside the
final one; only when it succeeded is the plan renamed into place, and the key
file is written last.  A failed build leaves the previous plan and key as they
were and no partial file.
"""
from __future__ import annotations

import base64
import hashlib
import json
import posixpath
from dataclasses import dataclass, field

from ..ssh.command import join, sh
from .base import Plan, Resource, kv_lines
from .files import _check_path
from ..secrets import HIDDEN, MASK, Vaulted
from ..untrusted import loads

__all__ = ["EngineBuild", "GpuClass", "TrtEngine", "engine_key", "key_digest", "key_changes", "trtexec_argv",
           "PLAN", "KEY_FILE", "ONNX", "CALIBRATION", "PRECISIONS"]

#: Triton's default file name for a ``tensorrt_plan`` model, and the key file beside it.
PLAN = "model.plan"
KEY_FILE = PLAN + ".key.json"
#: The staged inputs, in the engine's source folder on the host (mounted read-only as /in).
ONNX = "model.onnx"
CALIBRATION = "calibration.cache"
#: Precision -> trtexec flags.  INT8 keeps FP16 on, as the guide's builder does: layers without an
#: INT8 kernel fall back to FP16 rather than FP32.
PRECISIONS = {"fp16": ["--fp16"], "int8": ["--fp16", "--int8"]}
#: Temporary names of a build in progress (bringup's own: removed when a cut-short build left them).
_TMP_PLAN = ".model.plan.bringup-new"
_TMP_KEY = ".model.plan.key.json.bringup-new"

#: Key parts, in the order a change is reported, and how they are called.
KEY_LABELS = {
    "gpu_model": "GPU model",
    "compute_capability": "compute capability",
    "driver_version": "driver",
    "cuda_version": "CUDA",
    "tensorrt_version": "TensorRT",
    "precision": "precision",
    "shapes": "shapes",
    "onnx_sha256": "ONNX sha256",
    "calibration_sha256": "calibration cache sha256",
    "builder": "trtexec options",
}


@dataclass(frozen=True)
class GpuClass:
    """The GPU class of a host, as nvidia-smi reports it; engines are built on ``index``."""

    name: str
    compute_capability: str
    driver_version: str
    cuda_version: str
    index: int = 0
    count: int = 1


@dataclass(frozen=True)
class EngineBuild:
    """One engine to build: the model folder, its input and shapes, precision and trtexec options."""

    model: str
    version: int
    input: str
    shapes: dict[str, list[int]]  # min, opt, max
    precision: str = "fp16"
    workspace_mib: int = 4096
    extra_args: tuple[str, ...] = ()
    onnx_sha256: str = ""
    calibration_sha256: str | None = None

    @property
    def int8(self) -> bool:
        return self.precision == "int8"

    def builder_options(self) -> list[str]:
        """The trtexec options besides files, precision and shapes (part of the key)."""
        return [f"--memPoolSize=workspace:{self.workspace_mib}", *self.extra_args]


def _shape(name: str, dims: list[int]) -> str:
    # trtexec reads "name:1x3x224x224"; a name with a colon of its own (tf2onnx's "input:0") is quoted.
    return f"{repr(name) if ':' in name else name}:{'x'.join(str(d) for d in dims)}"


def trtexec_argv(e: EngineBuild, save_engine: str, source: str = "/in") -> list[str]:
    """trtexec's arguments for ``e`` (inputs under ``source`` in the container)."""
    argv = ["trtexec", f"--onnx={source}/{ONNX}", f"--saveEngine={save_engine}", *PRECISIONS[e.precision]]
    if e.int8:
        argv.append(f"--calib={source}/{CALIBRATION}")
    argv += [f"--{k}Shapes={_shape(e.input, e.shapes[k])}" for k in ("min", "opt", "max")]
    # Build only: the timing run after the build is trtexec's benchmark, not needed here.
    return argv + e.builder_options() + ["--skipInference"]


def engine_key(gpu: GpuClass, e: EngineBuild, tensorrt_version: str) -> dict:
    """What makes a plan valid (or different): a plan built under another key is rebuilt."""
    return {
        "gpu_model": gpu.name,
        "compute_capability": gpu.compute_capability,
        "driver_version": gpu.driver_version,
        "cuda_version": gpu.cuda_version,
        # A vaulted TensorRT (of a vaulted tensorrt_image) stays Vaulted: the same text in the key and its digest,
        # ******** wherever the plan shows it.
        "tensorrt_version": tensorrt_version if isinstance(tensorrt_version, Vaulted) else str(tensorrt_version),
        "precision": e.precision,
        "shapes": {"input": e.input, **{k: list(e.shapes[k]) for k in ("min", "opt", "max")}},
        "onnx_sha256": e.onnx_sha256,
        "calibration_sha256": e.calibration_sha256,
        "builder": e.builder_options(),
    }


def key_digest(key: dict) -> str:
    """The key's sha256 (of its canonical JSON)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _show(part: str, value) -> str:
    if MASK.is_secret(value):
        return HIDDEN
    if value is None:
        return "none"
    if part.endswith("sha256") and isinstance(value, str):
        return value[:12]
    if part == "shapes" and isinstance(value, dict):
        return " ".join(f"{k} {'x'.join(map(str, value.get(k) or []))}" for k in ("min", "opt", "max")) + \
            f" ({value.get('input')})"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def key_changes(old: dict, new: dict) -> dict[str, tuple[str, str]]:
    """``{label: (old, new)}`` for each part of the key that differs, in :data:`KEY_LABELS` order."""
    parts = [*KEY_LABELS, *sorted((set(old) | set(new)) - set(KEY_LABELS))]
    return {KEY_LABELS.get(p, p): (_show(p, old.get(p)), _show(p, new.get(p)))
            for p in parts if old.get(p) != new.get(p)}


class TrtEngine(Resource):
    """``<out_dir>/model.plan`` built from the staged ONNX under ``source_dir`` for ``key``.

        TrtEngine(build, key=engine_key(gpu, build, "10.1.0"), image="nvcr.io/nvidia/tensorrt:24.06-py3",
                  gpu_index=0, source_dir="/opt/trt-engines/resnet50", out_dir="/data/models/resnet50/1")

    A plan without a key file beside it was not built by bringup: it is never
    replaced (the plan fails and says how to hand it over).
    """

    kind = "trt-engine"

    def __init__(self, build: EngineBuild, *, key: dict, image: str, gpu_index: int, source_dir: str, out_dir: str,
                 notify=()):
        out_dir, source_dir = out_dir.rstrip("/"), source_dir.rstrip("/")
        super().__init__(f"{out_dir}/{PLAN}", notify=notify)
        for p in (out_dir, source_dir):
            _check_path(p)
        self.build, self.key, self.image, self.gpu_index = build, key, image, int(gpu_index)
        self.source_dir, self.out_dir = source_dir, out_dir
        self.plan_path, self.key_path = f"{out_dir}/{PLAN}", f"{out_dir}/{KEY_FILE}"
        self.digest = key_digest(key)
        #: The container's name: a build cut short (the connection lost) is found and removed by the next one.
        self.container = f"bringup-trtexec-{build.model}"

    def read(self) -> str:
        return sh("p=%s; k=%s\n"
                  "if [ -L \"$p\" ] || { [ -e \"$p\" ] && [ ! -f \"$p\" ]; }; then echo plan=other\n"
                  "elif [ -f \"$p\" ]; then printf 'plan_sha256='; sha256sum < \"$p\" | cut -c1-64\n"
                  "else echo plan=absent; fi\n"
                  "if [ -f \"$k\" ]; then printf 'key='; base64 -w0 < \"$k\"; echo; fi", self.plan_path, self.key_path)

    def recorded(self, current: str) -> dict | None:
        """The key file found beside the plan (None: none; ``{}``: unreadable)."""
        raw = kv_lines(current).get("key")
        if raw is None:
            return None
        try:
            doc = loads(base64.b64decode(raw), what="the key file")
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) and isinstance(doc.get("parts"), dict) else {}

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        if st.get("plan") == "other":
            return Plan.fail(f"{self.plan_path} exists and is not a regular file; move it away first")
        have = st.get("plan_sha256", "").strip() or None
        rec = self.recorded(current)
        short = self.digest[:12]
        if have and rec is None:
            return Plan.fail(f"{self.plan_path} exists without {KEY_FILE} beside it: bringup did not build it and "
                             "will not replace it; move it out of the model repository to have bringup build the "
                             "engine here")
        if have is None:
            why = "no engine yet" if not rec else "the plan is missing (its key file is there)"
            changes = {"engine": ("absent", f"key {short}")}
        elif not rec:
            why, changes = "its key file is unreadable", {"engine": ("key unreadable", f"key {short}")}
        elif rec.get("plan_sha256") != have:
            why = "the plan changed since bringup built it"
            changes = {"engine": (f"plan {have[:12]} (built {str(rec.get('plan_sha256'))[:12]})", f"key {short}")}
        else:
            changes = key_changes(rec["parts"], self.key)
            if not changes:
                return Plan.noop(f"engine up to date: key {short} matches ({self.key['gpu_model']}, "
                                 f"TensorRT {MASK.mask_value(self.key['tensorrt_version'])}, {self.key['precision']})")
            why = "rebuilt: " + ", ".join(changes) + " changed"
            changes["engine"] = (f"key {str(rec.get('key', ''))[:12]}", f"key {short}")
        return Plan(commands=[self.build_script()], changes=changes, reason=why)

    def docker_argv(self) -> list[str]:
        """``docker run`` of trtexec on GPU ``gpu_index``: the sources read-only at /in, the plan's folder at /out."""
        return ["docker", "run", "--rm", "--name", self.container, "--gpus", f"device={self.gpu_index}",
                "-v", f"{self.source_dir}:/in:ro", "-v", f"{self.out_dir}:/out", self.image,
                *trtexec_argv(self.build, f"/out/{_TMP_PLAN}")]

    def key_document(self) -> tuple[str, str]:
        """The key file's text around the plan's sha256 (known once built): ``(head, tail)``."""
        doc = {"key": self.digest, "parts": self.key, "image": self.image, "built_on_gpu": self.gpu_index,
               "trtexec": trtexec_argv(self.build, f"/out/{PLAN}")[1:], "plan_sha256": "\0"}
        head, tail = json.dumps(doc, indent=1, sort_keys=True).split("\\u0000")
        return head, tail + "\n"

    def build_script(self) -> str:
        head, tail = self.key_document()
        b = self.build
        checks = [sh('[ "$(sha256sum < "$s"/%s | cut -c1-64)" = %s ] || '
                     '{ echo "$s/"%s" is not the file planned (sha256 %s): not building from it"; exit 1; }',
                     name, sha, name, sha[:12])
                  for name, sha in ((ONNX, b.onnx_sha256), (CALIBRATION, b.calibration_sha256)) if sha]
        return "\n".join([
            "set -e",
            sh("o=%s; s=%s; p=%s; k=%s; t=%s; kt=%s; n=%s", self.out_dir, self.source_dir, self.plan_path,
               self.key_path, posixpath.join(self.out_dir, _TMP_PLAN), posixpath.join(self.out_dir, _TMP_KEY),
               self.container),
            'mkdir -p -- "$o"',
            # What a build cut short left (bringup's own names only): its container, its temporary files.
            'docker rm -f -- "$n" >/dev/null 2>&1 || true',
            'rm -f -- "$t" "$kt"',
            *checks,
            "trap 'rm -f -- \"$t\" \"$kt\"' EXIT",
            ': > "$t"',
            "if ! log=$(" + join(self.docker_argv()) + " 2>&1); then",
            '  printf "%s\\n" "$log" | grep -v "^\\[I\\]" | tail -n 15',
            sh('  echo "trtexec failed for %s: the previous plan (if any) is left as it was"; exit 1', b.model),
            "fi",
            sh('[ -s "$t" ] || { echo "trtexec succeeded but wrote no plan for %s"; exit 1; }', b.model),
            'chmod 0644 -- "$t"',
            'ps=$(sha256sum < "$t" | cut -c1-64)',
            sh('printf "%%s%%s%%s" %s "$ps" %s > "$kt"', head, tail),
            'chmod 0644 -- "$kt"',
            'sync -- "$t" "$kt" 2>/dev/null || sync',
            # The plan first, the key last: a key never names a plan that is not in place.
            'mv -f -- "$t" "$p"',
            'mv -f -- "$kt" "$k"',
            "trap - EXIT",
            'sync -- "$o" 2>/dev/null || true',
            sh("echo %s", f"built {PLAN} for {b.model} (key {self.digest[:12]})"),
        ])
