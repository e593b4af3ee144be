"""``bringup pull``: on a host, converge this host from a signed revision of a Git repository
(:mod:`bringup.pull`).

Exit 0 when the revision was applied, 2 when its converge failed, 3 when it was refused (unsigned, an
unknown key, not a bringup repository, an inventory that does not load or lacks this host), 4 when no revision
was reached (the server, the run lock), 1 for bad input; the last good revision stays applied in every case
but 0.
"""
from __future__ import annotations

from pathlib import Path

from invoke import Exit, task

from ..errors import InputError
from .context import fail, failing

__all__ = ["pull", "CACHE", "ALLOWED_SIGNERS"]

#: Where the host keeps the repository, its revisions and the pull state.
CACHE = "/var/lib/bringup/pull"
#: The host's list of trusted signing keys (OpenSSH allowed signers format).
ALLOWED_SIGNERS = "/etc/bringup/allowed_signers"


def _url(text) -> str:
    url = str(text or "").strip()
    if not url or url.startswith("-") or any(c.isspace() for c in url):
        raise InputError(f"--url {text!r}: give the repository's URL (https://..., ssh://..., git@host:path, "
                         "file:///path)")
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
    "prometheus": "also write the outcome as Prometheus text to FILE (*.prom, the node exporter's textfile folder)",
    "vault-password-file": "file holding the inventory's vault password (on this host); repeatable",
})
def pull(c, url=None, branch=None, tag=None, allowed_signers=ALLOWED_SIGNERS, name=None, inventory="hosts",
         cache=CACHE, prometheus=None, vault_password_file=None):
    """Converge this host from a signed Git revision (pull mode: fetch, verify, check out, converge locally)."""
    from ..drift import check_prometheus_path
    from ..pull.record import METRICS
    from ..pull.run import EXIT, Settings
    from ..pull.run import pull as pull_once
    from ..pull.source import parse_rule

    with failing():
        inv = str(inventory).strip()
        if not inv or Path(inv).is_absolute() or ".." in Path(inv).parts:
            raise InputError(f"--inventory {inventory!r}: a path inside the repository, like hosts or "
                             "inventories/prod")
        settings = Settings(url=_url(url), rule=parse_rule(branch, tag), cache=Path(cache),
                            allowed_signers=Path(allowed_signers), name=(str(name).strip() or None) if name else None,
                            inventory=inv,
                            prometheus=check_prometheus_path(prometheus, own=tuple(METRICS)) if prometheus else None,
                            vault_password_files=list(vault_password_file or []))
        try:
            attempt = pull_once(settings)
        except OSError as e:  # the cache or the textfile folder not writable, a full disk
            raise fail(f"{getattr(e, 'filename', None) or cache}: {e.strerror or e}") from None
    line = f"{attempt.status}: {attempt.message}"
    print(line, flush=True)
    if attempt.reason == "interrupted":
        raise Exit(code=130)
    code = EXIT[attempt.status]
    if code:
        raise Exit(code=code)
