"""The Git side of a pull: fetch the repository into the host's cache, pick the wanted revision, verify its
signature with Git's own verification, check it out in a folder of its own and swap the ``current`` link.

Git runs here as an argument vector (never through a shell), with the user's and the system's Git
configuration left out (``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_CONFIG_NOSYSTEM``), no prompt
(``GIT_TERMINAL_PROMPT=0``, ssh in batch mode) and a time bound on every call, so a pull never waits on a
person or a dead server.

The folder (``--cache``, ``/var/lib/bringup/pull`` by default)::

    repo.git/              bare mirror of the repository (fetched with --prune --force: a force-push is followed)
    revisions/<commit>/    a Git worktree per checked-out revision
    current -> revisions/<commit>   the last revision applied with success (swapped by a rename)
    pycache/               the converges' bytecode (-X pycache_prefix): a fresh folder per converge, removed after

A revision is trusted only when ``git verify-commit`` accepts it with ``gpg.format=ssh`` and
``gpg.ssh.allowedSignersFile`` = the host's allowed signers file, and ``%G?`` says ``G`` (good signature by a
key of the list); anything else is a :class:`Refused` naming why (unsigned, unknown key, bad, expired or
revoked signature).  The signature is checked again at every run, the applied revision's too: a key taken out
of the list stops its revisions at the next run.

A pull moves forward only: a revision that does not descend from the applied one (an ancestor of it, or the
tip of a rewritten history) is a :class:`Refused` ``rollback`` unless the operator allowed that very revision
(``--allow-rollback``, :meth:`Source.forward`).  A signed revision holding a symbolic link out of its checkout
is refused before anything reads it (:func:`links_out`).  A full disk (the fetch or the checkout) is a
``disk-full`` failure, and Git's temporary files of a cut fetch are removed (:meth:`Source.clean`).  A checkout
kept from an earlier run is reused only when it is exactly the signed tree (:meth:`Source.differs`).

Over 500 lines because a checkout's whole life (fetched, verified, checked out, held to the signed tree, swapped,
pruned) is one set of Git calls on one cache, each guarded the same way; split, each half would need the other's.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..child import capture
from ..userfile import read_capped, walk
from ..ssh.command import join
from ..errors import BringupError, InputError, said, shown

__all__ = ["Refused", "Rule", "Source", "parse_rule", "HELPER_URL", "ALLOWED_PROTOCOLS", "ssh_command", "links_out",
           "scan",
           "disk_full", "room", "FULL_ERRNOS", "GIT_TIMEOUT_S", "FETCH_TIMEOUT_S"]

#: Seconds one local Git call may take (rev-parse, verify-commit, worktree add).
GIT_TIMEOUT_S = 120
#: Seconds a fetch may take before the server counts as unreachable.
FETCH_TIMEOUT_S = 300

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: ssh-keygen's words (through ``git verify-commit``) for an allowed signers entry whose dates leave the commit's
#: time out: ``<file>:<line>: key has expired: verify time T > valid-before L`` (or ``is not yet valid: ... <``).
_VALIDITY = re.compile(r":(\d{1,9}): (key has expired|key is not yet valid): verify time ([0-9T:-]{1,32}) [<>] "
                       r"valid-(?:before|after) ([0-9T:-]{1,32})")
#: ssh-keygen's words for a line of the allowed signers file it could not read and skipped (after the file's path):
#: ``:<line>: bad options: invalid "valid-before" time``, ``:<line>: invalid key``, ``:<line>: missing principal``.
_SKIPPED = r":(\d{1,9}): ((?!key has expired|key is not yet valid)[^\n]{1,200})"
#: What bringup's converge writes in a checkout (``bringup provision``'s report and retry files under ``reports/``,
#: :mod:`bringup.engine.report`, :func:`bringup.engine.rollout.write_retry`): not counted as foreign when reused.
#: A converge killed while writing one leaves its temporary file (outfile's ``.NAME.XXXXXXXX.tmp``) beside it.
_OWN_REPORT = r"(\d{8}T\d{6}-provision(-\d+)?\.(json|retry)|last\.retry)"
_CONVERGE_OUTPUT = re.compile(rf"^reports/({_OWN_REPORT}|\.{_OWN_REPORT}\.[A-Za-z0-9_]{{1,16}}\.tmp)$")
#: The names bringup gives the entries of ``revisions/``: a commit's checkout, or a cut-off one's temporary folder.
_OWN_CHECKOUT = re.compile(r"^\.?[0-9a-f]{40}(\.[0-9]+)?$")


def bytecode_folder(cache: Path) -> Path:
    """The folder of the cache where each converge's bytecode goes (``-X pycache_prefix``), never a checkout: in a
    folder :func:`bringup.pull.run.bytecode_in` makes fresh in it for that converge and removes after (Python
    writes a checkout's bytecode under the prefix at the checkout's absolute path, and would run a ``.pyc`` found
    there whose size and time match a source: one planted there, or a link on the way leading elsewhere)."""
    return cache / "pycache"


#: The names :func:`fresh_bytecode` gives the converges' folders in :func:`bytecode_folder` (``mkdtemp``'s): only
#: these are removed there, where one was left by a pull killed mid-converge.
FRESH_BYTECODE = re.compile(r"^converge-[A-Za-z0-9_]{8}$")


def fresh_bytecode(cache: Path) -> Path:
    """A folder made fresh in :func:`bytecode_folder` for one converge's bytecode (``mkdtemp``: 0700, a new name,
    nothing planted in it, no link on its way below it), in a real folder of this user's that no one else may
    write (else one line, nothing run).  Python writes and reads a checkout's bytecode under the prefix at the
    checkout's absolute path, and runs a ``.pyc`` whose size and time match the source: one folder shared by every
    converge let a link one level down (``pycache/var -> elsewhere``) or a planted ``.pyc`` run instead of the
    signed source.  Each converge compiles afresh (a second or two).  The folders a pull killed meanwhile left
    (named :data:`FRESH_BYTECODE`, real folders of this user's) are removed first: the run lock is held, so no
    converge uses one."""
    root = bytecode_folder(cache)
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)  # (the cache itself, where a converge is run alone)
        st = os.lstat(root)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise BringupError(f"{shown(root)} is no folder of this user's alone (a link, another user's, or writable "
                               "by others) where the cache keeps the converges' bytecode: nothing was run; remove "
                               "it, or give another --cache")
        for name in os.listdir(root):
            left = os.lstat(root / name)  # a link there is no folder of lstat's: never followed
            if FRESH_BYTECODE.match(name) and stat.S_ISDIR(left.st_mode) and left.st_uid == st.st_uid:
                shutil.rmtree(root / name, ignore_errors=True)
        return Path(tempfile.mkdtemp(prefix="converge-", dir=root))
    except OSError as e:
        raise BringupError(f"{shown(root)}: {e.strerror or e}; the converges' bytecode cannot be kept there") from None


class Refused(BringupError):
    """A revision the host does not apply: ``reason`` is a short code for the metrics (unsigned,
    unknown-key, expired, not-ssh-signature, bad-signature, unreachable, no-revision, not-a-commit, rollback, link-out,
    not-bringup, invalid, host-absent, checkout, disk-full, busy), the message one line for the report and the
    journal."""

    def __init__(self, reason: str, message: str, revision: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.revision = revision


@dataclass(frozen=True)
class Rule:
    """Which revision to apply: the tip of a branch, or the highest tag (version order) matching a glob."""

    kind: str  # "branch" | "tag"
    value: str

    def __str__(self) -> str:
        return f"{self.kind} {self.value}"


_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/*?\[\]-]*$")


def parse_rule(branch: str | None, tag: str | None) -> Rule:
    """``--branch NAME`` or ``--tag PATTERN`` (one of them; ``--branch main`` when neither)."""
    if branch and tag:
        raise InputError("--branch and --tag: give one revision rule, a branch (--branch main) or a tag pattern "
                         "(--tag 'release-*')")
    kind, value = ("tag", tag) if tag else ("branch", branch or "main")
    value = str(value).strip()
    if not _REF.match(value) or ".." in value or value.endswith((".lock", "/")):
        raise InputError(f"--{kind} {value!r}: not a Git {kind} name{' pattern' if kind == 'tag' else ''}; "
                         f"give one like {'main' if kind == 'branch' else 'release-*'}")
    if kind == "branch" and any(c in value for c in "*?["):
        raise InputError(f"--branch {value!r}: a branch is one name; a pattern is for --tag")
    return Rule(kind, value)


#: The transports Git may use (``GIT_ALLOW_PROTOCOL``): a URL naming a remote helper (``fd::3``, which waited for
#: the fetch's whole bound on a descriptor nobody writes, or any ``git-remote-NAME`` a host has installed) is
#: refused by Git itself, whoever wrote it (the flag, or the pull role's ``url`` in the inventory).
ALLOWED_PROTOCOLS = "https:http:ssh:git:file"
#: ``NAME::ADDRESS``: a URL handed to Git's remote helper git-remote-NAME (``ext::`` runs a command, ``fd::`` reads a
#: descriptor), no repository's address (an IPv6 address's ``::`` comes after ``//`` or ``@``, never first): the
#: flag and the pull role refuse it in one line before Git is asked.
HELPER_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")


def _env(ssh: list[str] | None = None) -> dict[str, str]:
    """Git's environment: no user or system configuration, no prompt, only :data:`ALLOWED_PROTOCOLS`; ``ssh``: the ssh command line Git
    runs for ssh:// and host:path URLs (quoted: Git hands it to a shell)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
               GIT_SSH_COMMAND=join(ssh or ssh_command()), LC_ALL="C", GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS)
    return env


#: Bytes of a Git command's stdout read at most (its stderr: the first 64 KiB kept); more is one line.
GIT_OUTPUT_CAP = 16 << 20


def _run_git(argv: list[str], what: str, timeout: float, env: dict[str, str], cwd: Path | None = None,
             input_: str | None = None) -> subprocess.CompletedProcess:
    """Run a Git command line (``what``: its subcommand, as the messages name it) (:func:`bringup.child.capture`: its own process group, ended with all it started;
    a deadline, capped output); its answer as text.  Missing git, the deadline or a flood is one line."""
    try:
        got = capture(argv, timeout=timeout, cap=GIT_OUTPUT_CAP, env=env, cwd=cwd,
                      input=None if input_ is None else input_.encode())
    except FileNotFoundError:
        raise BringupError("git is not installed on this host (apt-get install git)") from None
    if got.why == "timeout":
        raise Refused("timeout", f"git {what} took longer than {timeout:g} s") from None
    if got.why is not None:
        raise BringupError(f"git {what} printed more than "
                           f"{GIT_OUTPUT_CAP >> 20} MiB; look at the repository") from None
    return subprocess.CompletedProcess(argv, got.rc or 0, got.out.decode("utf-8", "replace"),
                                       got.err.decode("utf-8", "replace"))

def ssh_command(key: Path | None = None, known_hosts: Path | None = None) -> list[str]:
    """ssh in batch mode (never a prompt), with the host's deploy key and the server's known host key file
    when given (an unknown or changed server key is then refused)."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"]
    if key:
        argv += ["-i", str(key), "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    return argv


#: Free bytes under which a failed write counts as a full disk (Git's own words may not say so).
_FULL_BELOW = 1 << 20
#: Git's words for a write that failed (a full disk; its checkout says only "unable to write file X", having
#: removed what it wrote, so the free space afterwards does not tell).
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "unable to write file",
               "unable to write loose object")


#: A write refused for want of room: the disk is full, or this user's quota is.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def disk_full(output: str, folder: Path) -> bool:
    """Whether a failed Git call's ``output`` and ``folder``'s filesystem say the disk is full."""
    if any(w in output.lower() for w in _FULL_WORDS):
        return True
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _FULL_BELOW


def links_out(root: Path) -> tuple[str, str] | None:
    """The first symbolic link under ``root`` (a checkout) that points out of it: absolute, or a relative one
    that resolves (through other links too) outside ``root``; as ``(its path inside root, its target)``, or
    None.  The worktree's own ``.git`` file is not looked into."""
    return scan(root)[1]


def not_checked_out(root: Path) -> str | None:
    """The first entry of the checkout ``root`` that no checkout and no converge makes, which ``git status`` does not
    list: a FIFO, a socket or a device (Git never writes one: a FIFO planted at ``group_vars/all.yml`` had the
    signed revision refused as an inventory that does not load; one in a folder a role copies would be read), or,
    under one of bringup's own converge output names in ``reports/``, anything but a regular file (a link there
    passed as bringup's own report, and the next converge read its retry file through it).  Named as
    ``path (what it is)``, or None.  The worktree's own ``.git`` is not looked into."""
    return scan(root)[0]


def scan(root: Path) -> tuple[str | None, tuple[str, str] | None]:
    """:func:`not_checked_out` and :func:`links_out` of ``root`` in one walk (a kept checkout of many files is
    walked once per run, not once for each), ending as soon as both are found."""
    top = os.path.realpath(root)
    odd: str | None = None
    out: tuple[str, str] | None = None
    for folder, dirs, files in walk(top, as_entries=True):  # no recursion: a tree 1,500 folders deep is read too
        if folder == top:
            dirs[:] = [d for d in dirs if d != ".git"]
        for entry in sorted(files, key=lambda e: e.name):
            try:  # the listing's own type (d_type): no stat for the many regular files of a large tree
                if entry.is_file(follow_symlinks=False):
                    continue
                mode = entry.stat(follow_symlinks=False).st_mode
                target = os.readlink(entry.path) if stat.S_ISLNK(mode) and out is None else ""
            except OSError:
                continue  # gone meanwhile
            rel = os.path.relpath(entry.path, top)
            if stat.S_ISLNK(mode) and out is None and (
                    os.path.isabs(target) or os.path.commonpath([top, os.path.realpath(entry.path)]) != top):
                out = rel, target
            if odd is None and not (stat.S_ISREG(mode) or (stat.S_ISLNK(mode) and not _CONVERGE_OUTPUT.match(rel))):
                what = ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                        "a socket" if stat.S_ISSOCK(mode) else "a device")
                odd = f"{rel} ({what}: no checkout or converge makes one)"
            if odd is not None and out is not None:
                return odd, out
    return odd, out


def room(folder: Path) -> str:
    """What room ``folder``'s filesystem has left, for a failed checkout's line (git says only "unable to write
    file" when the disk is full)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return "free space unknown"
    return f"{st.f_bavail * st.f_frsize // 1024} KiB free in {folder}"


def _worktree_status(base: list[str], env: dict[str, str], folder: Path, staged: bool = True
                     ) -> tuple[bool, str | None]:
    """:func:`_status_entries` of ``git status`` with untracked and ignored files, through ``base`` (the git dir and
    work tree named); a status that fails is itself the foreign entry."""
    status = _run_git([*base, "status", "--porcelain", "-z", "--ignored=matching", "--untracked-files=all"],
                      "status", GIT_TIMEOUT_S, env, cwd=folder)
    if status.returncode:
        return False, _status_failed(status)
    return _status_entries(status.stdout, staged)


def _status_failed(p: subprocess.CompletedProcess) -> str:
    return f".git (git status fails there: {said(p.stderr or p.stdout, 120)})"


def _status_entries(porcelain: str, staged: bool = True) -> tuple[bool, str | None]:
    """From ``git status --porcelain -z --ignored``: whether a tracked file changed (in the worktree, or with
    ``staged`` in the index against HEAD too), and the first untracked or ignored entry that is not bringup's own
    converge output, or None."""
    edited = False
    entries = iter(porcelain.split("\0"))
    for entry in entries:
        code, path = entry[:2], entry[3:]
        if not entry:
            continue
        if code in ("??", "!!"):
            if not _CONVERGE_OUTPUT.match(path):
                return edited, path
            continue
        edited = edited or code[1] != " " or staged  # (a temporary index read from the commit: its side not counted)
        if "R" in code or "C" in code:
            next(entries, None)  # a rename's or copy's old name, its own entry in -z form
    return edited, None


class Source:
    """One host's copy of the repository at ``url``, kept under ``cache``; signatures checked against
    ``allowed_signers`` (an OpenSSH allowed signers file)."""

    def __init__(self, url: str, cache: Path, allowed_signers: Path, ssh: list[str] | None = None):
        self.url = url
        self.ssh = ssh or ssh_command()
        # Absolute: every path handed to Git is one (a cache named "-1" is never read as an option).
        self.cache = Path(os.path.abspath(cache))
        self.allowed_signers = Path(os.path.abspath(allowed_signers))
        self.git_dir = self.cache / "repo.git"
        self.revisions = self.cache / "revisions"
        self.current = self.cache / "current"
        #: The kept checkout :meth:`differs` last walked (resolved) and the link out it found there, for
        #: :meth:`links_out_of` (one walk of a reused checkout per run).
        self._walked: tuple[str, tuple[str, str] | None] | None = None

    # -- Git ------------------------------------------------------------------------------------------------
    def _git(self, *args: str, timeout: float = GIT_TIMEOUT_S, cwd: Path | None = None,
             check: bool = True, input_: str | None = None) -> subprocess.CompletedProcess:
        argv = ["git", "--git-dir", str(self.git_dir),
                "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={self.allowed_signers}", *args]
        p = _run_git(argv, args[0], timeout, _env(self.ssh), cwd, input_)
        if check and p.returncode:
            raise BringupError(f"git {args[0]} failed: {said(p.stderr or p.stdout, 300)}")
        return p

    def fetch(self) -> None:
        """Fetch every branch and tag from ``url`` into the bare cache (made on the first run)."""
        if not (self.git_dir / "HEAD").is_file():
            self.git_dir.mkdir(parents=True, exist_ok=True)
            self._git("init", "--quiet", "--bare")
        self.clean()  # a fetch cut off by a signal, a crash or a full disk left its temporary files
        try:
            p = self._git("fetch", "--quiet", "--prune", "--force", "--no-write-fetch-head", "--",
                          self.url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                          timeout=FETCH_TIMEOUT_S, check=False)
        except BaseException:
            self.clean()
            raise
        if p.returncode:
            full = disk_full(p.stderr + p.stdout, self.git_dir)
            left = room(self.git_dir)  # before the temporary files go: what the fetch ran into
            self.clean()
            if full:
                raise Refused("disk-full", f"fetch from {shown(self.url)} stopped: the disk is full ({left}; its temporary "
                                           f"files removed): {said(p.stderr or p.stdout, 200)}")
            raise Refused("unreachable", f"fetch from {shown(self.url)} failed: {said(p.stderr or p.stdout, 300)}")

    def clean(self) -> list[str]:
        """Remove what a cut fetch leaves in the cache's object store (``objects/pack/tmp_pack_*``,
        ``tmp_idx_*``, loose ``objects/??/tmp_obj_*``); runs under the run lock, so no other fetch is
        writing them.  Returns what it removed (relative to the object store)."""
        objects = self.git_dir / "objects"
        gone = []
        for pattern in ("pack/tmp_*", "??/tmp_obj_*", "tmp_obj_*"):
            for f in objects.glob(pattern):
                try:
                    if f.is_file() and not f.is_symlink():
                        f.unlink()
                        gone.append(str(f.relative_to(objects)))
                except OSError:
                    pass
        return gone

    def resolve(self, rule: Rule) -> tuple[str, str]:
        """The commit ``rule`` picks, and the ref it came from."""
        if rule.kind == "branch":
            ref = f"refs/heads/{rule.value}"
        else:
            tags = self._git("tag", "--list", "--sort=-v:refname", "--", rule.value).stdout.split()
            tags = [t for t in tags if fnmatch.fnmatchcase(t, rule.value)]
            if not tags:
                raise Refused("no-revision", f"no tag of {shown(self.url)} matches {rule.value!r}")
            ref = f"refs/tags/{tags[0]}"
            # A tag may name any object (git tag v2 HEAD^{tree}): say what it names rather than "no revision".
            kind = self._git("cat-file", "-t", f"{ref}^{{}}", check=False).stdout.strip()
            if kind and kind != "commit":
                raise Refused("not-a-commit", f"tag {tags[0]} of {shown(self.url)} names a{'n' if kind[0] in 'aeiou' else ''} "
                                              f"{kind}, not a commit: nothing to check out; tag a signed commit")
        p = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        commit = p.stdout.strip()
        if p.returncode or not _COMMIT.match(commit):
            raise Refused("no-revision", f"{shown(self.url)} has no {rule}")
        return commit, ref

    def verify(self, commit: str) -> str:
        """Git's own verdict on ``commit``'s signature; returns who signed it (the allowed signers'
        principal), or raises :class:`Refused`."""
        if not self.allowed_signers.is_file():
            raise InputError(f"allowed signers file {shown(self.allowed_signers)} is no file: write the trusted "
                             "keys there (one 'principal ssh-ed25519 AAAA...' line each)")
        kind = self.signature_kind(commit)
        if kind not in (None, "ssh"):
            # Git would hand it to gpg (or gpgsm), which trusts the keyring of whoever runs it, not the allowed
            # signers file: refused whatever that keyring holds.
            raise Refused("not-ssh-signature", f"revision {commit[:12]} is signed with {kind}: pull mode trusts SSH "
                          f"signatures only, checked against {shown(self.allowed_signers)}; sign with an SSH key "
                          "(git config gpg.format ssh)", commit)
        status, signer, key = (self._git("log", "-1", "--format=%G?%x00%GS%x00%GK", commit).stdout
                               .strip().split("\0") + ["", ""])[:3]
        checked = self._git("verify-commit", commit, check=False)
        ok = checked.returncode == 0
        short = commit[:12]
        if ok and status == "G":
            return signer
        if status == "N":
            raise Refused("unsigned", f"revision {short} is not signed", commit)
        dated = _VALIDITY.search(checked.stderr) if status in ("U", "E") else None
        if dated:
            # Git says U ("no principal matched") for a key whose allowed signers entry has expired (valid-before)
            # or is not valid yet (valid-after): the key is in the list, so "not in the list" would send the SRE
            # looking for a key that is there.
            line, verdict, at, limit = dated.groups()
            when = "expired" if "expired" in verdict else "is not valid yet"
            raise Refused("expired", f"revision {short} is signed by a key whose entry in "
                          f"{shown(self.allowed_signers)} (line {line}) {when}: the commit's time {at} is "
                          f"{'past its valid-before' if when == 'expired' else 'before its valid-after'} {limit}"
                          f"{f' ({key})' if key else ''}; renew the entry's dates, or sign the revision with a key "
                          "valid now", commit)
        # A line of the file ssh-keygen could not read (a misspelt option, valid-before="20270101T0000", a cut key)
        # is skipped by it, and its key with it; a line whose namespaces="..." leaves out "git" does not count: "not in
        # the list" or "a bad signature" alone sent the SRE looking for a key that is there, or a forged commit.
        # ssh-keygen's words and the line's number only, never the line.
        skipped = re.search("^" + re.escape(str(self.allowed_signers)) + _SKIPPED, checked.stderr, re.M)
        # ssh-keygen names every line it skipped, whoever's key is on it: an aside, not the verdict's cause.
        why = (f"; ssh-keygen skipped line {skipped.group(1)} of {shown(self.allowed_signers)} "
               f"({said(skipped.group(2), 100)}): if the signer's key is on that line, fix it") if skipped else ""
        if status in ("U", "E", "G"):
            raise Refused("unknown-key", f"revision {short} is signed by a key not in {shown(self.allowed_signers)}"
                          f"{f' ({key})' if key else ''}{why}", commit)
        if status in ("X", "Y"):
            raise Refused("expired", f"revision {short} is signed by an expired key{f' ({key})' if key else ''}",
                          commit)
        if status == "R":
            raise Refused("revoked", f"revision {short} is signed by a revoked key ({key})", commit)
        raise Refused("bad-signature", f"revision {short} has a bad signature (Git's verdict {status or '?'})"
                      f"{why}",
                      commit)

    def signature_kind(self, commit: str) -> str | None:
        """The kind of ``commit``'s signature as its object carries it (``gpgsig`` header): "ssh", "OpenPGP",
        "X.509", or None when unsigned."""
        headers = self._git("cat-file", "commit", commit).stdout.split("\n\n", 1)[0]
        for line in headers.splitlines():
            if line.startswith(("gpgsig ", "gpgsig-sha256 ")):
                armor = line.split(" ", 1)[1].strip()
                return {"-----BEGIN SSH SIGNATURE-----": "ssh", "-----BEGIN PGP SIGNATURE-----": "OpenPGP",
                        "-----BEGIN SIGNED MESSAGE-----": "X.509"}.get(armor, "an unknown format")
        return None

    def forward(self, applied: str, commit: str, allow: str | None = None, ref: str = "",
                spent: bool = False) -> bool:
        """False when ``commit`` descends from ``applied`` (or is it); True when it does not but ``allow`` (a
        commit id or a unique start of one, the operator's ``--allow-rollback``) names it; else a :class:`Refused`
        ``rollback`` (an ancestor of the applied revision, or the tip of a rewritten history).  ``spent``: the
        allowance already moved the host back to that revision once, and it has moved on since: refused."""
        if commit == applied:
            return False
        ahead = self._git("merge-base", "--is-ancestor", applied, commit, check=False).returncode
        if ahead == 0:
            return False
        short, was = commit[:12], applied[:12]
        if allow and self.names(allow, commit):
            if not spent:
                return True
            raise Refused("rollback", f"revision {short} moves back from the applied {was}: --allow-rollback {allow} "
                                      "was used once already (the host moved back to it, then on); withdraw it "
                                      "(the flag, or the pull role's allow_rollback) for one run, then give it again "
                                      "to move back once more", commit)
        where = f" ({ref.removeprefix('refs/heads/').removeprefix('refs/tags/')})" if ref else ""
        how = f"allow it for that revision alone with bringup pull --allow-rollback {short}"
        if ahead != 1:
            why = f"the applied {was} is not in the fetched repository, so it cannot be told older or newer"
        elif self._git("merge-base", "--is-ancestor", commit, applied, check=False).returncode == 0:
            why = f"it is older than the applied {was} (an ancestor of it)"
        else:
            why = f"it does not descend from the applied {was} (a force-push rewrote the history, or an older line)"
        if allow and commit.startswith(allow.lower()):
            how = f"--allow-rollback {allow} is ambiguous in the repository: give more of {commit}"
        elif allow:  # (a mistyped id, or the one of the revision it came from: said, not passed over in silence)
            how = f"--allow-rollback {allow} does not name it; allow that very revision: --allow-rollback {short}"
        raise Refused("rollback", f"revision {short}{where} moves back: {why}; {how}", commit)

    def names(self, prefix: str, commit: str) -> bool:
        """Whether ``prefix`` (hexadecimal, 4 to 40 characters) names ``commit`` and no other commit of the
        cache (read as an object id only: a branch or tag named like it does not count)."""
        prefix = prefix.lower()
        if not commit.startswith(prefix):
            return False
        if len(prefix) == len(commit):
            return True
        found = self._git("rev-parse", f"--disambiguate={prefix}", check=False).stdout.split()
        if len(found) > 1:
            kinds = self._git("cat-file", "--batch-check=%(objecttype) %(objectname)", check=False,
                              input_="\n".join(found) + "\n").stdout.split("\n")
            found = [line.split()[1] for line in kinds if line.startswith("commit ")]
        return found == [commit]

    # -- Checkout -------------------------------------------------------------------------------------------
    def applied(self) -> str | None:
        """The commit ``current`` points at (the last revision applied with success), or None."""
        try:
            name = os.readlink(self.current)
        except OSError:
            return None
        name = Path(name).name
        return name if _COMMIT.match(name) else None

    def checkout(self, commit: str) -> Path:
        """``revisions/<commit>``, a worktree of ``commit``: made in a temporary folder and moved into place
        (a cut-off checkout, a full disk, leaves no folder under the final name); an existing one is reused
        when it is exactly ``commit``'s tree (:meth:`differs`), checked out afresh when only its tracked files
        changed, and :class:`Refused` ``tampered`` when it holds files the revision does not (never removed)."""
        final = self.revisions / commit
        if os.path.lexists(final) and (final.is_symlink() or not final.is_dir()):
            # A link (never checked out through), a file or a pipe under a checkout's name: none of bringup's, and
            # Git would refuse the checkout at every run ("already exists").
            self._drop(final)
        if final.is_dir():
            exact, foreign = self.differs(final, commit)
            if foreign:
                # Files the signed revision does not hold (planted, or left by someone): never converged from, and
                # never removed (bringup did not make them).  Refused until a person looks.
                raise Refused("tampered", f"{shown(final)} (the kept checkout of the signed revision {commit[:12]}) "
                                          f"holds what the revision does not: {shown(foreign)}; nothing applied "
                                          "from it, nothing removed (bringup did not write it): find who did, then "
                                          "remove that folder; the next run checks the revision out afresh", commit)
            if exact:
                return final
            self._walked = None  # checked out afresh below: walked again
            self._drop(final)  # bringup's own checkout, moved off the commit or edited: checked out afresh
        self.revisions.mkdir(parents=True, exist_ok=True)
        tmp = self.revisions / f".{commit}.{os.getpid()}"
        self._drop(tmp)
        try:
            p = self._git("worktree", "add", "--quiet", "--detach", "--", str(tmp), commit, check=False)
            if p.returncode:
                reason = "disk-full" if disk_full(p.stderr, self.revisions) else "checkout"
                raise Refused(reason, f"checkout of {commit[:12]} failed ({room(self.revisions)}"
                                      f"{', the disk is full' if reason == 'disk-full' else ''}): "
                                      f"{said(p.stderr, 300)}", commit)
            self._git("worktree", "move", "--", str(tmp), str(final))
        except BaseException:
            self._drop(tmp)
            raise
        return final

    def links_out_of(self, checkout: Path) -> tuple[str, str] | None:
        """:func:`links_out` of ``checkout`` (what :meth:`checkout` returned): a reused checkout's, found by the walk
        that held it to the signed tree just before, is not walked for again."""
        walked, self._walked = self._walked, None
        if walked is not None and walked[0] == os.path.realpath(checkout):
            return walked[1]
        return links_out(checkout)

    def differs(self, folder: Path, commit: str) -> tuple[bool, str | None]:
        """Whether ``folder`` (``revisions/<commit>``) is exactly ``commit``'s tree, and the first entry it holds
        that the revision does not (untracked, or hidden by the revision's own ``.gitignore``), else None.
        Bringup's own converge outputs under ``reports/`` (its report and retry files) are not counted.  Git is
        asked through this cache's own record of the worktree: a ``.git`` that is no file naming
        ``repo.git/worktrees/...`` (a planted one could name any repository) is itself the foreign entry."""
        dot = folder / ".git"
        try:
            text = (read_capped(dot, 4096, OSError, missing="", unreadable="", too_large="", not_regular="",
                                refuse=lambda p: not stat.S_ISREG(os.lstat(p).st_mode)).decode("utf-8", "replace")
                    if stat.S_ISREG(os.lstat(dot).st_mode) else "")
        except OSError:
            text = ""
        admin = Path(text.removeprefix("gitdir: ").strip()) if text.startswith("gitdir: ") else None
        own = Path(os.path.realpath(self.git_dir / "worktrees"))
        if admin is not None and admin.is_absolute() and not os.path.lexists(admin):
            # Its worktree record is gone (the cache was moved, or its records pruned): its content is held to the
            # commit's tree through a temporary index of this cache's repository, and it is checked out afresh
            # when it holds nothing else.
            return False, self._foreign_to_tree(folder, commit)
        if admin is None or Path(os.path.realpath(admin)).parent != own:
            try:
                inside = sorted(os.listdir(folder))
            except OSError:
                inside = [".git"]
            if not inside:
                return False, None  # an empty folder under the name: nothing of anyone's, checked out afresh
            return False, (".git (no worktree of this cache's repository)" if os.path.lexists(dot) else
                           f"{inside[0]} (and no .git: no checkout bringup made)")
        base = ["git", f"--git-dir={admin}", f"--work-tree={folder}", "--no-optional-locks"]
        head = _run_git([*base, "rev-parse", "--verify", "--quiet", "HEAD"], "rev-parse", GIT_TIMEOUT_S, _env(),
                        cwd=folder)
        edited, foreign = self._held_to_tree(folder, commit)
        return head.stdout.strip() == commit and not edited and not foreign, foreign

    def _foreign_to_tree(self, folder: Path, commit: str) -> str | None:
        """The first entry of ``folder`` that ``commit``'s tree does not hold (as :meth:`differs` counts them)."""
        return self._held_to_tree(folder, commit)[1]

    def _held_to_tree(self, folder: Path, commit: str) -> tuple[bool, str | None]:
        """Whether a tracked file of ``folder`` differs from ``commit``'s tree in content (edited, removed, its
        mode changed), and its first entry the tree does not hold (``.git`` itself when Git cannot tell).  Git
        is asked through a temporary index of this cache's repository read from the commit's tree, never the
        worktree's own index: that one carries a stat cache and flags anyone with a shell in the checkout can
        set (``git update-index --assume-unchanged``/``--skip-worktree``, a staged edit), under which an edited
        file reads as the signed one.  A fresh index has no stat data, so every tracked file is hashed (about
        what reading it costs: a checkout of 10,000 files is checked in well under a second)."""
        with tempfile.TemporaryDirectory(prefix="bringup-index-") as d:
            env = dict(_env(), GIT_INDEX_FILE=os.path.join(d, "index"))
            base = ["git", f"--git-dir={self.git_dir}", f"--work-tree={folder}", "--no-optional-locks"]
            read = _run_git([*base, "read-tree", commit], "read-tree", GIT_TIMEOUT_S, env, cwd=folder)
            if read.returncode:
                return True, _status_failed(read)
            edited, foreign = _worktree_status(base, env, folder, staged=False)
            if foreign:
                return edited, foreign
            odd, out = scan(folder)
            self._walked = (os.path.realpath(folder), out)
            return edited, odd

    def swap(self, commit: str) -> None:
        """Point ``current`` at ``revisions/<commit>`` in one rename."""
        tmp = self.cache / f".current.{os.getpid()}"
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        os.symlink(Path("revisions") / commit, tmp)
        try:
            os.replace(tmp, self.current)
        except BaseException:
            tmp.unlink(missing_ok=True)  # never a temporary link left behind (current a folder: no rename)
            raise

    def prune(self, keep: set[str]) -> None:
        """Remove the revisions' folders other than ``keep`` (commits) and any cut-off temporary one."""
        if not self.revisions.is_dir() or self.revisions.is_symlink():
            return
        for d in self.revisions.iterdir():
            # Only the names bringup makes there (a commit's checkout, a cut one's temporary folder): another
            # entry is no checkout of its own to remove.
            if d.name not in keep and _OWN_CHECKOUT.match(d.name):
                if _COMMIT.match(d.name) and d.is_dir() and not d.is_symlink() and self.differs(d, d.name)[1]:
                    continue  # it holds what bringup did not write: never removed with it (refused when reused)
                self._drop(d)

    def _drop(self, path: Path) -> None:
        if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()):
            path.unlink()  # the link alone, never what it leads to; a file or a pipe
            self._git("worktree", "prune", check=False)
            return
        if not path.exists():
            return
        self._git("worktree", "remove", "--force", "--force", "--", str(path), check=False)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        self._git("worktree", "prune", check=False)
        self._drop_bytecode(path)

    def _drop_bytecode(self, checkout: Path) -> None:
        """The bytecode the converges of ``checkout`` wrote under :func:`bytecode_folder` before each converge had
        a fresh folder of its own (a cache of an earlier bringup: a checkout removed, its bytecode goes with it),
        never through a link on the way to it."""
        root = bytecode_folder(self.cache)
        # Python joins the prefix with the path it imported from: the checkout as spelled, or resolved (the
        # converge's roots are resolved; a cache under a linked /var/lib has two spellings): both are removed.
        for rel in dict.fromkeys([str(checkout).lstrip(os.sep), os.path.realpath(checkout).lstrip(os.sep)]):
            there = root / rel
            if not there.is_dir() or os.path.realpath(there) != os.path.join(os.path.realpath(root), rel):
                continue  # none, or a link below the cache's pycache/ on its way: not bringup's own to remove
            shutil.rmtree(there, ignore_errors=True)
