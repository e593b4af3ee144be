"""The models' ``config.pbtxt``: rendered from the inventory, the host's GPU profile and what its tuner
recorded, then parsed with Triton's own schema (:func:`model_configs`); and the files of ``models_dir``
(:func:`local_files`), whose own configs are parsed too."""
from __future__ import annotations

import re
from pathlib import Path

from bringup.errors import BringupError, InputError
from bringup.userfile import home
from bringup.facts.triton import WINDOW_RECORD
from bringup.hardware.gpu_profiles import MAX_INSTANCES, choose
from bringup.latency.window_tuner import TUNED_SOURCE
from bringup.resources.tree import LocalFile, local_tree

from .variables import DELAY_MAX, DELAY_MIN

DEFAULT_DELAY = 800
#: A window-only change of a config.pbtxt: reload the models in place instead of recreating the container.
RELOAD = "reload triton models"
_WINDOW_LINE = re.compile(r"(?m)^(\s*max_queue_delay_microseconds:\s*)\d+\s*$|^\s*# The batching window: .*$")
#: What `invoke tune` changes on the running Triton and records (instances, batch sizes): like the window, a
#: reload in place, never a new container.
_TUNED_LINES = re.compile(r"(?m)^max_batch_size:\s*\d+\s*$|^\s*preferred_batch_size:.*$|(?<= count: )\d+")


def revision_text(config: str) -> str:
    """What of a rendered ``config.pbtxt`` goes into the revision: all but the window and ``invoke tune``'s
    lines, which a reload changes in place (:data:`RELOAD`), never a new container."""
    return _TUNED_LINES.sub("", _WINDOW_LINE.sub("", config))


def _int(v, what: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InputError(f"{what} {v!r}: must be a whole number within {lo}-{hi}")
    return v


def _tensors(spec: dict, key: str) -> list[dict]:
    return [{"name": t["name"], "data_type": t["data_type"], "dims": t["dims"]} for t in spec[key]]


def gpu_indexes(vars: dict, facts: dict) -> list[int]:
    """GPU indexes: nvidia-smi's from the facts, else 0..gpu_count-1."""
    listed = [g.get("index") for g in facts.get("nvidia.smi") or [] if isinstance(g.get("index"), int)]
    if listed:
        return sorted(listed)
    n = vars.get("gpu_count")
    if isinstance(n, int) and not isinstance(n, bool) and n > MAX_GPUS:
        raise InputError(f"gpu_count {n if n < 10**12 else f'of {len(str(n))} digits'}: more GPUs than one host "
                         f"holds (at most {MAX_GPUS}); set the host's GPU count")
    return list(range(n)) if isinstance(n, int) and n > 0 else []


#: The most GPUs one host is taken to hold (an NVL72 tray holds 4; the largest boards 16).
MAX_GPUS = 256


def model_configs(vars: dict, facts: dict, render) -> dict[str, str]:
    """``{model: config.pbtxt text}`` for every model of ``triton_models`` (checked by ``Vars``), rendered
    and parsed with Triton's schema."""
    picked = choose(vars, facts)  # the GPU profile: the inventory's, or under auto the GPUs' class
    profile_name, profile = picked.name, picked.profile
    pinned = vars.get("triton_max_queue_delay_microseconds")
    tuned = _tuned_windows(facts) if pinned is None else {}
    served = _tuned_configs(facts)
    gpus = gpu_indexes(vars, facts) if picked.gpu else []
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
        if not spec.get("instance_count") and chosen.get("instance_count"):  # the host's record: bounded too
            count = _int(count, f"{WINDOW_RECORD}: model {name}'s instance_count", 1, MAX_INSTANCES)
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


def local_files(vars: dict, configs: dict[str, str]) -> dict[str, LocalFile]:
    src = vars.get("models_dir") or ""
    if not src:
        return {}
    files = local_tree(Path(home(src)))
    for rel, f in files.items():
        model, _, rest = rel.partition("/")
        if rest == "config.pbtxt":
            if model in configs:
                raise InputError(f"{Path(src) / rel}: model {model} is also in triton_models; "
                                 "keep one (the inventory renders its config)")
            check_config(model, f.read_bytes().decode("utf-8", "replace"), where=str(Path(src) / rel))
    return files
