"""Files and directories: content, mode, owner; written atomically."""
from __future__ import annotations

import base64
import difflib
import functools
import hashlib
import posixpath

from ..ssh.command import sh
from ..errors import InputError
from ..secrets import HIDDEN, MASK
from .base import Plan, Resource, kv_lines

__all__ = ["File", "Directory", "write_file", "backup", "backups_glob", "prune_backups", "BACKUP_KEEP"]

#: Files up to this size are read back whole, for --diff.
DIFF_LIMIT = 256 * 1024

#: Backups bringup keeps of each file it replaces (the newest); older ones it made are removed.
BACKUP_KEEP = 5

#: The longest file name (bytes) Linux file systems take.
NAME_MAX = 255

#: The timestamp of a backup's name, ``<name>.20240131T235959.bak``, as a glob: only files named
#: like this are ever pruned (bringup's own backups; never a file someone else made).
_STAMP_GLOB = "[0-9]" * 8 + "T" + "[0-9]" * 6
_STAMP_LEN = len(".20240131T235959.bak")

#: A script that dies (a failed step, a signal, the connection gone) removes its temporary file and a
#: backup it had not finished; once the new file is in place both names are cleared and nothing is removed.
_CLEANUP = ("tmp=; bak=\n"
            "trap 'rm -f -- ${tmp:+\"$tmp\"} ${bak:+\"$bak\"}' EXIT\n"
            "trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 141' PIPE")
_KEPT = "tmp=; bak=\ntrap - EXIT HUP INT TERM PIPE"


def _cut(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` bytes of UTF-8, at a character boundary."""
    return name.encode("utf-8", "surrogateescape")[:limit].decode("utf-8", "ignore")


def _temp_template(base: str) -> str:
    """The ``mktemp`` template beside a file: ``.<name>.bringup.XXXXXX`` while that fits NAME_MAX."""
    named = f".{base}.bringup.XXXXXX"
    return named if len(named.encode("utf-8", "surrogateescape")) <= NAME_MAX else ".bringup.XXXXXXXX"


def _backup_prefix(path: str) -> str:
    d, base = posixpath.split(path)
    return posixpath.join(d, _cut(base, NAME_MAX - _STAMP_LEN))


def backup(path: str) -> str:
    """Shell: copy ``path``, when it is a file, to a new ``<path>.<timestamp>.bak`` (``$bak`` names it).

    A copy that fails (a full disk) leaves nothing behind.  Two backups in the
    same second never share a name: the second waits for the next one.  A
    name too long for the suffix is cut (NAME_MAX).
    """
    return sh('if [ -f %s ]; then\n'
              '  while :; do bak=%s.$(date +%%Y%%m%%dT%%H%%M%%S).bak; [ -e "$bak" ] || break; sleep 1; done\n'
              '  cp -p -- %s "$bak" || { rm -f -- "$bak"; bak=; exit 1; }\n'
              'fi', path, _backup_prefix(path), path)


def backups_glob(path: str) -> str:
    """Shell word: a glob of ``path``'s backups named as :func:`backup` names them (oldest first), never others."""
    return sh("%s", _backup_prefix(path)) + "." + _STAMP_GLOB + ".bak"


def prune_backups(path: str, keep: int = BACKUP_KEEP) -> str:
    """Shell: remove all but the newest ``keep`` backups of ``path`` named as :func:`backup` names them."""
    return ("set -- " + backups_glob(path) + "\n"
            + sh('while [ "$#" -gt %s ]; do if [ -f "$1" ]; then rm -f -- "$1"; fi; shift; done', int(keep)))


def write_file(path: str, data: bytes, *, mode: str | None = None, owner: str | None = None,
               keep_backup: bool = False) -> str:
    """Shell: replace ``path`` with ``data`` atomically, leaving nothing behind when any step fails.

    A temporary file in the same folder (a name within NAME_MAX whatever the
    file's), mode and owner set, fsync, the old file backed up
    (``keep_backup``; older backups pruned to :data:`BACKUP_KEEP`), rename.

        write_file("/etc/docker/daemon.json", b"{}\\n", mode="644", keep_backup=True)
    """
    d = posixpath.dirname(path) or "/"
    steps = [
        "set -e",
        _CLEANUP,
        sh("p=%s; d=%s", path, d),
        'mkdir -p -- "$d"',
        sh('tmp=$(mktemp -- "$d"/%s)', _temp_template(posixpath.basename(path))),
        sh('printf %%s %s | base64 -d > "$tmp"', base64.b64encode(data).decode()),
    ]
    if mode:
        steps.append(sh('chmod %s -- "$tmp"', mode))
    if owner:
        steps.append(sh('chown %s -- "$tmp"', owner))
    steps.append('sync -- "$tmp"')
    if keep_backup:
        steps.append(backup(path))
    steps += ['mv -f -- "$tmp" "$p"', _KEPT, 'sync -- "$d" 2>/dev/null || true']
    if keep_backup:
        steps.append(prune_backups(path))
    return "\n".join(steps)


def _check_path(path: str) -> None:
    if not path.startswith("/") or "\n" in path or "/../" in path + "/":
        raise InputError(f"file path {path!r} must be absolute, without '..' or newlines")


def _check_mode(mode: str | int | None, path: str) -> str | None:
    if mode is None:
        return None
    m = format(mode, "o") if isinstance(mode, int) else str(mode)
    if not (m.isdigit() and set(m) <= set("01234567") and len(m) <= 4):
        raise InputError(f"{path}: mode {mode!r} must be octal like '0644'")
    return format(int(m, 8), "o")


class File(Resource):
    """A regular file with exact content, and optionally mode and owner.

    Written atomically (:func:`write_file`): a temporary file in the same
    folder, fsync, rename; the file it replaces is kept as
    ``<path>.<timestamp>.bak`` unless ``backup=False`` (the newest
    :data:`BACKUP_KEEP` of them).  A failed write leaves no temporary file.

        File("/etc/sysctl.d/90-trt-latency.conf", content=text, mode="0644")
    """

    kind = "file"
    #: Its read bounds itself (the content only up to :data:`DIFF_LIMIT`, through ``head -c``) and reads a regular
    #: file only: no section bound's pipe around it.
    read_small = True

    def __init__(self, path: str, *, content: str | bytes, mode: str | int | None = "0644",
                 owner: str | None = "root", group: str | None = "root", backup: bool = True,
                 notify=()):
        super().__init__(path, notify=notify)
        _check_path(path)
        self.path = path
        self.content = content.encode() if isinstance(content, str) else content
        self.mode = _check_mode(mode, path)
        self.owner, self.group, self.backup = owner, group, backup

    @functools.cached_property
    def sha256(self) -> str:
        """The wanted content's sha256: the read compares it on the host, the plan with what the host said."""
        return hashlib.sha256(self.content).hexdigest()

    def read(self) -> str:
        """Type, mode, owner, size and sha256; the content (for the diff) only where the hash is not the wanted
        one: an unchanged file costs ``stat`` and ``sha256sum`` (read from stdin: no name to escape), no more."""
        return sh(
            "p=%s; h=\n"
            "if [ -L \"$p\" ]; then echo type=link\n"
            "elif [ -f \"$p\" ]; then echo type=file\n"
            "  stat --printf 'mode=%%a\\nowner=%%U\\ngroup=%%G\\nsize=%%s\\n' -- \"$p\"\n"
            "  h=$(sha256sum < \"$p\") && h=${h%%%% *} && echo \"sha256=$h\"\n"
            "  if [ \"$h\" != %s ] && [ \"$(stat -c %%s -- \"$p\")\" -le %s ]; then\n"
            "    printf 'content='; head -c %s -- \"$p\" | base64 -w0; echo; fi\n"
            "elif [ -e \"$p\" ]; then echo type=other\n"
            "else echo type=absent; fi",
            self.path, self.sha256, DIFF_LIMIT, DIFF_LIMIT,
        )

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        kind = st.get("type")
        if kind in ("link", "other"):
            return Plan.fail(f"{self.path} exists and is not a regular file ({kind}); move it away first")
        want_sha = self.sha256
        changes: dict = {}
        cmds: list[str] = []
        diff = None
        if kind != "file" or st.get("sha256") != want_sha:
            old = base64.b64decode(st["content"]) if "content" in st else None
            diff = self._diff(old if kind == "file" else b"", kind == "file" and old is None)
            if self._holds_secret(old if kind == "file" else None):
                # A hash of a text holding a secret gives the secret away (a 4-character one is found from its
                # SHA-256 in a moment): the hashes are not shown; the diff is, each line masked (the secret
                # standing alone in it is ********), as every diff is: the lines that change keep their use.
                changes["content"] = ("absent" if kind != "file" else HIDDEN, HIDDEN)
                diff = MASK.mask_lines(diff)
            else:
                changes["content"] = ("absent" if kind != "file" else st.get("sha256", "?")[:12], want_sha[:12])
            cmds.append(self._write())
        else:
            if self.mode and st.get("mode") != self.mode:
                changes["mode"] = (st.get("mode"), self.mode)
                cmds.append(sh("chmod %s -- %s", self.mode, self.path))
            own = self._owner_spec()
            if own and (self.owner and st.get("owner") != self.owner or self.group and st.get("group") != self.group):
                changes["owner"] = (f"{st.get('owner')}:{st.get('group')}", own)
                cmds.append(sh("chown %s -- %s", own, self.path))
        if not cmds:
            return Plan.noop(f"{self.path} already has this content, mode and owner")
        return Plan(commands=cmds, changes=changes, diff=diff)

    def _holds_secret(self, old: bytes | None) -> bool:
        """The wanted content, or the host's (``old``), holds a secret the run knows (:data:`MASK`)."""
        return any(t is not None and MASK.holds(t.decode("utf-8", "replace")) for t in (self.content, old))

    def _owner_spec(self) -> str | None:
        if self.owner and self.group:
            return f"{self.owner}:{self.group}"
        if self.owner:
            return self.owner
        if self.group:
            return f":{self.group}"
        return None

    def _diff(self, old: bytes, too_big: bool) -> str:
        if too_big:
            return f"--- {self.path}\n+++ {self.path}\n(old file larger than {DIFF_LIMIT} bytes; not shown)\n"
        try:
            a = old.decode().splitlines(keepends=True)
            b = self.content.decode().splitlines(keepends=True)
        except UnicodeDecodeError:
            return f"Binary files {self.path} differ\n"
        return "".join(difflib.unified_diff(a, b, f"{self.path} (host)", f"{self.path} (wanted)"))

    def _write(self) -> str:
        return write_file(self.path, self.content, mode=self.mode, owner=self._owner_spec(),
                          keep_backup=self.backup)


class Directory(Resource):
    """A directory with optional mode and owner (parents are created)."""

    kind = "directory"
    read_alongside = True

    def __init__(self, path: str, *, mode: str | int | None = "0755", owner: str | None = "root",
                 group: str | None = "root", notify=()):
        super().__init__(path, notify=notify)
        _check_path(path)
        self.path, self.mode = path, _check_mode(mode, path)
        self.owner, self.group = owner, group

    def read(self) -> str:
        return sh(
            "p=%s\n"
            "if [ -L \"$p\" ]; then echo type=link\n"
            "elif [ -d \"$p\" ]; then echo type=dir; stat --printf 'mode=%%a\\nowner=%%U\\ngroup=%%G\\n' -- \"$p\"\n"
            "elif [ -e \"$p\" ]; then echo type=other\n"
            "else echo type=absent; fi",
            self.path,
        )

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        kind = st.get("type")
        if kind in ("link", "other"):
            return Plan.fail(f"{self.path} exists and is not a directory ({kind})")
        cmds, changes = [], {}
        if kind != "dir":
            changes["state"] = ("absent", "directory")
            cmds.append(sh("mkdir -p -- %s", self.path))
        if self.mode and st.get("mode") != self.mode:
            changes["mode"] = (st.get("mode"), self.mode)
            cmds.append(sh("chmod %s -- %s", self.mode, self.path))
        own = f"{self.owner or ''}:{self.group or ''}".strip(":")
        if own and ((self.owner and st.get("owner") != self.owner) or (self.group and st.get("group") != self.group)):
            changes["owner"] = (f"{st.get('owner')}:{st.get('group')}" if kind == "dir" else None, own)
            cmds.append(sh("chown %s -- %s", f"{self.owner or ''}:{self.group or ''}".rstrip(":"), self.path))
        if not cmds:
            return Plan.noop(f"{self.path} is already a directory with this mode and owner")
        return Plan(commands=cmds, changes=changes)
