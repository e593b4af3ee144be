"""An apt repository: its keyring (``signed-by``, no apt-key), its list file, fresh indexes.

Air-gapped and mirrored sites point ``url`` at their mirror (``file:``,
``http:``); the key is either given as content (read on the control machine,
so the host needs no access to the key server) or fetched by the host from a
URL (``file://`` works too), optionally pinned by its SHA-256 so that a
rotated key is a deliberate inventory change.
"""
from __future__ import annotations

import base64
import hashlib
import posixpath
import re

from ..command import sh
from ..errors import InputError
from ..secrets import reveal
from .base import Plan, Resource, kv_lines

__all__ = ["AptRepository", "dearmor"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_URL = re.compile(r"^(https?|file|ftp|copy):[^\s\]\[]+$")
_WORD = re.compile(r"^[A-Za-z0-9._/~+-]+$")

#: Where the indexes' freshness is recorded: the list's and keyring's hashes at the last update.
STAMP_DIR = "/var/lib/bringup/apt"
#: Lists files replaced because they name the same repository go here.
BACKUP_DIR = "/var/backups/bringup-apt"


def dearmor(data: bytes) -> bytes:
    """An ASCII-armored OpenPGP key → the binary keyring apt's ``signed-by`` reads (``gpg --dearmor``)."""
    text = data.decode("ascii", "replace")
    if "-----BEGIN PGP PUBLIC KEY BLOCK-----" not in text:
        return data
    body = text.split("-----BEGIN PGP PUBLIC KEY BLOCK-----", 1)[1].split("-----END PGP PUBLIC KEY BLOCK-----", 1)[0]
    lines = body.strip("\r\n").splitlines()
    # Armor headers ("Comment: ...") end at the first empty line.
    if any(not l.strip() for l in lines):
        lines = lines[next(i for i, l in enumerate(lines) if not l.strip()) + 1:]
    b64 = "".join(l.strip() for l in lines if l.strip() and not l.startswith("="))
    try:
        return base64.b64decode(b64, validate=True)
    except ValueError:
        raise InputError("the repository key is ASCII-armored but its body is not valid base64") from None


# Dearmor on the host without gpg: the armor's base64 body between the blank line and the checksum.
_DEARMOR_SH = ("if grep -q 'BEGIN PGP PUBLIC KEY BLOCK' \"$tmp\"; then "
               "awk '/^-----BEGIN/{h=1;next} h&&/^[[:space:]]*$/{b=1;next} /^=/||/^-----END/{b=0} b' \"$tmp\" "
               "| base64 -d > \"$tmp.bin\" && mv -f -- \"$tmp.bin\" \"$tmp\"; fi")


class AptRepository(Resource):
    """A signed apt source with its own keyring file.

        AptRepository("nvidia-container-toolkit", url="https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
                      suite="/", key_url="https://nvidia.github.io/libnvidia-container/gpgkey")

    ``suite`` ending in ``/`` (and no components) is a flat repository.  The
    list goes to ``/etc/apt/sources.list.d/<name>.list``, the keyring to
    ``/usr/share/keyrings/<name>.gpg``.  Other list files naming the same URL
    (a stale copy with another ``signed-by``, which makes apt refuse every
    update) are moved to /var/backups/bringup-apt.  The repository's indexes
    are updated, alone, whenever the list or the key changed since the last
    update.
    """

    kind = "apt-repo"

    def __init__(self, name: str, *, url: str, suite: str, components: list[str] | tuple[str, ...] = (),
                 key: bytes | str | None = None, key_url: str | None = None, key_sha256: str | None = None,
                 lock_timeout: int = 300, retries: int = 3, notify=()):
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"apt repository name {name!r} is malformed (use a-z, 0-9, . _ -)")
        where = f"apt repository {name}"
        if not isinstance(url, str) or not _URL.match(url):
            raise InputError(f"{where}: url {url!r} must be an http(s):, file: or ftp: URL without spaces")
        if not isinstance(suite, str) or not _WORD.match(suite):
            raise InputError(f"{where}: suite {suite!r} is malformed")
        comps = list(components or [])
        if any(not isinstance(c, str) or not _WORD.match(c) for c in comps):
            raise InputError(f"{where}: components {comps!r} are malformed")
        if suite.endswith("/") and comps:
            raise InputError(f"{where}: a flat repository (suite ending in /) takes no components")
        if not suite.endswith("/") and not comps:
            raise InputError(f"{where}: suite {suite!r} needs components (e.g. [main]), or end it in / for a flat repo")
        if (key is None) == (key_url is None):
            raise InputError(f"{where}: give the key as content (key) or as a URL (key_url), one of them")
        if key_url is not None and not _URL.match(key_url):
            raise InputError(f"{where}: key_url {key_url!r} must be an http(s): or file: URL")
        if key_sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", str(key_sha256)):
            raise InputError(f"{where}: key_sha256 must be 64 lower-case hex digits")
        super().__init__(name, notify=notify)
        self.url, self.suite, self.components = url, suite, comps
        self.list_path = f"/etc/apt/sources.list.d/{name}.list"
        self.keyring = f"/usr/share/keyrings/{name}.gpg"
        self.key = dearmor(key.encode() if isinstance(key, str) else key) if key is not None else None
        self.key_url, self.key_sha256 = key_url, key_sha256
        self.lock_timeout, self.retries = int(lock_timeout), int(retries)
        self.stamp = posixpath.join(STAMP_DIR, f"{name}.stamp")
        line = f"deb [signed-by={self.keyring}] {url} {suite}" + "".join(f" {c}" for c in comps)
        self.content = ("# Written by bringup: the repository's own keyring, no apt-key.\n" + line + "\n").encode()

    def read(self) -> str:
        needle = self.url.rstrip("/")
        return sh(
            "l=%s; k=%s; s=%s; u=%s\n"
            "if [ -f \"$l\" ]; then printf 'list='; sha256sum -- \"$l\" | cut -d' ' -f1; fi\n"
            "if [ -f \"$k\" ]; then printf 'key='; sha256sum -- \"$k\" | cut -d' ' -f1; fi\n"
            "if [ -f \"$s\" ]; then printf 'stamp='; cat -- \"$s\"; echo; fi\n"
            "for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do\n"
            "  [ -f \"$f\" ] && [ \"$f\" != \"$l\" ] || continue\n"
            "  if grep -v '^[[:space:]]*#' -- \"$f\" | grep -qF -- \"$u\"; then echo \"conflict=$f\"; fi\n"
            "done\n"
            "command -v apt-get >/dev/null 2>&1 || echo apt=missing",
            self.list_path, self.keyring, self.stamp, needle,
        )

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        if st.get("apt") == "missing":
            return Plan.fail(f"{self.name}: apt-get is not installed on this host (not a Debian/Ubuntu system?)")
        conflicts = [line.split("=", 1)[1] for line in current.splitlines() if line.startswith("conflict=")]
        want_list = hashlib.sha256(self.content).hexdigest()
        cmds: list[str] = []
        changes: dict = {}
        if st.get("list") != want_list:
            changes["list"] = (st.get("list", "absent")[:12], want_list[:12])
            cmds.append(self._write(self.list_path, self.content))
        have_key = st.get("key")
        if self.key is not None:
            want_key = hashlib.sha256(self.key).hexdigest()
            if have_key != want_key:
                changes["keyring"] = ((have_key or "absent")[:12], want_key[:12])
                cmds.append(self._write(self.keyring, self.key))
        else:
            want_key = self.key_sha256 or have_key
            if have_key is None or (self.key_sha256 and have_key != self.key_sha256):
                changes["keyring"] = ((have_key or "absent")[:12], (self.key_sha256 or f"from {self.key_url}")[:12])
                cmds.append(self._fetch_key())
        for f in conflicts:
            changes[f"conflicting list {f}"] = ("present", f"moved to {BACKUP_DIR}")
            cmds.append(sh("mkdir -p -- %s && mv -f -- %s %s", BACKUP_DIR, f,
                           posixpath.join(BACKUP_DIR, posixpath.basename(f))))
        if cmds or st.get("stamp") != f"{want_list} {want_key}":
            if not cmds:
                changes["indexes"] = ("not updated since the list or key changed", "updated")
            cmds.append(self._update())
        if not cmds:
            return Plan.noop(f"{self.list_path} and {self.keyring} in place, indexes up to date")
        return Plan(commands=cmds, changes=changes)

    def _write(self, path: str, data: bytes) -> str:
        d = posixpath.dirname(path)
        return "\n".join([
            "set -e",
            sh("p=%s; mkdir -p -- %s", path, d),
            sh("tmp=$(mktemp -- %s/.bringup.XXXXXX)", d),
            sh("printf %%s %s | base64 -d > \"$tmp\"", base64.b64encode(data).decode()),
            "chmod 0644 -- \"$tmp\"",
            "mv -f -- \"$tmp\" \"$p\"",
        ])

    def _fetch_key(self) -> str:
        steps = [
            "set -e",
            sh("p=%s; mkdir -p -- %s", self.keyring, posixpath.dirname(self.keyring)),
            "tmp=$(mktemp)",
            "trap 'rm -f -- \"$tmp\" \"$tmp.bin\"' EXIT",
            sh("curl -fsSL --retry %s --retry-delay 2 --connect-timeout 20 -o \"$tmp\" -- %s",
               self.retries, self.key_url),
            _DEARMOR_SH,
        ]
        if self.key_sha256:
            steps.append(sh("got=$(sha256sum -- \"$tmp\" | cut -d' ' -f1); if [ \"$got\" != %s ]; then "
                            "echo \"key from %s has SHA-256 $got, not the pinned %s (rotated? update key_sha256)\"; "
                            "exit 1; fi", self.key_sha256, self.key_url, self.key_sha256))
        steps += ["chmod 0644 -- \"$tmp\"", "mv -f -- \"$tmp\" \"$p\"", "trap - EXIT"]
        return "\n".join(steps)

    def _update(self) -> str:
        return "\n".join([
            "set -e",
            # Only this repository: an unreachable other source must not fail this one.
            sh("apt-get -q update -o Dir::Etc::sourcelist=%s -o Dir::Etc::sourceparts=- "
               "-o APT::Get::List-Cleanup=0 -o Acquire::Retries=%s -o DPkg::Lock::Timeout=%s "
               "-o APT::Update::Error-Mode=any", self.list_path, self.retries, self.lock_timeout),
            sh("mkdir -p -- %s", STAMP_DIR),
            sh("l=$(sha256sum -- %s | cut -d' ' -f1); k=$(sha256sum -- %s | cut -d' ' -f1); "
               "printf '%%s %%s' \"$l\" \"$k\" > %s", self.list_path, self.keyring, self.stamp),
        ])


# ---------------------------------------------------------------------------
# Repository variables of roles: ``{url, suite, components, key | key_url, key_sha256}``

_RHEL = ("rhel", "rocky", "almalinux", "centos", "ol", "fedora")
_SPEC_KEYS = {"url", "suite", "components", "key", "key_url", "key_sha256"}


def check_repo_var(spec, var: str) -> dict | None:
    """Check a repository variable (None: no repository); ``key`` is a file on the control machine."""
    from pathlib import Path

    if spec is None:
        return None
    if not isinstance(spec, dict) or "url" not in spec:
        raise InputError(f"{var} must be a mapping with url, suite, and key (control-machine path) or key_url")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise InputError(f"{var}: unknown key(s) {', '.join(sorted(unknown))}")
    if ("key" in spec) == ("key_url" in spec):
        raise InputError(f"{var}: give key (a file on the control machine) or key_url (fetched by the host), one")
    if "key" in spec and not Path(str(spec["key"])).expanduser().is_file():
        raise InputError(f"{var}: key file {spec['key']} does not exist on the control machine")
    return spec


def repo_from_var(name: str, spec: dict, *, lock_timeout: int = 300, subst: dict | None = None) -> AptRepository:
    """An :class:`AptRepository` from a repository variable; ``{id}``-style fields filled from ``subst``."""
    from pathlib import Path

    def fill(v):
        return v.format(**subst) if subst and isinstance(v, str) else v

    spec = reveal(spec)  # a url given as {env: ...}: its text goes to the host (auth.conf.d), masked in output

    key = Path(str(spec["key"])).expanduser().read_bytes() if "key" in spec else None
    return AptRepository(name, url=fill(spec["url"]), suite=fill(spec.get("suite", "./")),
                         components=spec.get("components") or (), key=key, key_url=fill(spec.get("key_url")),
                         key_sha256=spec.get("key_sha256"), lock_timeout=lock_timeout)


#: Shared by the roles that install packages: seconds to wait for a held dpkg/apt lock.
DEFAULTS = {"apt_lock_timeout": 300}

#: What :func:`os_family` reads.
OS_FACTS = ("os.release",)


def os_family(facts: dict) -> tuple[str, str, str]:
    """The package family of a host from ``os.release``: (``apt`` | ``dnf`` | ``?``, os id, version id)."""
    rel = facts.get("os.release") or {}
    osid, ver = rel.get("id", ""), rel.get("version_id", "")
    like = (rel.get("ID_LIKE") or "").split()
    if osid in ("ubuntu", "debian") or "debian" in like:
        return "apt", osid, ver
    if osid in _RHEL or "rhel" in like or "fedora" in like:
        return "dnf", osid, ver
    return "?", osid, ver
