"""``invoke fleet`` (issue 33 item 4) against a real Prometheus that scrapes the textfiles pull runs write.

The hosts' textfiles are written by :func:`bringup.pull.record.write_metrics` (what each host's run leaves for
its node exporter), served on 127.0.0.1 by a small HTTP server, one path a host, and scraped every second by
the Prometheus binary (scripts/ci-setup.sh installs it) in the test's folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.pull import record
from bringup.pull.fleet import query, summarize
from tests.textfile_prometheus import TextfilePrometheus, free_port

REPO = Path(__file__).resolve().parents[2]
OLD, NEW = "a" * 40, "b" * 40


def states(now: float) -> dict[str, record.State]:
    def attempt(status, revision, reason=None, at=now - 60):
        return record.Attempt(at=at, status=status, revision=revision, reason=reason)

    return {
        "pull-01": record.State(host="pull-01", applied=NEW, last_success=now - 60, last=attempt("applied", NEW)),
        "pull-02": record.State(host="pull-02", applied=OLD, last_success=now - 7200, last=attempt("applied", OLD)),
        "pull-03": record.State(host="pull-03", applied=OLD, last_success=now - 7200,
                                last=attempt("refused", NEW, "unsigned"),
                                last_refusal=attempt("refused", NEW, "unsigned")),
        "pull-04": record.State(host="pull-04", applied=NEW, last_success=now - 90000,
                                last=attempt("applied", NEW, at=now - 90000)),
    }


@pytest.fixture()
def prometheus(tmp_path):
    now = time.time()
    for name, state in states(now).items():
        record.write_metrics(state, tmp_path / f"{name}.prom")
    prom = TextfilePrometheus(tmp_path, list(states(now)))
    url, proc = prom.url, prom.proc
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if len({s["metric"]["host"] for s in query(url)}) == 4:
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "Prometheus did not scrape the hosts"
            time.sleep(0.5)
        yield url
    finally:
        prom.close()


def bringup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()", *args],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"),
                          timeout=120)


def test_fleet_shows_each_host_revision_age_and_state_from_prometheus(prometheus):
    r = bringup("fleet", "--prometheus-url", prometheus, "--json")
    assert r.returncode == 4, r.stdout + r.stderr  # pull-04 has not run for a day: stale wins, as unreachable
    doc = json.loads(r.stdout)
    assert doc["revision"] == NEW  # the newest success's revision
    got = {h: v["verdict"] for h, v in doc["hosts"].items()}
    assert got == {"pull-01": "ok", "pull-02": "lagging", "pull-03": "refused", "pull-04": "stale"}
    assert doc["hosts"]["pull-03"]["last_refusal"] == "unsigned" and doc["hosts"]["pull-03"]["revision"] == OLD
    r = bringup("fleet", "--prometheus-url", prometheus, "--stale-hours", "48")
    assert r.returncode == 2, r.stdout + r.stderr  # lagging and refused hosts, none stale
    row = next(line for line in r.stdout.splitlines() if "pull-02" in line)
    assert "lagging" in row and OLD[:12] in row and "2h 0m" in row


def test_fleet_exit_codes_follow_drift():
    now = 1_800_000_000.0
    ok = [{"metric": {"__name__": "bringup_pull_applied_info", "host": "h", "revision": NEW}, "value": [now, "1"]},
          {"metric": {"__name__": "bringup_pull_status", "host": "h", "status": "applied"}, "value": [now, "1"]},
          {"metric": {"__name__": "bringup_pull_last_run_timestamp_seconds", "host": "h"}, "value": [now, str(now)]},
          {"metric": {"__name__": "bringup_pull_last_success_timestamp_seconds", "host": "h"},
           "value": [now, str(now)]}]
    assert summarize(ok, now=now).exit_code == 0
    assert summarize(ok, revision="a", now=now).exit_code == 2  # wanted elsewhere: lagging
    assert summarize(ok, revision=NEW[:7], now=now).exit_code == 0
    assert summarize(ok, now=now + 3 * 3600).exit_code == 4


@pytest.mark.reliability(item=33, fault="fleet: Prometheus not answering", variants=1,
                         checks=("one clear line", "exit code"))
def test_prometheus_down_is_one_line():
    r = bringup("fleet", "--prometheus-url", f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 4 and r.stderr.startswith("unreachable: Prometheus at") and "Traceback" not in r.stderr
    r = bringup("fleet", "--prometheus-url", "127.0.0.1:9090")
    assert r.returncode == 1 and r.stderr.startswith("error: --prometheus-url")


def _host(host: str, now: float, *, status: str = "applied", revision: str = NEW, success: float | None = None,
          extra: tuple = ()) -> list[dict]:
    success = now - 60 if success is None else success
    return [{"metric": {"__name__": "bringup_pull_applied_info", "host": host, "revision": revision},
             "value": [now, "1"]},
            {"metric": {"__name__": "bringup_pull_status", "host": host, "status": status}, "value": [now, "1"]},
            *extra,
            {"metric": {"__name__": "bringup_pull_last_run_timestamp_seconds", "host": host},
             "value": [now, str(now - 60)]},
            {"metric": {"__name__": "bringup_pull_last_success_timestamp_seconds", "host": host},
             "value": [now, str(success)]}]


def _status(host: str, now: float, word: str, value: str = "1") -> dict:
    return {"metric": {"__name__": "bringup_pull_status", "host": host, "status": word}, "value": [now, value]}


def test_the_fleets_statuses_are_the_ones_pull_writes():
    from bringup.pull.fleet import STATUSES

    assert STATUSES == record.STATUSES


@pytest.mark.reliability(item=40, fault="fleet: a host with two statuses at 1 (failed and applied, either order)",
                         variants=2, checks=("one clear line", "exit code"))
@pytest.mark.parametrize("first", ["failed", "applied"])
def test_two_statuses_of_one_host_are_unreadable_never_the_last_one(first):
    now = 1_800_000_000.0
    other = "applied" if first == "failed" else "failed"
    f = summarize(_host("a", now, status=first, extra=(_status("a", now, other),)), now=now)
    (h,) = f.hosts
    assert h.verdict == "unreadable" and f.exit_code == 2, (h.verdict, f.exit_code)
    from bringup.pull.fleet import note_lines

    assert note_lines(f) == [f'a: unreadable: bringup_pull_status{{status="{first}"}} and bringup_pull_status'
                             f'{{status="{other}"}} are all set for one host: which one is true is not known']
    assert h.status is None  # neither is shown as the last run's
    # Two revisions applied at once, a label named like a parameter: unreadable, named, no traceback.
    twice = {"metric": {"__name__": "bringup_pull_applied_info", "host": "a", "revision": OLD, "name": "x\ny"},
             "value": [now, "1"]}
    f = summarize(_host("a", now, extra=(twice,)), now=now)
    assert f.hosts[0].verdict == "unreadable" and f.hosts[0].revision is None and f.revision is None
    assert note_lines(f) == [f'a: unreadable: bringup_pull_applied_info{{revision="{NEW}"}} and '
                             f'bringup_pull_applied_info{{name="x\\ny",revision="{OLD}"}} are all set for one '
                             "host: which one is true is not known"]
    # The same status from two series (two scrape jobs) says one thing: read.
    f = summarize(_host("a", now, extra=(_status("a", now, "applied"),)), now=now)
    assert f.hosts[0].verdict == "ok" and f.exit_code == 0 and f.hosts[0].notes == []


STATUS_WORDS = {"weird": ("weird", "1"), "Failed": ("Failed", "1"), "a flag of 2": ("failed", "2")}


@pytest.mark.reliability(item=40, fault="fleet: a status pull never writes (weird, Failed) or a flag of 2",
                         variants=len(STATUS_WORDS), checks=("one clear line", "exit code"))
@pytest.mark.parametrize("word,value", STATUS_WORDS.values(), ids=STATUS_WORDS.keys())
def test_a_status_pull_never_writes_is_unreadable_never_ok(word, value):
    from bringup.pull.fleet import note_lines

    now = 1_800_000_000.0
    series = [s for s in _host("a", now) if s["metric"]["__name__"] != "bringup_pull_status"]
    f = summarize([*series, _status("a", now, word, value)], now=now)
    assert f.hosts[0].verdict == "unreadable" and f.exit_code == 2
    said = ('is 1: no status a pull run writes (applied, failed, refused, error)' if value == "1"
            else "is 2, not 0 or 1")
    assert note_lines(f) == [f'a: unreadable: bringup_pull_status{{status="{word}"}} {said}']


@pytest.mark.reliability(item=40, fault="fleet: a host whose last run has a time but no status at 1 (no "
                         "bringup_pull_status series, or every one 0): read as ok, exit 0", variants=2,
                         checks=("one clear line", "exit code"))
@pytest.mark.parametrize("flags", ["none", "all 0"])
def test_a_run_without_a_status_is_unreadable_never_ok(flags):
    """pull writes its run's time and its one-hot status together (record.registry): a row with the time and no
    status at 1 is a damaged textfile, whose last run may have failed."""
    from bringup.pull.fleet import note_lines

    now = 1_800_000_000.0
    series = [s for s in _host("a", now) if s["metric"]["__name__"] != "bringup_pull_status"]
    if flags == "all 0":
        series += [_status("a", now, word, "0") for word in record.STATUSES]
    f = summarize([*series, *_host("b", now)], now=now)
    a, b = f.hosts
    assert a.verdict == "unreadable" and b.verdict == "ok" and f.exit_code == 2, (a, b)
    assert note_lines(f) == ["a: unreadable: bringup_pull_last_run_timestamp_seconds is set but no "
                             "bringup_pull_status series is 1: the last run's status is not known"]


@pytest.mark.reliability(item=40, fault="fleet: a host's failed flag (or its applied revision's) of NaN, +Inf, -1 or "
                         "1e308", variants=5, checks=("one clear line", "exit code"))
@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1", "1e308", "1" * 5000])
def test_a_flag_that_is_no_number_is_unreadable_never_ok(value):
    """A flag of 2 was unreadable, but one of NaN, +Inf, -1 or 1e308 was dropped as if absent: the failed run's
    flag gone, the host read as ok, exit 0."""
    from bringup.pull.fleet import note_lines

    now = 1_800_000_000.0
    flags = [_status("a", now, "applied", "0"), _status("a", now, "failed", value), _status("a", now, "refused", "0"),
             _status("a", now, "error", "0")]
    series = [s for s in _host("a", now) if s["metric"]["__name__"] != "bringup_pull_status"]
    f = summarize([*series, *flags], now=now)
    assert f.hosts[0].verdict == "unreadable" and f.exit_code == 2
    shown = value if len(value) <= 40 else value[:40] + "..."
    assert note_lines(f) == [f'a: unreadable: bringup_pull_status{{status="failed"}} is {shown}, not 0 or 1']
    # The revision's flag too: no revision read from it, named.
    bad_rev = [{**s, "value": [now, value]} if s["metric"]["__name__"] == "bringup_pull_applied_info" else s
               for s in _host("a", now)]
    f = summarize(bad_rev, now=now)
    assert f.hosts[0].verdict == "unreadable" and f.hosts[0].revision is None


@pytest.mark.reliability(item=40, fault="fleet: a host's success time ahead of this machine's clock",
                         variants=2, checks=("one clear line", "exit code"))
def test_a_success_ahead_of_the_clock_is_read_within_the_skew_and_named():
    from bringup.pull.fleet import note_lines, render_table

    now = 1_800_000_000.0
    # b's clock runs 2 s fast and it has just applied NEW: it sets the fleet's revision, a (on OLD) lags, and b is
    # no "lagging" (a review found the host that applied the newest revision called lagging).
    f = summarize(_host("a", now, revision=OLD, success=now - 600) + _host("b", now, success=now + 2), now=now)
    assert f.revision == NEW and {h.host: h.verdict for h in f.hosts} == {"a": "lagging", "b": "ok"}
    assert note_lines(f) == ["b: bringup_pull_last_success_timestamp_seconds lies 0m 2s ahead of this machine's "
                             "clock (within the 5 min allowed for two clocks' difference)"]
    from rich.console import Console

    c = Console(width=200, record=True)
    c.print(render_table(f))
    row = next(r for r in c.export_text().splitlines() if r.lstrip().startswith("b "))
    assert "0m 2s ahead" in row and "0m 0s" not in row, row
    # Further ahead than the skew: a run that never happened, not read, and named.
    f = summarize(_host("a", now) + _host("evil", now, revision="c" * 40, success=now + 400), now=now)
    assert f.revision == NEW and {h.host: h.verdict for h in f.hosts}["a"] == "ok"
    assert note_lines(f) == ["evil: bringup_pull_last_success_timestamp_seconds lies 6m 40s ahead of this "
                             "machine's clock: not read"]


def test_fleet_prints_one_line_naming_the_host_and_its_series():
    from tests.hostile_http import HostileHTTP

    now = time.time()
    series = _host("a", now, status="failed", extra=(_status("a", now, "applied"),)) + _host("b", now)
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}}).encode()
    with HostileHTTP(body=body) as url:
        r = bringup("fleet", "--prometheus-url", url)
        j = bringup("fleet", "--prometheus-url", url, "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert ('a: unreadable: bringup_pull_status{status="failed"} and bringup_pull_status{status="applied"} are all '
            "set for one host: which one is true is not known") in r.stdout.splitlines(), r.stdout
    row = next(line for line in r.stdout.splitlines() if line.lstrip().startswith("a "))
    assert "unreadable" in row and " ok " not in row, row
    assert j.returncode == 2 and json.loads(j.stdout)["hosts"]["a"]["verdict"] == "unreadable"
