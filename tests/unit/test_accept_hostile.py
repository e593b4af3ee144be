"""Issue 40 items 3 and 6 for ``invoke accept``: what a compromised or broken host hands back (the probe's JSON,
nvidia-smi's cells, dcgmi's output, Triton's metrics, a saved result) is never read as a good figure.

Absurd numbers (NaN, Infinity, 1e308, 10^400, negative, wrong-typed) are "not checked", never PASS; deep or huge
JSON is one line; a flood or a drip ends within its bound, on the host (real processes through the local
transport, a real HTTP server on 127.0.0.1); a saved result dated in the future is refused.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bringup.acceptance import remote
from bringup.acceptance.judge import judge
from bringup.acceptance.saved import checklist_lines, save
from bringup.acceptance.serving import refusal
from bringup.checks import line
from bringup.ssh.connection import LocalTransport
from bringup.inventory.hosts import ConnectionVars, Host
from tests.hostile_http import HostileHTTP
from tests.unit.test_accept_judge import H200_BUS, by, h200_doc, h200_facts  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]
METRICS = (REPO / "tests/fixtures/triton/metrics-2.51-summary.txt").read_text()

ABSURD = {"NaN": float("nan"), "Infinity": float("inf"), "1e308": 1e308, "10^400": 10 ** 400, "negative": -55.4,
          "text": "55.4", "bool": True}


@pytest.mark.reliability(item=40, fault="probe: NaN, Infinity, 1e308, 10^400, negative or wrong-typed figures",
                         variants=len(ABSURD), checks=("one clear line",))
@pytest.mark.parametrize("value", ABSURD.values(), ids=ABSURD.keys())
def test_an_absurd_figure_is_not_checked_never_pass(h200_facts, value):  # noqa: F811
    lines = judge(h200_doc(h2d=value, d2d=value), h200_facts, {})
    for name in ("host-to-device bandwidth", "device memory bandwidth"):
        k = by(lines, name)
        assert k.status == "WARN" and k.seen.startswith("not checked: the probe's figure"), k.seen
        assert "unreadable" in k.seen and k.value is None
    assert by(lines, "device-to-host bandwidth").status == "PASS"  # the sound figure beside it is still judged


@pytest.mark.reliability(item=40, fault="probe: repeats of 10^400, Infinity, 0, -1 or text read as 'median of 0' "
                         "beside the figure", variants=6, checks=("one clear line",))
@pytest.mark.parametrize("repeats, said", [(float("inf"), "repeats inf is not a finite number"),
                                           ("many", "repeats 'many' is not a number"),
                                           (10 ** 400, "repeats " + "1" + "0" * 36 + "... is out of range "
                                            "(1..100)"),
                                           (-1, "repeats -1 is out of range (1..100)"),
                                           (0, "repeats 0 is out of range (1..100)"),
                                           (None, "repeats None is not a number")],
                         ids=["inf", "text", "10^400", "-1", "0", "absent"])
def test_absurd_repeats_are_said_never_median_of_0(h200_facts, repeats, said):  # noqa: F811
    seen = by(judge(h200_doc(repeats=repeats), h200_facts, {}), "host-to-device bandwidth").seen
    assert f"(runs unknown: {said})" in seen and "median of" not in seen, seen
    assert "(median of 5)" in by(judge(h200_doc(repeats=5), h200_facts, {}), "host-to-device bandwidth").seen


@pytest.mark.reliability(item=40, fault="probe: one GPU's bus id listed twice (its own figures and another's): a PASS "
                         "and a FAIL line of one GPU, each judged, and its load lines twice", variants=2,
                         checks=("one clear line",))
@pytest.mark.parametrize("spelling", [H200_BUS, "0000:00:06.0"])
def test_a_gpu_the_probe_lists_twice_is_not_checked_never_judged_twice(h200_facts, spelling):  # noqa: F811
    doc = h200_doc()
    doc["gpus"].append(dict(doc["gpus"][0], index=1, bus_id=spelling, h2d_gbs=10.0))
    lines = judge(doc, h200_facts, {})
    k = by(lines, "copies")
    assert k.status == "WARN" and k.seen.startswith("not checked: the probe's answer lists this GPU 2 times"), k.seen
    assert not [x for x in lines if x.name.endswith("bandwidth")], lines
    assert by(lines, "clocks under load").status == "PASS"  # the readings under load: judged once, by bus id


@pytest.mark.parametrize("temp", ["nan", "inf", "1e308", "-300", "9" * 5000, "0"])
def test_absurd_temperatures_from_nvidia_smi_are_not_shown(h200_facts, temp):  # noqa: F811
    # 0 °C under load: a sensor reading nothing (as nvidia -q's GPU Current Temp 0 C), never "up to 0 °C".
    k = by(judge(h200_doc(temp=temp), h200_facts, {}), "clocks under load")
    assert "temperature not shown" in k.seen and k.value is None


@pytest.mark.parametrize("reasons", ["0x" + "f" * 5000, "nan", "-0x40"])
def test_absurd_clock_reasons_are_unreadable(h200_facts, reasons):  # noqa: F811
    k = by(judge(h200_doc(reasons=reasons), h200_facts, {}), "clocks under load")
    assert k.status == "WARN" and "not readable" in k.seen


PROBE_OUTPUTS = {
    "NaN": '{"probe": 1, "gpus": [{"h2d_gbs": NaN}]}',
    "nested": '{"probe": 1, "x": ' + "[" * 100_000,
    "100,000 digits": '{"probe": 1, "repeats": ' + "7" * 100_000 + "}",
}


@pytest.mark.reliability(item=40, fault="probe's JSON: NaN, nested 100,000 deep, 100,000 digits", variants=3,
                         checks=("one clear line",))
@pytest.mark.parametrize("out", PROBE_OUTPUTS.values(), ids=PROBE_OUTPUTS.keys())
def test_a_hostile_probe_document_is_one_named_error(h200_facts, out):  # noqa: F811
    doc = remote.probe_result(0, out + "\n", "", 130)
    assert doc["error"].startswith("the probe's JSON: ") and "unreadable" in doc["error"]
    (k,) = judge(doc, h200_facts, {})
    assert k.status == "FAIL" and k.name == "acceptance probe" and "\n" not in k.seen


def local() -> LocalTransport:
    return LocalTransport(Host(name="ctl", groups=["all"], vars={},
                               connection=ConnectionVars(ansible_connection="local")))


@pytest.fixture()
def flooding_bin(tmp_path, monkeypatch) -> Path:
    """``dcgmi`` and ``python3`` stand-ins on PATH that print without end (a host whose tools flood)."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("dcgmi", "python3"):
        (d / name).write_text("#!/bin/sh\nexec yes 'flooding output line from a hostile host'\n")
        (d / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


@pytest.mark.reliability(item=40, fault="dcgmi or the probe prints without end (a flood)", variants=2,
                         checks=("one clear line", "no hang"))
def test_a_flooding_dcgmi_or_probe_is_cut_on_the_host_and_named(flooding_bin):
    t = local()
    t0 = time.monotonic()
    rc, out, err = remote.run_dcgmi(t, 1)
    assert out == "" and err.startswith("dcgmi printed more than 8 MiB") and rc != 0
    doc = remote.run_probe(t, seconds=0)
    assert doc["error"].startswith("the probe printed more than 8 MiB") and doc["gpus"] == []
    assert time.monotonic() - t0 < 60


def test_the_capped_run_keeps_the_commands_own_status_and_output():
    res = local().run_script(remote._capped("sh -c 'echo hi; echo err >&2; exit 3'"))
    assert res.rc == 3 and res.stdout.split() == ["hi", "err"]


@pytest.mark.reliability(item=40, fault="Triton's metrics port floods or drips", variants=2,
                         checks=("one clear line", "no hang"))
@pytest.mark.parametrize("mode", ["flood", "drip"])
def test_a_flooding_or_dripping_metrics_port_ends_within_its_bound(mode):
    with HostileHTTP(mode, content_type="text/plain") as url:
        port = int(url.rsplit(":", 1)[1])
        t0 = time.monotonic()
        pre = remote.preflight(local(), port)
        took = time.monotonic() - t0
    assert pre.metrics_first.startswith("# bringup: unreachable:"), pre.metrics_first[:200]
    assert len(pre.metrics_first) < 200 and len(pre.metrics_second) < 200
    assert took < 40  # two reads of at most 5 s each, 3 s apart; never the server's pace


@pytest.mark.reliability(item=40, fault="Triton's metrics: NaN, +Inf or negative request counts", variants=3,
                         checks=("one clear line",))
@pytest.mark.parametrize("value", ["NaN", "+Inf", "-5"])
def test_metrics_with_counts_that_are_no_counts_refuse_the_load(value):
    bad = "\n".join(
        f'nv_inference_request_success{{model="m",version="1"}} {value}' if ln.startswith(
            "nv_inference_request_success{") else ln for ln in METRICS.splitlines()) + "\n"
    why = refusal(bad, bad, "", 8002, 3)
    assert why and why.startswith("Triton's metrics port 8002 answered values that are no counts"), why


@pytest.mark.reliability(item=40, fault="Triton's metrics: NaN, +Inf, negative or 1e308 requests queued beside a "
                         "readable, steady success count", variants=4, checks=("one clear line",))
@pytest.mark.parametrize("value", ["NaN", "+Inf", "-3", "1e308"])
def test_a_queue_length_that_is_no_count_refuses_the_load(value):
    """The success count read and steady, the queue's length unreadable: it read as "nothing queued" (idle) and the
    GPUs were loaded under whatever Triton held."""
    ok = ("# TYPE nv_inference_request_success counter\n"
          'nv_inference_request_success{model="m",version="1"} 10\n')
    queued = (ok + "# TYPE nv_inference_pending_request_count gauge\n"
              f'nv_inference_pending_request_count{{model="m",version="1"}} {value}\n')
    why = refusal(ok, queued, "", 8002, 3)
    assert why and why.startswith("Triton's metrics port 8002 answered values that are no counts "
                                  "(nv_inference_pending_request_count"), why
    assert refusal(ok, queued.replace(f"}} {value}", "} 0"), "", 8002, 3) is None  # idle: loaded


@pytest.mark.reliability(item=40, fault="a saved acceptance result dated in the future", variants=1,
                         checks=("one clear line",))
def test_a_saved_result_dated_in_the_future_is_refused(tmp_path):
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    good = [line("acceptance", "host-to-device bandwidth", "PASS", "55.4 GB/s", value=55.4, limit=63.0, unit="GB/s")]
    save("gpu-01", {}, good, tmp_path, now + timedelta(minutes=2))  # within the clock-skew allowance
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "PASS"
    save("gpu-01", {}, good, tmp_path, now + timedelta(days=400))
    # Passed over, and said: a result named for the future would hide every later one as "newest".
    warn, k = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert warn.status == "WARN" and "named for a time in the future, not read" in warn.seen, warn.seen
    assert "20280108T120000Z" in warn.seen and "\n" not in warn.seen
    assert k.status == "PASS" and "20261204T120200Z" in k.seen, k.seen


@pytest.mark.reliability(item=40, fault="a saved acceptance result renamed to a future time (its measured_at real), "
                                        "or to another past time", variants=2, checks=("one clear line",))
def test_a_renamed_saved_result_never_hides_the_newest(tmp_path):
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    ok = [line("acceptance", "host-to-device bandwidth", "PASS", "55.4 GB/s", value=55.4, limit=63.0, unit="GB/s")]
    bad = [line("acceptance", "host-to-device bandwidth", "FAIL", "2.1 GB/s", value=2.1, limit=63.0, unit="GB/s")]
    old = save("gpu-01", {}, ok, tmp_path, now - timedelta(days=3))
    save("gpu-01", {}, bad, tmp_path, now - timedelta(hours=1))  # the real newest: a FAIL
    old.rename(tmp_path / "gpu-01-20991231T000000Z.json")
    lines = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert [k.status for k in lines] == ["WARN", "FAIL"], [(k.status, k.seen) for k in lines]
    assert "gpu-01-20991231T000000Z.json" in lines[0].seen
    # Renamed to a later past time: its measured_at says otherwise, so it is refused, not read as newest.
    (tmp_path / "gpu-01-20991231T000000Z.json").rename(tmp_path / "gpu-01-20261204T115900Z.json")
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "not the time its name says" in k.seen, k.seen


SAVED = {
    "nested": "[" * 100_000,
    "100,000 digits": '{"measured_at": "2026-12-04T11:00:00Z", "lines": [], "x": ' + "1" * 100_000 + "}",
    "NaN value": json.dumps({"measured_at": "2026-12-04T11:00:00Z", "lines": [
        {"area": "acceptance", "name": "x", "status": "PASS", "seen": "", "value": float("nan")}]}),
    # No line at all printed no acceptance line either, not even "not measured" (a hostile-input pass).
    "no lines": json.dumps({"host": "gpu-01", "measured_at": "2026-12-04T11:00:00Z", "lines": []}),
}


@pytest.mark.reliability(item=40, fault="saved acceptance result: nested, 100,000 digits, NaN, no lines", variants=4,
                         checks=("one clear line",))
@pytest.mark.parametrize("text", SAVED.values(), ids=SAVED.keys())
def test_a_hostile_saved_result_is_one_warn(tmp_path, text):
    (tmp_path / "gpu-01-20261204T110000Z.json").write_text(text)
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "not a saved acceptance result" in k.seen and "\n" not in k.seen


@pytest.mark.reliability(item=40, fault="a saved acceptance result's name on a FIFO, a folder, a link to nothing",
                         variants=3, checks=("one clear line", "no hang"))
@pytest.mark.parametrize("make", ["fifo", "folder", "dangling"])
def test_what_is_no_file_under_a_results_name_is_named_not_passed_over(tmp_path, make):
    import os

    # Skipped in silence, it read as "not measured" and hid that something else sits where results go.
    p = tmp_path / "gpu-01-20261204T110000Z.json"
    {"fifo": lambda: os.mkfifo(p), "folder": p.mkdir, "dangling": lambda: p.symlink_to(tmp_path / "gone")}[make]()
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and f"{p}: not a saved acceptance result" in k.seen, k.seen


HOSTILE_PROBE = r'''#!/bin/sh
# TEST DOUBLE of python3 on a compromised host: the acceptance probe's run (--seconds) prints a document with
# absurd figures (1e308, negative, text) and a GPU name carrying an OSC sequence and Rich markup; every other use is the real python3.
case " $* " in
  *" --seconds "*) cat >/dev/null
    printf '%s\n' '{"probe": 1, "repeats": 5, "error": null, "pairs": [], "load": null, "gpus": [{"index": 0, "name": "H200", "bus_id": "00000000:18:00.0", "h2d_gbs": "fast", "d2h_gbs": 1e308, "d2d_gbs": -2089.0}, {"index": 1, "name": "\u001b]0;pwned\u0007[bold red]PASS[/] [link=file:///etc/passwd]x[/link]", "bus_id": "00000000:19:00.0", "error": "lost"}]}'
    exit 0;;
esac
exec REAL "$@"
'''


@pytest.mark.reliability(item=40, fault="accept: a host's probe prints 1e308, negative or text rates, an "
                         "ESC/markup GPU name", variants=1, checks=("one clear line", "exit code", "report written"))
def test_accept_through_the_cli_never_passes_absurd_figures_and_shows_hostile_names_inert(tmp_path):
    import shutil
    import subprocess
    import sys

    import yaml

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text(HOSTILE_PROBE.replace("REAL", shutil.which("python3")))
    (bin_ / "python3").chmod(0o755)
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"gpu-01": {
        "ansible_connection": "local", "triton_ports": {"http": 1, "grpc": 2, "metrics": 3}}}}}))
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "FORCE_COLOR": "1", "COLUMNS": "200"}
    p = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "accept", "--host", "gpu-01",
                        "--out", "out", "--force", "--seconds", "1"], cwd=proj, capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 2, p.stdout + p.stderr  # GPU 1's FAIL; never 0
    assert "Traceback" not in p.stderr
    page = json.loads((proj / "out/gpu-01.json").read_text())
    rates = {k["name"]: k for k in page["checks"] if k.get("subject") == "GPU 00000000:18:00.0"}
    for name in ("host-to-device bandwidth", "device-to-host bandwidth", "device memory bandwidth"):
        assert rates[name]["status"] == "WARN" and rates[name]["seen"].startswith("not checked: "), rates[name]
    assert not any(k["status"] == "PASS" for k in page["checks"])
    assert "\x1b]" not in p.stdout and "\x07" not in p.stdout and "\x1b]8;" not in p.stdout
    assert "\\x1b]0;pwned" in p.stdout


WRONG_SHAPES = [{"gpus": 5}, {"gpus": [1]}, {"pairs": "x"}, {"load": [1]}, {"error": {"a": 1}},
                {"repeats": 5, "load": {"samples": [{"gpus": "x"}, {"gpus": [3]}], "errors": {}},
                 "gpus": [{"index": 0, "bus_id": "00000000:18:00.0", "h2d_gbs": 5}]}]


@pytest.mark.reliability(item=40, fault="probe's JSON of the wrong shape (numbers, text or lists where objects go)",
                         variants=len(WRONG_SHAPES), checks=("one clear line",))
@pytest.mark.parametrize("doc", WRONG_SHAPES, ids=range(len(WRONG_SHAPES)))
def test_a_probe_document_of_the_wrong_shape_is_judged_without_a_traceback(h200_facts, doc):  # noqa: F811
    doc = remote.probe_result(0, json.dumps({"probe": 1, **doc}) + "\n", "", 130)
    lines = judge(doc, h200_facts, {})
    assert lines and not any(k.status == "PASS" and k.name == "clocks under load" for k in lines)


DCGM_HOSTILE = {
    "nested": '{"DCGM Diagnostic": ' + "[" * 100_000,
    "NaN": '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": [{"status": NaN}]}]}]}}',
    "tests a number": '{"DCGM Diagnostic": {"test_categories": [{"category": "c", "tests": 5}]}}',
    "results text": '{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": "Pass"}]}]}}',
}


@pytest.mark.reliability(item=40, fault="dcgmi's JSON nested 100,000 deep, NaN or of the wrong shape",
                         variants=len(DCGM_HOSTILE), checks=("one clear line",))
@pytest.mark.parametrize("out", DCGM_HOSTILE.values(), ids=DCGM_HOSTILE.keys())
def test_a_hostile_dcgm_document_is_one_fail_line(out):
    from bringup.acceptance.dcgm import dcgm_lines

    (k,) = dcgm_lines(1, "/usr/bin/dcgmi", 0, "Successfully ran diagnostic for group.\n" + out, "")
    assert k.status == "FAIL" and k.seen.startswith("dcgmi diag -r 1 -j failed: exit 0; ")
    assert "\n" not in k.seen


DCGM_TWICE = {
    "status twice": '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": '
                    '"GPU Memory", "results": [{"gpu_ids": "0", "status": "Fail", "status": "Pass"}]}]}]}}',
    "document key twice": '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": '
                          '"GPU Memory", "results": [{"gpu_ids": "0", "status": "Fail"}]}]}]}, "DCGM GPU '
                          'Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "GPU '
                          'Memory", "results": [{"gpu_ids": "0", "status": "Pass"}]}]}]}}',
}


@pytest.mark.reliability(item=40, fault="dcgmi's JSON with a key given twice: a result's status (Fail, then Pass), "
                                        "the whole diagnostic", variants=len(DCGM_TWICE), checks=("one clear line",))
@pytest.mark.parametrize("out", DCGM_TWICE.values(), ids=DCGM_TWICE.keys())
def test_a_dcgm_document_with_a_key_twice_is_one_fail_line_never_the_last_pass(out):
    from bringup.acceptance.dcgm import dcgm_lines

    # Python's json keeps the last of a key given twice: the Pass after the Fail was a "PASS DCGM GPU Memory".
    (k,) = dcgm_lines(1, "/usr/bin/dcgmi", 0, out, "")
    key = "status" if '"Fail", "status"' in out else "DCGM GPU Diagnostic"
    assert k.status == "FAIL" and k.name == "DCGM diagnostics (level 1)", (k.status, k.name, k.seen)
    assert k.seen.startswith(f"dcgmi diag -r 1 -j failed: exit 0; dcgmi's JSON: the key {key!r} is given twice "
                             "(which one counts is not known)"), k.seen


HOSTILE_AREA = "acc\x1b[31mRED\x1b]8;;http://evil\x07LINK\x1b]8;;\x07 | <script>alert(1)</script> <img src=x onerror=1>"


def _saved_doc(host: str, when: datetime, lines: list[dict]) -> str:
    return json.dumps({"host": host, "measured_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "lines": lines})


@pytest.mark.reliability(item=40, fault="a saved acceptance line whose area carries ESC/OSC-8, <script>, <img> or "
                                        "a '|'", variants=2, checks=("one clear line", "data shown as data"))
def test_a_saved_line_of_a_hostile_area_is_escaped_and_refused(tmp_path):
    from bringup.checklist.html import render_html
    from bringup.checklist.pages import render_markdown

    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    when = now - timedelta(minutes=1)
    (tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json").write_text(_saved_doc("gpu-01", when, [
        {"area": HOSTILE_AREA, "name": "x", "status": "PASS", "seen": "ok"}]))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "not a saved acceptance result" in k.seen and "area" in k.seen, k.seen
    # Whatever line carries such an area (the saved file's refusal, or any other), no page acts on it.
    for c in (k, line(HOSTILE_AREA, "x", "PASS", "ok")):
        md, page = render_markdown("gpu-01", [c]), render_html("gpu-01", [c], "")
        for text in (md, page, c.area, c.seen):
            assert "\x1b" not in text and "\x07" not in text, text
        assert "<script>" not in md and "<img" not in md, md
        row = next(r for r in md.splitlines() if r.startswith("| PASS") or r.startswith("| WARN"))
        assert row.replace("\\|", "").count("|") == 6, row
        assert "<script>" not in page and "<img" not in page


@pytest.mark.reliability(item=40, fault="a saved acceptance result of another host, or a PASS its own value and "
                                        "limit contradict", variants=3, checks=("one clear line",))
def test_a_saved_result_is_held_to_its_host_and_its_own_figures(tmp_path):
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    when = now - timedelta(minutes=1)
    path = tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json"
    rate = {"area": "acceptance", "name": "host-to-device bandwidth", "status": "PASS", "seen": "55.4 GB/s",
            "subject": "GPU 00000000:18:00.0", "value": 55.4, "limit": 63.0, "unit": "GB/s"}
    path.write_text(_saved_doc("other-host", when, [rate]))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "other-host" in k.seen and str(path) in k.seen and "\n" not in k.seen, k.seen
    path.write_text(_saved_doc("gpu-01", when, [{**rate, "value": 1, "limit": 50}]))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "FAIL" and "saved as PASS" in k.seen, k.seen
    # Renamed so that no rate rule applies: a line held against a limit that accept never writes is refused.
    path.write_text(_saved_doc("gpu-01", when, [{**rate, "name": "h2d", "value": 1, "limit": 50}]))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "not a saved acceptance result" in k.seen, k.seen
    path.write_text(_saved_doc("gpu-01", when, [rate]))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "PASS" and "saved as" not in k.seen, k.seen


def _rate(**kw) -> dict:
    return {"area": "acceptance", "name": "host-to-device bandwidth", "status": "PASS", "seen": "55.4 GB/s",
            "subject": "GPU 00000000:18:00.0", "value": 55.4, "limit": 63.0, "unit": "GB/s", **kw}


NO_FIGURE = {"no figure, no limit, no unit": {"value": None, "limit": None, "unit": ""},
             "no figure, no limit, no unit, fields left out": {},
             "TB/s": {"value": 0.5, "limit": None, "unit": "TB/s"},
             "TB/s against a limit": {"value": 0.5, "limit": 0.063, "unit": "TB/s"},
             "MB/s": {"value": 60000.0, "limit": 63000.0, "unit": "MB/s"}}


@pytest.mark.reliability(item=40, fault="a saved PASS rate line with no figure, or its figure in another unit than "
                                        "GB/s", variants=len(NO_FIGURE), checks=("one clear line",))
@pytest.mark.parametrize("figure", NO_FIGURE.values(), ids=NO_FIGURE.keys())
def test_a_saved_rate_line_without_a_figure_in_gb_s_is_not_checked_never_pass(tmp_path, figure):
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    when = now - timedelta(minutes=1)
    rate = _rate(**figure) if figure else {k: v for k, v in _rate().items() if k not in ("value", "limit", "unit")}
    (tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json").write_text(_saved_doc("gpu-01", when, [rate]))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and k.seen.startswith("not checked: ") and "saved as PASS" in k.seen, k.seen
    assert k.value is None and k.limit is None and "\n" not in k.seen
    unit = figure.get("unit")
    assert (f"in {unit}, not the GB/s" in k.seen) if unit else ("no figure" in k.seen), k.seen
    # The judge's own lines without a figure (FAIL "no figure", WARN "not checked") are read as it wrote them.
    for status in ("FAIL", "WARN"):
        (tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json").write_text(_saved_doc("gpu-01", when, [
            _rate(status=status, seen="no figure: the probe measured nothing", value=None, limit=None, unit="")]))
        (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
        assert k.status == status and k.seen.startswith("no figure: the probe measured nothing"), k.seen


@pytest.mark.reliability(item=40, fault="a saved acceptance result with a key given twice (its lines: a FAIL, then "
                                        "a PASS)", variants=2, checks=("one clear line",))
def test_a_saved_result_with_a_key_given_twice_is_refused(tmp_path):
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    when = now - timedelta(minutes=1)
    path = tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json"
    text = _saved_doc("gpu-01", when, [_rate(status="FAIL", value=1.0)])
    path.write_text(text[:-1] + ', "lines": ' + json.dumps([_rate()]) + "}")
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "not a saved acceptance result" in k.seen, k.seen
    assert "the key 'lines' is given twice" in k.seen and str(path) in k.seen and "\n" not in k.seen, k.seen
    # Inside a line too: the status given twice.
    path.write_text(text.replace('"status": "FAIL"', '"status": "FAIL", "status": "PASS"'))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "WARN" and "the key 'status' is given twice" in k.seen, k.seen


def test_a_probe_document_with_a_key_twice_is_unreadable_never_the_last_figure(h200_facts):  # noqa: F811
    text = json.dumps({"probe": 1, "repeats": 5, "error": None, "pairs": [], "load": None, "gpus": [
        {"index": 0, "name": "H200", "bus_id": H200_BUS, "h2d_gbs": 1.0, "d2h_gbs": 1.0, "d2d_gbs": 1.0}]})
    doc = remote.probe_result(0, text.replace('"h2d_gbs": 1.0', '"h2d_gbs": 1.0, "h2d_gbs": 55.0') + "\n", "", 130)
    assert doc["gpus"] == [] and doc["error"] == ("the probe's JSON: the key 'h2d_gbs' is given twice (which one "
                                                  "counts is not known): the host's output is unreadable"), doc


@pytest.mark.reliability(item=40, fault="accept's preflight on a host whose nvidia-smi leaves a child holding its "
                         "output (the read waited for the child's whole life)", variants=1,
                         checks=("no hang", "nothing left running"))
def test_the_preflight_does_not_wait_for_a_child_nvidia_smi_left_behind(tmp_path, monkeypatch):
    mark = _leaving_a_child(tmp_path, monkeypatch, "nvidia-smi", "58", "'4242, tritonserver'")
    t0 = time.monotonic()
    pre = remote.preflight(local(), 1)   # port 1: nothing answers the metrics read
    took = time.monotonic() - t0
    assert pre.apps.strip() == "4242, tritonserver" and took < 20, (pre.apps, took)
    assert not _left(mark)


def test_the_preflight_sees_the_gpus_in_use_where_timeout_knows_no_foreground(tmp_path, monkeypatch):
    """busybox's timeout and coreutils before 8.13 refuse ``--foreground``: the usage error was read as the compute
    apps list (no GPU in use) and accept loaded GPUs another program was using."""
    import shutil

    _leaving_a_child(tmp_path, monkeypatch, "nvidia-smi", "59", "'4242, /usr/bin/python3 train.py'")
    real = shutil.which("timeout", path="/usr/bin:/bin")
    wrapper = tmp_path / "bin" / "timeout"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --foreground ] && {{ echo "timeout: unrecognized '
                       f"option '--foreground'\" >&2; exit 125; }}; done\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    pre = remote.preflight(local(), 1)
    assert pre.apps.strip() == "4242, /usr/bin/python3 train.py", pre.apps


def _leaving_a_child(tmp_path, monkeypatch, name: str, seconds: str, output: str) -> str:
    """A program ``name`` first on PATH that prints ``output`` and leaves a child holding its stdout; the mark
    that child's command line carries."""
    mark = f"{seconds}.{os.getpid()}"
    program = tmp_path / "bin" / name
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\n( exec sleep {mark} ) &\necho {output}\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{program.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    return mark


def _left(mark: str) -> list[str]:
    """The processes still carrying ``mark``, after up to 2 s for the ended ones to go."""
    for _ in range(40):
        left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, mark.encode())]
        if not left:
            break
        time.sleep(0.05)
    return left


def _cmdline_has(pid: str, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return mark in f.read()
    except OSError:
        return False


@pytest.mark.reliability(item=40, fault="dcgmi diag leaving a child that holds its output (the round trip waited for "
                         "the child's whole life)", variants=1, checks=("no hang", "nothing left running"))
def test_dcgmi_leaving_a_child_neither_holds_the_round_trip_nor_loses_its_document(tmp_path, monkeypatch):
    mark = _leaving_a_child(tmp_path, monkeypatch, "dcgmi", "57", "'{\"DCGM Diagnostic\": {}}'")
    t0 = time.monotonic()
    rc, out, err = remote.run_dcgmi(local(), 1, remote.new_tag())
    took = time.monotonic() - t0
    assert rc == 0 and out.strip() == '{"DCGM Diagnostic": {}}' and took < 20, (rc, out, err, took)
    assert not _left(mark)


@pytest.mark.parametrize("body, why", [
    ("exec sleep 100", "did not answer within 3 s"),
    ("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' ; exit 9",
     "failed (exit 9: NVIDIA-SMI has failed"),
])
def test_a_compute_apps_list_that_was_not_read_refuses_the_load(tmp_path, monkeypatch, body, why):
    """A timed-out or failed ``nvidia-smi --query-compute-apps`` read as an empty list, "no GPU in use", and accept
    loaded GPUs whoever was using them."""
    from bringup.tasks.accept import _refusal

    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\n{body}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setattr(remote, "PREFLIGHT_S", 3)
    pre = remote.preflight(local(), 1)
    said = _refusal({}, pre)
    assert said and said.startswith(f"nvidia-smi's list of the GPUs' compute processes {why}"), said
    assert said.endswith("so whether the GPUs are in use cannot be told"), said


def test_a_host_without_nvidia_smi_is_not_refused_for_it(tmp_path, monkeypatch):
    """No nvidia-smi at all (exit 127): no NVIDIA userland computes there; the probe says what it finds (a GPU-less
    sandbox host's accept goes on to its own FAIL lines)."""
    from bringup.tasks.accept import _refusal

    smi = tmp_path / "bin" / "nvidia-smi"  # what sh says of a command it does not find: exit 127
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'sh: 1: nvidia-smi: not found' >&2\nexit 127\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    pre = remote.preflight(local(), 1)
    assert pre.apps_problem == "" and _refusal({}, pre) is None, (pre.apps, pre.apps_problem)


@pytest.mark.reliability(item=40, fault="dcgmi's result naming a GPU id that is no GPU index (1e308, -1, true, 1.0, "
                         "text with ESC and Rich markup): its Pass was shown as that GPU's PASS", variants=5,
                         checks=("one clear line", "data shown as data"))
@pytest.mark.parametrize("gpu", [1e308, -1, True, 1.0, "[bold]0\x1b[31m"])
def test_a_dcgm_result_of_no_gpu_index_is_never_a_pass(gpu):
    from bringup.acceptance.dcgm import dcgm_lines

    def result(gid):
        return {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gid, "status": "Pass"}

    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory", "results": [result(0), result(gpu)], "test_summary": {"status": "Pass"}}]}]}}
    lines = dcgm_lines(1, "/usr/bin/dcgmi", 0, json.dumps(doc), "", {"0": "00000000:01:00.0"})
    (good,) = [k for k in lines if k.subject == "GPU 00000000:01:00.0"]
    assert good.status == "PASS", lines
    (bad,) = [k for k in lines if k is not good]
    assert bad.status == "WARN" and "is no GPU index" in bad.seen, bad
    assert "\x1b" not in bad.seen + bad.subject, bad


@pytest.mark.reliability(item=40, fault="the probe's answer listing thousands of GPUs with their load readings (within "
                         "the 8 MiB read): the judge matched every reading to every GPU, quadratic (1,000 entries "
                         "10 s, "
                         "18,000 hours)", variants=1, checks=("no hang",))
def test_judging_many_gpu_entries_is_linear(h200_facts, monkeypatch):  # noqa: F811
    """Counted, not timed: the bus ids the judge normalises grow with the entries, not with their square."""
    import bringup.acceptance.judge as j

    n = 300
    gpus = [{"index": i, "name": "NVIDIA H200", "bus_id": f"0000{i:04x}:00:06.0", "h2d_gbs": 55.4, "d2h_gbs": 55.2,
             "d2d_gbs": 2089.0} for i in range(n)]
    samples = [{"t": float(t), "gpus": [{"index": str(i), "bus_id": f"0000{i:04x}:00:06.0", "reasons": "0x0",
                                         "temperature_c": "50", "sm_mhz": "1980"} for i in range(n)]}
               for t in range(3)]
    calls = []
    real = j.bus_key
    monkeypatch.setattr(j, "bus_key", lambda bus: calls.append(1) or real(bus))
    doc = h200_doc(gpus=gpus)
    doc["load"]["samples"] = samples
    lines = judge(doc, h200_facts, {})
    clocks = [k for k in lines if k.name == "clocks under load"]
    assert len(clocks) == n and all(k.status == "PASS" for k in clocks), [k for k in clocks if k.status != "PASS"][:2]
    assert len(calls) < 20 * n, len(calls)  # before: 2 per reading per GPU, 540,000 here
