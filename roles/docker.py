"""Docker Engine, pinned, from the distribution (``docker.io``) or Docker's repository; compose; daemon.json merged.

Variables:
    docker_source: ``distro`` (default: ``docker.io``) or ``docker`` (Docker's repository:
        docker-ce, docker-ce-cli, containerd.io, docker-compose-plugin; signed-by keyring).
    docker_version: version or glob of the engine package (guide: 24.x, e.g. ``24.0.*`` for
        docker.io, ``5:24.0.*`` for docker-ce); default: whatever is installed or the newest.
    docker_repo: ``{url, suite, components, key | key_url, key_sha256}``; ``{id}`` and
        ``{codename}`` are filled from the host's os-release (mirrors: point url at yours).
    docker_compose: ``auto`` (default: an existing ``docker compose`` v2 or ``docker-compose``
        v1 is used as it is, else docker_compose_package is installed), ``install``, ``none``.
    docker_compose_package: default ``docker-compose-plugin`` (Docker's repo),
        ``docker-compose-v2`` (Ubuntu), ``docker-compose`` (Debian: v1).
    docker_daemon_config: keys merged into /etc/docker/daemon.json (others kept; the old file
        backed up; docker restarted only when the file changed).
    docker_hold: hold the engine packages when docker_version pins them (default true).
"""
from __future__ import annotations

import re

from bringup.command import join, sh
from bringup.errors import InputError
from bringup.resources import Command, Packages, Service
from bringup.resources.guard import Fail, Skip
from bringup.resources.hold import Hold
from bringup.resources.jsonfile import JsonFile, check_json
from bringup.resources.apt import check_repo_var, os_family, repo_from_var
from bringup.resources import apt

#: The facts this role reads (only these are gathered for it).
FACTS = (*apt.OS_FACTS, "system.docker", "system.systemd")

DEFAULTS = {
    "docker_source": "distro",
    "docker_version": None,
    "docker_repo": {
        "url": "https://download.docker.com/linux/{id}",
        "suite": "{codename}",
        "components": ["stable"],
        "key_url": "https://download.docker.com/linux/{id}/gpg",
    },
    "docker_compose": "auto",
    "docker_compose_package": None,
    "docker_daemon_config": {},
    "docker_hold": True,
    **apt.DEFAULTS,
}

DAEMON_JSON = "/etc/docker/daemon.json"

HANDLERS = {"restart docker": ["systemctl restart docker"]}


def validate(vars: dict) -> None:
    if vars.get("docker_source") not in ("distro", "docker"):
        raise InputError(f"docker_source {vars.get('docker_source')!r} must be distro (docker.io) or docker "
                         "(Docker's repository)")
    ver = vars.get("docker_version")
    if ver is not None and (not isinstance(ver, str) or not re.fullmatch(r"[0-9A-Za-z.+~:*_-]+", ver)):
        raise InputError(f"docker_version {ver!r} is malformed (e.g. 24.0.* or 5:24.0.9-1~ubuntu.22.04~jammy)")
    if vars.get("docker_compose") not in ("auto", "install", "none"):
        raise InputError("docker_compose must be auto, install or none")
    if not isinstance(vars.get("docker_daemon_config"), dict):
        raise InputError("docker_daemon_config must be a mapping of daemon.json keys")
    check_json(vars["docker_daemon_config"], "docker_daemon_config")
    if vars.get("docker_source") == "docker":
        check_repo_var(vars.get("docker_repo"), "docker_repo")


def resources(host):
    v = host.vars
    fam, osid, _ = os_family(host.facts)
    if fam != "apt":
        return [Fail("docker", f"OS {osid or 'unknown'}: this role installs Docker on Debian and Ubuntu only")]
    rel = host.facts.get("os.release") or {}
    lock = int(v["apt_lock_timeout"])
    out: list = []
    ver = v.get("docker_version")
    if v["docker_source"] == "docker":
        out.append(repo_from_var("docker", v["docker_repo"], lock_timeout=lock,
                                  subst={"id": osid, "codename": rel.get("codename", "")}))
        engine = {"docker-ce": ver, "docker-ce-cli": ver, "containerd.io": None}
        compose_pkg = v.get("docker_compose_package") or "docker-compose-plugin"
    else:
        engine = {"docker.io": ver}
        compose_pkg = v.get("docker_compose_package") or ("docker-compose-v2" if osid == "ubuntu"
                                                          else "docker-compose")
    out.append(Packages(engine, allow_change_held=True, lock_timeout=lock))
    if ver and v["docker_hold"]:
        out.append(Hold([p for p, pin in engine.items() if pin]))
    if v["docker_compose"] != "none":
        install = ("DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends "
                   + sh("-o DPkg::Lock::Timeout=%s", lock) + " -o Acquire::Retries=3 install -- "
                   + join([compose_pkg]))
        if v["docker_compose"] == "install":
            out.append(Packages({compose_pkg: None}, lock_timeout=lock))
        else:
            # compose v2 (the plugin) or v1 (docker-compose): either one already there is used as it is.
            out.append(Command(f"compose ({compose_pkg} unless a compose is there)", install,
                               unless="docker compose version || docker-compose version"))
    if v["docker_daemon_config"]:
        # A daemon not running yet reads the new file when the service below starts it: no restart.
        running = bool((host.facts.get("system.docker") or {}).get("server_version"))
        out.append(JsonFile(DAEMON_JSON, v["docker_daemon_config"], notify=["restart docker"] if running else ()))
    if not (host.facts.get("system.systemd") or {}).get("booted"):
        pid1 = (host.facts.get("system.systemd") or {}).get("pid1") or "unknown"
        out.append(Skip("docker service", f"systemd is not running (PID 1 is {pid1}): start dockerd with "
                                          "this host's init system"))
    else:
        out += [Service("containerd", enabled=True, running=True),
                Service("docker", enabled=True, running=True)]
    return out
