"""TensorRT engines per GPU class, built on the host with ``trtexec`` in NVIDIA's TensorRT container.

For each engine of ``trt_engines`` the ONNX file (and, for INT8, the
calibration cache) is sent from the control machine into
``<trt_engine_dir>/<model>/`` by sha256, and ``trtexec`` builds
``<triton_model_repository>/<model>/<version>/model.plan`` on the host's
first GPU (a host has one GPU class).  Beside the plan, ``model.plan.key.json``
records its key: GPU model, compute capability, driver, CUDA, TensorRT
version, precision, shapes, the ONNX's sha256 (and the calibration cache's):
the engine is rebuilt only when one of them changes, and the plan names it.
The triton role serves the plan: it never touches files it did not ship.
When an engine changed, a running Triton reloads it (the repository API
in explicit model-control mode, else a container restart).

Variables:
    trt_engines: ``{model: {onnx, input, shapes: {min, opt, max}, precision,
        calibration_cache, version, workspace_mib, trtexec_args}}``.  ``onnx``
        and ``calibration_cache`` are files on the control machine;
        ``precision`` is ``fp16`` (default) or ``int8`` (needs
        ``calibration_cache``); ``shapes`` are full input shapes with the
        batch first (the guide: 1/4/8 x 3x224x224); ``version`` the model
        version folder (1); ``workspace_mib`` trtexec's workspace pool (4096,
        the guide's 4 GB); ``trtexec_args`` extra flags (``--inputIOFormats=fp16:chw``).
    tensorrt_image: the TensorRT container (``nvcr.io/nvidia/tensorrt:24.06-py3``), of
        the Triton image's release so that both carry the same TensorRT.
    tensorrt_version: TensorRT of ``tensorrt_image`` when the version matrix does not know its release.
    tensorrt_image_id, image_transfer: as for the other images (pinned ID; pull or push).
    trt_engine_dir: where the ONNX files are kept on the host (/opt/trt-engines).
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Literal

from pydantic import field_validator, model_validator

from bringup.hardware import gpu
from bringup.ssh.command import sh
from bringup.errors import BringupError, InputError
from bringup.userfile import home
from bringup.secrets import HIDDEN, MASK, Vaulted
from bringup.hardware.gpu import gpu_gate
from bringup.resources import image
from bringup.resources.guard import Fail, Unused
from bringup.resources.image import DockerImage
from bringup.resources.files import Directory
from bringup.resources.trt import PLAN, CALIBRATION, ONNX, EngineBuild, GpuClass, TrtEngine, engine_key
from bringup.resources.upload import UploadedFile, file_sha256
from bringup.inventory.vars import AbsPath, RoleVars, Spec, key_matching, want

#: nvidia-smi's GPUs and driver (``nvidia.smi``: name, compute_cap), CUDA (``nvidia.query``), the PCI gate's.
FACTS = tuple(dict.fromkeys(("nvidia.smi", "nvidia.query", *gpu.FACTS)))

#: Engines are built on the GPU: not while the driver the nvidia_driver role installed waits for a reboot.
WAITS_FOR_REBOOT = True

RELOAD = "reload engines in triton"

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
#: An NGC tag's release: ``24.06`` of ``nvcr.io/nvidia/tensorrt:24.06-py3``.
_RELEASE = re.compile(r":(\d{2}\.\d{2})(?:-|$)")
#: Flags the engine sets itself (from the inventory's other keys), not accepted in trtexec_args.
_MANAGED = ("--onnx", "--saveEngine", "--fp16", "--int8", "--best", "--calib", "--minShapes", "--optShapes",
            "--maxShapes", "--memPoolSize", "--workspace", "--skipInference", "--buildOnly")
#: System folders: never the engines' work folder.
_SYSTEM = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/opt", "/proc", "/root", "/run", "/sbin", "/sys",
           "/tmp", "/usr", "/var", "/var/lib")


class EngineVars(Spec):
    """One engine of ``trt_engines``, as the inventory declares it."""

    onnx: str
    input: str = want(..., "must be an input name (letters, digits, _ . : / -)", pattern=r"^[A-Za-z0-9_.:/-]+$")
    shapes: dict[Literal["min", "opt", "max"], list[int]]
    precision: Literal["fp16", "int8"] = "fp16"
    calibration_cache: str | None = None
    version: int = want(1, "must be a whole number >= 1", ge=1)
    workspace_mib: int = want(4096, "must be MiB within 1-1048576", ge=1, le=1 << 20)
    trtexec_args: list[str] = []

    @field_validator("trtexec_args")
    @classmethod
    def _args(cls, v: list[str]) -> list[str]:
        for a in v:
            if not a.startswith("--") or any(c in a for c in "\n\0"):
                raise ValueError(f"{a!r} is not a trtexec flag like --inputIOFormats=fp16:chw")
            if a.split("=", 1)[0] in _MANAGED:
                raise ValueError(f"{a.split('=', 1)[0]} is set by bringup from the engine's other keys")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "EngineVars":
        if set(self.shapes) != {"min", "opt", "max"}:
            raise ValueError("shapes needs min, opt and max")
        lo, opt, hi = self.shapes["min"], self.shapes["opt"], self.shapes["max"]
        if not lo or len({len(lo), len(opt), len(hi)}) != 1 or not all(d >= 1 for d in lo + opt + hi):
            raise ValueError("shapes: min, opt and max are full input shapes of one rank, sizes >= 1 "
                             "(the guide: [1,3,224,224], [4,3,224,224], [8,3,224,224])")
        if not all(a <= b <= c for a, b, c in zip(lo, opt, hi)):
            raise ValueError(f"shapes: min {lo} <= opt {opt} <= max {hi} must hold in every dimension")
        if self.precision == "int8" and not self.calibration_cache:
            raise ValueError("precision int8 needs calibration_cache (a calibration cache file on the control "
                             "machine; without one INT8 scales are guesses)")
        if self.precision != "int8" and self.calibration_cache:
            raise ValueError(f"calibration_cache is only read with precision int8 (this engine is {self.precision})")
        return self


class Vars(image.ImageVars, RoleVars):
    trt_engines: dict[key_matching(_NAME.pattern, "must be letters, digits, '_', '.', '-' (it is the model's "
                                                  "folder in the repository)"), EngineVars] = want(
        {}, "must be a mapping of model name to {onnx, input, shapes, precision, ...}")
    tensorrt_image: str = want("nvcr.io/nvidia/tensorrt:24.06-py3",
                               "an image reference like nvcr.io/nvidia/tensorrt:24.06-py3", pattern=_IMAGE.pattern)
    tensorrt_image_id: str | None = want(None, "sha256:<64 hex digits>", pattern=r"^sha256:[0-9a-f]{64}$")
    tensorrt_version: str | None = want(None, "a version like 10.1.0", pattern=r"^\d+\.\d+(\.\d+){0,2}$")
    trt_engine_dir: AbsPath = "/opt/trt-engines"


def engines(vars: dict) -> dict[str, EngineVars]:
    """``trt_engines`` parsed (checked by ``Vars``); the files it names must exist on the control machine."""
    out = {}
    for name, spec in (vars.get("trt_engines") or {}).items():
        ev = EngineVars.model_validate(spec)
        for key in ("onnx", "calibration_cache"):
            p = getattr(ev, key)
            if p is not None and not Path(home(p)).is_file():
                raise InputError(f"trt_engines.{name}.{key} {p!r}: no such file on the control machine "
                                 f"(relative paths are read from {Path.cwd()})")
        out[str(name)] = ev
    return out


def _release(ref: str) -> str | None:
    m = _RELEASE.search(ref)
    return m.group(1) if m else None


def _matrix_tensorrt(release: str | None) -> str | None:
    """TensorRT of an NGC release from the version matrix (NVIDIA's containers of one release share it)."""
    from bringup.checks import load_matrix

    if release is None:
        return None
    v = ((load_matrix().get("triton") or {}).get(release) or {}).get("tensorrt")
    return str(v) if v else None


def tensorrt_version(vars: dict) -> str:
    """The TensorRT that builds the engines: ``tensorrt_version``, else the matrix's for the image's release.  A
    version that is a secret, or read from a vaulted ``tensorrt_image``'s release, is :class:`Vaulted` (a part of a
    decrypted value is the secret shown): ``********`` in the plan's no-op line and key changes."""
    ref = str(vars.get("tensorrt_image"))
    explicit = vars.get("tensorrt_version")
    if explicit is not None:
        return Vaulted(str(explicit)) if MASK.is_secret(explicit) else str(explicit)
    secret = MASK.is_secret(vars.get("tensorrt_image"))
    found = _matrix_tensorrt(_release(ref))
    if found is None:
        raise InputError(f"tensorrt_image {HIDDEN if secret else ref}: the TensorRT version of this release is not in "
                         "bringup/data/version_matrix.yaml; set tensorrt_version (NVIDIA's TensorRT container "
                         "release notes list it)")
    return Vaulted(found) if secret else found


def _folder(vars: dict, key: str) -> str:
    v = vars.get(key)
    if not isinstance(v, str) or not v.startswith("/") or "\n" in v:
        raise InputError(f"{key} {v!r}: must be an absolute path")
    return "/" + posixpath.normpath(v).lstrip("/")


def _check_triton(vars: dict, specs: dict[str, EngineVars], trt: str) -> None:
    """What the triton role serves must agree with the engines: same TensorRT, plan platform, batch, input."""
    triton_image = str(vars.get("triton_image") or "")
    serving = _matrix_tensorrt(_release(triton_image))
    if serving and serving != trt:
        # A vaulted image's release and TensorRT are parts of its secret: named as vaulted, never shown.
        built = MASK.is_secret(trt) or MASK.is_secret(vars.get("tensorrt_image"))
        served = MASK.is_secret(vars.get("triton_image"))
        same = "nvcr.io/nvidia/tensorrt:<its release>-py3" if served else \
            f"nvcr.io/nvidia/tensorrt:{_release(triton_image)}-py3"
        raise InputError(f"tensorrt_image {HIDDEN if built else vars['tensorrt_image']} builds with TensorRT "
                         f"{'(vaulted, not shown)' if built else trt} but triton_image "
                         f"{HIDDEN if served else triton_image} serves with TensorRT "
                         f"{'(vaulted, not shown)' if served else serving}: a plan loads only in the TensorRT that "
                         f"built it; use the TensorRT container of Triton's release ({same})")
    models = vars.get("triton_models") or {}
    src = vars.get("models_dir") or ""
    for name, ev in specs.items():
        if src and (Path(home(src)) / name / str(ev.version) / PLAN).exists():
            raise InputError(f"trt_engines.{name}: {Path(src) / name / str(ev.version) / PLAN} is also shipped "
                             "from models_dir by the triton role; keep one (remove it there to have it built here)")
        m = models.get(name) if isinstance(models, dict) else None
        if not isinstance(m, dict):
            continue
        if m.get("platform") not in (None, "tensorrt_plan") or m.get("backend") not in (None, "tensorrt"):
            raise InputError(f"trt_engines.{name}: triton_models.{name} is served by "
                             f"{m.get('platform') or m.get('backend')}, not tensorrt_plan; set platform: "
                             "tensorrt_plan there")
        mbs = m.get("max_batch_size")
        if isinstance(mbs, int) and mbs > 0 and ev.shapes["max"][0] < mbs:
            raise InputError(f"trt_engines.{name}.shapes.max batch {ev.shapes['max'][0]} is below "
                             f"triton_models.{name}.max_batch_size {mbs}: Triton refuses the plan; raise max or "
                             "lower max_batch_size")
        names = [t.get("name") for t in m.get("input") or [] if isinstance(t, dict)]
        if names and ev.input not in names:
            raise InputError(f"trt_engines.{name}.input {ev.input!r} is not an input of triton_models.{name} "
                             f"({', '.join(map(str, names))})")


def validate(vars: dict) -> None:
    specs = engines(vars)
    if not specs:
        return
    work, repo = _folder(vars, "trt_engine_dir"), _folder(vars, "triton_model_repository")
    if work in _SYSTEM:
        raise InputError(f"trt_engine_dir {vars['trt_engine_dir']!r} is a system folder; set a folder of its own, "
                         "like /opt/trt-engines")
    for a, b, what in ((work, repo, "in"), (repo, work, "around")):
        if a == b or a.startswith(b.rstrip("/") + "/"):
            raise InputError(f"trt_engine_dir {work} lies {what} the model repository {repo}: Triton would see the "
                             "ONNX files; set a folder of its own, like /opt/trt-engines")
    _check_triton(vars, specs, tensorrt_version(vars))


def gpu_class(facts: dict) -> GpuClass:
    """The host's GPU class from nvidia-smi (one class per host); raises BringupError with why not."""
    smi = [g for g in facts.get("nvidia.smi") or [] if isinstance(g.get("index"), int)]
    if not smi:
        raise BringupError("nvidia-smi lists no GPU (the driver is not loaded?): engines are built on the GPU; "
                           "run the nvidia_driver role (and reboot) first")
    names = sorted({str(g.get("name")) for g in smi})
    if len(names) > 1:
        raise BringupError(f"GPUs of more than one class on this host ({', '.join(names)}): an engine is built "
                           "per GPU class and this host would need one per GPU; put one class per host")
    first = min(smi, key=lambda g: g["index"])
    cuda = (facts.get("nvidia.query") or {}).get("cuda_version")
    values = {"compute capability (nvidia-smi compute_cap)": first.get("compute_cap"),
              "driver version": first.get("driver_version"), "CUDA version (nvidia-smi -q)": cuda}
    missing = [k for k, v in values.items() if not v]
    if missing:
        raise BringupError(f"nvidia-smi does not report the {', '.join(missing)} of {names[0]}: the engine key "
                           "needs it (a driver older than 510 has no compute_cap); update the driver")
    return GpuClass(name=names[0], compute_capability=str(first["compute_cap"]),
                    driver_version=str(first["driver_version"]), cuda_version=str(cuda), index=first["index"],
                    count=len(smi))


def resources(host):
    v = host.vars
    specs = engines(v)
    if not specs:
        return [Unused("trt_engines", "no engines declared: trt_engines is empty")]
    gate = gpu_gate(host, "trt_engines", without_gpu_install=False)
    if gate:
        return gate
    try:
        gpu_now = gpu_class(host.facts)
    except BringupError as e:
        return [Fail("trt_engines", str(e))]
    trt = tensorrt_version(v)
    work, repo = _folder(v, "trt_engine_dir"), _folder(v, "triton_model_repository")
    out: list = [Directory(work, mode="0755"),
                 DockerImage(v["tensorrt_image"], source=v["image_transfer"], image_id=v.get("tensorrt_image_id"))]
    for name, ev in sorted(specs.items()):
        src = f"{work}/{name}"
        onnx = Path(home(ev.onnx))
        onnx_sha = file_sha256(onnx)
        out.append(UploadedFile(f"{src}/{ONNX}", onnx, sha256=onnx_sha))
        calib_sha = None
        if ev.calibration_cache:
            calib = Path(home(ev.calibration_cache))
            calib_sha = file_sha256(calib)
            out.append(UploadedFile(f"{src}/{CALIBRATION}", calib, sha256=calib_sha))
        build = EngineBuild(model=name, version=ev.version, input=ev.input, shapes=dict(ev.shapes),
                            precision=ev.precision, workspace_mib=ev.workspace_mib, extra_args=tuple(ev.trtexec_args),
                            onnx_sha256=onnx_sha, calibration_sha256=calib_sha)
        out.append(TrtEngine(build, key=engine_key(gpu_now, build, trt), image=v["tensorrt_image"],
                             gpu_index=gpu_now.index, source_dir=src, out_dir=f"{repo}/{name}/{ev.version}",
                             notify=[RELOAD]))
    return out


def HANDLERS(host) -> dict[str, list[str]]:
    """A running Triton loads the new plans: by its repository API (explicit mode), else by a restart."""
    v = host.vars
    models = sorted(engines(v))
    port, container = int(v["triton_ports"]["http"]), str(v["triton_container"])
    timeout = int(v.get("triton_ready_timeout") or 180)
    return {RELOAD: ["\n".join([
        sh("c=%s; base=%s; end=$(( $(date +%%s) + %s ))", container, f"http://127.0.0.1:{port}", timeout),
        'if [ "$(docker inspect --format "{{.State.Running}}" -- "$c" 2>/dev/null)" != true ]; then',
        '  echo "Triton ($c) is not running: it loads the new engines when it starts"; exit 0; fi',
        "ok=1",
        *[sh('curl -sf -m 120 -X POST -d "{}" "$base/v2/repository/models/"%s/load >/dev/null || ok=0', m)
          for m in models],
        'if [ "$ok" = 1 ]; then echo "Triton reloaded the engines"; exit 0; fi',
        # Not in explicit model-control mode: Triton reads its plans when it starts.
        'docker restart -- "$c" >/dev/null',
        'until curl -sf -m 5 -o /dev/null "$base/v2/health/ready"; do',
        '  if [ "$(date +%s)" -ge "$end" ]; then echo "Triton ($c) restarted for the new engines but is not ready; '
        'see docker logs $c"; exit 1; fi',
        "  sleep 1",
        "done",
        'echo "Triton restarted with the new engines"',
    ])]}
