"""One pull run on a host: under the host's run lock, fetch, pick and verify the revision, check it out, validate
its inventory, find this host in it and converge this host alone through the local connection; then record
what came of it (:mod:`bringup.pull.record`).

Nothing of a revision is applied before its signature passed (again at every run: a key taken out of the
allowed signers stops even the applied revision), it moved forward from the applied one (or the operator
allowed that rollback), its checkout held no symbolic link out of itself, and its inventory loaded with this
host in it;
the ``current`` link moves to a revision only once its converge succeeded, so a refused or failed revision
leaves the last good one where it was (a failed one is tried again at the next run).

The converge is ``bringup provision --host NAME --set ansible_connection=local`` run in the revision's folder
(its ``roles/`` and ``templates/``, when it has them, are the content: :func:`bringup.project.content_root`),
a process of its own: push mode's engine, validation and rollback rules, and its JSON report, unchanged.
The roles are the repository's own ``roles/`` (all of them, or those ``bringup_pull.roles`` names); a
repository without ``roles/`` converges only the shipped roles ``bringup_pull.roles`` names (never all of them).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from .. import child
from ..ssh.runlock import WAIT_S, RunLock, refusal
from ..errors import BringupError, InputError, InventoryError, shown
from ..untrusted import loads, number
from ..userfile import kind, read_capped
from .cachedir import cache_problem
from .record import EXIT, Attempt, State, full_attempt, load_state, record_outcome
from .source import FULL_ERRNOS, Refused, Rule, Source, fresh_bytecode, ssh_command

__all__ = ["Settings", "Converged", "pull", "provision_here", "find_host", "pull_roles", "provision_argv", "EXIT"]

#: Converge reports kept in ``<cache>/reports`` (the newest).
KEEP_REPORTS = 20
#: The largest converge report read back (one host's report is kilobytes).
REPORT_MAX = 16 << 20
#: Characters of one line of the converge's output passed on at most: a longer one is cut (a line without end
#: costs no memory).
LINE_CAP = 64 * 1024


@dataclass
class Settings:
    """What ``bringup pull`` was asked (checked by the task)."""

    url: str
    rule: Rule
    cache: Path
    allowed_signers: Path
    name: str | None = None
    #: The inventory inside the repository (a file or folder), relative to its top.
    inventory: str = "hosts"
    prometheus: Path | None = None
    vault_password_files: list[str] = field(default_factory=list)
    #: The run lock's folder: None for the one push runs take as this user (root's /run/bringup).
    lock: str | None = None
    lock_wait_s: float = WAIT_S
    #: For ssh:// URLs: the host's deploy key and the server's known host key file.
    ssh_key: Path | None = None
    known_hosts: Path | None = None
    #: ``--allow-rollback``: the one older revision (a commit id or its unique start) this run may apply.
    allow_rollback: str | None = None
    #: The roles the converge runs (``--roles``), from the revision's ``bringup_pull.roles``; None: all the
    #: repository's own.  Set by the run, not by the operator.
    roles: list[str] | None = None


@dataclass
class Converged:
    """What the converge of one revision did."""

    rc: int
    changed: int = 0
    failed: int = 0
    report: str | None = None
    message: str = ""


class Stopped(Exception):
    """A signal ended the run before the converge started."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def run_lock(folder: str | None, wait_s: float, who: str) -> Iterator[None]:
    """The host's run lock (:mod:`bringup.ssh.runlock`), the one push runs take, held for the whole pull by the same
    holder script a push run's connection starts: its stdin is this process's pipe, so the lock goes when the
    pull ends or dies.  It waits for the scripts of an earlier run still running, as a push run does; a lock held
    past ``wait_s`` seconds (or unusable) is a :class:`Refused` ``busy``, in :func:`bringup.ssh.runlock.refusal`'s
    words."""
    lock = RunLock(wait_s=wait_s, base=folder)
    held = child.start(["sh", "-c", lock.holder()], stdin=child.PIPE, stdout=child.PIPE, stderr=child.DEVNULL,
                       text=True)
    holder = held.proc
    try:
        holder.stdin.write(who.replace("\n", " ") + "\n")
        holder.stdin.flush()
        answer = holder.stdout.readline(4096)
        why = refusal(answer, wait_s)
        if why:
            raise Refused("busy", f"{why}; the next run tries again")
        yield
    finally:
        try:
            holder.stdin.close()  # the holder's cat ends: the lock goes
        except OSError:
            pass
        try:
            holder.wait(10)
        except subprocess.TimeoutExpired:
            pass
        held.end()  # its group: the holder itself when it did not end, its cat


def find_host(inventory_path: Path, name: str | None, vault_files: list[str]) -> str:
    """This host's name in the revision's inventory: ``name``, else the hostname (or its first label).
    The inventory is loaded whole (its variables' syntax, vault values): a bad one is :class:`Refused`."""
    return _find_host(inventory_path, name, _open_vault(vault_files))[0]


def _find_host(inventory_path: Path, name: str | None, vault) -> tuple[str, dict]:
    from ..inventory.hosts import load_inventory

    try:
        inv = load_inventory([str(inventory_path)], vault=vault)
    except BringupError as e:
        raise Refused("invalid", f"the inventory does not load: {e}") from None
    if name:
        try:
            h = inv.host(name)
            return h.name, h.vars
        except InventoryError as e:
            raise Refused("host-absent", f"{e} (--name {shown(name)})") from None
    fqdn = socket.gethostname()
    for candidate in dict.fromkeys((fqdn, fqdn.split(".")[0])):
        if candidate in inv.hosts:
            return candidate, inv.host(candidate).vars
    raise Refused("host-absent", f"this host ({fqdn}) is not in {inventory_path.name}: add it there, or name it "
                                 "with --name as the inventory does")


_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")


def pull_roles(workdir: Path, hostvars: dict) -> list[str] | None:
    """The roles this host's converge runs: ``bringup_pull.roles`` (checked against the roles there are), or
    None (all of them) when the repository has its own ``roles/`` and the list is unset; a repository without
    ``roles/`` and no list is :class:`Refused` ``no-roles`` (it would converge every role bringup ships)."""
    raw = hostvars.get("bringup_pull")
    names = raw.get("roles") if isinstance(raw, dict) else None
    own = (workdir / "roles").is_dir()
    if names is None:
        if own:
            return None
        raise Refused("no-roles", "the repository has no roles/ and bringup_pull.roles is unset: name the shipped "
                                  "roles this host converges (bringup_pull: {roles: [sysctl, docker, ...]}), or add "
                                  "the repository's own roles/")
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and _ROLE_NAME.match(n) for n in names)):
        # Its kind, never its value: a vault value cut at 80 characters was no longer one the masker knows.
        what = (f"entry {next(i for i, n in enumerate(names) if not (isinstance(n, str) and _ROLE_NAME.match(n)))} "
                "is no role name" if isinstance(names, list) and names else
                "an empty list" if isinstance(names, list) else
                f"{'text' if isinstance(names, str) else 'a mapping' if isinstance(names, dict) else 'a value'}")
        raise Refused("invalid", f"bringup_pull.roles is not a list of role names ({what}); write roles: [sysctl, "
                                 "docker, ...] (lowercase letters, digits and _)")
    from ..project import content_root
    from ..engine.roles import load_roles

    try:
        order, _ = load_roles(content_root(workdir))
    except BringupError as e:
        raise Refused("invalid", f"the roles do not load: {e}") from None
    unknown = [n for n in names if n not in order]
    if unknown:
        raise Refused("invalid", f"bringup_pull.roles: unknown role {', '.join(unknown)}; "
                                 f"{'the repository' if own else 'bringup'} has {', '.join(order)}")
    return list(dict.fromkeys(names))


@contextmanager
def bytecode_in(cache: Path) -> Iterator[Path]:
    """A folder made fresh for one converge's bytecode (or this process's, while it imports a checkout's roles),
    :func:`fresh_bytecode`'s, yielded and removed after: never a folder another run, user or link shares."""
    fresh = fresh_bytecode(cache)
    before = sys.pycache_prefix
    sys.pycache_prefix = str(fresh)
    try:
        yield fresh
    finally:
        sys.pycache_prefix = before
        shutil.rmtree(fresh, ignore_errors=True)


def provision_argv(host: str, settings: Settings, pycache: Path) -> list[str]:
    """The converge's command line: ``bringup provision`` of ``host`` alone, through the local connection, with
    the roles ``settings.roles`` names (all when None), its bytecode in ``pycache`` (:func:`bytecode_in`'s)."""
    # Its bytecode (the repository's roles/, their manifest, bringup's own) goes to a fresh folder of the cache,
    # never into the checkout: a reused checkout must hold the signed tree and nothing else (Source.differs), and
    # a planted .pyc there would be code that runs.  -X, not PYTHONPYCACHEPREFIX: the programs the roles run do
    # not inherit it.
    argv = [sys.executable, "-X", f"pycache_prefix={pycache}",
            "-c", "import sys; from bringup.entry import main; sys.argv[0] = 'bringup'; main()",
            # ./: the checkout's own file, always (a path starting with ~ would be expanded to one outside it).
            "provision", "--host", host, "--inventory", f"./{settings.inventory}", "--set", "ansible_connection=local"]
    if settings.roles:
        argv += ["--roles", ",".join(settings.roles)]
    if os.geteuid() == 0:
        argv += ["--set", "ansible_become=false"]  # root already: no sudo needed (nor, maybe, installed)
    for f in settings.vault_password_files:
        argv += ["--vault-password-file", f]
    return argv


def provision_here(workdir: Path, host: str, settings: Settings) -> Converged:
    """``bringup provision`` of ``host`` alone, through the local connection, in ``workdir``; its recap read
    back from its JSON report.  A signal here is handed to it, which stops in order (its exit 130/143)."""
    with bytecode_in(settings.cache) as pycache:
        return _provision(workdir, host, settings, provision_argv(host, settings, pycache))


def _provision(workdir: Path, host: str, settings: Settings, argv: list[str]) -> Converged:
    there = _reports_in(workdir)  # what the revision itself holds under reports/: never the converge's report
    env = dict(os.environ, COLUMNS="160")
    converge = child.start(argv, cwd=workdir, env=env, stdout=child.PIPE, stderr=child.STDOUT, text=True)
    p = converge.proc
    before = {s: signal.signal(s, lambda signum, _f: p.send_signal(signum))
              for s in (signal.SIGINT, signal.SIGTERM)}
    said: list[str] = []
    try:
        assert p.stdout is not None
        for line in child.lines(p.stdout, LINE_CAP):  # streamed: the journal shows the converge as it goes
            sys.stdout.write(line)
            sys.stdout.flush()
            if line.startswith(("error:", "unreachable:")):
                said[:] = [line.strip()]  # the last one is the message: one kept, however many came
        p.wait()
    finally:
        for s, h in before.items():
            signal.signal(s, h)
        converge.end()  # what it left in its group; the converge itself when this was left by an exception
    done = Converged(rc=p.returncode)
    reports = sorted(set(_reports_in(workdir)) - set(there))  # the names provision gives: in the order made
    if reports:
        reports = [workdir / "reports" / reports[-1]]
        try:
            # The run's own report, read with a cap as any saved file (a file planted there reads as no report).
            # A key given twice (two recaps of the host) is no report either: which counts is not known.
            doc = loads(read_capped(reports[-1], REPORT_MAX, ValueError, missing="", unreadable="", too_large="",
                                    not_regular=""), what="the provision report", nan=True, unique=True)
            recap = next(h for h in doc["hosts"] if h.get("host") == host).get("recap") or {}
            done.changed, done.failed = (number(recap.get(k, 0), lo=0, hi=10 ** 9, integer=True, what=k)
                                         for k in ("changed", "failed"))
            kept = settings.cache / "reports"
            kept.mkdir(exist_ok=True)
            done.report = str(kept / reports[-1].name)
            os.replace(reports[-1], done.report)
            for old in sorted(_reports_in(settings.cache))[:-KEEP_REPORTS]:  # its own reports only, by name
                (kept / old).unlink()
        except (OSError, ValueError, KeyError, StopIteration, TypeError):
            pass
    done.message = said[-1] if said else f"bringup provision {child.how_ended(p.returncode)}"
    return done


#: The name of a report ``bringup provision`` writes (:class:`bringup.engine.report.Report`).
_REPORT_NAME = re.compile(r"^\d{8}T\d{6}-provision(-\d+)?\.json$")


def _reports_in(workdir: Path) -> list[str]:
    """The names under ``workdir/reports`` that a provision report could have, each a regular file (looked at
    without following a link: a dangling one the revision holds was a FileNotFoundError traceback)."""
    try:
        names = os.listdir(workdir / "reports")
    except OSError:
        return []
    found = []
    for name in names:
        try:
            if _REPORT_NAME.match(name) and stat.S_ISREG(os.lstat(workdir / "reports" / name).st_mode):
                found.append(name)
        except OSError:
            continue
    return found


def pull(settings: Settings, converge: Callable[[Path, str, Settings], Converged] = provision_here,
         say: Callable[[str], None] = print) -> Attempt:
    """One run (see the module): returns what came of it, recorded in ``<cache>/state.json`` and, with
    ``settings.prometheus``, in the textfile.  Bad input (a vault password file that does not open, a folder
    where the cache keeps its state or its ``current`` link) raises BringupError before anything is fetched.

    What was applied (the state and the ``current`` link) is read under the run lock, and the run's outcome (the
    link swapped, the state and the metrics written) recorded before the lock goes: a run that waited for the lock
    checks "forward" against what the run before it applied, never against what it read before waiting."""
    # Absolute: a cache or a trust list named "-1" is a path to every Git command, never an option.
    settings = replace(settings, cache=Path(os.path.abspath(settings.cache)),
                       allowed_signers=Path(os.path.abspath(settings.allowed_signers)))
    state_path = settings.cache / "state.json"
    unusable = cache_problem(settings.cache, settings.prometheus)
    if unusable:
        raise InputError(unusable)
    vault = _open_vault(settings.vault_password_files)
    settings.cache.mkdir(parents=True, exist_ok=True)
    source = Source(settings.url, settings.cache, settings.allowed_signers,
                    ssh=ssh_command(settings.ssh_key, settings.known_hosts))
    state: State | None = None
    linked: str | None = None
    commit = None

    def stopping(signum, _frame) -> None:
        raise Stopped(signum)

    before = {s: signal.signal(s, stopping) for s in (signal.SIGINT, signal.SIGTERM)}
    with ExitStack() as held:
        try:
            held.enter_context(run_lock(settings.lock, settings.lock_wait_s, f"bringup pull (pid {os.getpid()})"))
            # Under the lock: a run that held it before this one may have moved both on while this one waited.
            state, linked, known = _applied(source, state_path, settings, say)
            kind_ = kind(settings.allowed_signers, lambda why: Refused("no-allowed-signers", why),
                         f"allowed signers file {shown(settings.allowed_signers)}")
            if kind_ != "file":
                # Checked under the lock, before the fetch: a host without its trust list applies nothing.
                what = {"missing": "is missing", "folder": "is a folder",
                        "special": "is no regular file (a pipe, a socket or a device)"}[kind_]
                raise Refused("no-allowed-signers", f"allowed signers file {shown(settings.allowed_signers)} {what}: "
                                                    "nothing is trusted, nothing applied; write the trusted keys "
                                                    "there (one 'principal ssh-ed25519 AAAA...' line each)")
            source.fetch()
            commit, ref = source.resolve(settings.rule)
            signer = source.verify(commit)  # at every run: a key taken out of the list stops the applied one too
            allow, spent = settings.allow_rollback, state.spent_rollback
            if not (allow and spent and spent.startswith(allow)):
                state.spent_rollback = spent = None  # the allowance withdrawn (or another): given anew, it counts
            rolled_back = any([source.forward(applied, commit, allow, ref, spent == commit) for applied in known])
            workdir = source.checkout(commit)
            link = source.links_out_of(workdir)  # a reused checkout's from the walk that held it
            if link:
                raise Refused("link-out", f"revision {commit[:12]} holds a symbolic link out of its checkout: "
                                          f"{shown(link[0])} -> {shown(link[1])}; bringup reads the repository's "
                                          "own files only (make it a file, or a link inside the repository)", commit)
            inventory = workdir / settings.inventory
            if not inventory.exists():
                raise Refused("not-bringup", f"revision {commit[:12]} of {shown(settings.url)} is not a bringup "
                                             f"repository: no inventory {shown(settings.inventory)!r} at its top",
                              commit)
            host, hostvars = _find_host(inventory, settings.name, vault)
            state.host = host
            with bytecode_in(settings.cache):  # the roles import here too: their bytecode never in the checkout
                settings = replace(settings, roles=pull_roles(workdir, hostvars))
            say(f"{host}: applying {commit[:12]} ({ref}, signed by {signer})")
            for s, h in before.items():
                signal.signal(s, h)  # from here the converge takes the signal and stops in order
            done = converge(workdir, host, settings)
            if done.rc == 0:
                source.swap(commit)
                state.applied, state.signer, state.last_success = commit, signer, time.time()
                if rolled_back:
                    state.spent_rollback = commit
                attempt = Attempt(at=time.time(), status="applied", revision=commit, changed=done.changed,
                                  failed=done.failed, report=done.report,
                                  message=f"applied {commit[:12]}: changed={done.changed} failed={done.failed}")
            elif done.rc in (130, 143):
                attempt = Attempt(at=time.time(), status="failed", revision=commit, reason="interrupted",
                                  changed=done.changed, failed=done.failed, report=done.report, exit_code=done.rc,
                                  message=f"{commit[:12]}: the converge was stopped by "
                                          f"{'SIGINT' if done.rc == 130 else 'SIGTERM'} (the roles in progress "
                                          "finished, no other started); the next run converges")
            else:
                attempt = Attempt(at=time.time(), status="failed", revision=commit, reason="converge",
                                  changed=done.changed, failed=done.failed, report=done.report,
                                  message=f"{commit[:12]} failed to converge ({done.message}); "
                                          + (f"{state.applied[:12]} stays the last good revision"
                                             if state.applied else "no revision was applied before")
                                          + ", the next run tries again")
            source.prune({c for c in (state.applied, commit, source.applied()) if c})
        except Refused as e:
            if state is None:  # the lock was not taken (busy): the state as it stands
                state, linked, _ = _applied(source, state_path, settings, say)
            revision = e.revision or commit
            status = ("failed" if e.reason == "disk-full" else
                      "error" if e.reason in ("unreachable", "busy", "timeout", "checkout") else "refused")
            attempt = Attempt(at=time.time(), status=status, revision=revision, reason=e.reason, message=str(e))
            if status == "refused":
                state.last_refusal = attempt
            if e.reason == "disk-full":
                attempt.message += "; free some room, the next run tries again"
            if revision and revision != state.applied and e.reason != "busy":
                source.prune({c for c in (state.applied, linked) if c})
        except OSError as e:
            if e.errno not in FULL_ERRNOS:
                raise
            # The disk filled outside Git (the converge's own writes, the checkouts' folder, the current link):
            # a failure the next run tries again, as a fetch or checkout that ran out of room.
            if state is None:
                state, linked, _ = _applied(source, state_path, settings, say)
            attempt = full_attempt(commit, e, settings.cache)
        except BringupError as e:  # git missing or failing on the host's own cache
            if state is None:
                state, linked, _ = _applied(source, state_path, settings, say)
            attempt = Attempt(at=time.time(), status="error", revision=commit, reason="git", message=str(e))
        except Stopped as e:
            if state is None:
                state, linked, _ = _applied(source, state_path, settings, say)
            attempt = Attempt(at=time.time(), status="error", revision=commit, reason="interrupted",
                              message=f"{e}: stopped before the converge; nothing applied", exit_code=128 + e.signum)
        finally:
            for s, h in before.items():
                signal.signal(s, h)
        if attempt.status != "applied" and state.applied:
            attempt.message += f" (still at {state.applied[:12]})"
        attempt.exit_code = attempt.exit_code or EXIT[attempt.status]
        state.last = attempt
        # Still under the lock (when it was taken): the next run reads this.
        attempt = record_outcome(state, state_path, settings.prometheus, settings.cache)
    return attempt


def _applied(source: Source, state_path: Path, settings: Settings,
             say: Callable[[str], None]) -> tuple[State, str | None, list[str]]:
    """The saved state, the revision the ``current`` link names, and the revisions a new one must descend from:
    the link's and the state's.  Either alone can be lost or moved back (a removed link, a state started
    afresh); a revision must descend from both."""
    state, problem = load_state(state_path)
    if problem:
        say(f"warning: {problem}")
    state.url, state.rule = settings.url, str(settings.rule)
    linked, saved = source.applied(), state.applied
    known = [c for c in dict.fromkeys((linked, saved)) if c]
    if len(known) > 1:
        say(f"warning: {source.current} points at {linked[:12]}, but {state_path} says {saved[:12]} was applied "
            "last; a revision must move forward from both")
    elif saved and not linked:
        what = ("is no link to a revision's checkout (a file, a pipe or another link: replaced once a revision "
                "applies)" if os.path.lexists(source.current) else "is missing")
        say(f"warning: {source.current} {what}, but {state_path} says {saved[:12]} was applied last; "
            "a revision must move forward from it")
    state.applied = saved or linked
    state.host = state.host or settings.name or socket.gethostname()
    return state, linked, known


def _open_vault(files: list[str]):
    """The vault the revision's inventory is opened with, its password files read now, before anything is
    fetched: one that does not open is the operator's input, never a revision's fault."""
    from ..inventory.vault import vault_from_options

    return vault_from_options(files)
