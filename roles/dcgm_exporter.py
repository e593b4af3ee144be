"""NVIDIA's DCGM exporter: a pinned image run under systemd, counters from the inventory, /metrics checked.

The container runs ``--gpus all --cap-add SYS_ADMIN`` with port 9400 published
and the counters CSV rendered from the inventory mounted as its collectors
file.  It carries a revision label (hash of image, CSV and port): it is
restarted only when that revision changes, and the run waits (bounded) for
``/metrics`` to carry the first counter (``DCGM_FI_DEV_GPU_UTIL`` by default).

Images: ``image_transfer: pull`` (the host pulls ``dcgm_exporter_image`` from
its registry or mirror) or ``push`` (the control machine's copy is streamed
over SSH into ``docker load``; skipped when the host has the same image ID).

Variables:
    dcgm_exporter_image: ``nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04``.
    dcgm_exporter_image_id: optional ``sha256:...`` pin of the image's content.
    image_transfer: ``pull`` (default) or ``push``.
    dcgm_exporter_port: 9400.
    dcgm_exporter_counters: ``[[field, gauge|counter, help], ...]`` (default: the guide's list:
        utilization, memory copy utilization, SM clock, power, temperature, XID errors,
        PCIe replays, framebuffer used).
    dcgm_exporter_extra_counters: more of the same, appended.
    dcgm_exporter_wait: seconds to wait for /metrics after a (re)start (60).
    nvidia_without_gpu: as nvidia_driver.
"""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from bringup.engine.auditkit import Expect, tcp_listening
from bringup.ssh.command import sh
from bringup.errors import InputError
from bringup.hardware.gpu import gpu_gate
from bringup.resources import Directory, File, Service
from bringup.resources.compose import REVISION_LABEL, label_format, revision_hash
from bringup.resources.guard import Probe, Skip
from bringup.resources.systemd import without_systemd
from bringup.resources.image import DockerImage
from bringup.hardware import gpu
from bringup.resources import image
from bringup.inventory.vars import RoleVars, defaults_of, want

#: Not run while a reboot (a new driver) is pending: the exporter needs the loaded driver.
WAITS_FOR_REBOOT = True

NAME = "dcgm-exporter"
CONF_DIR = "/etc/dcgm-exporter"
CSV = f"{CONF_DIR}/bringup-counters.csv"
UNIT = "/etc/systemd/system/dcgm-exporter.service"

#: The guide's monitoring list; help texts as in dcgm-exporter's default-counters.csv.
DEFAULT_COUNTERS = [
    ["DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."],
    ["DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."],
    ["DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."],
    ["DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."],
    ["DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."],
    ["DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."],
    ["DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."],
    ["DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."],
]

#: The facts this role reads (only these are gathered for it).
FACTS = (*gpu.FACTS, "system.systemd")

_COUNTERS = "must be a list of [field, gauge|counter|label, help]"
_ROW = Annotated[list[str], Field(min_length=3, max_length=3)]


class Vars(image.ImageVars, gpu.GpuVars, RoleVars):
    dcgm_exporter_image: str = want("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
                                    "must be an image reference")
    dcgm_exporter_image_id: str | None = want(None, "must be sha256:<64 hex digits>", pattern=r"^sha256:[0-9a-f]{64}$")
    dcgm_exporter_port: int = want(9400, "must be a TCP port number", ge=1, le=65535)
    dcgm_exporter_counters: list[_ROW] = want(DEFAULT_COUNTERS, _COUNTERS)
    dcgm_exporter_extra_counters: list[_ROW] = want([], _COUNTERS)
    dcgm_exporter_wait: int = want(60, "whole seconds to wait for /metrics, 0-3600", ge=0, le=3600)


DEFAULTS = defaults_of(Vars)

_FIELD = re.compile(r"^DCGM_(FI|EXP)_[A-Z0-9_]+$")


def counters(vars: dict) -> list[list[str]]:
    """The counters, checked: ``[field, type, help]`` each, no duplicates."""
    out: list[list[str]] = []
    seen = set()
    for var in ("dcgm_exporter_counters", "dcgm_exporter_extra_counters"):
        for row in vars.get(var) or []:
            name, typ, help_ = (x.strip() for x in row)
            if not _FIELD.match(name):
                raise InputError(f"{var}: {name!r} is not a DCGM field name (DCGM_FI_...)")
            if typ not in ("gauge", "counter", "label"):
                raise InputError(f"{var}: {name}: type {typ!r} must be gauge, counter or label")
            if any(c in help_ for c in ",\n"):
                raise InputError(f"{var}: {name}: the help text may not hold a comma or newline")
            if name not in seen:
                seen.add(name)
                out.append([name, typ, help_])
    if not out:
        raise InputError("dcgm_exporter_counters: no counters left; the exporter would serve nothing")
    return out


def validate(vars: dict) -> None:
    """The counters' names and kinds, and the image as DockerImage reads it (what a type cannot say)."""
    counters(vars)
    DockerImage(vars["dcgm_exporter_image"], source=vars["image_transfer"], image_id=vars["dcgm_exporter_image_id"])


def _gate(host) -> list | None:
    """Why the role does not deploy here (a Skip or a Fail), or None."""
    gate = gpu_gate(host, "dcgm exporter")
    if gate:
        return gate
    skip = without_systemd(host, "dcgm exporter", "the exporter is a systemd unit here; run the container with "
                                                  "this host's init system")
    return [skip] if skip else None


def resources(host):
    v = host.vars
    gate = _gate(host)
    if gate:
        return gate
    rows = counters(v)
    image = DockerImage(v["dcgm_exporter_image"], source=v["image_transfer"], image_id=v.get("dcgm_exporter_image_id"))
    csv = host.render("dcgm_exporter/counters.csv.j2", counters=rows)
    pin = v.get("dcgm_exporter_image_id") or (image.local_id() if v["image_transfer"] == "push" else None) or ""
    revision = revision_hash(f"{image.ref}\n{pin}\n{v['dcgm_exporter_port']}\n{csv}", length=16)
    unit = host.render("dcgm_exporter/dcgm-exporter.service.j2", image=image.ref, container=NAME, revision=revision,
                       port=v["dcgm_exporter_port"], csv=CSV)
    first = rows[0][0]
    check = " && ".join([
        sh("[ \"$(docker inspect --format %s -- %s 2>/dev/null)\" = %s ]", label_format(REVISION_LABEL), NAME, revision),
        sh("curl -fsS --max-time 3 %s | grep -q %s", f"http://127.0.0.1:{v['dcgm_exporter_port']}/metrics",
           f"^{first}"),
    ])
    return [
        Directory(CONF_DIR, mode="0755"),
        File(CSV, content=csv, mode="0644"),
        image,
        File(UNIT, content=unit, mode="0644"),
        Service(NAME, enabled=True, daemon_reload=True),
        # (Re)started only when the running container is not this revision, or not serving.
        Probe(f"{NAME} revision {revision} serves {first}", check,
              fix=sh("systemctl daemon-reload && systemctl restart -- %s", NAME), wait=int(v["dcgm_exporter_wait"]),
              hint=f"see journalctl -u {NAME} and docker logs {NAME}"),
    ]


def audit(host):
    """What the files do not show: the unit active, port listening, /metrics carrying every counter.

    Where the role skips (no GPU on a cpu profile, no systemd), its promise is
    that no exporter is deployed: neither its unit file nor its container.
    """
    v = host.vars
    gate = _gate(host)
    if gate and isinstance(gate[0], Skip):
        why = f"exists but the role skips this host ({gate[0].reason})"
        return [
            Expect(f"no {UNIT}", sh("[ -e %s ] && echo present || echo absent", UNIT),
                   lambda out: None if out.strip() == "absent" else f"{UNIT} {why}"),
            Expect(f"no container {NAME}", sh("docker inspect --format '{{.State.Status}}' -- %s 2>/dev/null "
                                              "|| echo absent", NAME),
                   lambda out: None if out.strip() in ("", "absent") else f"container {NAME} {why}"),
        ]
    if gate:
        return []  # a Fail: the role's own resource fails the audit, saying why
    port = int(v["dcgm_exporter_port"])
    url = f"http://127.0.0.1:{port}/metrics"
    rows = counters(v)

    def metrics(body: str) -> str | None:
        first = rows[0][0]
        if not re.search(rf"^{first}\{{", body, re.M):
            return f"{url} carries no {first} sample"
        missing = [n for n, typ, _ in rows if f"# TYPE {n} {typ}" not in body]
        return f"{url} lacks counter(s) {', '.join(missing)}" if missing else None

    unit = Expect(f"unit {NAME}", sh("systemctl is-active -- %s 2>/dev/null || true", NAME),
                  lambda out: None if out.strip() == "active" else
                  f"unit {NAME} is {out.strip() or 'unknown'}, want active")
    port_up = tcp_listening("dcgm exporter", port, needs=unit)
    return [unit, port_up,
            Expect(f"{url} counters", sh("curl -fsS --max-time 5 %s 2>&1 | grep -E '^(# TYPE )?DCGM_' | head -400",
                                         url), metrics, needs=port_up)]
