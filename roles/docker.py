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
        backed up; docker restarted only when the file changed). dockerd checks the merged file
        before it is written (``dockerd --validate``; a dockerd before 23 reads a copy and stops at
        its pid file): a key or value it refuses is one failed line, the file and Docker left as
        they are. Keys bringup merged and the inventory no longer asks for are removed (keys it
        never wrote are kept). A restart that fails all the same puts the previous file back and
        starts Docker again.
    docker_hold: hold the engine packages when docker_version pins them (default true).
    registry_auths: ``{registry: {username, password}}`` written to root's
        /root/.docker/config.json (0600 root; other registries and keys kept) so that the
        host's ``docker pull`` of triton_image / dcgm_exporter_image logs in. The password
        is a secret reference, ``{env: NGC_API_KEY}`` or ``{file: ~/.config/bringup/ngc.key}``
        (never text in the inventory); NGC: ``nvcr.io: {username: $oauthtoken, password: ...}``.

A value of docker_daemon_config may be a secret reference too (a token in a
registry mirror's URL): daemon.json is then kept 0600 root, and the value is
masked in everything bringup prints.
"""
from __future__ import annotations

import base64
import json
import re
import string
from typing import Any, Literal

from pydantic import field_validator

from bringup.engine.auditkit import Expect
from bringup.ssh.command import join, sh
from bringup.inventory.vars import RoleVars, Spec, Text, key_matching, want
from bringup.resources import Command, Packages, Service
from bringup.resources.guard import Fail, unread_facts
from bringup.resources.systemd import restart_on_config, without_systemd
from bringup.resources.hold import Hold
from bringup.resources.jsonfile import JsonFile, check_json
from bringup.resources.privatejson import PrivateJsonFile, docker_auth
from bringup.secrets import SecretStr, holds_secret, reveal
from bringup.resources.apt import check_repo_var, os_family, repo_from_var
from bringup.resources import apt

#: The facts this role reads (only these are gathered for it).
FACTS = (*apt.OS_FACTS, "system.docker", "system.systemd")

#: What docker_repo's url, suite and key_url may name: filled from the host's os-release.
_PLACEHOLDERS = ("id", "codename")
_REGISTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?$|^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[\w./-]*)?$")


class RegistryAuth(Spec):
    """One registry's login in ``registry_auths``."""

    username: Text = want(..., "must be non-empty text without ':'")
    password: Any = want(..., "must be a secret reference, {env: NAME} or {file: PATH} (a file of mode 0600), "
                              "not text in the inventory", secret=True)

    @field_validator("username")
    @classmethod
    def _user(cls, v: Any) -> Any:
        if not reveal(v) or ":" in reveal(v):
            raise ValueError("must be non-empty text without ':'")
        return v

    @field_validator("password")
    @classmethod
    def _password(cls, v: Any) -> Any:
        if not isinstance(v, SecretStr):
            raise ValueError("must be a secret reference, {env: NAME} or {file: PATH} (a file of mode 0600), "
                             "not text in the inventory")
        return v


class Vars(apt.AptVars, RoleVars):
    docker_source: Literal["distro", "docker"] = want(
        "distro", "must be distro (docker.io) or docker (Docker's repository)")
    docker_version: str | None = want(None, "is malformed (e.g. 24.0.* or 5:24.0.9-1~ubuntu.22.04~jammy)",
                                      pattern=r"^[0-9A-Za-z.+~:*_-]+$")
    docker_repo: apt.RepoSpec | None = want({
        "url": "https://download.docker.com/linux/{id}",
        "suite": "{codename}",
        "components": ["stable"],
        "key_url": "https://download.docker.com/linux/{id}/gpg",
    }, "must be a mapping with url, suite, and key (control-machine path) or key_url")
    docker_compose: Literal["auto", "install", "none"] = want("auto", "must be auto, install or none")
    docker_compose_package: str | None = want(None, "must be a package name", pattern=r"^[a-z0-9][a-z0-9.+-]*$")
    docker_daemon_config: dict[str, Any] = want({}, "must be a mapping of daemon.json keys")
    docker_hold: bool = True
    registry_auths: dict[key_matching(_REGISTRY.pattern, "is not a registry host (nvcr.io, registry.local:5000)"),
                         RegistryAuth] = want(
        {}, "must be a mapping {registry: {username, password}}, e.g. "
            "{nvcr.io: {username: $oauthtoken, password: {env: NGC_API_KEY}}}", secret=True)

    @field_validator("docker_repo")
    @classmethod
    def _placeholders(cls, v: apt.RepoSpec | None) -> apt.RepoSpec | None:
        """``{id}`` and ``{codename}`` are filled from the host's os-release (str.format): any other brace
        would fail on the host, after connecting."""
        for key in ("url", "suite", "key_url"):
            text = reveal(getattr(v, key, None))
            try:
                names = [f for _, f, _, _ in string.Formatter().parse(text or "") if f is not None]
            except ValueError:
                raise ValueError(f"{key}: a lone {{ or }}; write {{{{ or }}}} for a brace") from None
            bad = [n for n in names if n not in _PLACEHOLDERS]
            if bad:
                brace = f"{{{bad[0]}}}"
                # Not quoted when it sits in the URL's user:password part: a password may hold it.
                shown = "a brace" if brace in (text or "").split("@", 1)[0] and "@" in (text or "") else brace
                raise ValueError(f"{key}: {shown} is not a placeholder; use "
                                 f"{', '.join('{' + p + '}' for p in _PLACEHOLDERS)} (the host's os-release)")
        return v

    @field_validator("docker_daemon_config")
    @classmethod
    def _json(cls, v: dict) -> dict:
        check_json(reveal(v), "docker_daemon_config")  # NaN, Infinity, a date: Docker would not start
        return v


DAEMON_JSON = "/etc/docker/daemon.json"
#: Root's Docker client config: the host's `docker pull` (and compose) run as root.
CLIENT_CONFIG = "/root/.docker/config.json"

HANDLERS = {"restart docker": [restart_on_config("docker.service", DAEMON_JSON)]}

#: Where dockerd before 23 (no ``--validate``) stops once it has read and checked its config: a pid file
#: that cannot be made, so the check never starts a second daemon.
_NO_PIDFILE = "/dev/null/bringup-check"


#: Seconds dockerd has to give its verdict on a merged daemon.json.
DOCKERD_CHECK_S = 60


def dockerd_check(doc: dict, folder: str = DAEMON_JSON.rsplit("/", 1)[0], within: int = DOCKERD_CHECK_S) -> str:
    """Shell: dockerd's own verdict on ``doc`` before it becomes daemon.json; refused: why, exit 1.

    ``dockerd --validate`` where dockerd has it (23 on); else dockerd reads a copy whose ``pidfile`` it
    cannot create, which it reaches only after the config passed.  The copy is 0600 beside daemon.json
    (it may hold a mirror's token) and removed whatever happens.  No dockerd yet: nothing to ask.  A dockerd
    that gives no verdict within ``within`` seconds (its own timeout(1), inside the round trip's) is said so,
    the file left as it was: its silence read as "dockerd refuses the merged daemon.json" with no reason.
    """
    def b64(d: dict) -> str:
        return base64.b64encode(json.dumps(d).encode()).decode()

    return "\n".join([
        "if command -v dockerd >/dev/null 2>&1; then (",
        "  c=; trap 'rm -f -- \"$c\"' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM",
        sh("  d=%s; mkdir -p -- \"$d\"; c=$(umask 077; mktemp -- \"$d/.daemon.json.bringup-check.XXXXXX\")",
           folder),
        "  if dockerd --help 2>&1 | grep -q -e '--validate'; then",
        sh("    printf %%s %s | base64 -d > \"$c\"", b64(doc)),
        sh('    out=$(timeout %s dockerd --validate --config-file "$c" 2>&1) && ok=1 || { r=$?; ok=; }', int(within)),
        "  else",
        sh("    printf %%s %s | base64 -d > \"$c\"", b64({**doc, "pidfile": _NO_PIDFILE})),
        sh('    r=0; out=$(timeout %s dockerd --config-file "$c" 2>&1) || r=$?', int(within)),  # under set -e
        sh('    case "$out" in *%s*) ok=1 ;; *) ok= ;; esac', "mkdir /dev/null: not a directory"),
        "  fi",
        '  if [ -z "$ok" ] && [ "${r:-0}" -eq 124 ]; then',
        sh("    echo \"dockerd gave no verdict on the merged %s within %s s (it hangs?), left as it was\"",
           DAEMON_JSON, int(within)),
        "    exit 1",
        "  fi",
        '  if [ -z "$ok" ]; then',
        sh("    echo \"dockerd refuses the merged %s, left as it was: $(printf '%%s\\n' \"$out\" | grep -v "
           "'level=info' | tail -n 2 | sed \"s#$c#%s#g\" | tr '\\n' ' ')\"", DAEMON_JSON, DAEMON_JSON),
        "    exit 1",
        "  fi",
        ") fi",
    ])


def validate(vars: dict) -> None:
    """Docker's repository key file, on the control machine (what a type cannot say)."""
    if vars["docker_source"] == "docker":
        check_repo_var(vars["docker_repo"], "docker_repo")


def _cli_split(osid: str, rel: dict) -> bool:
    """Whether the distribution ships the docker client apart from docker.io (Debian 13 on, and sid)."""
    if osid != "debian":
        return False
    major = str(rel.get("version_id") or "").split(".")[0]
    return not major.isdigit() or int(major) >= 13


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
        if _cli_split(osid, rel):
            # Debian 13 moved the client out of docker.io (only Recommended): the same source, the same version.
            engine["docker-cli"] = ver
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
            # v1 is found on the PATH as the triton role's compose picker finds it (resources/compose.py):
            # running `docker-compose version` (a Python program) cost 0.6-0.8 s of every no-op's read.
            out.append(Command(f"compose ({compose_pkg} unless a compose is there)", install,
                               unless="docker compose version || command -v docker-compose"))
    # Declared even when empty: keys an earlier run merged and the inventory dropped are removed.
    # A daemon not running yet reads the new file when the service below starts it: no restart.  One whose state
    # is unknown (docker info unread: a daemon that did not answer within its bound, a garbled answer) is left
    # alone, file and daemon, in one line naming the fact: read as "not running", the new file would never be
    # applied; restarted on a slow answer, a production Docker would stop its containers.
    unknown = unread_facts(host, ("system.docker",), "daemon.json and the Docker daemon")
    if unknown:
        out.append(unknown)
    else:
        running = bool((host.facts.get("system.docker") or {}).get("server_version"))
        cfg, notify = v["docker_daemon_config"], ["restart docker"] if running else ()
        # A token in it (a mirror's URL): the file is root's alone.
        out.append(PrivateJsonFile(DAEMON_JSON, reveal(cfg), notify=notify, check=dockerd_check, owned=True)
                   if holds_secret(cfg) else
                   JsonFile(DAEMON_JSON, cfg, notify=notify, check=dockerd_check, owned=True))
    if v["registry_auths"]:
        out.append(PrivateJsonFile(CLIENT_CONFIG, {"auths": {
            reg: {"auth": docker_auth(reveal(c["username"]), reveal(c["password"]))}
            for reg, c in v["registry_auths"].items()}}))
    skip = without_systemd(host, "docker service", "start dockerd with this host's init system")
    if skip:
        out.append(skip)
    else:
        out += [Service("containerd", enabled=True, running=True),
                Service("docker", enabled=True, running=True)]
    return out


def audit(host):
    """What the packages do not show: a compose that works (v2 plugin or v1), unless ``docker_compose: none``."""
    if host.vars["docker_compose"] == "none":
        return []
    check = ("if docker compose version >/dev/null 2>&1 || docker-compose version >/dev/null 2>&1; "
             "then echo works; else echo broken; fi")
    return [Expect("compose", check, lambda out: None if out.strip() == "works" else
                   "neither `docker compose` nor `docker-compose` works, want one of them")]
