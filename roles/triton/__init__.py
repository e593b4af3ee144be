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
        no GPU reservation) or of the inventory's ``gpu_profiles`` (bringup.hardware.gpu_profiles).
    triton_models: ``{name: {platform|backend, max_batch_size, input, output,
        instance_count, preferred_batch_size, max_queue_delay_microseconds,
        response_cache, extra}}``; ``input``/``output`` are lists of
        ``{name, data_type, dims}``.  instance_count is 1-32 per GPU, a batch size 1-65536
        (bringup.hardware.gpu_profiles.MAX_INSTANCES, MAX_BATCH).
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

The role is a package, split by concern: :mod:`.variables` (the variables and the folder checks),
:mod:`.configs` (the models' configs), :mod:`.desired` (what one host should run, and when nothing),
:mod:`.serving` (reload, readiness, rollback); the hooks are here.
"""
from __future__ import annotations

from bringup.hardware import topology
from bringup.engine.auditkit import Expect, http_ok, tcp_listening
from bringup.ssh.command import sh
from bringup.hardware.gpu_profiles import AUTO, table
from bringup.latency.trial import guard as trial_guard, restore_command
from bringup.resources import Directory, File
from bringup.resources.command import Command
from bringup.resources.guard import Fail
from bringup.resources.compose import PROJECT_LABEL, REVISION_LABEL, label_format
from bringup.resources.image import DockerImage

from .configs import RELOAD, local_files, model_configs
from .desired import Desired, cpuset, gate
from .served import serving_matches
from .serving import HANDLERS, health, rollback, verify
from .variables import DEFAULTS, Vars, check_folders

__all__ = ["FACTS", "Vars", "DEFAULTS", "validate", "resources", "audit", "HANDLERS", "verify", "health", "rollback",
           "checks", "model_configs", "cpuset"]

#: The facts this role reads (only these are gathered for it): the planner's, for the cpuset.
FACTS = tuple(dict.fromkeys(("nvidia.smi", "nvidia.query", "pci.devices", "triton.window", *topology.FACTS)))


def validate(vars: dict) -> None:
    """What the types cannot say: the folders are Triton's own, the configs render and parse, models_dir's
    configs parse and do not clash with the inventory's."""
    from bringup.project import content_root
    from bringup.engine.templates import Templates

    check_folders(vars)
    # Facts are not known yet: GPU profiles assume gpu_count GPUs (or one) to render and parse; under auto,
    # each profile the host could get is rendered.
    facts = {} if vars.get("gpu_count") else {"nvidia.smi": [{"index": 0}]}
    render = Templates(content_root() / "templates").render
    name = vars.get("gpu_profile", AUTO)
    configs: dict[str, str] = {}
    for profile in (table(vars) if name == AUTO else [name]):
        configs = model_configs({**vars, "gpu_profile": profile}, facts, render)
    local_files(vars, configs)


def resources(host):
    why = gate(host)
    if why:
        return why
    too_old = _image_too_old(host)
    if too_old:
        return [Fail("triton", too_old)]
    d = Desired(host)
    return [
        Directory(d.stack, mode="0755"),
        Directory(d.repo, mode="0755"),
        d.tree(),
        *[File(f"{d.repo}/{m}/config.pbtxt", content=text, mode="0644", backup=False, notify=[RELOAD])
          for m, text in sorted(d.configs.items())],
        File(d.compose_file, content=d.compose, mode="0644", backup=False),
        DockerImage(d.vars["triton_image"], source=d.vars["image_transfer"], image_id=d.vars.get("triton_image_id")),
        d.compose_up(),
        # A tune killed outright left a trial configuration loaded on the running server (no file says it):
        # its trial record names the model; its repository configuration is loaded again, the record removed.
        Command("the configuration a tune cut short left loaded",
                restore_command(d.models, d.repo, f"http://127.0.0.1:{int(d.vars['triton_ports']['http'])}"),
                onlyif=trial_guard()),
    ]


def audit(host):
    """What the files do not show: the container of compose project triton up at this revision, the ports
    listening, the server and every model ready, each model served as the role renders it (instances,
    batch sizes, window: what a tune cut short may have left loaded, in no file)."""
    if gate(host):
        return []  # the role's own Unused, Skip or Fail says why
    d = Desired(host)
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
    models_ready = Expect("triton models ready", "\n".join(sh("printf '%%s ' %s; " + code, m,
                                                               f"{base}/v2/models/{m}/ready")
                                                            for m in d.models) or "true", models, needs=ready)
    # Ready, and serving what the inventory and the record say: a configuration loaded through the model
    # control API shows in no file (served.py).
    return [up, ports, ready, models_ready, serving_matches(base, d.repo, d.configs, needs=models_ready)]


# --------------------------------------------------------------------------
# Rack checklist


def checks(host) -> list:
    """The rack checklist's Triton lines: the container release against the loaded driver and the GPUs."""
    from bringup.checks import line
    from bringup.hardware.driver_matrix import triton_need, unsupported_gpus
    from bringup.hardware.gpu import driver_version

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
    gpus = unsupported_gpus(need, host.facts)
    if gpus:
        out.append(line("software", "Triton container vs GPU architecture", "FAIL", gpus,
                        "pick a triton_image whose release supports these GPUs (bringup/data/version_matrix.yaml)"))
    return out


def _image_too_old(host) -> str | None:
    """Why ``triton_image`` cannot run on this host's GPUs (its release's supported architectures), or None."""
    from bringup.hardware.driver_matrix import triton_need, unsupported_gpus

    need = triton_need(host.vars.get("triton_image"))
    why = unsupported_gpus(need, host.facts) if need is not None else None
    return f"{why}: pick a triton_image whose release supports them" if why else None
