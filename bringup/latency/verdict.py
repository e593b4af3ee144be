"""A saved benchmark result read back and judged: where results are kept (:data:`REPORT_DIR`, the index of
``--out`` folders), the newest result of a host (:func:`latest`) and the latency line's verdict on it
(:func:`acceptance`), which refuses a damaged or future-dated result as unreadable.  Cut from
bringup/latency/results.py (issue 43 item 2): the checklist reads results through this module alone, without the
writing, tables and plots of bringup/latency/results.py.
"""
from __future__ import annotations

import glob
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import printable
from ..untrusted import Unreadable, loads
from ..userfile import read_capped
from .hostload import load_text

__all__ = ["latest", "acceptance", "REPORT_DIR", "INDEX", "KIND"]

REPORT_DIR = Path("reports") / "bench"
KIND = "bringup-bench"
#: Where the results of every ``--out`` folder are listed, so the checklist finds them (per host, newest last).
INDEX = REPORT_DIR / "index.json"


#: The most results of one host the index (where the results of every ``--out`` folder are listed, newest last)
#: holds: :func:`bringup.latency.results.remember` keeps this many, and only the newest of a longer list are read.
INDEX_KEEP = 50
#: The largest saved bench result or index read (a sweep's result is a few hundred kilobytes).
BENCH_MAX = 64 << 20


def _read(p: Path, folder: Path | None) -> Any:
    """The JSON of the saved file ``p``, or :class:`Unreadable` (one line): never a pipe (its read waits for a
    writer), a device (/dev/zero has no end), a file over :data:`BENCH_MAX`, or, with ``folder``, a link out of it."""
    data = read_capped(p, BENCH_MAX, Unreadable, missing="gone", unreadable="unreadable: ",
                       not_regular="not a regular file (a pipe, a device or a folder)",
                       too_large=f"larger than {BENCH_MAX >> 20} MiB", inside=folder)
    # NaN as json.dumps writes it is read (acceptance() refuses it where it would judge it).
    return loads(data, what="JSON", max_bytes=BENCH_MAX, nan=True)


def latest(host: str, reports: Path | str = REPORT_DIR, passed_over: list[Path] | None = None,
           skipped: list[tuple[Path, str]] | None = None) -> tuple[dict, Path] | None:
    """The newest benchmark result of ``host`` under ``reports``, or listed in ``reports``' index (results
    written with ``bench --out`` elsewhere), or None.  A result that finished in the future is passed over (it
    would hide every later one as the newest) and added to ``passed_over``, for the caller to name; a file that
    cannot be read as a result (no regular file, over the cap, not JSON, no time it finished) is added to
    ``skipped`` as ``(path, why)``."""
    folder = Path(reports)
    best: tuple[datetime, dict, Path] | None = None
    candidates = [(p, folder) for p in sorted(folder.glob(f"{glob.escape(host)}-*.json"))]
    index = folder / INDEX.name
    try:
        listed = _read(index, folder) if index.exists() or index.is_symlink() else {}
        listed = listed.get(host) or [] if isinstance(listed, dict) else []
        # The newest INDEX_KEEP entries, as bringup keeps them: an index listing more (200 spellings of one 60 MB
        # file, d/../x, d/../d/../x) had each read whole, minutes of reading.
        candidates += ([(Path(p), None) for p in listed if isinstance(p, str)][-INDEX_KEEP:]
                       if isinstance(listed, list) else [])
    except Unreadable as e:
        if skipped is not None:
            skipped.append((index, str(e)))
    seen: set[str] = set()
    for p, inside in candidates:
        try:
            real = os.path.realpath(p)  # one file under several names (a/../x, a link) read once
        except (OSError, ValueError):  # a NUL byte, a loop of links: read_capped says so
            real = str(p)
        if real in seen:
            continue
        seen.add(real)
        try:
            doc = _read(p, inside)
        except Unreadable as e:  # nested without end, 100,000 digits, a FIFO, /dev/zero
            if skipped is not None:
                skipped.append((p, str(e)))
            continue
        if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("host") != host:
            continue
        when = _finished(doc)
        if when is None:
            # No time, no order: a "finished" that is no time would be compared as text and could hide the newest.
            if skipped is not None:
                skipped.append((p, f"finished {printable(repr(doc.get('finished')))[:60]} is no time"))
            continue
        if _ahead(when):
            if passed_over is not None:
                passed_over.append(p)
            continue
        if best is None or when > best[0]:
            best = (when, doc, p)
    return best[1:] if best else None


def _load_text(r: dict) -> str:
    mb = f", client micro-batch {r['microbatch_us']} µs" if r.get("microbatch_us") else ""
    served = f"; served as {r['config']}" if r.get("config") else ""
    return (f"concurrency {r['concurrency']} × batch {r['batch']} ({r['items_per_s']:.0f} items/s, "
            f"window {r['window']}{mb}{served})")


#: What a saved point's figures can be: a p95 of up to a day in ms, a rate of up to 10^12 items/s, loads up to 10^6.
#: A saved median is rounded (ms to 3 decimals, items/s to 1) and its windows' min-max is not: it may fall past them
#: by that rounding (0.05 absolute, or this much relative); further outside is no measurement.
_SLACK = 1e-3
_POINT_RANGES = {"p95_ms": (0, 86_400_000), "p50_ms": (0, 86_400_000), "p99_ms": (0, 86_400_000),
                 "items_per_s": (0, 1e12), "concurrency": (1, 1e6), "batch": (1, 1e6)}

#: What a measured point (one with a p95) holds for acceptance() to judge it: a result without them is unreadable.
_POINT_NEEDS = ("concurrency", "batch", "items_per_s", "errors", "client_bound")

#: A point's figures that are counts: a batch of 1.5 rows or 2.5 requests in flight is no load a bench sent.
_WHOLE = ("concurrency", "batch")


def _finished(doc: dict) -> datetime | None:
    """When a saved bench result says it finished (aware, UTC when it names no zone); None when it says no time
    (not text, not ISO 8601, or beyond what the calendar holds in UTC)."""
    text = doc.get("finished")
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        when = datetime.fromisoformat(text)
        when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        when.astimezone(timezone.utc)  # 9999-12-31T23:59:59-23:00 lies past year 9999 in UTC
    except (ValueError, OverflowError):
        return None
    return when


def _ahead(when: datetime) -> bool:
    from ..untrusted import future

    return future(when)


def _finished_ahead(doc: dict) -> bool:
    when = _finished(doc)
    return when is not None and _ahead(when)


def _unreadable(doc: Any) -> str | None:
    """Why a saved bench result cannot be judged (None: it can): dated in the future beyond the clock-skew
    allowance, or a point's figure not a finite number in its range."""
    from ..untrusted import number

    if not isinstance(doc, dict) or not isinstance(doc.get("points", []), list):
        return "not a result document"
    # A time that is no time is shown as it is (latest() never picks such a result: it cannot be ordered).
    if _finished_ahead(doc):
        return f"finished {doc['finished']} lies in the future: not a result measured yet"
    for i, r in enumerate(doc.get("points", [])):
        if not isinstance(r, dict):
            return f"point {i} is not an object"
        spread = r.get("spread")
        if spread is not None and not isinstance(spread, dict):
            return f"point {i}'s spread is not an object"
        try:
            if spread and spread.get("repeats") is not None:
                number(spread["repeats"], lo=1, hi=1000, integer=True, what=f"point {i}'s repeats")
        except ValueError as e:
            return str(e)
        try:
            for key, (lo, hi) in _POINT_RANGES.items():
                if r.get(key) is not None:
                    number(r[key], lo=lo, hi=hi, integer=key in _WHOLE, what=f"point {i}'s {key}")
                spread = (r.get("spread") or {}).get(key) if isinstance(r.get("spread") or {}, dict) else None
                if spread is not None:
                    for end in ("min", "max"):
                        number(spread.get(end) if isinstance(spread, dict) else spread, lo=lo, hi=hi,
                               what=f"point {i}'s {key} {end}")
                    # The point's figure is the median of its windows: never outside their own min-max.
                    low, high, mid = spread["min"], spread["max"], r.get(key)
                    inside = mid is None or low - max(0.05, _SLACK * low) <= mid <= high + max(0.05, _SLACK * high)
                    if low > high or not inside:
                        return (f"point {i}'s {key} {mid} lies outside its own spread {low}-{high}: an edited or "
                                "damaged result")
        except ValueError as e:
            return str(e)
        if r.get("p95_ms") is not None:  # a measured point: what acceptance() judges it by is there
            missing = [k for k in _POINT_NEEDS if k not in r]
            if missing:
                return f"point {i} has no {', '.join(missing)}"
            if not isinstance(r["client_bound"], bool):
                return f"point {i}'s client_bound is {str(r['client_bound'])[:20]!r}, not true or false"
            try:
                number(r["errors"], lo=0, hi=1e12, integer=True, what=f"point {i}'s errors")
            except ValueError as e:
                return str(e)
        if r.get("unstable") is not None and not isinstance(r["unstable"], bool):
            return f"point {i}'s unstable is {str(r['unstable'])[:20]!r}, not true or false"
    return None


def acceptance(doc: dict, slo: float | None, load: dict | None = None) -> dict:
    """PASS/FAIL/WARN of one result against ``latency_slo_p95_ms``, on each point's **median** p95.

    Only points of the model as deployed count (a window sweep's other windows
    are not what the host serves), and never client-bound or failing ones.
    With ``load`` ({concurrency, batch}) that point decides; otherwise the host
    passes at the heaviest throughput whose p95 meets the SLO over its whole
    spread (a point unstable, or whose spread straddles the SLO, only when no
    point meets it outright), and fails when no measured load meets it.

    A point that is **unstable** (its windows did not agree, :mod:`.repeats`)
    or whose min-max p95 has the SLO inside it is WARN, not PASS/FAIL: another
    run could give the other verdict.  A result saved with one window per point
    (``--repeats 1``, or before spreads were kept) is WARN too: one sample of a
    shared machine is no verdict (the H200's 17.0 and 12.4 ms an hour apart);
    it says the median it would have judged.  ``kind`` says which: ``measured``,
    ``unstable``, ``inside``, ``single``, ``no-slo``, ``no-point``.
    """
    from .repeats import repeated, span

    when = doc.get("finished", "?")
    bad = _unreadable(doc)
    if bad:
        # Figures no bench measures (NaN, -1 ms, 1e308 items/s) or a result dated ahead: never a verdict.
        return {"status": "WARN", "measured": when, "slo_p95_ms": slo, "point": None, "kind": "unreadable",
                "seen": f"not checked: the saved result is unreadable ({bad})"}
    pts = [r for r in doc.get("points", []) if r.get("p95_ms") is not None]
    deployed = [r for r in pts if r.get("deployed")] or pts
    good = [r for r in deployed if not r["client_bound"] and not r["errors"] and not r.get("reloaded")]
    out = {"status": "WARN", "measured": when, "slo_p95_ms": slo, "point": None, "kind": "no-point"}
    if not good:
        why = "every point was client-bound, failed or spanned a reload" if deployed else "no point measured"
        out["seen"] = f"measured {when}, but {why}: not a server latency"
        return out

    def sure(r) -> bool:    # meets the SLO whatever window of it another run would repeat
        return not r.get("unstable") and span(r, "p95_ms")[1] <= slo

    if load:
        match = [r for r in good if r["concurrency"] == int(load.get("concurrency", -1))
                 and r["batch"] == int(load.get("batch", 1))]
        if not match:
            out["seen"] = f"measured {when}, but not at the acceptance load {load}"
            return out
        r = match[0]
    else:
        robust = [r for r in good if slo is not None and sure(r)]
        meeting = [r for r in good if slo is not None and r["p95_ms"] <= slo]
        r = (max(robust, key=lambda r: r["items_per_s"]) if robust else
             max(meeting, key=lambda r: r["items_per_s"]) if meeting else min(good, key=lambda r: r["p95_ms"]))
    lo, hi = span(r, "p95_ms")
    out["point"] = {k: r.get(k) for k in ("window", "batch", "concurrency", "p95_ms", "items_per_s", "microbatch_us",
                                          "config", "unstable")}
    out["point"].update(p95_min_ms=lo, p95_max_ms=hi, repeats=(r.get("spread") or {}).get("repeats", 1))
    basis = (f"median of {r['spread']['repeats']} windows, p95 {lo:.1f}-{hi:.1f} ms" if repeated(r) else
             "one window per point: no spread known")
    beside = load_text(doc, [r])
    beside = f"; during it: {beside}" if beside else ""
    if slo is None:
        out["kind"] = "no-slo"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms ({basis}) at {_load_text(r)}, measured {when}; "
                       "no latency_slo_p95_ms set")
        return out
    if r.get("unstable"):
        out["kind"] = "unstable"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms against SLO {slo:g} ms at {_load_text(r)} is UNSTABLE: "
                       f"{r.get('unstable_why') or 'its windows did not agree'}; no verdict, measured {when}{beside}")
        return out
    if repeated(r) and lo <= slo < hi:
        out["kind"] = "inside"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms ({basis}): the SLO {slo:g} ms lies inside the spread at "
                       f"{_load_text(r)}; another run could pass or fail, measured {when}{beside}")
        return out
    ok = r["p95_ms"] <= slo
    if not repeated(r):
        out["kind"] = "single"
        out["seen"] = (f"p95 {r['p95_ms']:.1f} ms {'≤' if ok else '>'} SLO {slo:g} ms on {basis} at "
                       f"{_load_text(r)}: one sample is no verdict, measured {when}{beside}")
        return out
    out["kind"] = "measured"
    out["status"] = "PASS" if ok else "FAIL"
    rel = "≤" if ok else ">"
    best = "" if ok or load else " (lowest p95 measured)"
    out["seen"] = f"p95 {r['p95_ms']:.1f} ms {rel} SLO {slo:g} ms ({basis}) at {_load_text(r)}{best}, measured {when}"
    return out
