"""What pull runs did, where the fleet looks: the JSON report on the host (``<cache>/state.json``) and the node
exporter's textfile (written by drift's writer, :func:`bringup.engine.drift.write_textfile`).

The state carries over from run to run (the last success, the last refusal); the metrics are made from it
whole at every run, so a host's series never go absent between two runs::

    bringup_pull_applied_info{host,revision}                 1: the revision applied with success last
    bringup_pull_changed{host} / bringup_pull_failed{host}   resources changed / failed by the last converge
    bringup_pull_status{host,status}                         1 for the last run's status, 0 for the others
    bringup_pull_last_run_timestamp_seconds{host}
    bringup_pull_last_success_timestamp_seconds{host}
    bringup_pull_last_refusal_timestamp_seconds{host}
    bringup_pull_last_refusal_info{host,reason,revision}     1: why the last refused revision was refused
    bringup_pull_last_run_info{host,status,reason}           1: the last run's status and its short reason
                                                             (unreachable, disk-full, busy, ...; "" when applied)
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

from pydantic import AfterValidator, BaseModel, Field, ValidationError

from ..errors import printable, shown
from ..outfile import write_atomic
from ..secrets import MASK
from ..untrusted import CLOCK_SKEW_S, Unreadable, loads
from ..userfile import read_capped
from .source import FULL_ERRNOS, room

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["Attempt", "State", "STATUSES", "METRICS", "EXIT", "load_state", "save_state", "full_attempt",
           "record_outcome", "registry", "write_metrics", "textfile_folder", "TEXTFILE_FOLDERS", "TEXTFILE"]

#: The largest state.json read (bringup writes a few kilobytes: two attempts' messages).
STATE_MAX = 1 << 20
#: ``--prometheus auto``'s file name, in the folder :func:`textfile_folder` finds.
TEXTFILE = "bringup-pull.prom"
#: Where node exporters read textfiles when no running one says: Debian's and Ubuntu's package
#: (prometheus-node-exporter: its built-in --collector.textfile.directory), then the folder bringup's role used
#: to make (the last: made when none of them is there).
TEXTFILE_FOLDERS = ("/var/lib/prometheus/node-exporter", "/var/lib/node_exporter/textfile_collector")
_EXPORTERS = ("node_exporter", "prometheus-node-exporter")
_FLAG = "--collector.textfile.directory"

#: A run's status: applied (converged with success), failed (the converge failed, or the disk is full: retried
#: next tick), refused (the revision is not trusted, not valid or older than the applied one: never applied),
#: error (no revision reached: server, lock).
STATUSES = ("applied", "failed", "refused", "error")
Status = Literal["applied", "failed", "refused", "error"]

METRICS = {
    "bringup_pull_applied_info": "The revision bringup pull last applied with success (1)",
    "bringup_pull_changed": "Resources the last bringup pull converge changed",
    "bringup_pull_failed": "Resources the last bringup pull converge failed",
    "bringup_pull_status": "1 for the status of the last bringup pull run (applied, failed, refused, error)",
    "bringup_pull_last_run_timestamp_seconds": "When bringup pull last ran (Unix time)",
    "bringup_pull_last_success_timestamp_seconds": "When bringup pull last applied a revision with success",
    "bringup_pull_last_refusal_timestamp_seconds": "When bringup pull last refused a revision (Unix time)",
    "bringup_pull_last_refusal_info": "Why bringup pull last refused a revision (1)",
    "bringup_pull_last_run_info": "The last bringup pull run's status and short reason (1)",
}


#: The exit code of each status: applied 0, failed 2 (as provision's), refused 3, error 4 (as unreachable).
EXIT = {"applied": 0, "failed": 2, "refused": 3, "error": 4}

#: A commit id as Git writes it: SHA-1 (40 hex digits) or SHA-256 (64).
COMMIT = r"^[0-9a-f]{40}([0-9a-f]{24})?$"


def _not_ahead(at: float) -> float:
    """A time a run happened: never ahead of this machine's clock beyond the skew allowance (a state from 2100
    would be exported as the last success for eighty years)."""
    if at > time.time() + CLOCK_SKEW_S:
        raise ValueError(f"{at:.0f} lies in the future")
    return at


#: When a run happened (Unix time): finite (no NaN, no Infinity), not negative, not in the future.
When = Annotated[float, Field(ge=0, allow_inf_nan=False), AfterValidator(_not_ahead)]
#: A count of resources (finite, not negative; no converge changes a billion).
Count = Annotated[int, Field(ge=0, le=10 ** 9)]
#: A revision: a commit id only (it becomes a metric's label: never "--upload-pack=evil").
Revision = Annotated[str, Field(pattern=COMMIT)]


class Attempt(BaseModel):
    """One run: when, which revision, what came of it."""

    at: When
    status: Status
    revision: Optional[Revision] = None
    #: A short code (unsigned, rollback, converge, ...): a metric's label.
    reason: Optional[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,39}$")]] = None
    message: str = ""
    changed: Count = 0
    failed: Count = 0
    #: The converge's own JSON report (bringup provision's), kept beside the state.
    report: Optional[str] = None
    #: ``bringup pull``'s exit code for this run (0 applied, 2 failed, 3 refused, 4 error, 130/143 a signal).
    exit_code: Annotated[int, Field(ge=0, le=255)] = 0


class State(BaseModel):
    """``state.json``: the host's pull history in brief."""

    #: The host's name as the inventory gives it: a metric's label, one line of printable text.
    host: Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]{0,4096}$")] = ""
    url: str = ""
    rule: str = ""
    last: Optional[Attempt] = None
    applied: Optional[Revision] = None
    signer: Optional[str] = None
    last_success: Optional[When] = None
    last_refusal: Optional[Attempt] = None
    #: The revision an ``--allow-rollback`` moved the host back to, while that allowance is still given: spent
    #: (a timer keeping the flag never lets the host be moved back to it a second time).
    spent_rollback: Optional[Revision] = None


def load_state(path: Path) -> tuple[State, str | None]:
    """The state saved at ``path`` (a new one when there is none), and a line when what was there could not
    be read (it is then started afresh: the ``current`` link, not this file, says what is applied)."""
    if path.is_symlink():  # bringup writes its state as a regular file (a rename): a link is none of its own
        return State(), f"{path}: a symbolic link, not a pull state bringup wrote; started afresh"
    try:
        # Never a FIFO (its read waits for a writer: before the lock, for ever), a device (/dev/zero has no end)
        # or more than the cap: the guarded reader refuses them before a byte is read.
        text = read_capped(path, STATE_MAX, Unreadable, missing="", unreadable="unreadable: ",
                           not_regular="not a regular file (a pipe, a device or a folder)",
                           too_large=f"larger than {STATE_MAX >> 10} KiB").decode("utf-8")
    except Unreadable as e:
        if not str(e):
            return State(), None  # no state yet
        return State(), f"{path}: {e}, not a pull state bringup wrote; started afresh"
    except UnicodeDecodeError:
        return State(), f"{path}: not UTF-8, not a pull state bringup wrote; started afresh"
    try:
        # The guarded reader first (a key given twice, whose value counts is not known; 100,000 digits; deep
        # nesting; NaN read, for the model to name its field), then the model, strictly: a time of true, a count of
        # "3" or 2.0, a host holding an escape sequence is no state bringup wrote.
        return State.model_validate(loads(text, what="", max_bytes=STATE_MAX, nan=True), strict=True), None
    except (Unreadable, ValidationError) as e:
        if isinstance(e, Unreadable):
            why = str(e).lstrip(": ") if "not JSON" not in str(e) else "damaged or cut"
        else:
            err = e.errors()[0] if e.errors() else {}
            where = ".".join(str(x) for x in err.get("loc", ())) or "the document"
            why = f"{where}: {err.get('msg', 'invalid')}"
        state = _afresh(text)
        kept = f" (its applied {state.applied[:12]} still holds revisions forward)" if state.applied else ""
        return state, f"{path}: not a pull state bringup wrote ({printable(why)[:160]}); started afresh{kept}"


def _afresh(text: str) -> State:
    """A new state, holding the refused one's ``applied`` and ``spent_rollback`` where each is a commit id: the
    forward-only check still knows them (a damaged state never lets an older revision in unsaid, nor a spent
    allowance count again, :func:`bringup.pull.run.pull`)."""
    try:
        doc = loads(text, what="state.json", max_bytes=STATE_MAX)
    except Unreadable:
        return State()
    kept = {k: doc.get(k) for k in ("applied", "spent_rollback")} if isinstance(doc, dict) else {}
    return State(**{k: v for k, v in kept.items() if isinstance(v, str) and re.match(COMMIT, v)})


def save_state(state: State, path: Path) -> None:
    """Write ``state`` whole (a temporary file made with O_EXCL in the same folder, then a rename): a link or a
    FIFO planted at a guessable temporary name is never written through; every text masked (no secret kept)."""
    # Through the run's masker: a message may quote what the revision's inventory said (a vault value it decrypted,
    # a password in the URL), and the state is a report kept on disk.  Its free texts only: a commit id, a status
    # and a reason are held to their patterns and carry no secret; a vaulted 'cafe' masked in a commit id made the
    # file one load_state refuses, and applied and spent_rollback were lost at every run.
    write_atomic(path, json.dumps(MASK.mask_obj(state.model_dump(), lines=True, keep=_UNMASKED), indent=2) + "\n")


#: The state's fields (its attempts' too) held to a pattern, never masked: :func:`save_state`.
_UNMASKED = frozenset({"applied", "spent_rollback", "revision", "status", "reason"})


def full_attempt(commit: str | None, e: OSError, cache: Path, what: str = "",
                 paths: list[Path] | None = None) -> Attempt:
    """A run that ran out of room (``e``, ENOSPC or EDQUOT) writing ``paths`` (else the file ``e`` names) as its
    failed attempt, reason ``disk-full``."""
    where = f"{what} " if what else ""
    # os.symlink's error names the link's target first, the link second: the link is what could not be made.
    paths = paths or [Path(getattr(e, "filename2", None) or getattr(e, "filename", None) or cache)]
    return Attempt(at=time.time(), status="failed", revision=commit, reason="disk-full", exit_code=EXIT["failed"],
                   message=f"{where}{' and '.join(shown(p) for p in paths)}: {e.strerror or e}: the disk is full "
                           f"({room(paths[0].parent)}); free some room, the next run tries again")


def record_outcome(state: State, state_path: Path, prometheus: Path | None, cache: Path) -> Attempt:
    """Write the state and the metrics; the run's attempt as recorded.  A full disk under either is the run's
    failure (``disk-full``, exit 2), recorded wherever there is room (the textfile lies in the node exporter's
    folder, often another file system): never an OSError after the run, nor an exit 1 that calls it bad input."""
    was = state.last
    full: list[tuple[Path, OSError]] = []
    for write, path in ((save_state, state_path), (write_metrics, prometheus)):
        if path is None:
            continue
        if full:  # the state could not be written: the textfile says the run failed for want of room
            state.last = full_attempt(was.revision, full[0][1], cache, paths=[state_path])
        try:
            write(state, path)
        except OSError as e:
            if e.errno not in FULL_ERRNOS:
                raise
            full.append((path, e))
    if not full:
        return was
    if was.reason == "disk-full":  # the run had already failed so: one line says both
        was.message += f"; nor recorded in {' and '.join(shown(p) for p, _ in full)}"
        return was
    attempt = full_attempt(was.revision, full[0][1], cache, "the run's outcome could not be recorded:",
                    [p for p, _ in full])
    if was.status == "applied":
        attempt.message = f"{was.message}, but {attempt.message}"
    elif state.applied:
        attempt.message += f" (still at {state.applied[:12]})"
    return attempt


def registry(state: State) -> CollectorRegistry:
    """The state as Prometheus metrics (:data:`METRICS`)."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry(auto_describe=True)
    host = state.host

    def gauge(name: str, *labels: str) -> Gauge:
        return Gauge(name, METRICS[name], ["host", *labels], registry=reg)

    applied, changed, failed = (gauge("bringup_pull_applied_info", "revision"), gauge("bringup_pull_changed"),
                                gauge("bringup_pull_failed"))
    status, run = gauge("bringup_pull_status", "status"), gauge("bringup_pull_last_run_timestamp_seconds")
    success = gauge("bringup_pull_last_success_timestamp_seconds")
    refusal_at = gauge("bringup_pull_last_refusal_timestamp_seconds")
    refusal = gauge("bringup_pull_last_refusal_info", "reason", "revision")
    last = gauge("bringup_pull_last_run_info", "status", "reason")
    if state.applied:
        applied.labels(host, state.applied).set(1)
    if state.last_success is not None:
        success.labels(host).set(state.last_success)
    if state.last is not None:
        changed.labels(host).set(state.last.changed)
        failed.labels(host).set(state.last.failed)
        run.labels(host).set(state.last.at)
        for s in STATUSES:
            status.labels(host, s).set(1 if s == state.last.status else 0)
        last.labels(host, state.last.status, state.last.reason or "").set(1)
    if state.last_refusal is not None:
        refusal_at.labels(host).set(state.last_refusal.at)
        refusal.labels(host, state.last_refusal.reason or "", state.last_refusal.revision or "").set(1)
    return reg


def write_metrics(state: State, path: Path) -> None:
    """The state's metrics in the textfile ``path``, by drift's writer (atomic; never another exporter's
    file)."""
    from ..engine.drift import write_textfile

    write_textfile(registry(state), path, own=tuple(METRICS))


def _said_folder(argv: list[str]) -> str | None:
    """The textfile folder a node exporter's command line names (``--collector.textfile.directory[=]DIR``)."""
    for i, word in enumerate(argv):
        for flag in (_FLAG, "-" + _FLAG):
            if word.startswith(flag + "="):
                return word.split("=", 1)[1]
            if word == flag and i + 1 < len(argv):
                return argv[i + 1]
    return None


def textfile_folder(proc: Path = Path("/proc"), folders: tuple[str, ...] = TEXTFILE_FOLDERS,
                    skipped: list[str] | None = None) -> tuple[Path, str]:
    """The node exporter's textfile folder on this host, and how it was found: the folder a running node
    exporter (``node_exporter``, Debian's ``prometheus-node-exporter``) names with
    ``--collector.textfile.directory``, when it is an absolute folder here that the exporter may be trusted
    with (:func:`_untrusted_exporter`); else the first of ``folders`` that exists; else the last of them (to be
    made).  Each command line is read with a size cap.  Why an exporter's folder was not taken is added to
    ``skipped``, one line each (anyone can start a process named node_exporter)."""
    try:
        pids = sorted((int(d.name) for d in proc.iterdir() if d.name.isdigit()))
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open(proc / str(pid) / "cmdline", "rb") as f:
                raw = f.read(64 << 10)
        except OSError:
            continue
        argv = raw.decode("utf-8", "replace").split("\0")
        if not argv or os.path.basename(argv[0]) not in _EXPORTERS:
            continue
        said = _said_folder(argv[1:])
        rootfs = next((w.split("=", 1)[1] for w in argv if w.startswith("--path.rootfs=")), "")
        if said and rootfs.startswith("/") and rootfs != "/" and said.startswith(rootfs.rstrip("/") + "/"):
            said = said[len(rootfs.rstrip("/")):]  # a containerised exporter's view of the host (/host/var/...)
        if said and os.path.isabs(said) and os.path.isdir(said):
            who = f"{os.path.basename(argv[0])[:40]} (pid {pid})"
            why = _untrusted_exporter(proc / str(pid), Path(said))
            if why:
                if skipped is not None:
                    skipped.append(f"{who} reads {ascii(said)[1:-1][:200]}, not taken: {why}")
                continue
            return Path(said), f"{who} reads {ascii(said)[1:-1]}"
    for folder in folders:
        if os.path.isdir(folder):
            return Path(folder), f"{folder} exists"
    return Path(folders[-1]), f"no node exporter's folder found; {folders[-1]} made"


def _uids(status: Path) -> set[int] | None:
    """The user ids a process runs as (real, effective, saved, file system: ``Uid:`` of /proc/PID/status)."""
    try:
        with open(status, "rb") as f:
            text = f.read(64 << 10).decode("ascii", "replace")
    except OSError:
        return None
    for row in text.splitlines():
        if row.startswith("Uid:"):
            try:
                ids = {int(w) for w in row.split()[1:]}
            except ValueError:
                return None
            return ids or None
    return None


def _untrusted_exporter(pid_dir: Path, folder: Path) -> str | None:
    """Why a node exporter's folder is not to be written into by bringup (often run as root), None when it
    may be: the exporter runs as root or as the folder's owner (every one of its user ids), and the folder is
    owned by root or that user and not writable by others.  Else a process any user started, naming any
    folder, would have root write (and so far chmod) there."""
    uids = _uids(pid_dir / "status")
    if uids is None:
        return "its user could not be read"
    if len(uids) != 1:
        return f"it runs as several users ({', '.join(map(str, sorted(uids)))})"
    uid = uids.pop()
    try:
        st = os.stat(os.path.realpath(folder))
    except OSError as e:
        return f"the folder cannot be read ({e.strerror or e})"
    if uid not in (0, st.st_uid):
        return f"it runs as user {uid}, neither root nor the folder's owner ({st.st_uid})"
    if st.st_uid not in (0, uid):
        return f"the folder is owned by user {st.st_uid}, neither root nor the exporter's user"
    if st.st_mode & 0o002:
        return "the folder is writable by others"
    return None
