"""An apt repository: its keyring (``signed-by``, no apt-key), its list file, fresh indexes.

Air-gapped and mirrored sites point ``url`` at their mirror (``file:``,
``http:``); the key is either given as content (read on the control machine,
so the host needs no access to the key server) or fetched by the host from a
URL (``file://`` works too), optionally pinned by its SHA-256 so that a
rotated key is a deliberate inventory change.
"""
from __future__ import annotations

import hashlib
import posixpath
import re

from pydantic import model_validator

from ..ssh.command import sh
from ..errors import InputError
from ..userfile import home
from ..secrets import reveal
from ..inventory.vars import RoleVars, Spec, Text, defaults_of, want
from .base import Plan, Resource, kv_lines
from .files import write_file
from .openpgp import dearmor, key_file, openpgp_problem

__all__ = ["AptRepository", "check_repo_var", "repo_from_var", "os_family", "RepoSpec", "AptVars"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_URL = re.compile(r"^(https?|file|ftp|copy):[^\s\]\[]+$")
_WORD = re.compile(r"^[A-Za-z0-9._/~+-]+$")

#: Where the indexes' freshness is recorded: the list's and keyring's hashes at the last update.
STAMP_DIR = "/var/lib/bringup/apt"
#: Lists files replaced because they name the same repository go here.
BACKUP_DIR = "/var/backups/bringup-apt"


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
    read_alongside = True

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
        url, self.auth = _split_credentials(url, where)
        self.url, self.suite, self.components = url, suite, comps
        self.list_path = f"/etc/apt/sources.list.d/{name}.list"
        #: Credentials in the URL go to apt's auth.conf.d, root-only; the list (world-readable) names the URL
        #: without them.  A file of this name that bringup did not write is never removed.
        self.auth_path = f"/etc/apt/auth.conf.d/{name}.conf"
        self.keyring = f"/usr/share/keyrings/{name}.gpg"
        self.key = dearmor(key.encode() if isinstance(key, str) else key) if key is not None else None
        self.key_url, self.key_sha256 = key_url, key_sha256
        self.lock_timeout, self.retries = int(lock_timeout), int(retries)
        self.stamp = posixpath.join(STAMP_DIR, f"{name}.stamp")
        line = f"deb [signed-by={self.keyring}] {url} {suite}" + "".join(f" {c}" for c in comps)
        self.content = ("# Written by bringup: the repository's own keyring, no apt-key.\n" + line + "\n").encode()

    def read(self) -> str:
        # The same URL in another list, also written with credentials (scheme://user:pw@host/...).
        scheme, _, rest = self.url.rstrip("/").partition("://")
        needle = (_ere(scheme) + "://([^/@[:space:]]*@)?" + _ere(rest)) if rest else _ere(self.url.rstrip("/"))
        return sh(
            "l=%s; k=%s; s=%s; u=%s; a=%s\n"
            "if [ -f \"$l\" ]; then printf 'list='; sha256sum -- \"$l\" | cut -d' ' -f1; fi\n"
            "if [ -f \"$a\" ]; then printf 'auth='; sha256sum -- \"$a\" | cut -d' ' -f1; "
            "head -n1 -- \"$a\" | grep -qF -- %s && echo auth_ours=yes; fi\n"
            "if [ -f \"$k\" ]; then printf 'key='; sha256sum -- \"$k\" | cut -d' ' -f1; fi\n"
            "if [ -f \"$s\" ]; then printf 'stamp='; cat -- \"$s\"; echo; fi\n"
            "for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do\n"
            "  [ -f \"$f\" ] && [ \"$f\" != \"$l\" ] || continue\n"
            "  if grep -v '^[[:space:]]*#' -- \"$f\" | grep -qE -- \"$u\"; then echo \"conflict=$f\"; fi\n"
            "done\n"
            "command -v apt-get >/dev/null 2>&1 || echo apt=missing",
            self.list_path, self.keyring, self.stamp, needle, self.auth_path, _AUTH_HEADER.strip(),
        )

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        if st.get("apt") == "missing":
            return Plan.fail(f"{self.name}: apt-get is not installed on this host (not a Debian/Ubuntu system?)")
        conflicts = [line.split("=", 1)[1] for line in current.splitlines() if line.startswith("conflict=")]
        want_list = hashlib.sha256(self.content).hexdigest()
        # In the order apt can bear a failure at each step: the keyring first, the credentials, then the other
        # lists of this URL moved away, the list that names the keyring last, then its indexes.  A failed
        # step ends the script, and what the steps before it wrote is put back (:meth:`_transaction`): a
        # list never names a keyring that was not written, and apt's other sources keep working.
        cmds: list[str] = []
        changes: dict = {}
        written: list[str] = []
        have_key = st.get("key")
        if self.key is not None:
            want_key = hashlib.sha256(self.key).hexdigest()
            if have_key != want_key:
                changes["keyring"] = ((have_key or "absent")[:12], want_key[:12])
                cmds.append(self._write(self.keyring, self.key))
                written.append(self.keyring)
        else:
            want_key = self.key_sha256 or have_key
            if have_key is None or (self.key_sha256 and have_key != self.key_sha256):
                changes["keyring"] = ((have_key or "absent")[:12], (self.key_sha256 or f"from {self.key_url}")[:12])
                cmds.append(self._fetch_key())
                written.append(self.keyring)
        if self.auth is not None:
            want_auth = hashlib.sha256(self.auth).hexdigest()
            if "auth" in st and st.get("auth_ours") != "yes":
                return Plan.fail(f"{self.name}: {self.auth_path} exists and was not written by bringup; move it "
                                 "away, or drop the credentials from the url and keep yours")
            if st.get("auth") != want_auth:
                changes["credentials"] = ("absent" if "auth" not in st else "other", f"{self.auth_path} (0600 root)")
                cmds.append(write_file(self.auth_path, self.auth, mode="0600", owner="root:root"))
                written.append(self.auth_path)
        elif st.get("auth_ours") == "yes":
            changes["credentials"] = (self.auth_path, "removed (the url has none now)")
            cmds.append(sh("rm -f -- %s", self.auth_path))
            written.append(self.auth_path)
        for f in conflicts:
            changes[f"conflicting list {f}"] = ("present", f"moved to {BACKUP_DIR}")
            cmds.append(sh("mkdir -p -- %s && mv -f -- %s %s && printf '%%s\\n' %s >> \"$bk/moved\"", BACKUP_DIR,
                           f, posixpath.join(BACKUP_DIR, posixpath.basename(f)), f))
        if st.get("list") != want_list:
            changes["list"] = (st.get("list", "absent")[:12], want_list[:12])
            cmds.append(self._write(self.list_path, self.content))
            written.append(self.list_path)
        if cmds or st.get("stamp") != f"{want_list} {want_key}":
            if not cmds:
                changes["indexes"] = ("not updated since the list or key changed", "updated")
            cmds.append(self._update())
        if not cmds:
            return Plan.noop(f"{self.list_path} and {self.keyring} in place, indexes up to date")
        return Plan(commands=[self._transaction(written), *(f"(\n{c}\n)" for c in cmds)], changes=changes)

    def _transaction(self, paths: list[str]) -> str:
        """Shell run first: keep a copy of each of ``paths`` (or that it was absent) and, when a later step
        fails, put them back and move the other lists moved away (``$bk/moved``) back; the steps run each in
        its own subshell after it, and the first that fails ends the script."""
        lines = ["set -e", 'bk=$(mktemp -d "${TMPDIR:-/tmp}/bringup-apt.XXXXXX")']
        restore = []
        for i, p in enumerate(paths):
            lines.append(sh("if [ -e %s ]; then cp -p -- %s \"$bk/%s\"; fi", p, p, str(i)))
            restore.append(sh("if [ -e \"$bk/%s\" ]; then cp -p -- \"$bk/%s\" %s.bringup-restore && "
                              "mv -f -- %s.bringup-restore %s; else rm -f -- %s; fi", str(i), str(i), p, p, p, p))
        restore.append(sh("if [ -f \"$bk/moved\" ]; then while IFS= read -r f; do "
                          "mv -f -- %s/\"${f##*/}\" \"$f\"; done < \"$bk/moved\"; fi", BACKUP_DIR))
        # A list of this name left naming a keyring that is not there (an older run's order) breaks every
        # `apt-get update` of the host: it goes too.
        restore.append(sh("if [ ! -e %s ] && [ -e %s ]; then rm -f -- %s; echo \"removed %s: the keyring it "
                          "names is not there\" >&2; fi", self.keyring, self.list_path, self.list_path,
                          self.list_path))
        lines += [
            "_apt_undo() {",
            "  rc=$?; trap - EXIT",
            '  if [ "$rc" -ne 0 ]; then',
            *(f"    {r}" for r in restore),
            sh("    echo \"apt repository %s: a step failed (exit $rc); %s, its keyring and credentials are "
               "as they were\" >&2", self.name, self.list_path),
            "  fi",
            '  rm -rf -- "$bk"; exit "$rc"',
            "}",
            "trap _apt_undo EXIT",
            "trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM",
        ]
        return "\n".join(lines)

    def _write(self, path: str, data: bytes) -> str:
        return write_file(path, data, mode="0644")

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


def _ere(text: str) -> str:
    """``text`` matched literally in a POSIX extended regular expression (grep -E)."""
    return re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", text)


_AUTH_HEADER = "# Written by bringup: credentials of an apt repository (apt_auth.conf(5)).\n"


def _split_credentials(url: str, where: str) -> tuple[str, bytes | None]:
    """``scheme://user:password@host/path`` → (the URL without them, apt_auth.conf lines); else (url, None).

    apt reads auth.conf.d entries for https only unless the machine names its scheme, so the scheme is kept.
    """
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    if not user or not hostport:
        raise InputError(f"{where}: the url's credentials must be user:password@host or token@host")
    if any(c in unquote(user) + unquote(password) for c in " \t\n\"'#"):
        raise InputError(f"{where}: the url's user or password holds a space, quote or #, which "
                         "apt_auth.conf cannot carry; use another token")
    clean = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    # apt matches the machine against the URL after it filled in $(ARCH): cut the path before any variable.
    machine = f"{parts.scheme}://{hostport}{parts.path.split('$(', 1)[0]}".rstrip("/")
    # A token alone (token@host, token:@host) is a login with an empty password: no password field.
    secret = f" password {unquote(password)}" if password else ""
    return clean, (_AUTH_HEADER + f"machine {machine} login {unquote(user)}{secret}\n").encode()


# ---------------------------------------------------------------------------
# Repository variables of roles: ``{url, suite, components, key | key_url, key_sha256}``

_RHEL = ("rhel", "rocky", "almalinux", "centos", "ol", "fedora")


def check_repo_var(spec, var: str) -> dict | None:
    """Check a repository variable's key file, on the control machine (None: no repository); its keys and
    their types are :class:`RepoSpec`'s, checked before."""
    from pathlib import Path

    if spec is None:
        return None
    if "key" in spec:
        path = Path(home(str(spec["key"])))
        problem = openpgp_problem(key_file(path, var))
        if problem:
            # Checked before anything connects: a wrong file is never shipped to /usr/share/keyrings.
            raise InputError(f"{var}: key file {path} is not an OpenPGP public key: it is {problem}; "
                             "give the repository's public key (armored or binary, e.g. its gpgkey file)")
    return spec


def repo_from_var(name: str, spec: dict, *, lock_timeout: int = 300, subst: dict | None = None) -> AptRepository:
    """An :class:`AptRepository` from a repository variable; ``{id}``-style fields filled from ``subst``."""
    from pathlib import Path

    def fill(v):
        return v.format(**subst) if subst and isinstance(v, str) else v

    spec = reveal(spec)  # a url given as {bringup_secret: {env: ...}}: its text goes to the host, masked in output

    key = key_file(Path(home(str(spec["key"]))), name) if "key" in spec else None
    return AptRepository(name, url=fill(spec["url"]), suite=fill(spec.get("suite", "./")),
                         components=spec.get("components") or (), key=key, key_url=fill(spec.get("key_url")),
                         key_sha256=spec.get("key_sha256"), lock_timeout=lock_timeout)


class RepoSpec(Spec):
    """A repository variable's value (``docker_repo``, ...); the key file is checked by :func:`check_repo_var`."""

    url: Text = want(..., "must be the repository's URL")
    suite: str = "./"
    components: list[str] = []
    key: str | None = None
    key_url: Text | None = None
    key_sha256: str | None = want(None, "must be 64 lower-case hex digits", pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_key(self) -> "RepoSpec":
        if (self.key is None) == (self.key_url is None):
            raise ValueError("give key (a file on the control machine) or key_url (fetched by the host), one")
        # What AptRepository refuses on the host side, refused with the inventory (before connecting);
        # a suite may hold a placeholder ({codename}) the role fills from the host.
        if not _WORD.match(self.suite.replace("{", "").replace("}", "") or "?"):
            raise ValueError(f"suite {self.suite!r} is malformed (letters, digits, . _ / ~ + -)")
        bad = [c for c in self.components if not _WORD.match(c)]
        if bad:
            raise ValueError(f"components: {bad[0]!r} is malformed (letters, digits, . _ / ~ + -)")
        if self.suite.endswith("/") and self.components:
            raise ValueError("a flat repository (suite ending in /) takes no components")
        if not self.suite.endswith("/") and not self.components:
            raise ValueError(f"suite {self.suite!r} needs components (e.g. [main]), or end it in / for a flat repo")
        return self


class AptVars(RoleVars):
    """Shared by the roles that install packages (each includes it in its ``Vars``)."""

    #: Seconds to wait for a dpkg/apt lock held by another process.
    apt_lock_timeout: int = want(300, "must be a whole number of seconds (0 to 86400)", ge=0, le=86400)


DEFAULTS = defaults_of(AptVars)

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
