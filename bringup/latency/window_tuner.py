"""The adaptive batching window: the guide's controller, run against production traffic.

Python's standard library only: this one file is shipped to a host
(``/usr/local/lib/bringup/window_tuner.py``) and run there by ``python3`` as the
``bringup-window-tuner`` systemd service; ``invoke tune-window --follow`` runs the
very same :class:`Controller` from the control machine against the host's ports.

Over 500 lines because this one file is the program the host runs: the role uploads it alone and systemd starts
it with the host's ``python3`` (no bringup, no package, no import path on the host), so the rule, Triton's
readers, the record's guards, the config rewrite and the service's main loop must travel together.  Cutting it
would mean shipping and versioning a package on every host (issue 43 item 2 weighed it and kept one file).

Every interval (default 10 s) it reads Triton's own numbers for each model and
generates no load:

* p95 of request latency: ``nv_inference_request_summary_us{quantile="0.95"}``
  from the metrics endpoint (Triton started with
  ``--metrics-config=summary_latencies=true``).  Triton 2.51's summary
  quantiles are over a sliding window (prometheus-cpp's default: 60 s in 5 age
  buckets; a quantile reads ``Nan`` once a minute passes without requests),
  while ``_count``/``_sum`` are cumulative.  The quantile is used as it is: no
  other p95 exists in Triton (the statistics API and the counters give sums,
  i.e. means), and a delta of cumulative sums would be a mean, not a p95.  The
  ``_count`` delta tells whether the interval had traffic at all (it survives a
  model reload; the statistics API's counters restart from zero on one).
* queue time per request: the statistics API (``GET /v2/models/<m>/stats``),
  the delta of ``queue.ns`` over the delta of ``success.count`` since the
  previous interval; a counter lower than before means the model was reloaded
  and the new counters are the delta.

Then :func:`next_window` (p95 below target: +50 µs, above: -50 µs, 200..1500 µs;
a breach in this and the previous interval while queue time per request rises:
-150 µs at once).  A change is applied with Triton's model control API (``POST
/v2/repository/models/<m>/load`` with a config override; Triton must run with
``--model-control-mode=explicit``): the new configuration is loaded beside the
old one, which serves until the swap, so no request is dropped.  Each interval
is one log line and one JSON line; the window in force is recorded atomically
in ``/etc/bringup/triton-window.json`` (``{model: {window_us, when, why}}``),
which the triton role reads so that a later provision keeps it.
"""
from __future__ import annotations

import argparse
import errno
import hashlib
import json
import math
import os
import re
import signal
import stat
import sys
import tempfile
import time
from datetime import datetime, timezone

__all__ = ["WINDOW_MIN", "WINDOW_MAX", "STEP", "TIGHTEN", "RECORD", "SERVING_KEYS", "next_window", "queue_rising",
           "parse_summary", "stats_counters", "proto_uint", "window_of", "ready_of", "with_window", "record_text", "read_record",
           "is_record", "record_path_problem", "record_state_problem", "local_record_problem", "TritonHTTP",
           "Controller", "TunerError", "Unreadable", "number", "text_number", "Stopping", "main"]

WINDOW_MIN, WINDOW_MAX = 200, 1500
STEP = 50
TIGHTEN = 150
#: Queue time per request "rises" when it grows by more than this share over the previous interval.
QUEUE_RISE = 0.05
RECORD = "/etc/bringup/triton-window.json"
#: What the triton role's config.pbtxt says of a tuned window (the tuner writes the same, so that a
#: provision right after a step changes nothing).
TUNED_SOURCE = f"tuned on this host ({RECORD}); pin it with triton_max_queue_delay_microseconds"
LOG = "/var/log/bringup/window-tuner.jsonl"
P95_METRIC = "nv_inference_request_summary_us"


class TunerError(Exception):
    """Triton refused or could not be read; one line."""


class Unreachable(TunerError):
    """Triton's HTTP or metrics port does not answer."""


class Unreadable(TunerError, ValueError):
    """A number or document Triton handed over that cannot be Triton's (``+Inf`` ms, ``-5`` requests, a window of
    ``1e308`` µs, a statistics answer that is a list): one line naming what and where.  The interval is skipped
    (no reload, the window kept), as for a Triton that does not answer.  A ValueError too, so that the control
    machine's readers of a model config (:func:`window_of` through ``serving_of``) name it as unreadable."""


# --------------------------------------------------------------------------- guarded numbers
# A copy of bringup.untrusted.number/text_number (this file runs on hosts alone, standard library only); the
# unit tests hold the two to the same answers.

#: The longest p95 read: an hour (Triton's request latencies are milliseconds; more is no measurement).
P95_MAX_US = 3_600_000_000
#: A counter of Triton's (a uint64).
COUNTER_MAX = 2 ** 64 - 1
#: The widest window read from a served config: an hour (Triton's own guide stays below a few ms, but a window
#: of seconds is still a window, one the controller steps back into WINDOW_MIN..WINDOW_MAX; more is no window).
WINDOW_READ_MAX = 3_600_000_000
#: The longest integer literal read in Triton's JSON (a uint64 counter has 20 digits).
DIGITS_MAX = 40


def _shown(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * DIGITS_MAX:
        return f"an integer of about {round(value.bit_length() * 0.30103)} digits"   # repr fails past 4,300
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _within(value, shown: str, lo, hi, integer: bool, what: str):
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unreadable(f"{what} {shown} is not a finite number")
        if integer:
            if value != int(value):
                raise Unreadable(f"{what} {shown} is not a whole number")
            value = int(value)
    if lo is not None and value < lo or hi is not None and value > hi:
        bounds = f"{lo:g}..{hi:g}" if lo is not None and hi is not None else \
            f"at least {lo:g}" if lo is not None else f"at most {hi:g}"
        raise Unreadable(f"{what} {shown} is out of range ({bounds})")
    return value


def number(value, *, lo=None, hi=None, integer: bool = False, what: str = "value"):
    """``value`` (a JSON number: ``int``/``float``, never ``bool`` or text) when finite and within ``lo``..``hi``;
    ``integer``: a whole number (returned as ``int``).  Else :class:`Unreadable` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unreadable(f"{what} {_shown(value)} is not a number")
    return _within(value, _shown(value), lo, hi, integer, what)


_DECIMAL = re.compile(r"[+-]?(\d{1,40}(\.\d{0,40})?|\.\d{1,40})([eE][+-]?\d{1,3})?")
_WHOLE = re.compile(r"[+-]?\d{1,40}")


def text_number(text, *, lo=None, hi=None, integer: bool = False, what: str = "value"):
    """A number Triton printed (``"11790"``, ``"1.179e+04"``): plain decimal digits only, never ``nan``/``+Inf``,
    at most 40 digits, then as :func:`number`, the text shown as it was.  ``integer``: a whole number, written
    with digits or as a float without a fraction (``5e+01``)."""
    s = str(text if text is not None else "").strip()
    if integer and _WHOLE.fullmatch(s):
        return _within(int(s), _shown(s), lo, hi, True, what)
    if not _DECIMAL.fullmatch(s):
        raise Unreadable(f"{what} {_shown(s)} is not a number")
    return _within(float(s), _shown(s), lo, hi, integer, what)


# --------------------------------------------------------------------------- the rule


def next_window(window_us: int, p95_ms: float, target_ms: float, queue_rising: bool = False) -> tuple[int, str]:
    """The window for the next interval, and why."""
    if p95_ms > target_ms:
        step = TIGHTEN if queue_rising else STEP
        why = f"p95 {p95_ms:.1f} ms > {target_ms:g} ms" + (", queue time rising" if queue_rising else "")
        new = window_us - step
    else:
        why = f"p95 {p95_ms:.1f} ms <= {target_ms:g} ms"
        new = window_us + STEP
    new = max(WINDOW_MIN, min(WINDOW_MAX, new))
    return new, why


def queue_rising(prev: dict | None, p95_ms: float, queue_us: float | None, target_ms: float) -> bool:
    """A sustained breach with rising queue time: this and the previous interval with traffic both above
    the target, and queue time per request up by more than :data:`QUEUE_RISE` since then."""
    if prev is None or queue_us is None or prev.get("queue_us") is None or prev.get("p95_ms") is None:
        return False
    return prev["p95_ms"] > target_ms and p95_ms > target_ms and queue_us > prev["queue_us"] * (1 + QUEUE_RISE)


# --------------------------------------------------------------------------- Triton's numbers

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
#: The longest metrics line read (Triton's are a few hundred characters): the label pattern's work grows with
#: the square of a line's length where it holds many unterminated labels.
LINE_MAX = 4096


def parse_summary(text: str, model: str, quantile: str = "0.95", metric: str = P95_METRIC
                  ) -> tuple[float | None, int]:
    """``(quantile in µs, request count)`` of ``model`` from Prometheus text.

    Versions are combined: the highest quantile (the conservative one) and the
    summed ``_count``.  The quantile is None when Triton reports ``Nan`` (no
    request within its sliding window).  A model Triton reports nothing for
    has count 0; no summary at all is a :class:`TunerError` (Triton was started
    without ``--metrics-config=summary_latencies=true``).  A quantile or count that is no reading
    (``+Inf``, ``-5``, ``1e308``, text) is :class:`Unreadable`, never a figure to step on.
    """
    q: float | None = None
    count = 0
    family = False
    for line in text.splitlines():
        if line.startswith(f"# TYPE {metric} "):
            family = True
        m = _SAMPLE.match(line)
        if not m or not m.group(1).startswith(metric):
            continue
        if len(line) > LINE_MAX:
            raise TunerError(f"Triton's metrics: a {metric} line of {len(line)} characters (at most {LINE_MAX}): "
                             "not Triton's")
        labels = dict(_LABEL.findall(m.group(2) or ""))
        if labels.get("model") != model:
            continue
        name, value = m.group(1), m.group(3)
        if name == metric + "_count":
            count += text_number(value, lo=0, hi=COUNTER_MAX, integer=True,
                                 what=f"Triton's metrics: {model}'s request count ({name})")
        elif name == metric and labels.get("quantile") == quantile and value.lower() != "nan":  # Nan: none yet
            v = text_number(value, lo=0, hi=P95_MAX_US,
                            what=f"Triton's metrics: {model}'s p{_percent(quantile)} ({metric} quantile {quantile}, µs)")
            q = v if q is None else max(q, v)
    if not family:
        raise TunerError(f"Triton's metrics have no {metric}: start Triton with "
                         "--metrics-config=summary_latencies=true")
    return q, count


def _percent(quantile: str) -> str:
    try:
        return f"{float(quantile) * 100:g}"
    except ValueError:
        return quantile


def proto_uint(v):
    """A uint64 as protobuf's JSON writes it (its digits as text: Triton's gRPC form), else ``v`` as it is."""
    if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 20:
        return int(v)
    return v


def _counter(v, what: str) -> int:
    """A counter of the statistics API: a whole number 0..2^64-1 (an int, or its digits as text); else
    Unreadable (1e308, -5, "many" or 10^400 is no counter of Triton's)."""
    return number(proto_uint(v), lo=0, hi=COUNTER_MAX, integer=True, what=what)


def _object(v, what: str) -> dict:
    if not isinstance(v, dict):
        raise Unreadable(f"{what} {_shown(v)} is not a JSON object")
    return v


def stats_counters(doc: dict, model: str) -> tuple[int, int]:
    """``(successful requests, queue ns)`` of ``model`` from a statistics API answer, versions summed; an
    answer of another shape or a counter that is none is :class:`Unreadable`, naming the part."""
    where = f"Triton's statistics of {model}:"
    stats = _object(doc, f"{where} the answer").get("model_stats")
    if stats is None:
        return 0, 0
    if not isinstance(stats, list):
        raise Unreadable(f"{where} model_stats {_shown(stats)} is not a list")
    ok = queue = 0
    for i, m in enumerate(stats):
        if _object(m, f"{where} model_stats[{i}]").get("name") != model:
            continue
        st = _object(m.get("inference_stats") or {}, f"{where} inference_stats")
        ok += _counter(_object(st.get("success") or {}, f"{where} success").get("count") or 0,
                       f"{where} success.count")
        queue += _counter(_object(st.get("queue") or {}, f"{where} queue").get("ns") or 0, f"{where} queue.ns")
    return ok, queue


def window_of(config: dict) -> int | None:
    """The dynamic batching window in µs (0..:data:`WINDOW_READ_MAX`); None when the model has no dynamic
    batching.  A config of another shape or a window that is none (``-5``, ``"abc"``, ``1e308``) is
    :class:`Unreadable`: never stepped from, never loaded."""
    db = _object(config, "Triton's model config: the answer").get("dynamic_batching")
    if db is None:
        return None
    v = _object(db, "Triton's model config: dynamic_batching").get("max_queue_delay_microseconds", 0)
    return number(proto_uint(v), lo=0, hi=WINDOW_READ_MAX, integer=True,
                  what="Triton's model config: max_queue_delay_microseconds")


def model_name_problem(name) -> str | None:
    """Why ``name`` (a model's, from Triton's index or a flag) cannot name a folder of the model repository: a
    model is one folder there, so a name is one path component (no ``/``, not ``.`` or ``..``, no control
    character or NUL); else None.  A name that is none is never joined into a path (``<repository>/../../x``)."""
    if not isinstance(name, str) or not name or len(name) > 256:
        return f"{_shown(name)} is not a model name"
    if "/" in name or name in (".", "..") or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return (f"{_shown(name)} is not a model name (a folder of the model repository: no '/', '.', '..' or "
                "control character)")
    return None


def ready_of(index) -> list[str]:
    """The models Triton's repository index (``POST /v2/repository/index``) says are READY; an index of
    another shape is :class:`Unreadable`."""
    where = "Triton's repository index:"
    if not isinstance(index, list):
        raise Unreadable(f"{where} the answer {_shown(index)} is not a list")
    ready = set()
    for i, m in enumerate(index):
        if _object(m, f"{where} entry {i}").get("state") == "READY":
            name = m.get("name")
            if model_name_problem(name):
                raise Unreadable(f"{where} entry {i}: {model_name_problem(name)}")
            ready.add(name)
    return sorted(ready)


def with_window(config: dict, window_us: int | None) -> dict:
    """A copy of ``config`` with the window set (None: dynamic batching off)."""
    cfg = json.loads(json.dumps(config))
    if window_us is None:
        cfg.pop("dynamic_batching", None)
    else:
        cfg.setdefault("dynamic_batching", {})["max_queue_delay_microseconds"] = int(window_us)
    return cfg


#: The largest answer read from Triton's HTTP API or metrics (a configuration or metrics page is kilobytes).
ANSWER_MAX = 16 << 20


def read_bounded(r, seconds: float, what: str) -> bytes:
    """The body of the response ``r``: at most :data:`ANSWER_MAX` bytes, whole within ``seconds`` (urllib's
    timeout bounds each read only: a server dripping a byte a second would hold the tuner for ever).
    TimeoutError (an OSError: "does not answer") past the deadline, TunerError past the cap.  Standard
    library only: this file runs on hosts alone (bringup.untrusted.http_get is the control machine's)."""
    end = time.monotonic() + seconds
    read = getattr(r, "read1", r.read)
    got, n = [], 0
    while True:
        if time.monotonic() > end:
            raise TimeoutError(f"{what} did not come whole within {seconds:g} s")
        chunk = read(65536)
        if not chunk:
            return b"".join(got)
        n += len(chunk)
        if n > ANSWER_MAX:
            raise TunerError(f"{what} is larger than {ANSWER_MAX >> 20} MiB (not Triton's)")
        got.append(chunk)


def open_bounded(req, seconds: float):
    """``urllib.request.urlopen(req)`` whose every read of the answer, its status line and headers included, ends
    ``seconds`` after the call began: urllib's timeout bounds each socket read only, so a server dripping a header
    byte a second held the controller for ever before :func:`read_bounded` was reached.  Past the deadline a read
    raises TimeoutError (an OSError: "does not answer")."""
    import http.client
    import socket
    import urllib.request

    end = time.monotonic() + seconds

    class Socket(socket.socket):
        def recv_into(self, buffer, nbytes=0, flags=0):
            left = end - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                self.settimeout(left)
                return super().recv_into(buffer, nbytes, flags)
            except TimeoutError:
                raise TimeoutError(f"the answer did not come whole within {seconds:g} s") from None

    class Connection(http.client.HTTPConnection):
        def connect(self):
            super().connect()
            plain, self.sock = self.sock, None
            self.sock = Socket(fileno=plain.detach())
            self.sock.settimeout(max(0.001, end - time.monotonic()))

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, r):
            return self.do_open(Connection, r)

    return urllib.request.build_opener(Handler()).open(req, timeout=seconds)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > DIGITS_MAX:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {DIGITS_MAX} are read)")
    return int(text)


def _unique(pairs: list) -> dict:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {_shown(twice)} is given twice (which one counts is not known)")
    return doc


def loads_bounded(body: bytes, what: str):
    """Triton's JSON answer, or TunerError with one line: NaN/Infinity, an integer of more than
    :data:`DIGITS_MAX` digits, a key given twice or nesting thousands deep (a RecursionError) are no answer of
    Triton's."""
    try:
        return json.loads(body, parse_constant=_no_constant, parse_int=_int, object_pairs_hook=_unique)
    except (ValueError, RecursionError) as e:
        raise TunerError(f"Triton's answer to {what} is not JSON it writes ({type(e).__name__}: "
                         f"{str(e)[:80]})") from None


class TritonHTTP:
    """Triton's HTTP API and metrics endpoint, through urllib."""

    def __init__(self, http_url: str, metrics_url: str, timeout: float = 10.0):
        self.http_url, self.metrics_url, self.timeout = http_url.rstrip("/"), metrics_url, timeout

    def _call(self, path: str, body: dict | None = None, timeout: float | None = None) -> bytes:
        # urllib here, not at the top: a provision imports this module for RECORD (the triton.window fact)
        # and would pay for urllib.request, http.client and email (~30 ms) without one request.
        import urllib.error
        import urllib.request

        url = self.http_url + path
        req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with open_bounded(req, timeout or self.timeout) as r:
                return read_bounded(r, timeout or self.timeout, f"Triton's answer to {path}")
        except urllib.error.HTTPError as e:
            try:
                msg = loads_bounded(e.read(65536) or b"{}", path).get("error") or e.reason
            except (TunerError, AttributeError):
                msg = e.reason
            raise TunerError(f"Triton answered {e.code} to {path}: {msg}") from None
        except (OSError, urllib.error.URLError) as e:
            raise Unreachable(f"Triton at {self.http_url} does not answer: "
                              f"{getattr(e, 'reason', None) or e}") from None

    def config(self, model: str) -> dict:
        return loads_bounded(self._call(f"/v2/models/{model}/config"), "config")

    def stats(self, model: str) -> tuple[int, int]:
        return stats_counters(loads_bounded(self._call(f"/v2/models/{model}/stats"), "stats"), model)

    def ready_models(self) -> list[str]:
        return ready_of(loads_bounded(self._call("/v2/repository/index", {}), "/v2/repository/index"))

    def load(self, model: str, config: dict, timeout: float = 120.0) -> None:
        """Reload ``model`` with ``config`` (Triton answers once the new one serves)."""
        try:
            self._call(f"/v2/repository/models/{model}/load", {"parameters": {"config": json.dumps(config)}},
                       timeout=timeout)
        except Unreachable:
            raise
        except TunerError as e:
            hint = " (start Triton with --model-control-mode=explicit)" if "explicit" in str(e) or \
                "not allowed" in str(e) else ""
            raise TunerError(f"Triton refused to reload {model} with a new batching window: {e}{hint}") from None

    def metrics(self) -> str:
        import urllib.error
        import urllib.request

        try:
            with open_bounded(self.metrics_url, self.timeout) as r:
                return read_bounded(r, self.timeout, f"Triton's metrics at {self.metrics_url}").decode(
                    "utf-8", "replace")
        except (OSError, urllib.error.URLError) as e:
            raise Unreachable(f"Triton's metrics at {self.metrics_url} do not answer: "
                              f"{getattr(e, 'reason', None) or e}") from None


# --------------------------------------------------------------------------- the record


def read_record(text: str) -> dict:
    """The record file's ``{model: {window_us, when, why, [instance_count, max_batch_size,
    preferred_batch_size]}}``; empty text is an empty record."""
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


#: What ``invoke tune`` records of a model beside its window (the serving configuration it chose).
SERVING_KEYS = ("instance_count", "max_batch_size", "preferred_batch_size")
#: The record's name and where it may live: bringup's own file in a folder of bringup's own.
RECORD_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.json$")
RECORD_MAX_BYTES = 1 << 20


def is_record(doc) -> bool:
    """Whether ``doc`` is a record bringup wrote: ``{model: {window_us: whole number, ...}}``."""
    if not isinstance(doc, dict):
        return False
    for rec in doc.values():
        w = rec.get("window_us") if isinstance(rec, dict) else None
        if isinstance(w, bool) or not isinstance(w, int):
            return False
    return True


def record_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be the tuner's record, from its name alone (None: it may be).

    The record is bringup's own file: an absolute path, a ``*.json`` name, in a folder named ``bringup``
    (``/etc/bringup/triton-window.json``, the default); never a system file such as ``/etc/passwd``.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        return "an absolute path on the host"
    if "\n" in path or "\0" in path or "/../" in path + "/" or "/./" in path + "/" or "//" in path:
        return "a plain absolute path (no '..', '.', '//' or newline)"
    folder, name = os.path.split(path)
    if not name:
        return f"it names a folder: give bringup's record file (like {RECORD})"
    if not RECORD_NAME.match(name):
        return f"bringup's record is a *.json file (like {RECORD}), not {name or 'a folder'}"
    if os.path.basename(folder) != "bringup":
        return f"bringup's record lives in a folder named bringup (like {os.path.dirname(RECORD)}), not {folder or '/'}"
    return None


def record_state_problem(kind: str, text: str = "") -> str | None:
    """Why the file found at the record's path is not bringup's (None: it is, or there is none).

    ``kind`` is what is there: ``none``, ``file`` (``text`` its start), ``folder``, ``link``, ``large`` (a
    file past what is read) or ``other``.
    """
    if kind == "none":
        return None
    if kind == "folder":
        return "it is a folder, not bringup's record file"
    if kind == "link":
        return "it is a symbolic link: bringup writes its record as a regular file"
    if kind not in ("file", "large"):
        return "it is not a regular file"
    if kind == "large" or len(text.encode("utf-8", "replace")) >= RECORD_MAX_BYTES:
        return f"it is larger than {RECORD_MAX_BYTES >> 20} MiB: not a record bringup wrote"
    if not text.strip():
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: [[[... nested thousands deep
        return "it is not a record bringup wrote (not JSON): bringup never replaces a file it did not write"
    if not is_record(doc):
        return ("it is not a record bringup wrote ({model: {window_us, ...}}): bringup never replaces a file it "
                "did not write")
    return None


#: A shell probe of the record's path: what is there (none, link, folder, file, other), and a file's start.
RECORD_PROBE = ('p=%s; if [ -L "$p" ]; then echo link; elif [ -d "$p" ]; then echo folder; '
                'elif [ -f "$p" ]; then echo file; head -c ' + str(RECORD_MAX_BYTES) + ' -- "$p"; '
                'elif [ -e "$p" ]; then echo other; else echo none; fi')


def local_record_problem(path: str) -> str | None:
    """:func:`record_path_problem` and :func:`record_state_problem` of ``path`` on this machine."""
    return _local_record(path)[0]


def _local_record(path: str) -> tuple[str | None, str]:
    """Why ``path`` on this machine is no record bringup may replace (None: it may), and its text ("" when there
    is none yet), read once through :func:`read_local`."""
    why = record_path_problem(path)
    if why:
        return why, ""
    if os.path.islink(path):
        return record_state_problem("link"), ""
    if os.path.isdir(path):
        return record_state_problem("folder"), ""
    # Opened as looked at (read_local): never through a link or into a FIFO put there since, a regular file by
    # what was opened, not by the name.
    kind, text, _mode = read_local(path)
    if kind != "file":
        return (None if kind == "missing" else record_state_problem(kind)), ""
    return record_state_problem("file", text), text


def record_text(old: str, model: str, window_us: int, why: str, when: str, serving: dict | None = None) -> str:
    """The record with ``model``'s window set (other models kept; an unreadable old record is replaced).

    What else the model's entry holds (the serving configuration ``invoke tune`` chose) is kept, so the
    window controller moves the window within that configuration; ``serving`` sets it anew.
    """
    try:
        doc = read_record(old)
    except ValueError:
        doc = {}
    if not is_record(doc):
        doc = {}
    entry = dict(doc.get(model) or {})
    entry.update(window_us=int(window_us), when=when, why=why)
    if serving:
        entry.update({k: serving[k] for k in SERVING_KEYS if serving.get(k) is not None})
    doc[model] = entry
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


_DELAY = re.compile(r"(?m)^(\s*)max_queue_delay_microseconds:\s*\d+\s*$")
_SOURCE = re.compile(r"(?m)^(\s*)# The batching window: .*$")


_MBS = re.compile(r"(?m)^max_batch_size:\s*\d+\s*$")
_PREFERRED = re.compile(r"(?m)^(\s*)preferred_batch_size:\s*\[[^\]\n]*\]\s*$")
_COUNT = re.compile(r"(?m)^(\s*\{ kind: KIND_[A-Z]+ count: )\d+")


def config_text(text: str, window_us: int, serving: dict | None = None) -> str | None:
    """A config.pbtxt the triton role rendered, with the window set (and ``serving``'s instance count,
    max_batch_size and preferred sizes, as ``invoke tune`` chose them); None when it has not exactly one
    line of each to set (a config bringup did not render is never rewritten)."""
    if len(_DELAY.findall(text)) != 1:
        return None
    text = _DELAY.sub(lambda m: f"{m.group(1)}max_queue_delay_microseconds: {int(window_us)}", text)
    if serving:
        if len(_MBS.findall(text)) != 1 or len(_PREFERRED.findall(text)) != 1 or len(_COUNT.findall(text)) != 1:
            return None
        text = _MBS.sub(f"max_batch_size: {int(serving['max_batch_size'])}", text)
        sizes = ", ".join(str(int(p)) for p in serving["preferred_batch_size"])
        text = _PREFERRED.sub(lambda m: f"{m.group(1)}preferred_batch_size: [ {sizes} ]", text)
        text = _COUNT.sub(lambda m: f"{m.group(1)}{int(serving['instance_count'])}", text)
    return _SOURCE.sub(lambda m: f"{m.group(1)}# The batching window: {TUNED_SOURCE}.", text)


def manifest_of(stack_dir: str) -> str:
    """Where the triton role keeps its manifest of the files it shipped (one name, for it and the tuner)."""
    return stack_dir.rstrip("/") + "/models.manifest"


def manifest_text(text: str, rel: str, sha: str) -> str | None:
    """The triton role's manifest (``sha256  ./rel`` lines) with ``rel``'s sha256 set; None when ``rel`` is
    not listed.  A config the tuner rewrote stays bringup's own: the role removes it with its model later."""
    lines, found = text.splitlines(keepends=True), False
    for i, ln in enumerate(lines):
        sha0, sep, name = ln.rstrip("\n").partition("  ")
        if sep and len(sha0) == 64 and os.path.normpath(name) == os.path.normpath(rel):
            lines[i], found = f"{sha}  {name}\n", True
    return "".join(lines) if found else None


def _replace_local(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``path`` by a temporary file in its folder, its mode set on the open file (a chmod by name would
    follow a link swapped in under the temporary name), fsync and rename (never in place)."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


#: The most of a config.pbtxt or the role's manifest read (kilobytes each; the control machine's bound too).
LOCAL_READ_MAX = 4 << 20
#: Why a config.pbtxt or manifest is not read (:func:`read_local`), as one line's words.
NOT_READ = {"link": "is a symbolic link (bringup never reads or writes through one)",
            "other": "is not a regular file (a FIFO, a device, a folder)",
            "large": f"is larger than {LOCAL_READ_MAX >> 20} MiB (no file bringup wrote)"}


def read_local(path: str) -> tuple[str, str, int]:
    """``(kind, text, mode)`` of ``path`` here: ``file``, its text and permission bits when it is a regular file,
    not a link, of at most :data:`LOCAL_READ_MAX` bytes; else ``missing``, ``link``, ``other`` or ``large``
    (:data:`NOT_READ`).  Opened without following a link and without waiting on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "missing", "", 0
    except OSError:
        return ("link" if os.path.islink(path) else "other"), "", 0
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not (st.st_mode & 0o170000 == 0o100000):
            return "other", "", 0
        data = f.read(LOCAL_READ_MAX + 1)
    if len(data) > LOCAL_READ_MAX:
        return "large", "", 0
    return "file", data.decode("utf-8", "replace"), st.st_mode & 0o7777


def not_rewritten(path: str, kind: str, record: str) -> str:
    """The one line saying that ``path`` (a config.pbtxt or the manifest, :data:`NOT_READ` ``kind``) was left as
    it was, control characters and line breaks of the path written out."""
    text = (f"{path} {NOT_READ[kind]}: not rewritten; the window is recorded in {record}, but a restart of Triton "
            "serves what that file holds: put the triton role's file back (bringup provision)")
    return repr(text)[1:-1]


def _not_rewritten(path: str, kind: str, record: str) -> None:
    print(f"{_now()} WARN: {not_rewritten(path, kind, record)}", file=sys.stderr, flush=True)


def write_local_config(repository: str, model: str, window_us: int, manifest: str | None = None,
                       record: str = RECORD) -> bool:
    """Set the window in ``<repository>/<model>/config.pbtxt`` (renamed into place: the triton role's
    last-good snapshot holds hard links), and its sha256 in the role's ``manifest`` when it lists it;
    False when there is no such file or window line.  A config.pbtxt or manifest that is a link, not a regular
    file or too large is neither read nor replaced: one WARN line on standard error names it."""
    if model_name_problem(model):
        raise TunerError(f"not writing the model's config.pbtxt: {model_name_problem(model)}")
    path = os.path.join(repository, model, "config.pbtxt")
    kind, text, mode = read_local(path)
    if kind in NOT_READ:
        _not_rewritten(path, kind, record)
    new = config_text(text, window_us) if kind == "file" else None
    if new is None:
        return False
    _replace_local(path, new, mode)
    if manifest:
        kind, text, _ = read_local(manifest)
        if kind in NOT_READ:
            _not_rewritten(manifest, kind, record)
        listed = manifest_text(text, f"./{model}/config.pbtxt",
                               hashlib.sha256(new.encode()).hexdigest()) if kind == "file" else None
        if listed is not None:
            _replace_local(manifest, listed)
    return True


def write_local_record(path: str, model: str, window_us: int, why: str, when: str) -> None:
    """Record ``model``'s window in ``path`` on this machine: a temporary file, fsync, rename; never onto a
    file that is not bringup's record (see :func:`local_record_problem`)."""
    # The text the check read is the one kept (read_local: never through a link or into a FIFO swapped in since,
    # capped, a byte that is not UTF-8 replaced; a second open() here followed a link, waited on a FIFO and raised
    # UnicodeDecodeError, ending the controller), and the reason given is the one recorded (it was overwritten by
    # the check's None).
    problem, old = _local_record(path)
    if problem:
        raise TunerError(f"not recording in {path}: {problem}")
    _replace_local(path, record_text(old, model, window_us, why, when))


# --------------------------------------------------------------------------- the controller


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Controller:
    """One model's window under a p95 target; :meth:`step` is one interval.

    ``record(model, window_us, why, when)`` stores the window in force (on the
    host, or through the control machine's connection to it); ``emit(entry)``
    receives each interval's entry (printed and appended as a JSON line by the
    callers).
    """

    def __init__(self, api: TritonHTTP, model: str, target_ms: float, record=None, emit=None):
        self.api, self.model, self.target_ms = api, model, float(target_ms)
        self.record, self.emit = record, emit or (lambda entry: None)
        self.count: int | None = None
        self.stats: tuple[int, int] | None = None
        self.prev: dict | None = None   # the last interval with traffic: p95_ms, queue_us

    def prime(self) -> int | None:
        """Baselines for the first interval; the window Triton serves now."""
        _, self.count = parse_summary(self.api.metrics(), self.model)
        self.stats = self.api.stats(self.model)
        return window_of(self.api.config(self.model))

    def step(self) -> dict:
        """Read the interval's numbers, decide, apply; the entry says what and why."""
        if self.count is None:
            self.prime()
        p95_us, count = parse_summary(self.api.metrics(), self.model)
        ok, queue_ns = self.api.stats(self.model)
        requests = count - self.count if count >= self.count else count   # lower: Triton restarted
        b_ok, b_q = self.stats
        if ok < b_ok or queue_ns < b_q:                                    # lower: the model was reloaded
            b_ok = b_q = 0
        d_ok, d_q = ok - b_ok, queue_ns - b_q
        self.count, self.stats = count, (ok, queue_ns)
        config = self.api.config(self.model)
        old = window_of(config)
        entry = {"time": _now(), "model": self.model, "target_p95_ms": self.target_ms, "requests": requests,
                 "p95_ms": None if p95_us is None else round(p95_us / 1000, 3),
                 "queue_us": round(d_q / d_ok / 1000, 1) if d_ok else None,
                 "old_window_us": old, "new_window_us": old, "action": "none"}
        if old is None:
            entry["why"] = "the model has no dynamic batching: nothing to tune"
        elif requests <= 0:
            entry["why"] = "no traffic in the interval: no step"
        elif p95_us is None:
            entry["why"] = "Triton has no p95 yet (Nan): no step"
        else:
            rising = queue_rising(self.prev, entry["p95_ms"], entry["queue_us"], self.target_ms)
            new, why = next_window(old, entry["p95_ms"], self.target_ms, rising)
            self.prev = {"p95_ms": entry["p95_ms"], "queue_us": entry["queue_us"]}
            if new == old:
                entry["why"] = why + f": kept at the bound ({WINDOW_MIN}-{WINDOW_MAX} µs)"
                entry["action"] = "kept"
            else:
                self.api.load(self.model, with_window(config, new))
                # The reload restarts the statistics API's counters: the next interval counts from here.
                self.stats = self.api.stats(self.model)
                entry.update(new_window_us=new, why=why, action="tightened" if old - new > STEP else
                             ("widened" if new > old else "narrowed"))
                if self.record:
                    self.record(self.model, new, why, entry["time"])
        self.emit(entry)
        return entry


def line(entry: dict) -> str:
    """One log line: time, p95, queue µs, old -> new window, why."""
    p95 = "-" if entry.get("p95_ms") is None else f"{entry['p95_ms']:.1f} ms"
    q = "-" if entry.get("queue_us") is None else f"{entry['queue_us']:.0f} µs"
    old, new = entry.get("old_window_us"), entry.get("new_window_us")
    move = f"{old} -> {new} µs" if old != new else f"{old} µs"
    return (f"{entry['time']} {entry['model']}: p95 {p95}, queue {q}/request, {entry.get('requests', 0)} "
            f"requests: window {move} ({entry['why']})")


def run(controllers: list[Controller], interval_s: float, *, steps: int | None = None,
        seconds: float | None = None, on_error=None, sleep=time.sleep) -> int:
    """Step every controller each ``interval_s`` until ``steps`` intervals or ``seconds`` pass (or forever).

    A Triton that stops answering mid-run (a restart) is reported to
    ``on_error`` and the interval skipped; the baselines are taken afresh.
    Returns the number of intervals run.
    """
    start = time.monotonic()
    tick = start + interval_s
    n = 0
    while (steps is None or n < steps) and (seconds is None or tick - start <= seconds):
        sleep(max(0.0, tick - time.monotonic()))
        n += 1
        for c in controllers:
            try:
                c.step()
            except TunerError as e:
                c.count = None
                if on_error is None:
                    raise
                on_error(c.model, e)
        # A step that ran past the next tick (a reload takes seconds) still gives the next interval its
        # full length: an interval is a span of traffic, not a slot on a clock.
        tick = max(tick + interval_s, time.monotonic() + interval_s)
    return n


# --------------------------------------------------------------------------- on the host


def _append(path: str, entry: dict) -> None:
    """Add ``entry`` as one JSON line to the log ``path`` (made if missing), as bringup's own logs are appended to
    (this file runs on the host without the package, so it cannot import :func:`bringup.outfile.append_text`: a
    minimal copy of its rule, here): never through a symbolic link planted there (``O_NOFOLLOW``), never into a
    FIFO or a device (opened without waiting, then held to a regular file), the line in one ``write``; a line the
    disk cuts short is taken back at once, no retry, only while it is still the log's end (never another run's
    line).  A log that cannot be written is one WARN line on standard error and the interval goes on (its line was
    printed to the journal already): open(path, "a") wrote through a link (as root: into any file) and waited for
    ever on a FIFO, the controller stopped."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            _log_not_written(path, "is a symbolic link" if os.path.islink(path) else
                             "is no regular file (a FIFO, a device)", remove=True)
        else:
            _log_not_written(path, f"cannot be opened: {e.strerror or e}")
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            _log_not_written(path, "is no regular file (a FIFO, a device)", remove=True)
            return
        body = (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8")
        try:
            wrote = os.write(fd, body)
        except OSError as e:
            _log_not_written(path, f"cannot be written: {e.strerror or e}")
            return
        if wrote != len(body):  # the disk filled or a file size limit: no half line for the next to be glued to
            kept = "its cut line not taken back (another run appended after it)"
            try:
                end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just past the bytes this write put
                if os.fstat(fd).st_size == end:
                    os.ftruncate(fd, end - wrote)
                    kept = "the log is as it was"
            except OSError:
                pass
            _log_not_written(path, f"cannot be written: the line was cut short (the disk is full or a file size "
                                   f"limit; free some room); {kept}")
    finally:
        os.close(fd)


def _log_not_written(path: str, why: str, remove: bool = False) -> None:
    """One WARN line: ``remove`` (a link or something other than a file at the log's name) says to remove it;
    a full disk does not (the log is the tuner's own)."""
    text = f"{path} {why}: the interval is not logged there" + (
        "; bringup appends only to a log file of its own: remove it" if remove else "")
    print(f"{_now()} WARN: {repr(text)[1:-1]}", file=sys.stderr, flush=True)


def tunable(api: TritonHTTP, wanted: list[str]) -> list[str]:
    """The models to tune: those named, else every ready model with dynamic batching."""
    if wanted:
        return wanted
    return [m for m in api.ready_models() if window_of(api.config(m)) is not None]


class Stopping:
    """SIGTERM (``systemctl stop``) and SIGINT end the service between intervals, never inside a step: a
    window a step loaded is recorded before the service ends (a stop between the reload and the record
    would leave Triton serving a window nothing records).  :meth:`pause` is the wait between intervals."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def handle(self, signum, _frame=None) -> None:
        self.signum = signum

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` in short steps; KeyboardInterrupt once a signal came (at once if it came during
        the step)."""
        end = time.monotonic() + seconds
        while self.signum is None and end - time.monotonic() > 0:
            time.sleep(min(0.2, end - time.monotonic()))
        if self.signum is not None:
            raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="window_tuner", description=__doc__.split("\n\n")[0])
    p.add_argument("--target-p95-ms", type=float, required=True)
    p.add_argument("--interval", type=float, default=10.0, help="seconds between steps (default 10)")
    p.add_argument("--model", action="append", default=[], help="model to tune (repeatable; default: every "
                   "ready model with dynamic batching)")
    p.add_argument("--http", default="http://127.0.0.1:8000", help="Triton's HTTP API")
    p.add_argument("--metrics", default="http://127.0.0.1:8002/metrics", help="Triton's metrics endpoint")
    p.add_argument("--record", default=RECORD, help=f"the window in force, per model (default {RECORD})")
    p.add_argument("--repository", default=None, help="the model repository on this host: each model's "
                   "config.pbtxt gets the window too, so a later provision changes nothing")
    p.add_argument("--manifest", default=None, help="the triton role's manifest of what it shipped: a rewritten "
                   "config.pbtxt's sha256 is updated there too")
    p.add_argument("--log", default=LOG, help=f"JSON lines, one per model and interval (default {LOG})")
    p.add_argument("--steps", type=int, default=None, help="stop after this many intervals")
    p.add_argument("--for", dest="seconds", type=float, default=None, help="stop after this many seconds")
    a = p.parse_args(argv)
    if not (0 < a.target_p95_ms < math.inf):
        p.error(f"--target-p95-ms {a.target_p95_ms}: must be a finite number above 0")
    if not (0.1 <= a.interval < math.inf):
        p.error(f"--interval {a.interval}: must be a finite number of seconds, at least 0.1")
    if a.seconds is not None and not (0 < a.seconds < math.inf):
        p.error(f"--for {a.seconds}: must be a finite number of seconds above 0")
    if a.steps is not None and a.steps < 1:
        p.error(f"--steps {a.steps}: must be at least 1")
    why = local_record_problem(a.record)
    if why:
        p.error(f"--record {a.record}: {why}")
    stopping = Stopping()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping.handle)
    api = TritonHTTP(a.http, a.metrics)

    def emit(entry):
        print(line(entry), flush=True)
        _append(a.log, entry)

    def record(model, window_us, why, when):
        write_local_record(a.record, model, window_us, why, when)
        if a.repository:
            write_local_config(a.repository, model, window_us, a.manifest, a.record)

    def err(model, e):
        print(f"{_now()} {model}: skipped, window kept: {e}", file=sys.stderr, flush=True)

    try:
        while True:   # Triton may still be starting (boot, a provision's restart): wait for it
            try:
                models = tunable(api, a.model)
                controllers = [Controller(api, m, a.target_p95_ms, record, emit) for m in models]
                for c in controllers:
                    print(f"{_now()} {c.model}: window {c.prime()} µs, target p95 {a.target_p95_ms:g} ms, "
                          f"every {a.interval:g} s", flush=True)
                break
            except TunerError as e:
                err(",".join(a.model) or "triton", e)
                stopping.pause(a.interval)
        if not controllers:
            print("no model with dynamic batching to tune", file=sys.stderr)
            return 1
        run(controllers, a.interval, steps=a.steps, seconds=a.seconds, on_error=err, sleep=stopping.pause)
    except KeyboardInterrupt:
        print(f"{_now()} stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
