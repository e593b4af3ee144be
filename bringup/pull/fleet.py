"""Where a pull-mode fleet stands, read from Prometheus's HTTP API (``invoke fleet``): each host's applied
revision, how old its last success is, the state of its last run, and which hosts lag or fail.

One instant query (``/api/v1/query`` of ``{__name__=~"bringup_pull_.+"}``) returns every host's series that
:mod:`bringup.pull.record` writes and the node exporter serves; this module reads them into one row a host.
The fleet's revision is the one applied by the host whose success is the newest (or ``--revision``); a host
on another one lags.  Exit codes as drift's: 0 every host current, 2 a host lags, failed or refused, 4 a
host stopped reporting (no run within ``stale_s``) or Prometheus does not answer, 1 bad input.
"""
from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InputError, Unreachable
from ..untrusted import CLOCK_SKEW_S, HttpError, Unreadable, http_get, loads, number

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["HostState", "Fleet", "query", "summarize", "render_table", "to_json", "QUERY"]

QUERY = '{__name__=~"bringup_pull_.+"}'
#: Seconds an answer of Prometheus may take (the whole answer: a server that drips is given up on then).
HTTP_TIMEOUT_S = 20
#: The largest answer read (a series is about 300 bytes: 200,000 series of a thousand hosts fit).
ANSWER_MAX = 64 << 20


@dataclass
class HostState:
    """One host's row."""

    host: str
    revision: str | None = None
    status: str | None = None  # the last run's: applied, failed, refused, error
    last_run: float | None = None
    last_success: float | None = None
    refusal: str | None = None  # the last refusal's reason
    #: ok | lagging | failed | refused | error | stale
    verdict: str = "ok"


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
        doc = loads(body, what=f"Prometheus at {url}: /api/v1/query's answer")
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
    for s in series:
        labels, value = _sample(s)
        if labels is None:
            continue
        name, host = labels.get("__name__", ""), labels.get("host")
        if not host:
            continue
        h = hosts.setdefault(host, HostState(host))
        if value is None:
            continue  # unreadable (NaN, +Inf, 1e308 s, text): the row stays as unknown as without it
        if name == "bringup_pull_applied_info" and value == 1:
            h.revision = labels.get("revision") or None
        elif name == "bringup_pull_status" and value == 1:
            h.status = labels.get("status")
        elif name == "bringup_pull_last_run_timestamp_seconds":
            h.last_run = value if value <= now + CLOCK_SKEW_S else None  # a run in the future never happened
        elif name == "bringup_pull_last_success_timestamp_seconds":
            h.last_success = value if value <= now + CLOCK_SKEW_S else None
        elif name == "bringup_pull_last_refusal_info" and value == 1:
            h.refusal = labels.get("reason")
    newest = max((h for h in hosts.values() if h.revision and h.last_success), key=lambda h: h.last_success,
                 default=None)
    wanted = revision or (newest.revision if newest else None)
    for h in hosts.values():
        if h.last_run is None or now - h.last_run > stale_s:
            h.verdict = "stale"
        elif h.status in ("failed", "refused", "error"):
            h.verdict = h.status
        elif wanted and not (h.revision or "").startswith(wanted):
            h.verdict = "lagging"
    return Fleet(sorted(hosts.values(), key=lambda h: h.host), wanted, now)


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
    s = max(0, int(now - then))
    return f"{s // 86400}d {s % 86400 // 3600}h" if s >= 86400 else (
        f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s")


_STYLE = {"ok": "green", "lagging": "yellow", "failed": "red", "refused": "red", "error": "red", "stale": "red"}


def render_table(fleet: Fleet) -> Table:
    from rich.markup import escape
    from rich.table import Table

    t = Table("host", "state", "revision", "last success", "last run", "last refusal", box=None,
              title=escape(f"pull fleet (revision {fleet.revision[:12] if fleet.revision else 'unknown'})"))
    for h in fleet.hosts:
        # Host names, revisions and reasons are labels any host's textfile may write: never markup.
        t.add_row(escape(h.host), f"[{_STYLE[h.verdict]}]{h.verdict}[/]", escape((h.revision or "-")[:12]),
                  _age(fleet.at, h.last_success), _age(fleet.at, h.last_run), escape(h.refusal or "-"))
    return t


def to_json(fleet: Fleet) -> dict:
    return {"revision": fleet.revision, "exit_code": fleet.exit_code,
            "hosts": {h.host: {"verdict": h.verdict, "revision": h.revision, "status": h.status,
                               "last_run": h.last_run, "last_success": h.last_success,
                               "last_refusal": h.refusal} for h in fleet.hosts}}
