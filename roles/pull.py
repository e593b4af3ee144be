"""Pull mode on the host: ``bringup-pull.timer`` runs ``bringup pull`` (:mod:`bringup.tasks.pull`) after boot and
then every ``interval``, each run delayed by a random part of ``randomized_delay`` so a fleet does not fetch
in the same second, bounded by ``TimeoutStartSec``; never two at once (a oneshot unit, and the host's run lock
that push runs take too).

Installed only on hosts whose inventory sets ``bringup_pull`` (unset: nothing, and the plan says so), so
adding the role changes no existing host.  What it writes: the allowed signers file (the keys whose signed
commits the host applies), the service and the timer; with ``package`` it also installs bringup into
``/opt/bringup/venv`` with pip (an internal index, a wheel's URL or path); without it, ``command`` names the
bringup already on the host.

Variables:
    bringup_pull: ``{url, branch | tag, allowed_signers: ["principal ssh-ed25519 AAAA...", ...], interval
        (15min), randomized_delay (10min), on_boot (2min), timeout (1h), inventory (hosts), name (the host's
        inventory name), prometheus (the node exporter's textfile, null: none), vault_password_file (on the
        host), known_hosts (the Git server's keys, for ssh:// URLs), ssh_key_file (the deploy key on the host),
        package, command}``; null (the default): pull mode not installed.
"""
from __future__ import annotations

import re
from typing import Optional

from bringup.ssh.command import join, sh
from bringup.errors import InputError, shown
from bringup.pull.source import HELPER_URL, parse_rule
from bringup.resources import Command, Directory, File, Service
from bringup.resources.guard import Unused
from bringup.resources.packages import Packages
from bringup.resources.systemd import without_systemd
from bringup.inventory.vars import RoleVars, Spec, want

UNIT_NAME = "bringup-pull"
SERVICE = f"/etc/systemd/system/{UNIT_NAME}.service"
TIMER = f"/etc/systemd/system/{UNIT_NAME}.timer"
ALLOWED_SIGNERS = "/etc/bringup/allowed_signers"
KNOWN_HOSTS = "/etc/bringup/pull_known_hosts"
VENV = "/opt/bringup/venv"
CACHE = "/var/lib/bringup/pull"

FACTS = ("system.systemd",)

#: A systemd time span as the timer takes it: 90, 15min, 1h 30min, 2d.
_SPAN = r"^\d+(\.\d+)?\s*(us|ms|s|sec|m|min|h|hr|d|w)?(\s+\d+(\.\d+)?\s*(us|ms|s|sec|m|min|h|hr|d|w)?)*$"
_SIGNER = re.compile(r"^\S+\s+(?:\S+\s+)?(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp\d+|sk-\S+)\s+[A-Za-z0-9+/=]+(\s.*)?$")
_PATH = r"^/[^\s]*$"


class Pull(Spec):
    """``bringup_pull``'s value."""

    url: str = want(..., "the repository's URL (https://..., ssh://..., git@host:path)", pattern=r"^[^\s-]\S*$")
    branch: Optional[str] = want(None, "a branch name (main)")
    tag: Optional[str] = want(None, "a tag glob (release-*)")
    allowed_signers: list[str] = want(..., "a list of allowed signers lines ('ops@example.org ssh-ed25519 "
                                           "AAAA...'), one at least", min_length=1)
    interval: str = want("15min", "a systemd time span (15min, 1h)", pattern=_SPAN)
    randomized_delay: str = want("10min", "a systemd time span (10min)", pattern=_SPAN)
    on_boot: str = want("2min", "a systemd time span (2min)", pattern=_SPAN)
    timeout: str = want("1h", "a systemd time span (1h): the longest run", pattern=_SPAN)
    inventory: str = want("hosts", "a path inside the repository (hosts)", pattern=r"^[^/~\s][^\s]*$")
    name: Optional[str] = want(None, "the host's name in the repository's inventory", pattern=r"^\S+$")
    prometheus: Optional[str] = want("auto", "auto (the folder the host's node exporter reads), an absolute "
                                             "*.prom path, or null", pattern=r"^(auto|/\S*\.prom)$")
    allow_rollback: Optional[str] = want(None, "a commit id (or its first 4+ characters): the one older revision "
                                                "the host may move back to", pattern=r"^[0-9a-fA-F]{4,40}$")
    roles: Optional[list[str]] = want(None, "a list of role names the host's pull converges ([sysctl, docker]); "
                                            "needed when the repository has no roles/ of its own")
    vault_password_file: Optional[str] = want(None, "an absolute path on the host", pattern=_PATH)
    known_hosts: list[str] = want([], "a list of known_hosts lines of the Git server ('git.example.org "
                                      "ssh-ed25519 AAAA...'), for ssh:// URLs")
    ssh_key_file: Optional[str] = want(None, "the host's deploy key, an absolute path on the host", pattern=_PATH)
    package: Optional[str] = want(None, "a pip requirement for bringup (a wheel's URL or path, bringup==X)")
    command: Optional[str] = want(None, "the absolute path of bringup on the host", pattern=_PATH)


class Vars(RoleVars):
    bringup_pull: Optional[Pull] = want(None, "a mapping {url, branch or tag, allowed_signers, ...}, or null")


def validate(vars: dict) -> None:
    """The revision rule and the signers' lines (what a type cannot say)."""
    p = vars.get("bringup_pull")
    if not p:
        return
    if HELPER_URL.match(p["url"]):
        raise InputError(f"bringup_pull.url {shown(repr(p['url']))}: names a Git remote helper "
                         f"({shown(p['url'].split('::')[0], 40)}::), which pull never runs; give the repository's URL "
                         "(https://..., ssh://..., git@host:path)")
    try:
        parse_rule(p.get("branch"), p.get("tag"))
    except InputError as e:
        raise InputError(f"bringup_pull: {str(e).replace('--', '')}") from None
    for i, line in enumerate(p["allowed_signers"]):
        if "\n" in line or not _SIGNER.match(line.strip()):
            raise InputError(f"bringup_pull.allowed_signers[{i}]: not an allowed signers line; write "
                             "'principal ssh-ed25519 AAAA...' (the principal, then the public key as in its .pub)")
    for i, line in enumerate(p.get("known_hosts") or []):
        if "\n" in line or len(line.split()) < 3:
            raise InputError(f"bringup_pull.known_hosts[{i}]: not a known_hosts line; write 'git.example.org "
                             "ssh-ed25519 AAAA...' (ssh-keyscan prints them)")
    roles = p.get("roles")
    if roles is not None and (not roles or not all(re.match(r"^[a-z_][a-z0-9_]{0,63}$", str(r)) for r in roles)):
        raise InputError(f"bringup_pull.roles: {roles!r} is not a list of role names; write roles: [sysctl, docker] "
                         "(the roles the host's pull converges)")
    if p.get("package") and p.get("command"):
        raise InputError("bringup_pull: package and command: give one (package installs bringup in "
                         f"{VENV}; command names one already on the host)")


def argv(name: str, p: dict) -> list[str]:
    """The service's command line."""
    command = p.get("command") or (f"{VENV}/bin/bringup" if p.get("package") else "/usr/local/bin/bringup")
    out = [command, "pull", "--url", p["url"], "--allowed-signers", ALLOWED_SIGNERS, "--name", p.get("name") or name,
           "--inventory", p.get("inventory") or "hosts", "--cache", CACHE]
    out += ["--tag", p["tag"]] if p.get("tag") else ["--branch", p.get("branch") or "main"]
    if p.get("prometheus"):
        out += ["--prometheus", p["prometheus"]]
    if p.get("vault_password_file"):
        out += ["--vault-password-file", p["vault_password_file"]]
    if p.get("allow_rollback"):
        out += ["--allow-rollback", p["allow_rollback"].lower()]
    if p.get("known_hosts"):
        out += ["--known-hosts", KNOWN_HOSTS]
    if p.get("ssh_key_file"):
        out += ["--ssh-key", p["ssh_key_file"]]
    return out


def exec_line(words: list[str]) -> str:
    """``words`` as systemd's ExecStart= reads them: each quoted, its ``%`` specifiers and ``$`` variables
    escaped (a URL's ``%2F`` stays itself)."""
    return join(words).replace("%", "%%").replace("$", "$$")


def resources(host):
    raw = host.vars.get("bringup_pull")
    if not raw:
        return [Unused("pull mode", "bringup_pull is unset: this host is converged from the control machine only")]
    skip = without_systemd(host, "pull mode", "run `bringup pull` from this host's scheduler (its cron)")
    if skip:
        return [skip]
    p = Pull.model_validate(raw).model_dump()  # with its defaults (checked before the run by Vars)
    rule = parse_rule(p["branch"], p["tag"])
    spans = {k: p[k] for k in ("interval", "randomized_delay", "on_boot", "timeout")}
    service = host.render("pull/bringup-pull.service.j2", url=p["url"], rule=str(rule), argv=exec_line(argv(host.name, p)),
                          timeout=spans["timeout"])
    timer = host.render("pull/bringup-pull.timer.j2", **spans)
    out = [
        Packages(["git", "openssh-client", "util-linux"] + (["python3-venv"] if p.get("package") else []),
                 lock_timeout=int(host.vars.get("apt_lock_timeout", 300))),
        Directory("/etc/bringup", mode="0755"),
        File(ALLOWED_SIGNERS, content="".join(line.strip() + "\n" for line in p["allowed_signers"]), mode="0644"),
    ]
    if p["known_hosts"]:
        out.append(File(KNOWN_HOSTS, content="".join(line.strip() + "\n" for line in p["known_hosts"]), mode="0644"))
    if p.get("prometheus") and p["prometheus"] != "auto":
        # Made when missing; an existing one (the node exporter's) keeps its owner and mode.  With auto, each
        # run finds the folder the node exporter reads (Debian's package: /var/lib/prometheus/node-exporter).
        out.append(Directory(p["prometheus"].rsplit("/", 1)[0] or "/", mode=None, owner=None, group=None))
    if p.get("package"):
        out.append(Command(f"install bringup ({p['package']})",
                           sh("python3 -m venv -- %s && %s -m pip install --quiet -- %s", VENV, f"{VENV}/bin/python",
                              p["package"]),
                           unless=sh("%s --version", f"{VENV}/bin/bringup")))
    out += [
        File(SERVICE, content=service, mode="0644"),
        File(TIMER, content=timer, mode="0644"),
        Service(f"{UNIT_NAME}.timer", enabled=True, running=True, daemon_reload=True),
    ]
    return out
