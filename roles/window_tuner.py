"""The adaptive batching window as a service on the host: ``bringup-window-tuner``.

The controller is ``bringup/latency/window_tuner.py`` (Python's standard
library only), shipped as one file to ``/usr/local/lib/bringup/window_tuner.py``
and run by the host's ``python3`` under systemd (``Restart=on-failure``).  It
generates no load: every ``interval_s`` it reads Triton's p95 (summary metrics)
and queue time per request (statistics API) on 127.0.0.1, steps the window by
the guide's rule and reloads the model in place, records the window in
``/etc/bringup/triton-window.json`` and in the model's ``config.pbtxt`` (so a
later provision of the triton role keeps it unless the inventory pins
``triton_max_queue_delay_microseconds``), and logs each interval to the journal
and ``/var/log/bringup/window-tuner.jsonl``.

A role of its own, after triton: the triton role stays about what Triton
serves; this one about a process that changes it, installed only on hosts
that ask for it.  It reads the triton role's ports, repository and models.

Variables:
    triton_window_tuner: ``{target_p95_ms, interval_s (10), models ([]: every ready model with
        dynamic batching)}``; null (the default): not installed.
"""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from bringup.ssh.command import sh
from bringup.latency import window_tuner
from bringup.latency.window_tuner import LOG, RECORD, manifest_of
from bringup.resources import Directory, File, Service
from bringup.resources.guard import Unused
from bringup.resources.systemd import without_systemd
from bringup.resources.packages import Packages
from bringup.inventory.vars import RoleVars, Spec, want

UNIT_NAME = "bringup-window-tuner"
UNIT = f"/etc/systemd/system/{UNIT_NAME}.service"
MODULE = "/usr/local/lib/bringup/window_tuner.py"
RESTART = "restart window tuner"

FACTS = ("system.systemd",)
HANDLERS = {RESTART: [sh("systemctl daemon-reload && systemctl restart -- %s", UNIT_NAME)]}

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class Tuner(Spec):
    """``triton_window_tuner``'s value."""

    target_p95_ms: float = want(..., "a number above 0", gt=0)
    interval_s: float = want(10, "a number above 0", gt=0)
    models: list[Annotated[str, Field(pattern=_NAME.pattern)]] = want([], "a list of model names")


class Vars(RoleVars):
    triton_window_tuner: Tuner | None = want(
        None, "a mapping {target_p95_ms, interval_s, models}, or null for none")


def settings(vars: dict) -> dict | None:
    """``triton_window_tuner`` with its defaults (checked by ``Vars``); None when not wanted."""
    t = vars.get("triton_window_tuner")
    if t is None:
        return None
    return {"target": t["target_p95_ms"], "interval": t.get("interval_s", 10), "models": t.get("models") or []}


def resources(host):
    s = settings(host.vars)
    if s is None:
        return [Unused("window tuner", "triton_window_tuner is unset: no tuner on this host")]
    skip = without_systemd(host, "window tuner", "run bringup/latency/window_tuner.py with this host's init system")
    if skip:
        return [skip]
    v = host.vars
    ports = v.get("triton_ports") or {}
    with open(window_tuner.__file__, encoding="utf-8") as f:
        code = f.read()
    unit = host.render("window_tuner/bringup-window-tuner.service.j2", module=MODULE, target=s["target"],
                       interval=s["interval"], http_port=ports.get("http", 8000),
                       metrics_port=ports.get("metrics", 8002), record=RECORD, log=LOG,
                       repository=v.get("triton_model_repository", "/data/models"),
                       manifest=manifest_of(v.get("triton_stack_dir", "/opt/triton")), models=s["models"])
    return [
        Packages(["python3"], lock_timeout=int(v.get("apt_lock_timeout", 300))),
        Directory("/usr/local/lib/bringup", mode="0755"),
        File(MODULE, content=code, mode="0644", notify=[RESTART]),
        File(UNIT, content=unit, mode="0644", notify=[RESTART]),
        Service(UNIT_NAME, enabled=True, running=True, daemon_reload=True),
    ]
