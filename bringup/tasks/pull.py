"""``bringup pull``: on a host, converge this host from a signed revision of a Git repository
(:mod:`bringup.pull`).

Exit 0 when the revision was applied, 2 when its converge failed (or the disk is full), 3 when it was refused
(unsigned, an unknown key, older than the applied one, a link out of the checkout, not a bringup repository, an
inventory that does not load or lacks this host), 4 when no revision was reached (the server, the run lock),
1 for bad input; the last good revision stays applied in every case but 0.
"""
from __future__ import annotations

import re
from pathlib import Path

from invoke import Exit

from ..errors import InputError, shown
from ..userfile import kind
from .context import fail, failing, one_line, unreachable
from .context import task  # Invoke's @task, an empty flag value refused first

__all__ = ["pull", "fleet", "CACHE", "ALLOWED_SIGNERS"]

#: Where the host keeps the repository, its revisions and the pull state.
CACHE = "/var/lib/bringup/pull"
#: The host's list of trusted signing keys (OpenSSH allowed signers format).
ALLOWED_SIGNERS = "/etc/bringup/allowed_signers"


#: The longest path, and name in it, the system takes (Linux's PATH_MAX less its NUL, NAME_MAX).
_PATH_MAX, _NAME_MAX = 4095, 255


def _commit_id(text) -> str:
    """``--allow-rollback``: a commit id, whole or its start (4 to 40 hexadecimal characters)."""
    rev = str(text).strip().lower()
    if not re.fullmatch(r"[0-9a-f]{4,40}", rev):
        raise InputError(f"--allow-rollback {str(text)[:60]!r}: give the commit to roll back to, its id or its "
                         "first characters (4 to 40 hexadecimal digits, e.g. 3f2a9c1d07be)")
    return rev


def _textfile(given, check, own) -> Path:
    """``--prometheus FILE``, or ``auto``: bringup-pull.prom in the node exporter's textfile folder found on this
    host (:func:`bringup.pull.record.textfile_folder`; Debian's package reads /var/lib/prometheus/node-exporter)."""
    if str(given).strip() != "auto":
        return check(given, own=tuple(own))
    from ..pull.record import TEXTFILE, textfile_folder

    skipped: list[str] = []
    folder, how = textfile_folder(skipped=skipped)
    for why in skipped:
        print(f"--prometheus auto: {why}", flush=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--prometheus auto: cannot make {folder} ({e.strerror or e}); give --prometheus FILE "
                         "in the node exporter's textfile folder") from None
    print(f"--prometheus auto: {folder / TEXTFILE} ({how})", flush=True)
    return check(str(folder / TEXTFILE), own=tuple(own))


def _url(text) -> str:
    url = str(text or "").strip()
    if not url or url.startswith("-") or any(c.isspace() for c in url):
        raise InputError(f"--url {shown(repr(text))}: give the repository's URL (https://..., ssh://..., git@host:path, "
                         "file:///path)")
    from ..pull.source import HELPER_URL

    if HELPER_URL.match(url):
        raise InputError(f"--url {shown(repr(text))}: names a Git remote helper ({shown(url.split('::')[0], 40)}::), which pull "
                         "never runs; give the repository's URL (https://..., ssh://..., git@host:path, file:///path)")
    return url


@task(iterable=["vault_password_file"], auto_shortflags=False, help={
    "url": "the repository to converge from (the folder an operator runs from: hosts, group_vars, models, roles)",
    "branch": "apply the tip of this branch (default main)",
    "tag": "apply the highest tag (version order) matching this glob, e.g. 'release-*'",
    "allowed-signers": f"OpenSSH allowed signers file: the keys whose signed commits are applied "
                       f"(default {ALLOWED_SIGNERS})",
    "name": "this host's name in the inventory (default: its hostname)",
    "inventory": "the inventory inside the repository (default hosts)",
    "cache": f"folder for the repository, the revisions' checkouts and the state (default {CACHE})",
    "prometheus": "also write the outcome as Prometheus text to FILE (*.prom, the node exporter's textfile folder), "
                  "or auto: bringup-pull.prom in the folder this host's node exporter reads",
    "vault-password-file": "file holding the inventory's vault password (on this host); repeatable",
    "lock": "the folder of the host's run lock, the one push runs take (default: root's /run/bringup)",
    "ssh-key": "ssh:// URLs: the host's deploy key (a file on this host)",
    "known-hosts": "ssh:// URLs: the server's host key, a known_hosts file (an unknown or changed key is refused)",
    "allow-rollback": "apply this revision (a commit id or its start) even though it does not descend from the "
                      "applied one (an older commit, a force-pushed branch, a tag moved back)",
})
def pull(c, url=None, branch=None, tag=None, allowed_signers=ALLOWED_SIGNERS, name=None, inventory="hosts",
         cache=CACHE, prometheus=None, vault_password_file=None, lock=None, ssh_key=None, known_hosts=None,
         allow_rollback=None):
    """Converge this host from a signed Git revision (pull mode: fetch, verify, check out, converge locally)."""
    from ..engine.drift import check_prometheus_path
    from ..pull.record import METRICS
    from ..pull.run import Settings
    from ..pull.run import pull as pull_once
    from ..pull.source import parse_rule

    with failing():
        inv = str(inventory).strip()
        if not inv or Path(inv).is_absolute() or ".." in Path(inv).parts or inv.startswith("~"):
            raise InputError(f"--inventory {shown(repr(inventory))}: a path inside the repository, like hosts or "
                             "inventories/prod")
        if len(inv.encode("utf-8", "surrogateescape")) > _PATH_MAX or any(
                len(part.encode("utf-8", "surrogateescape")) > _NAME_MAX for part in Path(inv).parts):
            raise InputError(f"--inventory {shown(inv)}: a path longer than the system takes ({_NAME_MAX} bytes "
                             f"a name, {_PATH_MAX} in all); give the inventory's path inside the repository")
        settings = Settings(url=_url(url), rule=parse_rule(branch, tag), cache=Path(cache),
                            allowed_signers=Path(allowed_signers), name=(str(name).strip() or None) if name else None,
                            inventory=inv,
                            prometheus=_textfile(prometheus, check_prometheus_path, METRICS) if prometheus else None,
                            vault_password_files=list(vault_password_file or []))
        if lock:
            settings.lock = str(lock)
        if allow_rollback is not None:
            settings.allow_rollback = _commit_id(allow_rollback)
        for flag, value in (("--ssh-key", ssh_key), ("--known-hosts", known_hosts)):
            what = kind(value, InputError, f"{flag} {shown(value)}") if value else "file"
            if what != "file":
                raise InputError(f"{flag} {shown(value)}: "
                                 + ("no such file on this host" if what == "missing" else
                                    f"a {'folder' if what == 'folder' else 'pipe, socket or device'}, not a file"))
        settings.ssh_key = Path(ssh_key) if ssh_key else None
        settings.known_hosts = Path(known_hosts) if known_hosts else None
        try:
            # Every line one line: a flag's value (a name, a path) carrying a newline adds none of its own.
            attempt = pull_once(settings, say=lambda text: print(one_line(text), flush=True))
        except OSError as e:  # the cache or the textfile folder not writable, a full disk
            raise fail(f"{shown(getattr(e, 'filename', None) or cache)}: {e.strerror or e}") from None
    line = f"{attempt.status}: {attempt.message}"
    print(one_line(line), flush=True)
    if attempt.exit_code:
        raise Exit(code=attempt.exit_code)


@task(auto_shortflags=False, help={
    "prometheus-url": "the Prometheus that scrapes the hosts' node exporters (default http://127.0.0.1:9090)",
    "revision": "the revision every host should run (a commit or its start; default: the newest applied)",
    "stale-hours": "a host whose last pull run is older is stale (default 2)",
    "json": "print the fleet as JSON instead of the table",
})
def fleet(c, prometheus_url="http://127.0.0.1:9090", revision=None, stale_hours="2", json_=False):
    """Where a pull-mode fleet stands, from Prometheus: each host's revision, age and state; lagging hosts."""
    import json

    from ..errors import Unreachable
    from ..latency.options import number
    from ..pull.fleet import note_lines, query, render_table, summarize, to_json
    from .context import console

    with failing():
        stale = number(stale_hours, "--stale-hours", lo=0.01, hi=24 * 365, unit="h")
        if revision is not None and not str(revision).strip():
            raise InputError("--revision '': give a commit (or its first characters)")
        try:
            series = query(str(prometheus_url))
        except Unreachable as e:
            raise unreachable(e) from None
    report = summarize(series, revision=str(revision).strip().lower() if revision else None, stale_s=stale * 3600)
    if json_:
        print(json.dumps(to_json(report), indent=2))
    else:
        out = console()
        out.print(render_table(report), highlight=False, soft_wrap=True)
        notes = note_lines(report)  # an unreadable row's series, a time ahead of this clock: one line each
        if notes:  # printed at once: one print a note cost 0.1 ms each, seconds for a flood of them
            out.print("\n".join(notes), markup=False, highlight=False, soft_wrap=True)
        if not report.hosts:
            out.print("no host reports bringup_pull_* metrics to this Prometheus (is the role pull installed, and "
                      "the node exporter's textfile folder scraped?)", markup=False)
    if report.exit_code:
        raise Exit(code=report.exit_code)
