"""invoke drift's report: the summary per host and role, its exit code, the table, JSON and Prometheus text
(parsed by Debian's promtool and by prometheus_client's parser), the atomic write, bad input."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from bringup.engine import drift as D
from bringup.errors import InputError
from bringup.engine.results import HostResult, ResourceResult

REPO = Path(__file__).resolve().parents[2]


def res(role, id_, status, **kw) -> ResourceResult:
    return ResourceResult(role, id_, status, **kw)


def converged() -> HostResult:
    return HostResult("conv-01", resources=[res("sysctl", "file:/etc/sysctl.d/90-trt-latency.conf", "ok"),
                                            res("docker", "service:docker", "ok")])


def drifted() -> HostResult:
    return HostResult("drift-01", resources=[
        res("sysctl", "sysctl:net.core.busy_read", "changed"), res("sysctl", "sysctl:net.core.busy_poll", "changed"),
        res("sysctl", "file:/etc/sysctl.d/90-trt-latency.conf", "ok"), res("docker", "service:docker", "ok"),
        res("docker", "guard:unused", "skipped", reason="no registry_auths")])


def unreachable() -> HostResult:
    return HostResult("gone-01", status="unreachable", message="127.0.0.1:1: connection refused")


def failed() -> HostResult:
    return HostResult("err-01", status="failed", resources=[
        res("sysctl", "sysctl:net.core.busy_read", "failed", error="its state could not be read"),
        res("docker", "service:docker", "changed")])


def report(*results) -> D.DriftReport:
    return D.summarize(list(results), ["sysctl", "docker"], checked_at=1_700_000_000.0)


def test_summary_per_host_and_role():
    r = report(converged(), drifted(), failed())
    by = {h.host: h for h in r.hosts}
    assert [by[h].status for h in ("conv-01", "drift-01", "err-01")] == ["converged", "drifted", "failed"]
    assert by["drift-01"].roles["sysctl"].pending == ["sysctl:net.core.busy_read", "sysctl:net.core.busy_poll"]
    assert by["drift-01"].roles["docker"].pending == [] and by["drift-01"].roles["docker"].total == 2
    assert by["err-01"].roles["sysctl"].failed == ["sysctl:net.core.busy_read: its state could not be read"]


@pytest.mark.parametrize("results,code", [
    ((converged,), 0), ((converged, drifted), 2), ((converged, failed), 2),
    ((converged, unreachable), 4), ((drifted, unreachable, failed), 4)])
def test_exit_codes_follow_the_run_4_wins_over_2(results, code):
    assert report(*(f() for f in results)).exit_code == code


def test_table_names_pending_changes_and_unreachable_hosts():
    console = Console(width=200, record=True, color_system=None)
    console.print(D.render_table(report(converged(), drifted(), unreachable())))
    text = console.export_text()
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip() and line.split()[0].endswith("-01")}
    assert rows["drift-01"].split()[1:] == ["drifted", "2", "pending", "ok"]
    assert rows["conv-01"].split()[1:] == ["converged", "ok", "ok"]
    assert "unreachable" in rows["gone-01"] and "connection refused" in rows["gone-01"]


def test_json_lists_drifted_and_unreachable():
    doc = json.loads(json.dumps(D.to_json(report(converged(), drifted(), unreachable()))))
    assert doc["drifted"] == ["drift-01"] and doc["unreachable"] == ["gone-01"] and doc["exit_code"] == 4
    assert doc["hosts"]["drift-01"]["roles"]["sysctl"]["pending"] == ["sysctl:net.core.busy_read",
                                                                      "sysctl:net.core.busy_poll"]
    assert doc["hosts"]["gone-01"]["status"] == "unreachable" and doc["hosts"]["gone-01"]["roles"] == {}


def samples(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_prometheus_text_has_the_issue_metrics(tmp_path):
    path = tmp_path / "bringup.prom"
    D.write_prometheus(report(converged(), drifted(), unreachable()), path)
    got = samples(path.read_text())
    assert got[("bringup_drift_resources", (("host", "drift-01"), ("role", "sysctl")))] == 2
    assert got[("bringup_drift_resources", (("host", "drift-01"), ("role", "docker")))] == 0
    assert got[("bringup_drift_resources", (("host", "conv-01"), ("role", "sysctl")))] == 0
    assert got[("bringup_last_check_timestamp_seconds", (("host", "gone-01"),))] == 1_700_000_000.0
    assert got[("bringup_unreachable", (("host", "gone-01"),))] == 1
    assert got[("bringup_unreachable", (("host", "drift-01"),))] == 0
    # An unreachable host's roles are unknown: no drift series rather than a false 0.
    assert not any(k[0] == "bringup_drift_resources" and ("host", "gone-01") in k[1] for k in got)
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_prometheus_text_passes_promtool_check_metrics(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (scripts/ci-setup.sh does)"
    path = tmp_path / "bringup.prom"
    D.write_prometheus(report(converged(), drifted(), unreachable(), failed()), path)
    text = path.read_text()
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in D.METRICS:
        assert f"# HELP {name} " in text and f"# TYPE {name} gauge" in text


def test_label_values_are_escaped(tmp_path):
    odd = HostResult('we"ird\\host\nx', resources=[res("sysctl", "a", "changed")])
    path = tmp_path / "bringup.prom"
    D.write_prometheus(D.summarize([odd], ["sysctl"], 1.0), path)
    text = path.read_text()
    assert 'host="we\\"ird\\\\host\\nx"' in text
    got = samples(text)
    assert got[("bringup_drift_resources", (("host", 'we"ird\\host\nx'), ("role", "sysctl")))] == 1


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "bringup.prom"
    D.write_prometheus(report(converged()), path)
    before = path.read_text()

    def broken_rename(src, dst, **kw):
        raise OSError(28, "No space left on device")

    # os.replace: the textfile is written by bringup's write_atomic since F1 (prometheus_client used os.rename)
    monkeypatch.setattr(os, "replace", broken_rename)
    with pytest.raises(OSError):
        D.write_prometheus(report(drifted()), path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bringup.prom"]


@pytest.mark.parametrize("name,match", [("bringup.txt", r"\*\.prom"), ("missing/bringup.prom", "does not exist")])
def test_prometheus_path_checked_before_anything(tmp_path, name, match):
    with pytest.raises(InputError, match=match):
        D.check_prometheus_path(str(tmp_path / name))


def test_bad_prometheus_path_is_one_line_and_connects_to_nothing(tmp_path):
    # The inventory's host is a closed port: had drift connected, it would say unreachable (exit 4).
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h1": {
        "ansible_host": "127.0.0.1", "ansible_port": 1}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "drift", "--group", "all",
                        "--prometheus", str(tmp_path / "nowhere" / "bringup.prom")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "does not exist" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "reports").exists() and not (tmp_path / "nowhere").exists()


@pytest.mark.reliability(item=25, fault="a host unreachable or interrupted after a drift check: its series "
                                        "disappeared from the textfile (alerts went absent)", variants=2,
                         checks=("report written",))
def test_a_host_not_planned_this_time_keeps_its_last_series(tmp_path):
    path = tmp_path / "bringup.prom"
    gone = HostResult("drift-01", status="unreachable", message="connection refused")
    D.write_prometheus(report(converged(), drifted()), path)
    later = D.summarize([converged(), gone], ["sysctl", "docker"], checked_at=1_700_000_900.0)
    D.write_prometheus(later, path)
    got = samples(path.read_text())
    # Unreachable now: the last drift counts stay beside the unreachable flag; the check time moves on.
    assert got[("bringup_drift_resources", (("host", "drift-01"), ("role", "sysctl")))] == 2
    assert got[("bringup_unreachable", (("host", "drift-01"),))] == 1
    assert got[("bringup_last_check_timestamp_seconds", (("host", "drift-01"),))] == 1_700_000_900.0
    # Interrupted: every series as it was, the check time included (it goes stale, as it should).
    cut = HostResult("drift-01", status="interrupted", message="interrupted by SIGINT")
    D.write_prometheus(D.summarize([converged(), cut], ["sysctl", "docker"], checked_at=1_700_001_800.0), path)
    got = samples(path.read_text())
    assert got[("bringup_drift_resources", (("host", "drift-01"), ("role", "sysctl")))] == 2
    assert got[("bringup_last_check_timestamp_seconds", (("host", "drift-01"),))] == 1_700_000_900.0
    assert got[("bringup_last_check_timestamp_seconds", (("host", "conv-01"),))] == 1_700_001_800.0


def test_drift_takes_limit_patterns_and_retry_files(tmp_path):
    """`invoke drift --limit` as provision has it (a pattern, or @retry file): only those hosts are checked."""
    import socket
    import subprocess
    import sys

    import yaml

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    conn = {"ansible_host": "127.0.0.1", "ansible_port": port, "ssh_connect_timeout": 2}
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {h: conn for h in ("web1", "web2", "db1")}}}))
    (tmp_path / "last.retry").write_text("db1\n")
    for limit, want in (("web*:!web2", ["web1"]), ("@last.retry", ["db1"])):
        r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "drift", "--limit", limit,
                            "--roles", "sysctl", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 4, r.stdout + r.stderr  # unreachable, but only the limited hosts were tried
        assert sorted(json.loads(r.stdout)["hosts"]) == want, r.stdout


@pytest.mark.reliability(item=40, fault="--prometheus: the textfile swapped for a FIFO between the look and the read "
                                        "(the check of what is there, the read of the last series), or grown past "
                                        "the cap after its size was looked at", variants=3,
                         checks=("no hang", "one clear line"))
@pytest.mark.parametrize("swap", ["fifo-check", "fifo-previous", "grown"])
def test_the_textfile_is_read_bounded_whatever_it_became_after_the_look(tmp_path, monkeypatch, swap):
    import threading

    prom = tmp_path / "bringup.prom"
    prom.write_text("# HELP bringup_drift_changed x\n# TYPE bringup_drift_changed gauge\n"
                    'bringup_drift_changed{host="h1"} 1.0\n')
    looked = Path.is_file

    def is_file(self):
        seen = looked(self)
        if self == prom and seen:
            prom.unlink()
            if swap == "grown":  # a size within the cap when looked at, more than it when read
                with open(prom, "wb") as f:
                    f.truncate(D.PROM_READ_MAX + 1)
            else:
                os.mkfifo(prom)  # its read would wait for a writer that never comes
        return seen

    monkeypatch.setattr(Path, "is_file", is_file)
    got: list = []
    call = (lambda: D.read_previous(prom)) if swap == "fifo-previous" else \
        (lambda: D.prometheus_file_problem(prom))
    t = threading.Thread(target=lambda: got.append(call()), daemon=True)
    t.start()
    t.join(20)
    assert got, "the read waited on the FIFO (or read past the cap)"
    if swap == "fifo-previous":
        assert got == [{}]
    elif swap == "fifo-check":
        assert got == ["it is not a regular file (a device, a pipe or a socket)"]
    else:
        assert got == [f"it is larger than {D.PROM_READ_MAX >> 20} MiB: not a textfile bringup wrote"]
