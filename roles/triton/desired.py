"""What the role wants on one host (:class:`Desired`: its folders, configs, files, compose file and the
revision hash of them all), Triton's CPUs (:func:`cpuset`), and why it deploys nothing here (:func:`gate`)."""
from __future__ import annotations

import hashlib

from bringup.hardware import topology
from bringup.errors import InputError
from bringup.facts.base import format_cpulist
from bringup.hardware.gpu import gpu_gate
from bringup.hardware.gpu_profiles import ClassUnknown, choose
from bringup.latency.window_tuner import manifest_of
from bringup.resources.compose import ComposeUp, revision_hash
from bringup.resources.guard import Skip, Unused
from bringup.resources.revisions import Revisions
from bringup.resources.tree import Tree

from .configs import gpu_indexes, local_files, model_configs, revision_text
from .variables import check_folders, folder


def cpuset(vars: dict, facts: dict) -> str:
    """Triton's CPUs: ``triton_cpuset`` when the inventory pins them (:func:`bringup.hardware.topology.triton_pin`),
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


class Desired:
    """Everything the role wants on one host, and the revision hash of it."""

    def __init__(self, host):
        v = host.vars
        check_folders(v)
        self.vars = v
        self.repo = folder(v, "triton_model_repository")
        self.stack = folder(v, "triton_stack_dir")
        self.compose_file = f"{self.stack}/docker-compose.yml"
        self.snapshot = f"{self.stack}/last-good"
        #: What bringup shipped into the repository (sha256sum's format): nothing else there is ever removed.
        self.manifest = manifest_of(self.stack)
        self.container = v["triton_container"]
        self.configs = model_configs(v, host.facts, host.render)
        self.files = local_files(v, self.configs)
        self.models = sorted(set(self.configs) | {rel.split("/", 1)[0] for rel in self.files if "/" in rel})
        picked = choose(v, host.facts)
        gpus = gpu_indexes(v, host.facts) if picked.gpu else []
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
            [(f"config {name}", revision_text(text))
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


def gate(host) -> list | None:
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
