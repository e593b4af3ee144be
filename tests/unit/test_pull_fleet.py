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
