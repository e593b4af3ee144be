"""The benchmark's six-operation mix, the same work as bench/peers/mix_deploy.py and mix_playbook.yml.

A templated sysctl file applied on change (handler), a directory, a templated
env file, a copied file, two packages present, a service running and enabled.
"""
from __future__ import annotations

from pathlib import Path

from bringup.errors import InputError
from bringup.resources import Directory, File, Packages, Service

FACTS = ()

DEFAULTS = {"mix_fin_timeout": 15, "mix_workers": 4, "mix_listen": "127.0.0.1:8000"}

SYSCTL_FILE = "/etc/sysctl.d/91-bench-mix.conf"
COPIED = Path(__file__).resolve().parents[1] / "files" / "motd"


def validate(vars: dict) -> None:
    if not isinstance(vars.get("mix_workers"), int):
        raise InputError(f"mix_workers {vars.get('mix_workers')!r}: must be a whole number, e.g. 4")


HANDLERS = {"apply mix sysctl": [f"sysctl -p {SYSCTL_FILE}"]}


def resources(host):
    v = {k: host.vars[k] for k in DEFAULTS}
    return [
        File(SYSCTL_FILE, content=host.render("mix/91-bench-mix.conf.j2", **v), notify=["apply mix sysctl"]),
        Directory("/opt/bench-mix"),
        File("/etc/default/bench-mix", content=host.render("mix/bench-mix.env.j2", **v)),
        File("/opt/bench-mix/motd", content=COPIED.read_bytes()),
        Packages(["curl", "procps"]),
        Service("containerd", running=True, enabled=True),
    ]
