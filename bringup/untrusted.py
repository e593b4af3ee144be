"""Guarded readers of what hosts, HTTP servers and saved files hand bringup: numbers, JSON, HTTP bodies.

Everything here treats its input as hostile (issue 40 item 6, item 3):

- :func:`number`: one value (a JSON number, or text a tool printed) as a finite ``int``/``float`` inside a
  declared range, or :class:`Unreadable`.  ``NaN``, ``Infinity``, ``1e308`` against a GB/s limit, a
  10^400-digit count, ``-3`` requests, ``true`` or ``"12"`` where a number was meant: never read as a figure
  (never a PASS), always "unreadable".
- :func:`loads`: JSON text as a document, or :class:`Unreadable` with one line: ``NaN``/``Infinity`` refused
  (JSON has none; Python's json would take them), integers of more than :data:`DIGITS_MAX` digits refused before
  Python converts them (``int``'s own limit raises ValueError at 4,300 digits), nesting deeper than
  :data:`DEPTH_MAX` refused before the parser recurses (100,000 ``[`` ends in RecursionError otherwise).
  A key given twice in one object is refused (``json`` keeps the last).
- :func:`http_get`: an HTTP body read with a size cap and one deadline for the whole answer (urllib's timeout
  bounds each socket read only: a server dripping one byte a second would hold it for ever), or
  :class:`HttpError`.
- :func:`future`: a saved result's time beyond now and a small clock-skew allowance.

Nothing here imports the rest of bringup (a leaf: every layer may use it).
"""
from __future__ import annotations

import json
import math
import re
import threading
import time
from datetime import datetime, timezone
from typing import Any

__all__ = ["Unreadable", "HttpError", "number", "text_number", "loads", "keys_once", "http_get", "future",
           "CLOCK_SKEW_S", "DEPTH_MAX", "DIGITS_MAX"]

#: The deepest JSON nesting read (bringup's own documents nest a handful of levels; DCGM's about eight).
DEPTH_MAX = 64
#: The longest integer literal read (a 64-bit counter has 20 digits; nanosecond sums of a day, 14).
DIGITS_MAX = 40
#: How far a saved result's time may lie ahead of this machine's clock (two machines' clocks disagree a little).
CLOCK_SKEW_S = 300


class Unreadable(ValueError):
    """A value, document or answer that cannot be what the host or file should have written; its message is
    one line saying why (the caller names where it came from)."""


class HttpError(Unreadable):
    """An HTTP answer that did not come whole within the deadline and the cap (``status`` the HTTP status
    when the server answered an error, else None: unreachable, too slow, too large)."""

    def __init__(self, message: str, status: int | None = None, unreachable: bool = False, body: bytes = b"",
                 reason: str = ""):
        super().__init__(message)
        self.status, self.unreachable, self.body, self.reason = status, unreachable, body, reason


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def number(value: Any, *, lo: float | None = None, hi: float | None = None, integer: bool = False,
           what: str = "value") -> int | float:
    """``value`` (a JSON number: ``int``/``float``, never ``bool`` or text) when finite and within
    ``lo``..``hi``; ``integer``: a whole number (an ``int``, or a float with no fraction, returned as ``int``).
    Else :class:`Unreadable` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unreadable(f"{what} {_shown(value)} is not a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unreadable(f"{what} {_shown(value)} is not a finite number")
        if integer:
            if value != int(value):
                raise Unreadable(f"{what} {_shown(value)} is not a whole number")
            value = int(value)
    if lo is not None and value < lo or hi is not None and value > hi:
        bounds = f"{lo:g}..{hi:g}" if lo is not None and hi is not None else \
            f"at least {lo:g}" if lo is not None else f"at most {hi:g}"
        raise Unreadable(f"{what} {_shown(value)} is out of range ({bounds})")
    return value


_DECIMAL = re.compile(r"[+-]?(\d{1,40}(\.\d{0,40})?|\.\d{1,40})([eE][+-]?\d{1,3})?")
_WHOLE = re.compile(r"[+-]?\d{1,40}")


def text_number(text: Any, *, lo: float | None = None, hi: float | None = None, integer: bool = False,
                what: str = "value") -> int | float:
    """A number a tool printed (``"71"``, ``"1.5"``, ``" 0x40"`` is not one): plain decimal digits only, never
    ``nan``/``inf``/``1_000``, at most 40 digits, then as :func:`number`."""
    s = str(text if text is not None else "").strip()
    if integer:
        if not _WHOLE.fullmatch(s):
            raise Unreadable(f"{what} {_shown(s)} is not a whole number")
        return number(int(s), lo=lo, hi=hi, integer=True, what=what)
    if not _DECIMAL.fullmatch(s):
        raise Unreadable(f"{what} {_shown(s)} is not a number")
    return number(float(s), lo=lo, hi=hi, what=what)


def _constant(name: str) -> Any:
    raise Unreadable(f"{name} is not a JSON number")


def _int(text: str, digits: int = DIGITS_MAX) -> int:
    if len(text.lstrip("-")) > digits:
        raise Unreadable(f"an integer of {len(text.lstrip('-'))} digits (at most {digits} are read)")
    return int(text)


def _float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise Unreadable(f"{_shown(text)} is not a finite number")
    return v


# A string, or one left open to the end of the text: the match never fails once begun, so it never starts
# again at each later quote (which made an open string of escaped quotes quadratic).
_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"?', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (strings left out): linear, no recursion."""
    deepest = depth = 0
    for m in _BRACKET.finditer(_STRING.sub("", text)):
        if m.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > DEPTH_MAX:
                    break
        else:
            depth -= 1
    return deepest


def keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s ``object_pairs_hook`` that refuses (:class:`Unreadable`, a ValueError) a key given twice."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise Unreadable(f"the key {_shown(twice)} is given twice (which one counts is not known)")
    return doc


def loads(text: str | bytes, *, what: str = "JSON", max_bytes: int | None = None, raw: bool = False,
          nan: bool = False, unique: bool = True, end: bool = False, digits: int = DIGITS_MAX) -> Any:
    """``text`` as a JSON document, or :class:`Unreadable` with one line (``what`` leads it): not JSON,
    larger than ``max_bytes``, NaN/Infinity, an integer of more than :data:`DIGITS_MAX` digits, nesting deeper
    than :data:`DEPTH_MAX`.  ``raw``: the first document in ``text`` (what follows is ignored, as
    ``JSONDecoder.raw_decode`` does).  ``nan``: NaN and Infinity are read as floats (a file bringup's own
    ``json.dumps`` wrote, whose judged figures the caller checks with :func:`number`).  ``unique`` (the default): a
    key given twice in one object is refused (``json`` keeps the last: a host's "Fail" then "Pass" read as a
    Pass); ``unique=False`` only where a source's own rules take the last.  ``end`` (with ``raw``):
    ``(document, where it ends in text)``, for a caller that looks at what follows it.  ``digits``: the longest
    integer read (at most 4,000: Python's ``int`` refuses 4,300 with its own advice), for a caller that names a
    longer-than-real number itself (a saved fact "is a 400-digit number")."""
    if isinstance(text, bytes):
        if max_bytes is not None and len(text) > max_bytes:
            raise Unreadable(f"{what}: larger than {max_bytes} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise Unreadable(f"{what}: not UTF-8") from None
    if max_bytes is not None and len(text) > max_bytes:
        raise Unreadable(f"{what}: larger than {max_bytes} bytes")
    if _depth(text) > DEPTH_MAX:
        raise Unreadable(f"{what}: nested more than {DEPTH_MAX} levels deep (not a document bringup reads)")
    digits = min(digits, 4000)
    dec = json.JSONDecoder(parse_constant=None if nan else _constant,
                           parse_int=_int if digits == DIGITS_MAX else lambda t: _int(t, digits),
                           parse_float=float if nan else _float, object_pairs_hook=keys_once if unique else None)
    try:
        if raw:
            doc, stop = dec.raw_decode(text)
            return (doc, stop) if end else doc
        return dec.decode(text)
    except Unreadable as e:
        raise Unreadable(f"{what}: {e}") from None
    except json.JSONDecodeError as e:
        raise Unreadable(f"{what}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise Unreadable(f"{what}: not JSON ({type(e).__name__})") from None


def future(when: datetime, now: datetime | None = None, skew_s: float = CLOCK_SKEW_S) -> bool:
    """Whether ``when`` (aware) lies ahead of ``now`` by more than ``skew_s``: a result no one measured yet."""
    now = now or datetime.now(timezone.utc)
    return (when - now).total_seconds() > skew_s


def http_get(url: str, *, max_bytes: int, deadline_s: float, what: str = "the server",
             headers: dict[str, str] | None = None, data: bytes | None = None, method: str | None = None) -> bytes:
    """The body of ``GET url`` (``data``/``method``: a POST): at most ``max_bytes``, the whole answer (connect,
    headers, body) within ``deadline_s``.  :class:`HttpError` otherwise: ``status`` set when the server
    answered an HTTP error (``body`` its first 64 KiB, ``reason`` its reason phrase), ``unreachable`` when it
    did not answer (refused, reset, silent)."""
    import urllib.error
    import urllib.request

    box: dict[str, Any] = {}
    stop = threading.Event()
    resp: list[Any] = []
    start = time.monotonic()

    def fetch() -> None:
        try:
            req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
            r = urllib.request.urlopen(req, timeout=max(0.1, deadline_s))
            resp.append(r)
            with r:
                chunks, n = [], 0
                while not stop.is_set():
                    left = deadline_s - (time.monotonic() - start)
                    if left <= 0:
                        break
                    chunk = r.read1(min(65536, max_bytes + 1 - n))
                    if not chunk:
                        box["body"] = b"".join(chunks)
                        return
                    chunks.append(chunk)
                    n += len(chunk)
                    if n > max_bytes:
                        box["error"] = HttpError(f"{what} answered more than {max_bytes} bytes (at most "
                                                 f"{max_bytes} are read)")
                        return
        except urllib.error.HTTPError as e:
            try:
                body = e.read(65536) or b""
            except Exception:  # noqa: BLE001 - an error body that does not come is just empty
                body = b""
            box["error"] = HttpError(f"{what} answered HTTP {e.code}", status=e.code, body=body,
                                     reason=str(e.reason or "")[:200])
        except (urllib.error.URLError, OSError, ValueError) as e:
            why = getattr(e, "reason", None) or e
            box["error"] = HttpError(f"{what} did not answer ({why})", unreachable=True)
        except Exception as e:  # noqa: BLE001 - http.client's own (a status line that is not HTTP): one line
            box["error"] = HttpError(f"{what} answered no HTTP ({type(e).__name__})", unreachable=True)

    t = threading.Thread(target=fetch, daemon=True, name="bringup-http-get")
    t.start()
    t.join(deadline_s + 0.5)
    stop.set()
    if "body" in box:
        return box["body"]
    if "error" in box:
        raise box["error"]
    for r in resp:  # still reading: close its socket so the thread ends now, not at the server's pace
        try:
            r.close()
        except Exception:  # noqa: BLE001 - closing what is being read may raise anything; it is given up on
            pass
    raise HttpError(f"{what} did not answer whole within {deadline_s:g} s (too slow, or still sending)",
                    unreachable=True)
