"""The drift report: which hosts drifted from the inventory, for people (a table) and for alerting (Prometheus).

``invoke drift`` (:mod:`bringup.tasks.drift`) plans every selected host in check mode
(:class:`bringup.engine.runner.HostRun` through :func:`bringup.engine.runner.run_hosts`, in parallel), nothing is
written on any host, and this module sums the plans up per host and role (:mod:`bringup.engine.results`): the
resources that would change (drift), those whose state could not be planned (errors), or the host
unreachable.  The same summary reads as a table, as JSON (``--json``),
and as the Prometheus text the node exporter's textfile collector serves
(``--prometheus FILE``)::

    invoke drift --group all --prometheus /var/lib/node_exporter/textfile_collector/bringup.prom

Exit codes follow the run's: 0 nothing drifted, 2 something drifted (or a
role could not be planned), 4 a host was unreachable (4 wins over 2, as in
Ansible), 1 bad input.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Collection

from ..errors import InputError, shown
from .results import RoleState, role_states

if TYPE_CHECKING:  # imported where used
    from prometheus_client import CollectorRegistry
    from rich.table import Table

    from .results import HostResult

__all__ = ["HostDrift", "DriftReport", "summarize", "render_table", "to_json", "registry", "write_prometheus",
           "write_textfile", "check_prometheus_path", "prometheus_file_problem", "METRICS"]

#: The metrics of ``--prometheus``, with their HELP text (the monitoring role's alert rules read them).
METRICS = {
    "bringup_drift_resources": "Resources of a role that a check-mode plan would change (drift from the inventory)",
    "bringup_drift_errors": "Resources of a role whose state could not be read or planned",
    "bringup_last_check_timestamp_seconds": "When bringup drift (invoke drift) last planned the host (Unix time)",
    "bringup_unreachable": "1 when the host could not be reached by the last bringup drift (invoke drift), else 0",
}


@dataclass
class HostDrift:
    """One host's line of the report."""

    host: str
    #: converged | drifted | failed | unreachable | interrupted | not started
    status: str
    roles: dict[str, RoleState]
    message: str | None = None


@dataclass
class DriftReport:
    """Every host's drift, the roles planned, and when."""

    hosts: list[HostDrift]
    roles: list[str]
    checked_at: float

    @property
    def exit_code(self) -> int:
        """4 when a host was unreachable, else 2 when one drifted (or could not be planned), else 0."""
        statuses = {h.status for h in self.hosts}
        if "unreachable" in statuses:
            return 4
        return 2 if statuses - {"converged"} else 0


def _host_status(result: HostResult, roles: dict[str, RoleState]) -> str:
    if result.status in ("unreachable", "interrupted", "not started"):
        return result.status
    if result.status == "failed" or any(s.failed for s in roles.values()):
        return "failed"
    return "drifted" if any(s.pending for s in roles.values()) else "converged"


def summarize(results: list[HostResult], roles: list[str], checked_at: float | None = None) -> DriftReport:
    """The report of check-mode ``results`` (one per host) of ``roles``."""
    hosts = []
    for r in results:
        states = role_states(r)
        hosts.append(HostDrift(r.host, _host_status(r, states), states, r.message))
    return DriftReport(hosts, list(roles), time.time() if checked_at is None else checked_at)


_STYLE = {"converged": "green", "drifted": "yellow", "failed": "red", "unreachable": "red"}


def _cell(s: RoleState | None) -> str:
    if s is None:
        return "-"
    if s.failed:
        return f"[red]error ({len(s.failed)})[/]"
    if s.pending:
        return f"[yellow]{len(s.pending)} pending[/]"
    if s.skipped and len(s.skipped) == s.total:
        return "[dim]not applicable[/]"
    return "[green]ok[/]"


def render_table(report: DriftReport) -> Table:
    """One row per host, one column per role: ``N pending``, ``ok``, ``error (N)``, or the row unreachable."""
    from rich.markup import escape
    from rich.table import Table

    # Host names and messages (a host's error text) are data: never markup (a "[link=...]" or "[/x]" in them).
    t = Table("host", "status", *map(escape, report.roles), title="drift (check mode: nothing was changed)",
              box=None)
    for h in report.hosts:
        status = f"[{_STYLE.get(h.status, 'dim')}]{escape(h.status)}[/]"
        if h.status in ("unreachable", "interrupted", "not started") or (h.status == "failed" and not h.roles):
            t.add_row(escape(h.host), status, *([escape(h.message or h.status)] + [""] * (len(report.roles) - 1)))
            continue
        t.add_row(escape(h.host), status, *(_cell(h.roles.get(role)) for role in report.roles))
    return t


def to_json(report: DriftReport) -> dict:
    """The report as a JSON-able document (``--json``)."""
    return {
        "checked_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(report.checked_at)),
        "roles": report.roles,
        "hosts": {h.host: {"status": h.status, "message": h.message,
                           "roles": {role: {"pending": s.pending, "errors": s.failed,
                                            "not_applicable": s.skipped} for role, s in h.roles.items()}}
                  for h in report.hosts},
        "drifted": [h.host for h in report.hosts if h.status == "drifted"],
        "unreachable": [h.host for h in report.hosts if h.status == "unreachable"],
        "exit_code": report.exit_code,
    }


def registry(report: DriftReport, previous: dict[tuple[str, ...], float] | None = None) -> CollectorRegistry:
    """The report as Prometheus metrics (:data:`METRICS`).

    A host that was not planned this time keeps the series of ``previous`` (the file's last write, from
    :func:`read_previous`), so an alert keyed on them never goes absent: an unreachable host keeps its
    last drift counts beside ``bringup_unreachable 1``; an interrupted or never-started host keeps all of
    its series, its last check timestamp included (which then goes stale, as it should).
    """
    from prometheus_client import CollectorRegistry, Gauge

    previous = previous or {}
    reg = CollectorRegistry(auto_describe=True)
    g = {name: Gauge(name, help_, ["host", "role"] if name.startswith("bringup_drift_") else ["host"],
                     registry=reg)
         for name, help_ in METRICS.items()}

    def keep(host: str, names: tuple[str, ...]) -> None:
        for (name, h, *role), value in previous.items():
            if h == host and name in names:
                g[name].labels(h, *role).set(value)

    for h in report.hosts:
        if h.status in ("interrupted", "not started"):
            keep(h.host, tuple(METRICS))  # not checked this time: its last check stays what it was
            continue
        g["bringup_last_check_timestamp_seconds"].labels(h.host).set(report.checked_at)
        g["bringup_unreachable"].labels(h.host).set(1 if h.status == "unreachable" else 0)
        if h.status == "unreachable":
            keep(h.host, ("bringup_drift_resources", "bringup_drift_errors"))
        for role, s in h.roles.items():
            g["bringup_drift_resources"].labels(h.host, role).set(len(s.pending))
            g["bringup_drift_errors"].labels(h.host, role).set(len(s.failed))
    return reg


#: The largest earlier textfile read back (a few hundred bytes a host).
PROM_READ_MAX = 16 * 1024 * 1024


def _count_like(v: float) -> bool:
    """Whether ``v`` is a value drift's series hold: a finite count, 0/1 or Unix time (0..10^12)."""
    from ..untrusted import Unreadable, number

    try:
        number(v, lo=0, hi=1e12)
    except Unreadable:
        return False
    return True


class _Unfit(Exception):
    """read_capped's error for the textfile (no OSError: read_capped would take it for the open's own)."""


def _textfile(path: Path) -> str | None:
    """The text of the textfile at ``path``, read as any saved file (:func:`bringup.userfile.read_capped`: at most
    :data:`PROM_READ_MAX` bytes, whatever it grew to since a look at its size; a pipe or a device put there after
    the look is never waited on or read without end); None when there is none or it is no regular file;
    :class:`OSError` with the line's words when it cannot be read or is too large."""
    from ..userfile import read_capped

    try:
        data = read_capped(path, PROM_READ_MAX, _Unfit, missing="", not_regular="",
                           unreadable="it cannot be read: ",
                           too_large=f"it is larger than {PROM_READ_MAX >> 20} MiB: not a textfile bringup wrote")
    except _Unfit as e:
        if not str(e):
            return None
        raise OSError(str(e)) from None
    return data.decode("utf-8")


def read_previous(path: Path) -> dict[tuple[str, ...], float]:
    """The series an earlier ``--prometheus`` write left in ``path``: ``{(metric, host[, role]): value}``.
    A file that is missing, too large or not Prometheus text gives none (the new file is written whole)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = _textfile(path)
        if text is None:
            return {}
        out: dict[tuple[str, ...], float] = {}
        for fam in text_string_to_metric_families(text):
            for sample in fam.samples:
                if sample.name in METRICS and "host" in sample.labels:
                    if not _count_like(sample.value):
                        continue  # NaN, +Inf, -3 or 1e308 is no count or time drift wrote: not carried on
                    role = (sample.labels["role"],) if "role" in sample.labels else ()
                    out[(sample.name, sample.labels["host"], *role)] = sample.value
        return out
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def check_prometheus_path(path: str, own: Collection[str] = tuple(METRICS)) -> Path:
    """``--prometheus FILE`` checked before anything connects: a ``.prom`` file in an existing folder, and
    nothing there yet or bringup's own textfile (:func:`prometheus_file_problem`; ``own``: the metric families
    of the textfile that may be replaced, drift's by default).  A path the system will not look at (a name too
    long) is one line too, and the path is shown cut (:func:`bringup.errors.shown`)."""
    from ..userfile import kind

    p = Path(path)
    where = f"--prometheus {shown(path)}"
    if p.suffix != ".prom":
        raise InputError(f"{where}: the node exporter's textfile collector reads only *.prom files; "
                         "name it like bringup.prom")
    folder = kind(p.parent, InputError, where)
    if folder != "folder":
        raise InputError(f"{where}: folder {shown(p.parent)} "
                         f"{'does not exist' if folder == 'missing' else 'is no folder'}; create it (the node "
                         "exporter's --collector.textfile.directory)")
    if kind(p, InputError, where) == "folder":
        raise InputError(f"{where} is a folder: give a file name in it, like {shown(p / 'bringup.prom')}")
    why = prometheus_file_problem(p, own)
    if why:
        raise InputError(f"{where}: {why}; give a file of its own, like {shown(p.parent / 'bringup.prom')}")
    return p


def is_own_textfile(text: str, own: Collection[str] = tuple(METRICS)) -> bool:
    """Whether ``text`` is a textfile bringup wrote: Prometheus text whose every metric family is one of
    ``own`` (:data:`METRICS`; another exporter's families, or text that does not parse, are not bringup's)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        names = [fam.name for fam in text_string_to_metric_families(text)]
    except (ValueError, TypeError, IndexError):
        return False
    return bool(names) and all(n in own for n in names)


def prometheus_file_problem(path: Path, own: Collection[str] = tuple(METRICS)) -> str | None:
    """Why bringup must not replace what is at ``path`` (None: nothing is there, or bringup's own textfile).

    The rule of the tuner's ``--record``: a link, a folder, a device or a pipe is never written through or
    replaced, nor a file bringup did not write (another exporter's ``.prom`` in the same collector folder).
    Nothing is opened but a regular file (a pipe would block the read).
    """
    if path.is_symlink():
        return "it is a symbolic link: bringup writes its textfile as a regular file"
    if path.is_dir():
        return "it is a folder"
    if not path.exists():
        return None
    if not path.is_file():
        return "it is not a regular file (a device, a pipe or a socket)"
    try:
        text = _textfile(path)
    except UnicodeDecodeError:
        text = "\0"
    except OSError as e:
        return str(e)
    if text is None:
        return "it is gone" if not os.path.lexists(path) else "it is not a regular file (a device, a pipe or a socket)"
    if not text.strip() or is_own_textfile(text, own):
        return None
    return ("it is not a textfile bringup wrote (its metrics are not bringup_*): bringup never replaces "
            "another exporter's file")


def write_prometheus(report: DriftReport, path: Path) -> None:
    """Write the report's metrics to ``path`` (:func:`write_textfile`), keeping the series of the hosts not
    planned this time from the file's last write."""
    write_textfile(registry(report, read_previous(path)), path)


def write_textfile(reg: CollectorRegistry, path: Path, own: Collection[str] = tuple(METRICS)) -> None:
    """Write ``reg`` to ``path`` atomically, for the node exporter's textfile collector; ``own``: the metric
    families of a file bringup may replace there.

    Through :func:`bringup.outfile.write_atomic`: a temporary file made with ``O_EXCL`` in the same folder,
    mode 0644 set on its descriptor (the node exporter usually runs as its own user), synced, renamed over
    ``path``.  Nothing is ever opened or chmodded by name: the folder may be writable by others, and a link
    planted at a guessable temporary name or at ``path`` is never followed.  The collector never reads a
    half-written file; a failed write leaves the previous file as it was and no temporary file behind.  A
    label value that is not UTF-8 text (a host name of raw bytes) is refused, naming it, and
    nothing is written.
    """
    import errno

    from prometheus_client.exposition import generate_latest

    from ..outfile import write_atomic

    bad = _unprintable_label(reg)
    if bad:
        raise OSError(errno.EINVAL, f"label {bad}: not UTF-8 text; nothing written (name the host "
                                    "in plain text)", str(path))
    why = prometheus_file_problem(path, own)  # checked again: the run took minutes, the folder is shared
    if why:
        raise FileExistsError(errno.EEXIST, f"{why}; nothing written")
    write_atomic(path, generate_latest(reg), mode=0o644, umask=False)


def _unprintable_label(reg: CollectorRegistry) -> str | None:
    """The first label of ``reg``'s samples whose value is not UTF-8 text, as ``name=<ascii>``."""
    for fam in reg.collect():
        for sample in fam.samples:
            for k, v in sample.labels.items():
                try:
                    v.encode("utf-8")  # a newline or a quote is escaped in the text; a lone surrogate cannot be
                except UnicodeEncodeError:
                    return f"{k}={ascii(v)}"
    return None
