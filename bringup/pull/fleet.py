"""Where a pull-mode fleet stands, read from Prometheus's HTTP API (``invoke fleet``): each host's applied
revision, how old its last success is, the state of its last run, and which hosts lag or fail.

One instant query (``/api/v1/query`` of ``{__name__=~"bringup_pull_.+"}``) returns every host's series that
:mod:`bringup.pull.record` writes and the node exporter serves; this module reads them into one row a host.
The fleet's revision is the one applied by the host whose success is the newest (or ``--revision``); a host
on another one lags.  A time ahead of this machine's clock within :data:`CLOCK_SKEW_S` (two machines' clocks
disagree a little) is read, and named below the table; further ahead it never happened, and is not read (named
too).  A host whose series contradict each other (two
statuses, two revisions or times at once) or say what pull never writes (a status word it has not, a flag neither
0 nor 1) is ``unreadable``, the series named: which one is true is not known.  Exit codes as drift's: 0 every
host current, 2 a host lags, failed, was refused or is unreadable, 4 a host stopped reporting (no run within
``stale_s``) or Prometheus does not answer, 1 bad input.
"""
from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InputError, Unreachable, printable
from ..untrusted import CLOCK_SKEW_S, HttpError, Unreadable, http_get, loads, number

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["HostState", "Fleet", "query", "summarize", "render_table", "to_json", "note_lines", "QUERY", "STATUSES"]

QUERY = '{__name__=~"bringup_pull_.+"}'
#: Seconds an answer of Prometheus may take (the whole answer: a server that drips is given up on then).
HTTP_TIMEOUT_S = 20
#: The largest answer read (a series is about 300 bytes: 200,000 series of a thousand hosts fit).
ANSWER_MAX = 64 << 20
#: The statuses a pull run writes (:data:`bringup.pull.record.STATUSES`, not imported: record loads pydantic).
STATUSES = ("applied", "failed", "refused", "error")


@dataclass
class HostState:
    """One host's row."""

    host: str
    revision: str | None = None
    status: str | None = None  # the last run's: applied, failed, refused, error
    last_run: float | None = None
    last_success: float | None = None
    refusal: str | None = None  # the last refusal's reason
    #: ok | lagging | failed | refused | error | stale | unreadable
    verdict: str = "ok"
    #: Why the row is unreadable (its series named), or what was not taken (a time ahead of this machine's clock).
    notes: list[str] = field(default_factory=list)


@dataclass
class Fleet:
    hosts: list[HostState]
    revision: str | None
    at: float

    @property
    def exit_code(self) -> int:
        verdicts = {h.verdict for h in self.hosts}
        if "stale" in verdicts:
            return 4
        return 2 if verdicts - {"ok"} else 0


def query(url: str, promql: str = QUERY) -> list[dict]:
    """The instant vector ``promql`` from the Prometheus at ``url``; Unreachable when it does not answer,
    InputError when it answers something else than a vector."""
    if not url.startswith(("http://", "https://")):
        raise InputError(f"--prometheus-url {url!r}: give Prometheus's address, like http://127.0.0.1:9090")
    full = url.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        body = http_get(full, max_bytes=ANSWER_MAX, deadline_s=HTTP_TIMEOUT_S, what=f"Prometheus at {url}")
    except HttpError as e:
        if e.status is not None:
            raise InputError(f"Prometheus at {url} answered HTTP {e.status} to /api/v1/query") from None
        if e.unreachable:
            raise Unreachable(f"{e}; is it running, and is this its address?") from None
        raise InputError(f"{e} to /api/v1/query") from None
    try:
        # A key given twice (a series' "status" label, the "result") is refused: json would take the last.
        doc = loads(body, what=f"Prometheus at {url}: /api/v1/query's answer", unique=True)
    except Unreadable as e:
        raise InputError(f"{e} (not a Prometheus?)") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or doc.get("status") != "success" or data.get("resultType") != "vector":
        raise InputError(f"Prometheus at {url}: /api/v1/query answered no vector ({str(doc)[:120]})")
    return list(data.get("result") or [])


def summarize(series: list[dict], *, revision: str | None = None, stale_s: float = 7200,
              now: float | None = None) -> Fleet:
    """The hosts' rows from the series ``query`` returned."""
    now = time.time() if now is None else now
    hosts: dict[str, HostState] = {}
    unreadable: dict[str, list[str]] = {}
    seen: dict[tuple[str, str], dict[str, str]] = {}  # (host, series) -> {what it says: the series, as shown}
    for s in series:
        labels, value = _sample(s)
        if labels is None:
            continue
        name, host = labels.get("__name__", ""), labels.get("host")
        if not host:
            continue
        h = hosts.setdefault(host, HostState(host))
        if value is None:
            if name in _FLAGS:  # a flag of NaN, +Inf, -1 or text: neither 0 nor 1, as a 2 is (a failed run read as ok)
                unreadable.setdefault(host, []).append(
                    f"{_series(name, {k: v for k, v in labels.items() if k not in ('__name__', 'host')})} is "
                    f"{_raw(s)}, not 0 or 1")
            continue  # an unreadable time (NaN, +Inf, 1e308 s, text): the row stays as unknown as without it
        says = None
        if name == "bringup_pull_status":
            word = labels.get("status", "")
            if value not in (0, 1):
                unreadable.setdefault(host, []).append(f"{_series(name, {'status': word})} is {value:g}, not 0 or 1")
            elif word not in STATUSES:
                if value == 1:
                    unreadable.setdefault(host, []).append(
                        f"{_series(name, {'status': word})} is 1: no status a pull run writes ({', '.join(STATUSES)})")
            elif value == 1:
                says = h.status = word
        elif name == "bringup_pull_applied_info" and value == 1:
            says = h.revision = labels.get("revision") or None
        elif name in ("bringup_pull_last_run_timestamp_seconds", "bringup_pull_last_success_timestamp_seconds"):
            says = f"{value:.0f}"
            if value > now + CLOCK_SKEW_S:  # a run in the future never happened: not read, and said
                h.notes.append(f"{name} lies {_age(value, now)} ahead of this machine's clock: not read")
                value = None
            elif value > now:  # within the clock skew: read (the host that just applied the newest, its clock a
                # little fast, sets the fleet's revision and is no "lagging"), and said
                h.notes.append(f"{name} lies {_age(value, now)} ahead of this machine's clock (within the "
                               f"{CLOCK_SKEW_S // 60:.0f} min allowed for two clocks' difference)")
            if name == "bringup_pull_last_run_timestamp_seconds":
                h.last_run = value
            else:
                h.last_success = value
        elif name == "bringup_pull_last_refusal_info" and value == 1:
            says = h.refusal = labels.get("reason")
        if says is not None:
            seen.setdefault((host, name), {})[says] = _series(name, {k: v for k, v in labels.items()
                                                                     if k not in ("__name__", "host")})
    for (host, name), said in seen.items():
        if len(said) > 1:  # two series of one host at once: whichever Prometheus listed last won
            setattr(hosts[host], _FIELD[name], None)  # neither is shown as the host's
            unreadable.setdefault(host, []).append(
                f"{' and '.join(said.values())} are all set for one host: which one is true is not known"
                if name not in ("bringup_pull_last_run_timestamp_seconds",
                                "bringup_pull_last_success_timestamp_seconds")
                else f"{name} has {len(said)} values ({', '.join(said)}): which one is true is not known")
    for h in hosts.values():
        if h.last_run is not None and h.status is None and h.host not in unreadable:
            # A pull run writes its time and its status together, one bringup_pull_status at 1: a run whose status
            # no series says (none listed, all 0) read as "ok", a failed run's row among them.
            unreadable.setdefault(h.host, []).append(
                "bringup_pull_last_run_timestamp_seconds is set but no bringup_pull_status series is 1: the last "
                "run's status is not known")
    newest = max((h for h in hosts.values() if h.revision and h.last_success and h.host not in unreadable),
                 key=lambda h: h.last_success, default=None)
    wanted = revision or (newest.revision if newest else None)
    for h in hosts.values():
        if h.host in unreadable:
            h.verdict = "unreadable"
            h.notes[:0] = unreadable[h.host]
        elif h.last_run is None or now - h.last_run > stale_s:
            h.verdict = "stale"
        elif h.status in ("failed", "refused", "error"):
            h.verdict = h.status
        elif wanted and not (h.revision or "").startswith(wanted):
            h.verdict = "lagging"
    return Fleet(sorted(hosts.values(), key=lambda h: h.host), wanted, now)


#: The row's field each series sets.
_FIELD = {"bringup_pull_status": "status", "bringup_pull_applied_info": "revision",
          "bringup_pull_last_run_timestamp_seconds": "last_run",
          "bringup_pull_last_success_timestamp_seconds": "last_success", "bringup_pull_last_refusal_info": "refusal"}


#: The series whose value is a flag, 0 or 1.
_FLAGS = ("bringup_pull_status", "bringup_pull_applied_info", "bringup_pull_last_refusal_info")


def _raw(s: dict) -> str:
    """A series' value as the answer gave it, printable and short."""
    pair = s.get("value")
    raw = pair[1] if isinstance(pair, list) and len(pair) == 2 else pair
    text = _one(raw if isinstance(raw, str) else repr(raw))
    return text if len(text) <= 40 else text[:40] + "..."


def _series(name: str, labels: dict[str, str]) -> str:
    """A series as PromQL writes it: ``bringup_pull_status{status="failed"}`` (the labels' text printable)."""
    inner = ",".join(f'{_one(k)[:40]}="{_one(v)[:80]}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}" if inner else name


def _one(text: str) -> str:
    """A label's text on one line, written out (a host or label is what any host's textfile may write)."""
    return printable(text).replace("\n", "\\n")


#: The largest Unix time read as a run's time (the year 2200): 1e308 s is no time a run happened.
_TIME_MAX = 7.3e9


def _sample(s: object) -> tuple[dict | None, float | None]:
    """One series of the answer as ``(labels, value)``; labels None when it is not a series, value None when
    its value is not a finite number within what a pull series holds (0 .. the year 2200)."""
    if not isinstance(s, dict) or not isinstance(s.get("metric") or {}, dict):
        return None, None
    labels = {str(k): str(v) for k, v in (s.get("metric") or {}).items()}
    pair = s.get("value")
    if not isinstance(pair, list) or len(pair) != 2:
        return labels, None
    try:
        return labels, float(number(float(pair[1]) if isinstance(pair[1], str) and len(pair[1]) < 40 else pair[1],
                                    lo=0, hi=_TIME_MAX, what="value"))
    except (Unreadable, ValueError):
        return labels, None


def _age(now: float, then: float | None) -> str:
    if then is None:
        return "never"
    if then > now:  # a time ahead of this machine's clock is said so, never "0m 0s" ago
        return f"{_age(then, now)} ahead"
    s = max(0, int(now - then))
    return f"{s // 86400}d {s % 86400 // 3600}h" if s >= 86400 else (
        f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s")


_STYLE = {"ok": "green", "lagging": "yellow", "failed": "red", "refused": "red", "error": "red", "stale": "red",
          "unreadable": "red"}


def render_table(fleet: Fleet) -> Text:
    """The fleet's table, one line a host under its title, columns as wide as their widest cell (print it with
    ``soft_wrap=True``).  Built as one :class:`rich.text.Text` in one pass over the rows: a rich ``Table`` laid out
    every row's cells through its measuring and padding renderables, about 1 ms a host, so that a Prometheus
    answer of 200,000 series took more than a minute in the table where ``--json`` took seconds."""
    from rich.cells import cell_len
    from rich.text import Span, Text

    head = ("host", "state", "revision", "last success", "last run", "last refusal")
    # Host names, revisions and reasons are labels any host's textfile may write: plain text, never markup, one line.
    rows = [(_one(h.host), h.verdict, _one((h.revision or "-")[:12]), _age(fleet.at, h.last_success),
             _age(fleet.at, h.last_run), _one(h.refusal or "-")) for h in fleet.hosts]
    widths = [max([cell_len(c) for c in col], default=0) for col in zip(head, *rows)]
    title = f"pull fleet (revision {fleet.revision[:12] if fleet.revision else 'unknown'})"
    parts, spans, at = [title], [Span(0, len(title), "italic")], len(title)
    for i, row in enumerate([head, *rows]):
        line = [" "]
        for n, (cell, width) in enumerate(zip(row, widths)):
            if n == 1:  # the state's colour, or the header's bold
                start = at + 1 + sum(len(c) for c in line)
                spans.append(Span(start, start + len(cell), "bold" if i == 0 else _STYLE[cell]))
            line.append(cell if n == len(row) - 1 else cell + " " * (width - cell_len(cell) + 2))
        text = "".join(line)
        if i == 0:
            spans.append(Span(at + 1, at + 1 + len(text), "bold"))
        parts.append(text)
        at += 1 + len(text)
    return Text("\n".join(parts), spans=spans, no_wrap=True, end="")


def to_json(fleet: Fleet) -> dict:
    return {"revision": fleet.revision, "exit_code": fleet.exit_code,
            "hosts": {h.host: {"verdict": h.verdict, "revision": h.revision, "status": h.status,
                               "last_run": h.last_run, "last_success": h.last_success,
                               "last_refusal": h.refusal, "notes": h.notes} for h in fleet.hosts}}


def note_lines(fleet: Fleet) -> list[str]:
    """One line a note: the host, then why its row is unreadable or what of it was not taken."""
    return [f"{_one(h.host)}: {h.verdict + ': ' if h.verdict == 'unreadable' else ''}{n}"
            for h in fleet.hosts for n in h.notes]
