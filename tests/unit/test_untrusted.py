"""Hostile numbers, JSON and HTTP answers (issue 40 items 3 and 6): the guarded readers of bringup.untrusted,
and ``invoke fleet`` against a real HTTP server on 127.0.0.1 that floods, drips or answers absurd JSON."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.errors import InputError, Unreachable
from bringup.pull import fleet
from bringup.untrusted import HttpError, Unreadable, http_get, loads, number, text_number
from tests.hostile_http import HostileHTTP
from tests.unit.test_saved_reads import _bounded

REPO = Path(__file__).resolve().parents[2]

HOSTILE_JSON = {
    "nested 100,000 deep": "[" * 100_000,
    "nested objects": '{"a":' * 100_000,
    "100,000-digit integer": "1" * 100_000,
    "NaN": '{"v": NaN}',
    "Infinity": '{"v": -Infinity}',
    "1e400": '{"v": 1e400}',
    "not UTF-8": b'{"v": "\xff"}',
    # Before: the string scan started again at each escaped quote (quadratic: 20,000 took 5 s).
    "an open string of 1,000,000 escaped quotes": '"' + '\\"' * 1_000_000,
}


@pytest.mark.reliability(item=40, fault="deeply nested or 100,000-digit JSON, NaN/Infinity in JSON",
                         variants=len(HOSTILE_JSON), checks=("one clear line",))
@pytest.mark.parametrize("text", HOSTILE_JSON.values(), ids=HOSTILE_JSON.keys())
def test_hostile_json_is_one_line(text):
    t0 = time.monotonic()
    with pytest.raises(Unreadable) as e:
        loads(text, what="the answer")
    assert str(e.value).startswith("the answer: ") and "\n" not in str(e.value)
    assert time.monotonic() - t0 < 5


def test_ordinary_json_still_reads():
    doc = '{"a": [1, -2, 3.5e2, "x\\"[[[", {"b": null}], "c": 18446744073709551615}'
    assert loads(doc) == json.loads(doc)
    assert loads(b'{"x": 1} trailing', raw=True) == {"x": 1}
    assert loads('{"x": 1} {"y": 2}', raw=True, end=True) == ({"x": 1}, 8)


def test_a_key_given_twice_is_refused_also_in_the_first_document_of_a_text():
    with pytest.raises(Unreadable) as e:
        loads('banner {"a": {"s": "Fail", "s": "Pass"}} tail'[7:], what="dcgmi's JSON", raw=True)
    assert str(e.value) == "dcgmi's JSON: the key 's' is given twice (which one counts is not known)"
    with pytest.raises(Unreadable, match="the key 's' is given twice"):  # the default: every reader refuses it
        loads('{"s": "Fail", "s": "Pass"}')
    assert loads('{"s": "Fail", "s": "Pass"}', unique=False) == {"s": "Pass"}  # json's own reading, asked for


NUMBERS = [float("nan"), float("inf"), -float("inf"), 1e308, 10 ** 400, -1, True, "12", None, [1]]


@pytest.mark.reliability(item=40, fault="NaN, Infinity, 1e308, 10^400, negative or wrong-typed numbers",
                         variants=len(NUMBERS), checks=("one clear line",))
@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_absurd_numbers_are_unreadable(value):
    with pytest.raises(Unreadable) as e:
        number(value, lo=0, hi=1e6, what="h2d_gbs")
    assert str(e.value).startswith("h2d_gbs ") and len(str(e.value)) < 120


@pytest.mark.parametrize("text", ["nan", "inf", "-Infinity", "1e999", "1_000", "0x40", "", "9" * 41, "-3"])
def test_absurd_tool_text_is_unreadable(text):
    with pytest.raises(Unreadable):
        text_number(text, lo=0, hi=1e6)


def test_sane_numbers_read():
    assert number(12.5, lo=0, hi=100) == 12.5 and number(3.0, integer=True) == 3
    assert text_number(" 71 ", lo=0, hi=200) == 71.0 and text_number("1410", integer=True) == 1410


@pytest.mark.reliability(item=40, fault="HTTP answer: a 1 GiB flood or a dripping server", variants=2,
                         checks=("one clear line", "no hang"))
def test_http_get_flood_and_drip_end_within_the_deadline():
    with HostileHTTP("flood") as url:
        t0 = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(HttpError) as e:
            http_get(url, max_bytes=8 << 20, deadline_s=30, what="the flood")
        assert "more than 8388608 bytes" in str(e.value) and not e.value.unreachable
        assert time.monotonic() - t0 < 30
        # Memory bounded: the cap and one chunk, not the flood (ru_maxrss is KiB on Linux).
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10
    with HostileHTTP("drip") as url:
        t0 = time.monotonic()
        with pytest.raises(HttpError) as e:
            http_get(url, max_bytes=8 << 20, deadline_s=2, what="the drip")
        took = time.monotonic() - t0
        assert "within 2 s" in str(e.value) and e.value.unreachable
        assert took < 10  # the deadline (2 s) and its grace, whatever the server's pace


def test_fleet_query_refuses_a_dripping_prometheus_within_its_deadline(monkeypatch):
    monkeypatch.setattr(fleet, "HTTP_TIMEOUT_S", 2)
    with HostileHTTP("drip") as url:
        t0 = time.monotonic()
        with pytest.raises(Unreachable) as e:
            fleet.query(url)
        assert time.monotonic() - t0 < 10 and "within 2 s" in str(e.value)


def bringup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()", *args],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"),
                          timeout=120)


def vector(series: list[dict]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}}).encode()


FLEET_ANSWERS = {
    "nested 100,000 deep": b"[" * 100_000,
    "100,000-digit integer": b'{"status": "success", "data": ' + b"1" * 100_000 + b"}",
    "not JSON": b"<html>hello</html>",
}


@pytest.mark.reliability(item=40, fault="fleet: Prometheus answers deep/huge JSON, floods", variants=4,
                         checks=("one clear line", "exit code"))
@pytest.mark.parametrize("body", [*FLEET_ANSWERS.values(), None], ids=[*FLEET_ANSWERS, "64 MiB flood"])
def test_fleet_hostile_answer_is_one_line(body):
    with HostileHTTP("flood" if body is None else "body", body=body or b"") as url:
        r = bringup("fleet", "--prometheus-url", url)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: Prometheus at") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout


@pytest.mark.reliability(item=40, fault="fleet: NaN, +Inf, 1e308 or future timestamps from Prometheus",
                         variants=4, checks=("exit code",))
@pytest.mark.parametrize("raw", ["NaN", "+Inf", "1e308", "FUTURE"])
def test_fleet_absurd_timestamps_are_never_ok(raw):
    now = time.time()
    value = str(now + 86400 * 365) if raw == "FUTURE" else raw
    rev = "b" * 40
    series = [
        {"metric": {"__name__": "bringup_pull_applied_info", "host": "h", "revision": rev}, "value": [now, "1"]},
        {"metric": {"__name__": "bringup_pull_status", "host": "h", "status": "applied"}, "value": [now, "1"]},
        {"metric": {"__name__": "bringup_pull_last_run_timestamp_seconds", "host": "h"}, "value": [now, value]},
        {"metric": {"__name__": "bringup_pull_last_success_timestamp_seconds", "host": "h"}, "value": [now, value]},
        {"metric": "garbage", "value": 3},
        {"metric": {"__name__": "bringup_pull_status", "host": "h2"}, "value": [now, "1" * 5000]},
    ]
    f = fleet.summarize(json.loads(vector(series))["data"]["result"], now=now)
    h = {x.host: x for x in f.hosts}["h"]
    assert h.verdict == "stale" and f.exit_code == 4  # a run never seen: not "ok"
    with HostileHTTP(body=vector(series)) as url:
        r = bringup("fleet", "--prometheus-url", url, "--json")
    assert r.returncode == 4, r.stderr
    assert json.loads(r.stdout)["hosts"]["h"]["verdict"] == "stale"


def test_fleet_table_shows_markup_and_escapes_from_labels_as_text():
    now = time.time()
    evil = "[link=file:///etc/passwd]x[/link]\x1b]0;pwned\x07[bold red]PASS[/]"
    series = [
        {"metric": {"__name__": "bringup_pull_last_run_timestamp_seconds", "host": evil}, "value": [now, str(now)]},
        {"metric": {"__name__": "bringup_pull_last_refusal_info", "host": evil, "reason": "[/oops]"},
         "value": [now, "1"]},
    ]
    with HostileHTTP(body=vector(series)) as url:
        r = subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()", "fleet",
                            "--prometheus-url", url], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", FORCE_COLOR="1"))
    assert "Traceback" not in r.stderr, r.stderr
    assert "\x1b[" in r.stdout  # styled as on a terminal: a hyperlink would be emitted here
    assert "\x1b]" not in r.stdout and "\x07" not in r.stdout and "\x1b]8;" not in r.stdout
    assert "[link=file:///etc/passwd]" in r.stdout and "[/oops]" in r.stdout


@pytest.mark.reliability(item=40, fault="ESC sequences and Rich markup in host text (drift table, check lines)",
                         variants=3, checks=("one clear line",))
def test_drift_table_and_plain_prints_show_hostile_text_inert(monkeypatch):
    """Through the console every task prints to (bringup.tasks.context.console), styled as on a terminal."""
    from bringup.engine import drift as D
    from bringup.engine.report import HostResult
    from bringup.tasks.context import console

    evil = "[link=file:///etc/passwd]click[/link] \x1b]0;pwned\x07 \x1b[2J [bold red]PASS[/] [/oops]"
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich's styles are written, as on a terminal: a hyperlink would be too
    c = console()
    with c.capture() as cap:
        c.print(D.render_table(D.summarize([HostResult("gone-01", status="unreachable", message=evil)], ["sysctl"],
                                           checked_at=1_700_000_000.0)))
        c.print(f"host said: {evil}")  # a plain print with markup on: what does not parse is shown as text
        from rich.text import Text
        c.print(Text(evil))
    out = cap.get()
    assert "\x1b[" in out  # styled
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\x07" not in out
    assert "[link=file:///etc/passwd]" in out and "[/oops]" in out
    assert "\\x1b]0;pwned" in out  # shown, written out


@pytest.mark.reliability(item=40, fault="Triton's metrics endpoint floods or drips (tune-window)", variants=2,
                         checks=("one clear line", "no hang"))
@pytest.mark.parametrize("mode", ["flood", "drip"])
def test_tritons_metrics_flood_or_drip_end_within_the_timeout(mode):
    from bringup.latency.window_tuner import TritonHTTP, TunerError

    with HostileHTTP(mode, content_type="text/plain") as url:
        api = TritonHTTP(url, url + "/metrics", timeout=3)
        t0 = time.monotonic()
        with pytest.raises(TunerError) as e:  # Unreachable (the drip) is a TunerError
            api.metrics()
        assert time.monotonic() - t0 < 20
    assert ("larger than 16 MiB" if mode == "flood" else "within 3 s") in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.reliability(item=40, fault="Triton's HTTP port drips its headers (window controller, tune-window): a "
                         "byte each 0.2 s, never done", variants=3, checks=("one clear line", "no hang"))
@pytest.mark.parametrize("call", ["metrics", "stats", "load"])
def test_tritons_headers_dripping_end_within_the_timeout(call):
    """urllib's timeout bounds each read only: before, the controller waited for ever on such a port."""
    from bringup.latency.window_tuner import TritonHTTP, Unreachable

    with HostileHTTP("drip-headers", content_type="text/plain") as url:
        api = TritonHTTP(url, url + "/metrics", timeout=2)
        t0 = time.monotonic()
        with pytest.raises(Unreachable) as e:
            _bounded({"metrics": api.metrics, "stats": lambda: api.stats("m"),
                      "load": lambda: api.load("m", {}, timeout=2)}[call], 20)
        assert time.monotonic() - t0 < 10
    assert str(e.value).endswith("the answer did not come whole within 2 s") and "\n" not in str(e.value)


@pytest.mark.reliability(item=40, fault="Triton's statistics API: nested, 100,000 digits, NaN, absurd counters",
                         variants=4, checks=("one clear line",))
@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"model_stats": ' + b"1" * 100_000 + b"}",
                                  b'{"model_stats": [{"name": "m", "inference_stats": {"success": {"count": NaN}}}]}',
                                  b'{"model_stats": [{"name": "m", "inference_stats": {"success": {"count": -5}}}]}'])
def test_tritons_hostile_statistics_are_one_line(body):
    from bringup.latency.window_tuner import TritonHTTP, TunerError

    with HostileHTTP(body=body) as url:
        with pytest.raises(TunerError) as e:
            TritonHTTP(url, url + "/metrics", timeout=5).stats("m")
    assert str(e.value).startswith("Triton's") and "\n" not in str(e.value)


def test_an_error_line_carrying_a_hosts_escape_sequence_is_written_out():
    """A task's one error line (invoke prints it to stderr as it is, outside rich) carrying an escape sequence:
    written out, never acting on the terminal, whatever the task put in it."""
    with HostileHTTP(body=b"{}") as url:
        r = bringup("fleet", "--prometheus-url", url + "/\x1b[2J\x1b]0;pwned\x07")
    assert r.returncode == 4 and "\x1b" not in r.stderr and "\\x1b" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.reliability(item=40, fault="fleet: Prometheus answers a key twice (a host's status failed, then applied)",
                         variants=1, checks=("one clear line", "exit code"))
def test_fleet_answer_with_a_key_given_twice_is_one_line():
    now = time.time()
    series = [{"metric": {"__name__": "bringup_pull_status", "host": "h", "status": "failed"}, "value": [now, "1"]}]
    body = vector(series).replace(b'"status": "failed"', b'"status": "failed", "status": "applied"')
    with HostileHTTP(body=body) as url:
        r = bringup("fleet", "--prometheus-url", url)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert r.stderr == (f"error: Prometheus at {url}: /api/v1/query's answer: the key 'status' is given twice "
                        "(which one counts is not known) (not a Prometheus?)\n"), r.stderr
