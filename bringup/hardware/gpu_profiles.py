"""GPU profiles: per GPU class, how Triton serves a model on it, and which class a host's GPUs are.

A profile is data (``bringup/data/gpu_profiles.yaml``), typed by :class:`Profile`: Triton's
instances per GPU (``instance_count``) and preferred batch sizes (``preferred_batch_size``),
``kind`` (``KIND_GPU``, or ``KIND_CPU`` for ``cpu``), what the facts show of a GPU of the class
(``match``: nvidia-smi's name, compute capability, memory) and where each value comes from
(``source``).  Only ``l40s`` and ``a10`` were measured (the guide's rack); every other shipped
profile states its reason.

``gpu_profile`` (default ``auto``) names the profile a host is served with; ``auto`` is the class
its GPUs show (:func:`detect`): one profile whose ``match`` every GPU meets; a host of two classes,
or with a GPU that no profile matches, is one error naming them; a host without a GPU is ``cpu``.
The inventory's ``gpu_profiles`` adds profiles or overrides shipped ones, key by key, through the
same model (an unknown key is one line with the closest known one)::

    gpu_profiles:
      h200: {instance_count: 3, source: {instance_count: "invoke bench on trt-h200-01, 2025-03"}}
      rtx6000ada:
        match: {name: 'RTX 6000 Ada', compute_cap: ['8.9']}
        preferred_batch_size: [2, 4, 8]
        instance_count: 2

    chosen = choose(host_vars, facts)      # Chosen(name='h200', profile=Profile(...), detected=True, ...)
"""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Mapping

from pydantic import Field, ValidationError, field_validator, model_validator

from .. import regexes
from ..errors import InputError
from ..latency import MAX_BATCH  # the package's leaf: no bench code, no pydantic models of the bench
from ..process import command
from ..shipped import shipped_yaml
from ..inventory.vars import RoleVars, Spec, key_matching, one_line, want

__all__ = ["AUTO", "MAX_INSTANCES", "MAX_BATCH", "BatchSizes", "Profile", "Match", "ProfileVars", "Chosen",
           "Detected", "ClassUnknown", "shipped", "table", "detect", "choose", "describe", "matches", "memory_bandwidth", "inventory_matches"]

#: Triton instances per GPU at most (per host for ``KIND_CPU``): each instance holds its own copy of the model in
#: the GPU's memory and its own CUDA streams; ``invoke tune`` searches 1-4, and past a few dozen the copies only
#: contend for the same SMs.  A count above it is a typo (``instance_count: 1000000000`` deployed 100000).
MAX_INSTANCES = 32
#: A batch size is at most MAX_BATCH (``max_batch_size``, ``preferred_batch_size``): the bench client's bound on a
#: request batch (:data:`bringup.latency.MAX_BATCH`, 65536), so that what is served can be measured.
#: A list of preferred batch sizes, each 1..MAX_BATCH (a profile's and a model's).
BatchSizes = list[Annotated[int, Field(ge=1, le=MAX_BATCH)]]
_BATCHES = f"a list of batch sizes from 1 to {MAX_BATCH}, like [2, 4, 8]"
_INSTANCES = f"must be a whole number from 1 to {MAX_INSTANCES} (Triton instances per GPU)"

#: ``gpu_profile: auto``: the class the facts show.
AUTO = "auto"
_NAME = r"[a-z0-9][a-z0-9_.-]{0,63}"
_PROFILE_NAME = "is not a profile name: use lower-case letters, digits, '_', '.', '-'"


class Memory(Spec):
    """Bounds on nvidia-smi's memory.total, MiB."""

    min: int | None = want(None, "must be a whole number of MiB >= 1", ge=1)
    max: int | None = want(None, "must be a whole number of MiB >= 1", ge=1)


def _bounded_regex(v: str | None) -> str | None:
    """A name match, held to what a search can do in bounded time (:func:`bringup.regexes.problem`)."""
    why = None if v is None else regexes.problem(v)
    if why:
        raise ValueError(why)
    return v


def _name_search(pattern: str, gpu: Mapping[str, Any]) -> bool:
    """Whether ``pattern`` (a profile's name match) is found in ``gpu``'s name; one that runs too long is one line."""
    try:
        return regexes.search(pattern, str(gpu.get("name") or ""))
    except regexes.RegexTimeout as e:
        raise InputError(f"gpu_profiles: the name match {e}; write a simpler one") from None


class Match(Spec):
    """What the facts show of a GPU of the class (``nvidia.smi``): every key given must hold."""

    name: str = want(..., "a regular expression searched in nvidia-smi's GPU name, like '\\bH100\\b'")
    compute_cap: list[Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+$")]] | None = want(
        None, "a list of compute capabilities like ['9.0']")
    memory_mib: Memory | None = want(None, "a mapping with min and/or max (MiB of memory.total)")

    @field_validator("name")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return _bounded_regex(v)


class Sources(Spec):
    """Where each value of a profile comes from (a measurement, the guide, a stated reason)."""

    preferred_batch_size: str | None = None
    instance_count: str | None = None


class Bandwidth(Spec):
    """One variant of a class's device memory bandwidth (the first whose ``name``/``memory_mib`` the GPU meets):
    the datasheet's figure and the datasheet it comes from."""

    name: str | None = want(None, "a regular expression searched in nvidia-smi's GPU name, like 'NVL'")
    memory_mib: Memory | None = want(None, "a mapping with min and/or max (MiB of memory.total)")
    gbs: float = want(..., "must be the memory bandwidth in GB/s (> 0)", gt=0)
    source: str = want(..., "where the figure comes from (a datasheet)", min_length=1)

    @field_validator("name")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return _bounded_regex(v)


class Profile(Spec):
    """A GPU profile.  In the inventory's ``gpu_profiles`` every key is optional: an entry named like a
    shipped profile overrides the keys it gives; a new one needs preferred_batch_size and instance_count."""

    kind: Literal["KIND_GPU", "KIND_CPU"] | None = want(None, "must be KIND_GPU or KIND_CPU")
    preferred_batch_size: BatchSizes | None = want(None, _BATCHES, min_length=1)
    instance_count: int | None = want(None, _INSTANCES, ge=1, le=MAX_INSTANCES)
    match: Match | None = want(None, "a mapping: name (a regular expression), compute_cap, memory_mib")
    source: Sources | None = want(None, "a mapping: preferred_batch_size and instance_count, each a text")
    #: Device memory bandwidth by variant of the class, with its source (issue 31's acceptance limits).
    memory_bandwidth: list[Bandwidth] | None = want(
        None, "a list of {name, memory_mib, gbs, source}: the class's memory bandwidth by variant", min_length=1)


#: The values a complete profile has.
_VALUES = ("preferred_batch_size", "instance_count")


@functools.cache
def shipped() -> dict[str, Profile]:
    """The profiles shipped in ``bringup/data/gpu_profiles.yaml``, each complete and sourced."""
    raw = shipped_yaml("gpu_profiles.yaml")
    out: dict[str, Profile] = {}
    for name, entry in raw.items():
        p = Profile.model_validate(entry)
        missing = [k for k in _VALUES if getattr(p, k) is None or getattr(p.source, k, None) is None]
        if missing:  # the file is ours: a test keeps this from ever happening
            raise ValueError(f"gpu_profiles.yaml: {name} lacks {missing} or their source")
        out[name] = p.model_copy(update={"kind": p.kind or "KIND_GPU"})
    return out


def table(vars: Mapping[str, Any]) -> dict[str, Profile]:
    """Every profile a host can use: the shipped ones with the inventory's ``gpu_profiles`` over them.

    An entry named like a shipped profile replaces the keys it gives (a value it gives without a
    ``source`` gets the inventory as its source); a new entry needs preferred_batch_size and
    instance_count.  Bad input raises :class:`InputError` (one line).
    """
    out = dict(shipped())
    given = vars.get("gpu_profiles") or {}
    if not all(isinstance(e, Profile) for e in (given.values() if isinstance(given, Mapping) else [None])):
        try:
            given = _Given.model_validate({"gpu_profiles": given}).gpu_profiles
        except ValidationError as e:
            raise one_line(e, _Given) from None
    for name, p in given.items():
        if name == AUTO:
            raise InputError(f"gpu_profiles.{AUTO}: {AUTO} is not a profile (gpu_profile: auto picks one by "
                             "the GPUs' class); give the profile a name of its own")
        base = out.get(name)
        mine = p.model_dump(exclude_none=True, exclude={"source"})
        sources = {k: f"the inventory's gpu_profiles.{name}" for k in _VALUES if k in mine}
        sources.update((p.source.model_dump(exclude_none=True) if p.source else {}))
        if base is None:
            lacking = [k for k in _VALUES if k not in mine]
            if lacking:
                raise InputError(f"gpu_profiles.{name}: a new profile needs {' and '.join(lacking)} "
                                 f"(or name a shipped one to override: {', '.join(sorted(shipped()))})")
            merged = {"kind": "KIND_GPU", **mine, "source": sources}
        else:
            merged = {**base.model_dump(exclude_none=True), **mine,
                      "source": {**(base.source.model_dump(exclude_none=True) if base.source else {}), **sources}}
        out[name] = Profile.model_validate(merged)
    return out


def _names(profiles: Mapping[str, Profile]) -> str:
    return ", ".join(sorted(profiles))


class _Given(RoleVars):
    gpu_profiles: dict[key_matching(_NAME, _PROFILE_NAME), Profile] = want(
        {}, "must be a mapping of profile name to its settings (preferred_batch_size, instance_count, match, ...)")


class ProfileVars(_Given):
    """``gpu_profile`` and ``gpu_profiles``: declared once, here; the triton role and the GPU roles include it."""

    gpu_profile: str = want(AUTO, f"must be {AUTO} or a profile name", pattern=rf"^{_NAME}$")

    @model_validator(mode="after")
    def _known(self) -> "ProfileVars":
        try:
            profiles = table({"gpu_profiles": self.gpu_profiles})
        except InputError as e:
            raise ValueError(str(e)) from None
        if self.gpu_profile != AUTO and self.gpu_profile not in profiles:
            close = difflib.get_close_matches(self.gpu_profile, list(profiles), n=1, cutoff=0.6)
            raise ValueError(f"gpu_profile {self.gpu_profile!r}: is unknown"
                             + (f" (did you mean {close[0]!r}?)" if close else "")
                             + f"; use {AUTO} (the class the GPUs show) or one of {_names(profiles)}, "
                             "or define it under gpu_profiles")
        return self


# --------------------------------------------------------------------------------------------------
# Which class a host's GPUs are


class ClassUnknown(InputError):
    """``gpu_profile: auto`` on a host whose PCI bus shows NVIDIA GPUs that nvidia-smi does not list (no
    driver loaded yet): the class is read from nvidia-smi."""


def describe(gpu: Mapping[str, Any]) -> str:
    """``GPU 0 NVIDIA H200 (9.0, 143771 MiB)``: what a match is judged on."""
    facts = [f"compute capability {gpu['compute_cap']}" if gpu.get("compute_cap") else "",
             f"{gpu['memory_total_mib']} MiB" if gpu.get("memory_total_mib") is not None else ""]
    shown = ", ".join(f for f in facts if f)
    return f"GPU {gpu.get('index', '?')} {gpu.get('name') or '(no name)'}" + (f" ({shown})" if shown else "")


def memory_bandwidth(profiles: Mapping[str, Profile], gpu: Mapping[str, Any]) -> tuple[float, str, str] | None:
    """``(GB/s, its source, the profile)`` of ``gpu`` (an entry of ``nvidia.smi``: name, memory_total_mib): the
    first variant of the first profile whose ``match`` the GPU meets; None when no profile knows it."""
    for pname, p in profiles.items():
        if p.match is None or not p.memory_bandwidth or not matches(p.match, gpu):
            continue
        for b in p.memory_bandwidth:
            if b.name is not None and not _name_search(b.name, gpu):
                continue
            if b.memory_mib is not None and not matches(Match(name="", memory_mib=b.memory_mib), gpu):
                continue
            return b.gbs, b.source, pname
    return None


def matches(m: Match, gpu: Mapping[str, Any]) -> bool:
    """Whether ``gpu`` (an entry of ``nvidia.smi``) meets ``m``; a value the facts lack does not refuse it."""
    if not _name_search(m.name, gpu):
        return False
    cc = gpu.get("compute_cap")
    if m.compute_cap and cc is not None and str(cc) not in m.compute_cap:
        return False
    mem = gpu.get("memory_total_mib")
    if m.memory_mib and isinstance(mem, (int, float)) and not isinstance(mem, bool):
        if m.memory_mib.min is not None and mem < m.memory_mib.min:
            return False
        if m.memory_mib.max is not None and mem > m.memory_mib.max:
            return False
    return True


@dataclass(frozen=True)
class Detected:
    """The classes a host's GPUs show: ``{profile: [GPU described]}``, GPUs no profile matches, GPUs
    several match, and whether the PCI bus shows NVIDIA GPUs nvidia-smi does not list."""

    classes: dict[str, list[str]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    ambiguous: dict[str, list[str]] = field(default_factory=dict)
    unlisted: bool = False

    @property
    def one(self) -> str | None:
        """The profile, when the GPUs show exactly one (``cpu`` for a host without any)."""
        if self.unmatched or self.ambiguous or len(self.classes) > 1:
            return None
        if not self.classes:
            return None if self.unlisted else "cpu"
        return next(iter(self.classes))

    def problem(self) -> tuple[str, str] | None:
        """(what was seen, how to fix it) when the GPUs do not name one profile; None when they do."""
        if self.ambiguous:
            gpu, names = next(iter(self.ambiguous.items()))
            return (f"{gpu} matches profiles {', '.join(names)}",
                    "narrow their match under gpu_profiles, or set gpu_profile to one of them")
        if self.unmatched:
            return (f"{self.unmatched[0]} matches no GPU profile"
                    + (f" ({len(self.unmatched)} such GPUs)" if len(self.unmatched) > 1 else ""),
                    "define a profile for it under gpu_profiles (match, preferred_batch_size, instance_count) "
                    "and set gpu_profile to it, or set gpu_profile to a shipped profile")
        if len(self.classes) > 1:
            seen = "; ".join(f"{name}: {', '.join(gpus)}" for name, gpus in self.classes.items())
            return (f"GPUs of {len(self.classes)} classes on one host, {' and '.join(self.classes)} ({seen})",
                    f"set gpu_profile to the one Triton is served with on this host "
                    f"({' or '.join(self.classes)}), or move the odd GPU")
        if not self.classes and self.unlisted:
            return ("NVIDIA GPUs on the PCI bus, but nvidia-smi lists none (no driver loaded): the class is "
                    "read from nvidia-smi",
                    f"install the driver first ({command('provision --roles nvidia_driver')}), or set gpu_profile")
        return None


def detect(facts: Mapping[str, Any], profiles: Mapping[str, Profile], preferred: set[str] = frozenset()) -> Detected:
    """The classes ``facts`` show (``nvidia.smi``): for each GPU, the profiles whose ``match`` it meets;
    among several, those in ``preferred`` (the inventory's) win."""
    smi = [g for g in facts.get("nvidia.smi") or [] if isinstance(g, Mapping)]
    classes: dict[str, list[str]] = {}
    unmatched: list[str] = []
    ambiguous: dict[str, list[str]] = {}
    for g in smi:
        hits = [n for n, p in profiles.items() if p.match is not None and matches(p.match, g)]
        if len(hits) > 1 and preferred & set(hits):
            hits = [n for n in hits if n in preferred]
        if not hits:
            unmatched.append(describe(g))
        elif len(hits) > 1:
            ambiguous[describe(g)] = sorted(hits)
        else:
            classes.setdefault(hits[0], []).append(describe(g))
    unlisted = not smi and any(d.get("kind") == "gpu" for d in facts.get("pci.devices") or []
                               if isinstance(d, Mapping))
    return Detected(classes, unmatched, ambiguous, unlisted)


@dataclass(frozen=True)
class Chosen:
    """The profile a host is served with: its name, its values, whether ``auto`` found it, and how."""

    name: str
    profile: Profile
    detected: bool
    why: str

    @property
    def gpu(self) -> bool:
        return self.profile.kind != "KIND_CPU"


def inventory_matches(vars: Mapping[str, Any]) -> set[str]:
    """The inventory's profiles that give a ``match``: among several a GPU meets, these win."""
    given = vars.get("gpu_profiles") or {}
    out = set()
    for name, entry in given.items() if isinstance(given, Mapping) else ():
        has = entry.match is not None if isinstance(entry, Profile) else isinstance(entry, Mapping) and "match" in entry
        if has:
            out.add(name)
    return out


def choose(vars: Mapping[str, Any], facts: Mapping[str, Any]) -> Chosen:
    """The profile for a host with ``vars`` and ``facts``: the inventory's ``gpu_profile``, or for ``auto``
    the class the GPUs show.  Two classes, a GPU no profile matches: :class:`InputError`, one line
    naming them; GPUs on the PCI bus but none listed by nvidia-smi: :class:`ClassUnknown`."""
    profiles = table(vars)
    name = vars.get("gpu_profile") or AUTO
    if name != AUTO:
        if name not in profiles:
            raise InputError(f"gpu_profile {name!r}: is unknown; use {AUTO} or one of {_names(profiles)}, "
                             "or define it under gpu_profiles")
        return Chosen(name, profiles[name], False, f"gpu_profile {name}")
    found = detect(facts, profiles, inventory_matches(vars))
    one = found.one
    if one is None:
        seen, fix = found.problem() or ("no class", "set gpu_profile")
        cls = ClassUnknown if found.unlisted and not found.classes else InputError
        raise cls(f"gpu_profile auto: {seen}; {fix}")
    gpus = found.classes.get(one, [])
    why = f"gpu_profile auto: {len(gpus)} GPU(s) of class {one}" if gpus else "gpu_profile auto: no NVIDIA GPU"
    return Chosen(one, profiles[one], True, why)
