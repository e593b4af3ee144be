"""Triton Inference Server under Docker Compose, with per-GPU-class model configs.

The model repository (``triton_model_repository``, the guide's /data/models)
mirrors the control machine's ``models_dir`` by checksum; each model of
``triton_models`` gets a ``config.pbtxt`` rendered from the inventory and the
host's GPU profile, parsed with Triton's own protobuf schema before anything is
shipped.  ``docker compose up -d`` runs only when the compose file, a config
or a model file changed (the container carries the revision as a label).
After a change the role waits (bounded) for ``/v2/health/ready`` and every
model's ready endpoint; if the new revision does not come up, the previous
compose file and repository are restored and started again, and the run
fails with Triton's own error lines.

Only files bringup shipped are ever removed from the repository: a manifest
in the stack folder lists them (path and sha256).  A shipped file that is no
longer wanted is held in ``<stack>/held/<revision>`` (outside the repository,
so Triton does not serve it) and deleted once the new revision is ready; a
rollback puts the last ready revision's shipped files back from
``<stack>/last-good`` (hard links) and leaves every other file alone.

Variables:
    gpu_profile: ``auto`` (default: the class nvidia-smi shows; no GPU: ``cpu``) or a profile of
        ``bringup/data/gpu_profiles.yaml`` (``l40s``, ``a10``, ``h100``, ``h200``, ...; ``cpu``: KIND_CPU,
        no GPU reservation) or of the inventory's ``gpu_profiles`` (bringup.gpu_profiles).
    triton_models: ``{name: {platform|backend, max_batch_size, input, output,
        instance_count, preferred_batch_size, max_queue_delay_microseconds,
        response_cache, extra}}``; ``input``/``output`` are lists of
        ``{name, data_type, dims}``.
    models_dir: folder on the control machine mirrored into the repository
        (model version folders; a model missing from triton_models may bring
        its own config.pbtxt, which is validated too).  Empty: nothing mirrored.
    triton_max_queue_delay_microseconds: the batching window, 200-1500 µs.  Unset (null, the default):
        the window the host's tuner recorded per model (``/etc/bringup/triton-window.json``, the fact
        ``triton.window``) if any, else 800; a value here pins it (and a provision restores the pin).
        A change of the window alone never restarts Triton: the models are reloaded in place.
        ``invoke tune``'s instance count, max_batch_size (at most the entry's) and preferred sizes are in
        the same record and rendered unless the model's entry pins them; they too reload in place.
    image_transfer: ``pull`` (the host pulls triton_image) or ``push`` (the
        control machine's copy is streamed over SSH into ``docker load``).
    triton_cpuset: Triton's CPUs; empty (default): on a GPU profile, the topology
        planner's Triton CPUs (``triton_cpus_per_gpu`` on each GPU's own node, the
        same plan cpu_tuning exports to /etc/bringup/triton-cpuset).
    triton_image, triton_image_id, triton_shm_size, triton_ports,
    triton_cache_size, triton_ready_timeout, triton_stack_dir.
    triton_model_repository and triton_stack_dir: folders of their own; a
        system folder (/, /etc, /usr, /var/lib, a home, a top-level folder) is
        refused, as is one inside the other.
"""
from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from bringup import topology
from bringup.auditkit import Expect, http_ok, tcp_listening
from bringup.command import sh
from bringup.errors import BringupError, InputError, said
from bringup.facts.triton import WINDOW_RECORD
from bringup.latency.window_tuner import TUNED_SOURCE, manifest_of
from bringup.gpu import gpu_gate
from bringup.gpu_profiles import AUTO, ClassUnknown, ProfileVars, choose, table
from bringup.resources import Directory, File
from bringup.resources.compose import PROJECT_LABEL, REVISION_LABEL, ComposeUp, label_format, revision_hash
from bringup.resources.guard import Skip, Unused
from bringup.resources import image
from bringup.resources.image import DockerImage
from bringup.facts.base import format_cpulist
from bringup.resources.revisions import Revisions
from bringup.resources.tree import LocalFile, Tree, local_tree, parse_manifest
from bringup.vars import AbsPath, RoleVars, Spec, defaults_of, key_matching, want

DELAY_MIN, DELAY_MAX = 200, 1500
DEFAULT_DELAY = 800
#: A window-only change of a config.pbtxt: reload the models in place instead of recreating the container.
RELOAD = "reload triton models"
_WINDOW_LINE = re.compile(r"(?m)^(\s*max_queue_delay_microseconds:\s*)\d+\s*$|^\s*# The batching window: .*$")
#: What `invoke tune` changes on the running Triton and records (instances, batch sizes): like the window, a
#: reload in place, never a new container.
_TUNED_LINES = re.compile(r"(?m)^max_batch_size:\s*\d+\s*$|^\s*preferred_batch_size:.*$|(?<= count: )\d+")

#: The facts this role reads (only these are gathered for it): the planner's, for the cpuset.
FACTS = tuple(dict.fromkeys(("nvidia.smi", "pci.devices", "triton.window", *topology.FACTS)))

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
    max_batch_size: int = want(8, "must be a whole number >= 1", ge=1)
    input: list[Tensor] = want(..., _TENSORS, min_length=1)
    output: list[Tensor] = want(..., _TENSORS, min_length=1)
    instance_count: int | None = want(None, "must be a whole number >= 1", ge=1)
    preferred_batch_size: list[Annotated[int, Field(ge=1)]] | None = want(None, "a list of sizes >= 1")
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


def _int(v, what: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InputError(f"{what} {v!r}: must be a whole number within {lo}-{hi}")
    return v


def _tensors(spec: dict, key: str) -> list[dict]:
    return [{"name": t["name"], "data_type": t["data_type"], "dims": t["dims"]} for t in spec[key]]


def _gpus(vars: dict, facts: dict) -> list[int]:
    """GPU indexes: nvidia-smi's from the facts, else 0..gpu_count-1."""
    listed = [g.get("index") for g in facts.get("nvidia.smi") or [] if isinstance(g.get("index"), int)]
    if listed:
        return sorted(listed)
    n = vars.get("gpu_count")
    return list(range(n)) if isinstance(n, int) and n > 0 else []


def model_configs(vars: dict, facts: dict, render) -> dict[str, str]:
    """``{model: config.pbtxt text}`` for every model of ``triton_models`` (checked by ``Vars``), rendered
    and parsed with Triton's schema."""
    picked = choose(vars, facts)  # the GPU profile: the inventory's, or under auto the GPUs' class
    profile_name, profile = picked.name, picked.profile
    pinned = vars.get("triton_max_queue_delay_microseconds")
    tuned = _tuned_windows(facts) if pinned is None else {}
    served = _tuned_configs(facts)
    gpus = _gpus(vars, facts) if picked.gpu else []
    out = {}
    for name, spec in (vars.get("triton_models") or {}).items():
        mbs = spec.get("max_batch_size", 8)
        # `invoke tune`'s choice (the record): max_batch_size within the inventory's, which is what the model
        # allows; instances and preferred sizes unless the inventory pins them.
        chosen = served.get(name) or {}
        if isinstance(chosen.get("max_batch_size"), int) and 1 <= chosen["max_batch_size"] <= mbs:
            mbs = chosen["max_batch_size"]
        if spec.get("max_queue_delay_microseconds") is not None:
            delay, source = spec["max_queue_delay_microseconds"], "triton_models." + name
        elif pinned is not None:
            delay, source = pinned, "triton_max_queue_delay_microseconds"
        elif name in tuned:
            delay = _int(tuned[name], f"{WINDOW_RECORD}: model {name}'s window_us", DELAY_MIN, DELAY_MAX)
            source = TUNED_SOURCE
        else:
            delay, source = DEFAULT_DELAY, "the default (triton_max_queue_delay_microseconds unset, none tuned)"
        preferred = spec.get("preferred_batch_size")
        preferred = chosen.get("preferred_batch_size") if preferred is None else preferred
        preferred = profile.preferred_batch_size if preferred is None else preferred
        # Triton refuses a preferred size above max_batch_size: the profile's list is cut to fit.
        fitted = [p for p in preferred if p <= mbs] or [mbs]
        # None: the tuned count, else the profile's
        count = spec.get("instance_count") or chosen.get("instance_count") or profile.instance_count
        if picked.gpu and not gpus:
            raise InputError(f"gpu_profile {profile_name}: no GPU found (nvidia-smi lists none and gpu_count is unset)")
        text = render("triton/config.pbtxt.j2", model=name, profile=profile_name, platform=spec.get("platform"),
                      backend=spec.get("backend"), max_batch_size=mbs, inputs=_tensors(spec, "input"),
                      outputs=_tensors(spec, "output"), kind=profile.kind, count=count, gpus=gpus,
                      preferred=fitted, delay=delay, delay_source=source,
                      response_cache=bool(spec.get("response_cache")), extra=spec.get("extra") or "")
        check_config(name, text)
        out[name] = text
    return out


def _tuned_windows(facts) -> dict[str, int]:
    """The windows the host's tuner recorded (fact ``triton.window``); an unreadable record is refused."""
    rec = facts.get("triton.window") if "triton.window" in facts else None
    if not rec:
        return {}
    if rec.get("error"):
        raise BringupError(f"{rec['error']}: fix or remove it, or pin triton_max_queue_delay_microseconds")
    return dict(rec.get("windows") or {})


def _tuned_configs(facts) -> dict[str, dict]:
    """The serving configurations ``invoke tune`` recorded (fact ``triton.window``); none from a bad record."""
    rec = facts.get("triton.window") if "triton.window" in facts else None
    return dict((rec or {}).get("configs") or {}) if not (rec or {}).get("error") else {}


def check_config(model: str, text: str, where: str = "config.pbtxt") -> None:
    """Parse ``text`` with Triton's ModelConfig schema; a bad one is one line naming model, line and field."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    cfg = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as e:
        line = e.GetLine() if e.GetLine() is not None else 0
        msg = re.sub(r"^\d+:\d+ : ('.*?': )?", "", str(e))
        src = text.splitlines()[line - 1].strip() if 0 < line <= len(text.splitlines()) else ""
        raise InputError(f"model {model}: {where} line {line}: {msg}" + (f" (in: {src})" if src else "")) from None
    if cfg.name and cfg.name != model:
        raise InputError(f"model {model}: {where} says name {cfg.name!r}; it must match its folder")


def _local_files(vars: dict, configs: dict[str, str]) -> dict[str, LocalFile]:
    src = vars.get("models_dir") or ""
    if not src:
        return {}
    files = local_tree(Path(src).expanduser())
    for rel, f in files.items():
        model, _, rest = rel.partition("/")
        if rest == "config.pbtxt":
            if model in configs:
                raise InputError(f"{Path(src) / rel}: model {model} is also in triton_models; "
                                 "keep one (the inventory renders its config)")
            check_config(model, f.read_bytes().decode("utf-8", "replace"), where=str(Path(src) / rel))
    return files


#: System folders: never a model repository or a stack folder, nor (first list) anything under them.
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                 "/sys", "/usr")
_SYSTEM = {"/", "/home", "/lost+found", "/media", "/mnt", "/opt", "/root", "/snap", "/srv", "/tmp", "/var"}
#: Under these a folder needs a level of its own: /var/lib or /home/ann are not Triton's.
_SHARED_PARENTS = ("/var", "/home")
_EXAMPLE = {"triton_model_repository": "/data/models", "triton_stack_dir": "/opt/triton"}


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _folder(vars: dict, key: str) -> str:
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


def _static(vars: dict) -> None:
    repo, stack = _folder(vars, "triton_model_repository"), _folder(vars, "triton_stack_dir")
    if _inside(repo, stack):
        raise InputError(f"triton_model_repository {vars['triton_model_repository']!r} lies in triton_stack_dir "
                         f"{stack}, where bringup keeps the last good revision; set it to a folder of its own, "
                         "like /data/models")
    if _inside(stack, repo):
        raise InputError(f"triton_stack_dir {vars['triton_stack_dir']!r} lies in the model repository {repo}, "
                         "which Triton serves; set it to a folder of its own, like /opt/triton")


def validate(vars: dict) -> None:
    """What the types cannot say: the folders are Triton's own, the configs render and parse, models_dir's
    configs parse and do not clash with the inventory's."""
    from bringup.project import content_root
    from bringup.templates import Templates

    _static(vars)
    # Facts are not known yet: GPU profiles assume gpu_count GPUs (or one) to render and parse; under auto,
    # each profile the host could get is rendered.
    facts = {} if vars.get("gpu_count") else {"nvidia.smi": [{"index": 0}]}
    render = Templates(content_root() / "templates").render
    name = vars.get("gpu_profile", AUTO)
    configs: dict[str, str] = {}
    for profile in (table(vars) if name == AUTO else [name]):
        configs = model_configs({**vars, "gpu_profile": profile}, facts, render)
    _local_files(vars, configs)


def cpuset(vars: dict, facts: dict) -> str:
    """Triton's CPUs: ``triton_cpuset`` when the inventory pins them (:func:`bringup.topology.triton_pin`),
    else the topology plan's Triton CPUs (``triton_cpus_per_gpu`` on each GPU's own node, as cpu_tuning
    exports them); "" when the plan has none."""
    pin = topology.triton_pin(vars)
    if pin is not None:
        return pin
    try:
        return format_cpulist(topology.plan_topology(facts, vars).triton_cpus)
    except InputError as e:
        raise InputError(f"triton: cannot place Triton on the planner's CPUs ({e}); set triton_cpuset "
                         "to a CPU list, or fix the facts") from None


class _Desired:
    """Everything the role wants on one host, and the revision hash of it."""

    def __init__(self, host):
        v = host.vars
        _static(v)
        self.vars = v
        self.repo = _folder(v, "triton_model_repository")
        self.stack = _folder(v, "triton_stack_dir")
        self.compose_file = f"{self.stack}/docker-compose.yml"
        self.snapshot = f"{self.stack}/last-good"
        #: What bringup shipped into the repository (sha256sum's format): nothing else there is ever removed.
        self.manifest = manifest_of(self.stack)
        self.container = v["triton_container"]
        self.configs = model_configs(v, host.facts, host.render)
        self.files = _local_files(v, self.configs)
        self.models = sorted(set(self.configs) | {rel.split("/", 1)[0] for rel in self.files if "/" in rel})
        picked = choose(v, host.facts)
        gpus = _gpus(v, host.facts) if picked.gpu else []
        self.cpuset = cpuset(v, host.facts) if gpus else (topology.triton_pin(v) or "")
        cache = any((s or {}).get("response_cache") for s in (v.get("triton_models") or {}).values())
        ctx = dict(image=v["triton_image"], container=self.container, shm_size=str(v["triton_shm_size"]),
                   cpuset=self.cpuset, gpus=gpus, ports=v["triton_ports"],
                   repository=self.repo, cache_size=v["triton_cache_size"] if cache else 0,
                   extra_args=v["triton_extra_args"])
        # The window is not part of the revision: a new window is a reload in place (RELOAD), never a
        # new container (the tuner changes it on the running Triton and records it).
        self.revision = revision_hash(
            host.render("triton/docker-compose.yml.j2", revision="", **ctx),
            [(f"config {name}", _TUNED_LINES.sub("", _WINDOW_LINE.sub("", text)))
             for name, text in sorted(self.configs.items())]
            + [(f"file {rel} {f.executable}", bytes.fromhex(f.sha256)) for rel, f in sorted(self.files.items())])
        self.compose = host.render("triton/docker-compose.yml.j2", revision=self.revision, **ctx)
        self.gpu_profile = picked.gpu

    def tree(self) -> Tree:
        """The repository as bringup ships it; files no longer wanted are held (outside it) until ready."""
        keep = {f"{m}/config.pbtxt": hashlib.sha256(text.encode()).hexdigest() for m, text in self.configs.items()}
        return Tree(self.repo, self.files, keep=keep, manifest=self.manifest, holding=self.holding)

    def revisions(self) -> Revisions:
        """The repository's last good state, kept (snapshot), put back (restore), and what was held released."""
        return Revisions(self.repo, manifest=self.manifest, holding=self.holding)

    @property
    def holding(self) -> str:
        """Where the files this revision no longer ships wait (outside the repository) until it is ready."""
        return f"{self.stack}/held/{self.revision}"

    def compose_up(self) -> ComposeUp:
        return ComposeUp(self.compose_file, project="triton", container=self.container, revision=self.revision)


def _gate(host) -> list | None:
    """Why the role deploys nothing here (nothing to serve, a GPU profile without a GPU, a GPU class not
    known yet), or None.  GPUs of two classes under ``gpu_profile: auto``: one line naming both (InputError)."""
    if not (host.vars.get("triton_models") or host.vars.get("models_dir")):
        return [Unused("triton", "nothing to serve: triton_models is empty and models_dir is unset")]
    try:
        gpu_profile = choose(host.vars, host.facts).gpu
    except ClassUnknown as e:
        # No driver loaded yet (a first run, before its reboot): a run with nvidia-smi answering deploys.
        return [Skip("triton", str(e))]
    if gpu_profile and not [g for g in host.facts.get("nvidia.smi") or [] if isinstance(g.get("index"), int)]:
        # As the GPU roles check (the PCI bus, not gpu_count); a GPU reservation cannot be met without one.
        return gpu_gate(host, "triton", without_gpu_install=False)
    return None


def resources(host):
    gate = _gate(host)
    if gate:
        return gate
    d = _Desired(host)
    return [
        Directory(d.stack, mode="0755"),
        Directory(d.repo, mode="0755"),
        d.tree(),
        *[File(f"{d.repo}/{m}/config.pbtxt", content=text, mode="0644", backup=False, notify=[RELOAD])
          for m, text in sorted(d.configs.items())],
        File(d.compose_file, content=d.compose, mode="0644", backup=False),
        DockerImage(d.vars["triton_image"], source=d.vars["image_transfer"], image_id=d.vars.get("triton_image_id")),
        d.compose_up(),
    ]


def audit(host):
    """What the files do not show: the container of compose project triton up at this revision, the ports
    listening, the server and every model ready."""
    if _gate(host):
        return []  # the role's own Unused, Skip or Fail says why
    d = _Desired(host)
    base = f"http://127.0.0.1:{int(d.vars['triton_ports']['http'])}"

    def container(out: str) -> str | None:
        got = out.split() or ["absent"]
        if got[:1] != ["running"]:
            return f"container {d.container} is {' '.join(got)}, want running"
        if got[2:] != ["triton"]:
            return f"container {d.container} is of compose project {' '.join(got[2:]) or 'none'}, want triton"
        if got[1:2] != [d.revision]:
            return f"container {d.container} runs revision {''.join(got[1:2]) or 'none'}, want {d.revision}"
        return None

    def models(out: str) -> str | None:
        codes = dict(line.split(None, 1) for line in out.splitlines() if len(line.split()) == 2)
        bad = [f"{m} ({codes.get(m, 'no answer')})" for m in d.models if codes.get(m) != "200"]
        return f"triton model(s) not ready: {', '.join(bad)}, want 200 from each" if bad else None

    code = "curl -s -o /dev/null -w '%%{http_code}' --max-time 5 %s || true; echo"
    # One cause, one finding: a stopped container is not also four ports and a server that do not answer.
    up = Expect(f"container {d.container}", sh(
        "docker inspect --format %s -- %s 2>/dev/null || echo absent",
        f"{{{{.State.Status}}}} {label_format(REVISION_LABEL)} {label_format(PROJECT_LABEL)}", d.container),
        container)
    ports = tcp_listening("triton", {k: int(p) for k, p in d.vars["triton_ports"].items()}, needs=up)
    ready = http_ok("triton /v2/health/ready", f"{base}/v2/health/ready", needs=ports)
    return [up, ports, ready,
            Expect("triton models ready", "\n".join(sh("printf '%%s ' %s; " + code, m, f"{base}/v2/models/{m}/ready")
                                                    for m in d.models) or "true", models, needs=ready)]


def HANDLERS(host) -> dict[str, list[str]]:
    """A changed config.pbtxt is loaded in place by Triton's model control API (explicit mode; a load
    without an override re-reads the repository): the old model serves until the new one is ready."""
    if not (host.vars.get("triton_models") or host.vars.get("models_dir")):
        return {}
    base = f"http://127.0.0.1:{int(host.vars['triton_ports']['http'])}"
    lines = [sh("base=%s; deadline=$(( $(date +%%s) + %s ))", base, int(host.vars["triton_ready_timeout"])),
             # A container that is (re)starting loads the new files itself; verify judges its readiness.
             'until curl -sf -m 5 -o /dev/null "$base/v2/health/ready"; do '
             '[ "$(date +%s)" -lt "$deadline" ] || exit 0; sleep 1; done']
    for m in sorted(host.vars.get("triton_models") or {}):
        lines.append(sh('out=$(curl -sS -m 300 -X POST -d "{}" "$base/v2/repository/models/"%s/load 2>&1) '
                        '&& ! printf %%s "$out" | grep -q \'"error"\' || { echo "reload of "%s" failed: $out" >&2; '
                        'exit 1; }', m, m))
    return {RELOAD: ["\n".join(lines)]}


# --------------------------------------------------------------------------
# Readiness gate and rollback


def _wait_script(port: int, container: str, revision: str | None, models: list[str], timeout: int) -> str:
    """Poll Triton on the host until ready, a model fails to load, or ``timeout`` s pass; print key=value."""
    base = f"http://127.0.0.1:{port}"
    lines = [
        sh("c=%s; base=%s; want=%s; deadline=$(( $(date +%%s) + %s ))", container, base, revision or "", timeout),
        sh('got=$(docker inspect --format %s -- "$c" 2>/dev/null)', label_format(REVISION_LABEL)),
        'if [ -n "$want" ] && [ "$got" != "$want" ]; then echo "fail=container $c runs revision ${got:-none}, '
        'not $want"; else',
        '  while :; do',
        '    st=$(docker inspect --format "{{.State.Status}}" -- "$c" 2>/dev/null)',
        # Not started (compose failed half-way), stopped, or gone: no use waiting for it.
        '    case "$st" in created|exited|dead|"") echo "fail=container $c is ${st:-gone}'
        ' (exit code $(docker inspect --format "{{.State.ExitCode}}" -- "$c" 2>/dev/null))'
        ' $(docker inspect --format "{{.State.Error}}" -- "$c" 2>/dev/null | head -c 400)"; break;; esac',
        '    idx=$(curl -s -m 5 -X POST -d "{}" "$base/v2/repository/index" 2>/dev/null)',
        '    if printf %s "$idx" | grep -q \'"state":"UNAVAILABLE"\'; then '
        'echo "fail=a model failed to load: $(printf %s "$idx" | head -c 600)"; break; fi',
        '    if curl -sf -m 5 -o /dev/null "$base/v2/health/ready"; then echo ready=server; break; fi',
        '    if [ "$(date +%s)" -ge "$deadline" ]; then echo "fail=not ready after ' + str(timeout) +
        ' s (container $st)"; break; fi',
        '    sleep 1',
        '  done',
        'fi',
    ]
    for m in models:
        lines.append(sh('if curl -sf -m 5 -o /dev/null "$base/v2/models/"%s/ready; then echo ready=%s; '
                        'else echo notready=%s; fi', m, m, m))
    return "\n".join(lines)


def _triton_errors(t, container: str) -> str:
    """Triton's own error lines (E... from its log), or its last lines."""
    out = t.run_script(sh("docker logs --tail 400 -- %s 2>&1", container)).stdout
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    errors = [l for l in lines if re.match(r"^E\d{4} ", l)] or lines[-3:]
    return " | ".join(errors[-4:])[:1500] or "(no log)"


def _parse_wait(out: str, models: list[str]) -> str | None:
    fail = next((l[5:] for l in out.splitlines() if l.startswith("fail=")), None)
    notready = [l[9:] for l in out.splitlines() if l.startswith("notready=")]
    if fail:
        return fail
    if "ready=server" not in out:
        return f"the readiness check stopped early: {said(out, 300)}"
    if notready:
        return f"model(s) not ready: {', '.join(notready)}"
    return None


def verify(host, t) -> str:
    d = _Desired(host)
    port = int(d.vars["triton_ports"]["http"])
    res = t.run_script(_wait_script(port, d.container, d.revision, d.models, int(d.vars["triton_ready_timeout"])))
    problem = _parse_wait(res.stdout, d.models)
    if problem:
        raise BringupError(f"Triton revision {d.revision} is not ready: {problem}; "
                           f"Triton says: {_triton_errors(t, d.container)}")
    # This revision serves: it is what a later failed deploy falls back to (the files bringup shipped, as
    # hard links: the repository's files are replaced by rename, never in place), and what it no longer
    # ships, held until now, can go.
    keeper = d.revisions()
    snap = t.run_script(keeper.snapshot(d.snapshot, also=(d.compose_file,)) + "\n" + keeper.release())
    if snap.rc != 0:
        raise BringupError(f"revision {d.revision} is ready but saving it as last-good failed: "
                           f"{said(snap.stdout + snap.stderr, 300)}")
    return f"revision {d.revision} ready: server and {len(d.models)} model(s) ({', '.join(d.models) or 'none'})"


def health(host, t) -> str | None:
    """A rolling run's gate after each host (``provision --serial``, drain hooks): the server and every
    model ready, on the host itself (verify's readiness wait, bounded by ``rollout_health_timeout``), the
    container at the revision this run wants.  None when the host serves nothing."""
    if _gate(host):
        return None  # nothing to serve (or no GPU: then the run itself failed)
    d = _Desired(host)
    timeout = int(d.vars["rollout_health_timeout"])
    res = t.run_script(_wait_script(int(d.vars["triton_ports"]["http"]), d.container, d.revision, d.models, timeout))
    problem = _parse_wait(res.stdout, d.models)
    if problem:
        raise BringupError(f"Triton is not serving (waited up to {timeout} s, rollout_health_timeout): {problem}")
    return f"Triton ready at revision {d.revision}, model(s) ready: {', '.join(d.models) or 'none'}"


def rollback(host, t) -> str:
    """Back to the last ready revision: the files bringup shipped then, its compose file, its container.

    Files bringup did not ship are left alone; what the failed run shipped
    goes, what it held comes back.  Whatever stage compose (v1 or v2) stopped
    at, the project's containers are sorted out first: one still running the
    old revision is kept under its own name, the others are removed.
    """
    d = _Desired(host)
    s = d.snapshot
    have = t.run_script("\n".join([
        sh("s=%s; m=%s", s, d.manifest),
        '[ -f "$s/docker-compose.yml" ] || exit 0',
        "sed -n 's/^# Revision \\([0-9a-f]*\\):.*/rev=\\1/p' -- \"$s/docker-compose.yml\"",
        'if [ -f "$s/manifest" ]; then echo format=manifest; sed "s/^/g=/" -- "$s/manifest"',
        'elif [ -d "$s/models" ]; then echo format=copy; '
        '(cd -- "$s/models" && find . -type f -exec sha256sum -- {} +) | sed "s/^/g=/"; fi',
        '[ ! -f "$m" ] || sed "s/^/c=/" -- "$m"',
    ]))
    lines = have.stdout.splitlines()
    fmt = next((l[7:] for l in lines if l.startswith("format=")), None)
    if fmt is None:
        return "nothing: no earlier revision was ever ready on this host (first deploy)"
    old = next((l[4:] for l in lines if l.startswith("rev=")), "")
    good = "\n".join(l[2:] for l in lines if l.startswith("g="))
    current = "\n".join(l[2:] for l in lines if l.startswith("c="))
    record = None
    if fmt == "copy":
        # A snapshot of an earlier bringup: a copy of the whole folder, hand-placed files included.  All come
        # back, but only what the manifest says bringup shipped is recorded as its own (never removed later).
        now = parse_manifest(current)
        record = {rel: sha for rel, sha in parse_manifest(good).items() if rel in now}
    keeper = d.revisions()
    files = f"{s}/files" if fmt == "manifest" else f"{s}/models"
    res = t.run_script("\n".join([
        "set -e",
        "(", keeper.restore(files, good, current, record), ")",
        sh("cp -p -- %s %s", f"{s}/docker-compose.yml", d.compose_file),
        "(", d.compose_up().restore(old or None), ")",
    ]))
    if res.rc != 0:
        raise BringupError(f"restoring the last good revision failed: {said(res.stdout + res.stderr, 400)}")
    models = sorted({rel.split("/", 1)[0] for rel in parse_manifest(good) if "/" in rel})
    port = int(d.vars["triton_ports"]["http"])
    res = t.run_script(_wait_script(port, d.container, old or None, models, int(d.vars["triton_ready_timeout"])))
    problem = _parse_wait(res.stdout, models)
    if problem:
        raise BringupError(f"restored revision {old or '?'} but it is not ready either: {problem}")
    return f"revision {old or '?'} restored and ready ({', '.join(models) or 'no models'})"


# --------------------------------------------------------------------------
# Rack checklist


def checks(host) -> list:
    """The rack checklist's Triton lines: the container release against the loaded driver and the GPUs."""
    from bringup.checks import line
    from bringup.driver_matrix import triton_need, version_key
    from bringup.gpu import driver_version

    drv = driver_version(host.facts)
    image = host.vars.get("triton_image")
    if not drv or not image:
        return []  # no driver: the nvidia_driver role's line says so
    need = triton_need(image)
    if need is None:
        return [line("software", "Triton container vs driver", "WARN", f"{image}: not in the version matrix",
                     "add its release notes' driver requirement to bringup/data/version_matrix.yaml")]
    how = need.meets(drv)
    if how is not None:
        out = [line("software", "Triton container vs driver", "PASS", f"{need.label}; driver {drv}{how}")]
    else:
        out = [line("software", "Triton container vs driver", "FAIL", f"{need.label}; driver {drv}",
                    f"upgrade to R{need.min_branch}+ or pick an older triton_image")]
    cc = need.min_compute_capability
    caps = [g.get("compute_cap") for g in host.facts.get("nvidia.smi") or [] if g.get("compute_cap")]
    if cc and caps and any(version_key(str(c)) < version_key(cc) for c in caps):
        out.append(line("software", "GPU compute capability", "FAIL", f"{caps} < {cc} for Triton {need.release}",
                        "use an older triton_image"))
    return out
