"""Acceptance results saved per host (``reports/accept/<host>-<UTC time>.json``, written atomically), the newest
read back for the rack checklist, and the Prometheus textfile beside drift's.

The saved document: ``{"host", "measured_at" (ISO 8601 UTC), "seconds", "dcgm_level", "probe": the probe's
JSON, "dcgm": {...}, "lines": [the checklist lines as render_json writes them]}``.
"""
from __future__ import annotations

import glob
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..checks import Check, dated_ahead, line, line_json, printable
from ..process import command
from ..untrusted import Unreadable, future, loads, number
from ..outfile import write_atomic
from ..userfile import read_capped
from ..errors import InputError
from .limits import Thresholds, thresholds

__all__ = ["REPORT_DIR", "save", "latest", "lines_of", "checklist_lines", "METRICS", "write_prometheus",
           "check_prometheus_path"]

REPORT_DIR = "reports/accept"
_NAME = re.compile(r"^(?P<host>.+)-(?P<stamp>\d{8}T\d{6}Z)\.json$")
#: The largest saved result read back (a host's is a few kilobytes).
SAVED_MAX = 16 * 1024 * 1024


def save(host: str, doc: dict[str, Any], lines: list[Check], out: Path, when: datetime | None = None) -> Path:
    """Write the host's result into ``out`` as every saved file is (:func:`bringup.outfile.write_atomic`: its mode
    set on the open file, never a chmod by name, which a link swapped in under the temporary name would have led
    to another file; synced, then renamed); its path."""
    when = when or datetime.now(timezone.utc)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{host}-{when.strftime('%Y%m%dT%H%M%SZ')}.json"
    body = json.dumps({**doc, "host": host, "measured_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "lines": [line_json(k) for k in lines]}, indent=2) + "\n"
    return write_atomic(path, body, mode=0o644, umask=False)


def latest(host: str, folder: str | Path = REPORT_DIR, now: datetime | None = None,
           passed_over: list[Path] | None = None) -> Path | None:
    """The newest saved result of ``host`` in ``folder`` (by the UTC time in its name), or None.  A name dated in
    the future is passed over (it would hide every result measured after it) and added to ``passed_over``, for
    the caller to name."""
    found = []
    for when, p in sorted(_saved(host, folder)):
        if not future(when, now):
            found.append(p)
        elif passed_over is not None:
            passed_over.append(p)
    return found[-1] if found else None


def _saved(host: str, folder: str | Path) -> list[tuple[datetime, Path]]:
    d = Path(folder)
    if not d.is_dir():
        return []
    found = []
    for p in d.glob(f"{glob.escape(host)}-*.json"):
        m = _NAME.match(p.name)
        # Whatever is there under a result's name is read (and refused by lines_of, naming it) where it is the
        # newest: a pipe, a folder or a link to nothing passed over in silence would hide that it is no result.
        if m and m["host"] == host:
            try:
                found.append((_stamp(m["stamp"]), p))
            except ValueError:  # 20261399T...: no time
                continue
    return found


def _stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)


def lines_of(path: Path, now: datetime | None = None, th: Thresholds | None = None) -> tuple[list[Check], datetime]:
    """The lines and the time of a saved result; ValueError (one line) when the file is not one, or is dated
    in the future (beyond a few minutes of clock skew: no one measured it yet, and it would hide every later
    result as "newest"), or is another host's (its ``host`` is not the one its name says).  A measured rate's
    status is judged again from its own value and limit (``th``: the host's thresholds, the defaults when None):
    a saved PASS over a figure far below its limit is never shown as a PASS."""
    th = th or Thresholds()
    try:
        # Never a pipe (its read waits for a writer), a device (/dev/zero never ends), more than the cap, or a link
        # out of its folder (a result elsewhere, or any JSON file, standing for this host's), as bench results.
        data = read_capped(path, SAVED_MAX, Unreadable, missing="gone", unreadable="", not_regular="not a regular file",
                           too_large=f"larger than {SAVED_MAX >> 20} MiB", inside=path.parent)
        # A key given twice (two "lines", a line's status twice) is refused: which one counts is not known, and
        # Python's json would take the last, a PASS written after the FAIL.
        doc = loads(data, what="JSON", max_bytes=SAVED_MAX, unique=True)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        m = _NAME.match(path.name)
        if m and doc.get("host") != m["host"]:
            # Another host's result copied under this host's name would stand for this host's hardware.
            raise Unreadable(f"it is the result of host {printable(str(doc.get('host')))[:80]!r}, not of "
                             f"{m['host']!r} its name says: a copied or edited file")
        when = datetime.strptime(str(doc["measured_at"]), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        if m and _stamp(m["stamp"]) != when:
            raise ValueError(f"measured_at {doc['measured_at']} is not the time its name says "
                             f"({m['stamp']}): a renamed or edited file")
        if future(when, now):
            raise ValueError(f"measured_at {doc['measured_at']} lies in the future (this machine's clock says "
                             f"{(now or datetime.now(timezone.utc)).strftime('%Y-%m-%dT%H:%M:%SZ')}): not a result "
                             "measured yet")
        lines = [line(str(k["area"]), str(k["name"]), str(k["status"]), str(k["seen"]), str(k.get("fix", "")),
                      subject=str(k.get("subject", "")), value=_num(k.get("value")), limit=_num(k.get("limit")),
                      unit=str(k.get("unit", ""))) for k in doc["lines"]]
        if not lines:  # a result says what was measured: none would hide the acceptance from the checklist
            raise Unreadable("it holds no line: an acceptance result always has some (an edited file)")
        for k in lines:
            _judge_again(k, th)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        why = str(e) if isinstance(e, Unreadable) or "future" in str(e) else f"{type(e).__name__}: {e}"
        raise ValueError(f"{path}: not a saved acceptance result ({why})") from None
    return lines, when


def _kind(k: Check) -> str | None:
    """Which thresholds the judge held a rate line against (its name and what it says), None: not a rate line."""
    if k.name in ("host-to-device bandwidth", "device-to-host bandwidth"):
        return "pcie"
    if k.name == "device memory bandwidth":
        return "memory"
    if k.name.startswith("P2P to "):
        return "nvlink" if "NVLink link(s)'" in k.seen else "pcie_p2p"
    return None


def _judge_again(k: Check, th: Thresholds) -> None:
    """A saved rate line's status made the judge's own for its value and limit (:mod:`.judge`): an edited PASS
    over 1 GB/s of 50 is a FAIL here; a line whose figure cannot be judged (no figure, no limit) is never a PASS.
    A rate line is known by its name: one whose figure is in another unit than GB/s (0.5 "TB/s"), or a PASS with
    no figure at all, is "not checked" (the judge writes a rate in GB/s, and a line without one as FAIL or WARN)."""
    if k.area != "acceptance":
        raise Unreadable(f"line {k.name!r} of area {k.area!r}: accept writes lines of area acceptance only")
    kind = _kind(k)
    if kind is None:
        if k.limit is not None:  # only a rate line is held against a limit: a renamed one is not passed as it says
            raise Unreadable(f"line {k.name!r} ({k.unit or 'no unit'}) holds a limit, but is no rate line accept "
                             "writes")
        if k.unit not in _OTHER_UNITS or (k.value is not None) != (k.unit != ""):
            # Units compared exactly: "GB/S" or "gb/s" on a line that is no rate line is no figure accept wrote,
            # and a figure of a unit it never writes cannot be judged again: never the PASS it says.
            _not_checked(k, f"its figure {k.value} in {k.unit or 'no unit'!s} is not one accept writes on this line "
                            "(a rate in GB/s on a rate line, a temperature in °C)")
        return
    if k.unit != "GB/s":
        if k.value is None and k.limit is None and not k.unit:
            if k.status != "PASS":
                return  # the judge's "no figure" FAIL, "not checked" WARN, P2P without peer access: as written
            _not_checked(k, "no figure and no limit, nothing a PASS could stand on")
        else:
            _not_checked(k, f"its figure {k.value} against limit {k.limit} is in {k.unit or 'no unit'}, not the "
                            "GB/s this check measures")
        return
    if k.value is None or k.value < 0 or k.limit is not None and k.limit <= 0:
        raise Unreadable(f"line {k.name!r}: value {k.value} against limit {k.limit} is no measured rate")
    if k.limit is None:
        judged = "WARN"  # the judge's "no limit known": judged by hand, never a PASS
    else:
        ratio = k.value / k.limit
        warn, fail = getattr(th, f"{kind}_warn"), getattr(th, f"{kind}_fail")
        judged = "FAIL" if ratio < fail else "WARN" if ratio < warn else "PASS"
    if judged != k.status:
        k.seen = (f"{k.seen} [saved as {k.status}, judged {judged} again from its value {k.value:g} {k.unit} and "
                  f"limit {k.limit} {k.unit}]")
        k.status = judged


#: The units of the figures accept writes on lines that are no rate line (the clock lines' temperature), and none.
_OTHER_UNITS = ("", "°C")


def _not_checked(k: Check, why: str) -> None:
    """A saved rate line that cannot be judged again made a WARN "not checked" (its figure no longer drawn)."""
    k.seen = f"not checked: {why} [saved as {k.status}: {k.seen}]"
    k.status, k.value, k.limit, k.unit = "WARN", None, None, ""
    k.fix = "run the acceptance again: accept writes a rate line in GB/s, and one without a figure never as a PASS"


def _num(v: Any) -> float | None:
    """A line's value or limit: None, or a finite number (NaN, Infinity, 1e308 GB/s: not a saved figure)."""
    if v is None:
        return None
    return float(number(v, lo=-1e6, hi=1e6, what="value"))


def _age(when: datetime, now: datetime) -> str:
    s = max(0, int((now - when).total_seconds()))
    for unit, n in (("day", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            v = s // n
            return f"{v} {unit}{'s' if unit == 'day' and v != 1 else ''} ago"
    return f"{s} s ago"


#: A saved acceptance result older than this is said so in the checklist: the hardware may have changed since.
MAX_AGE_DAYS = 30


def checklist_lines(vars: dict, folder: str | Path = REPORT_DIR, now: datetime | None = None) -> list[Check]:
    """The rack checklist's acceptance lines of a host: its newest saved result's lines, each saying how old it
    is, or one WARN "not measured" line."""
    host = vars.get("inventory_hostname", "")
    now = now or datetime.now(timezone.utc)
    later: list[Path] = []
    path = latest(host, folder, now, passed_over=later) if host else None
    run = command(f"accept --host {host}")
    warn = dated_ahead("acceptance", "measured acceptance", later, "saved result(s) named for a time in the future",
                       "results are named by the time they were measured")
    if path is None:
        return warn + [line("acceptance", "measured acceptance", "WARN",
                            f"not measured: no acceptance result of this host in {folder}", f"run {run}")]
    try:
        try:
            th = thresholds(vars)
        except InputError:
            th = None  # accept refuses a bad accept_thresholds before it measures; the defaults judge here
        lines, when = lines_of(path, now, th)
    except ValueError as e:
        return warn + [line("acceptance", "measured acceptance", "WARN", str(e), f"run {run} again")]
    age = _age(when, now)
    for k in lines:
        k.seen = f"{k.seen} (measured {age}: {path})"
    if (now - when).total_seconds() > MAX_AGE_DAYS * 86400:
        # A board replaced or broken since would hide behind an old PASS.
        lines.insert(0, line("acceptance", "measured acceptance", "WARN",
                             f"the newest result is {age}, older than {MAX_AGE_DAYS} days: {path}",
                             f"run {run} again"))
    return warn + lines


# --- Prometheus ------------------------------------------------------------------------------------------------

METRICS = {
    "bringup_accept_rate_gbs": "A measured acceptance rate (GB/s): host-to-device, device-to-host, device memory, P2P",
    "bringup_accept_limit_gbs": "The limit the acceptance rate is held against (GB/s)",
    "bringup_accept_check_status": "An acceptance line's status: 0 PASS, 1 WARN, 2 FAIL",
    "bringup_accept_timestamp_seconds": "When the host's acceptance was measured (Unix time)",
}
_STATUS = {"PASS": 0, "WARN": 1, "FAIL": 2}


def check_prometheus_path(path: str) -> Path:
    """``--prometheus FILE`` checked before anything connects, by drift's rules, this textfile's own metrics."""
    from ..engine.drift import check_prometheus_path as check

    return check(path, own=tuple(METRICS))


def write_prometheus(results: dict[str, tuple[list[Check], float]], path: Path) -> None:
    """``{host: (lines, measured at)}`` as a textfile, written atomically (drift's write_textfile: bringup's
    write_atomic); what is at ``path`` is checked again first (never another exporter's file)."""
    from prometheus_client import CollectorRegistry, Gauge

    from ..engine.drift import write_textfile

    reg = CollectorRegistry()
    rate = Gauge("bringup_accept_rate_gbs", METRICS["bringup_accept_rate_gbs"], ["host", "subject", "check"],
                 registry=reg)
    limit = Gauge("bringup_accept_limit_gbs", METRICS["bringup_accept_limit_gbs"], ["host", "subject", "check"],
                  registry=reg)
    status = Gauge("bringup_accept_check_status", METRICS["bringup_accept_check_status"],
                   ["host", "subject", "check"], registry=reg)
    stamp = Gauge("bringup_accept_timestamp_seconds", METRICS["bringup_accept_timestamp_seconds"], ["host"],
                  registry=reg)
    for host, (lines, when) in results.items():
        stamp.labels(host).set(when)
        for k in lines:
            status.labels(host, k.subject, k.name).set(_STATUS[k.status])
            if k.unit == "GB/s" and k.value is not None:
                rate.labels(host, k.subject, k.name).set(k.value)
                if k.limit is not None:
                    limit.labels(host, k.subject, k.name).set(k.limit)
    write_textfile(reg, path, own=tuple(METRICS))
