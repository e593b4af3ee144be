"""The run's JSON report: the document json.dumps gives, rewritten as each host ends, secrets masked."""
import json
from dataclasses import asdict

import pytest

from bringup.engine.report import Report
from bringup.engine.results import HostResult, ResourceResult
from bringup.secrets import HIDDEN, MASK


def _result(host: str, note: str = "") -> HostResult:
    return HostResult(host, round_trips=2, seconds=0.25, fact_errors={"os.kernel": "odd"}, resources=[
        ResourceResult("sysctl", "file:/etc/sysctl.d/90-trt-latency.conf", "changed",
                       changes={"content": ["absent", "ab12"]}, diff="+ a = 1\n"),
        ResourceResult("sysctl", "sysctl:vm.swappiness", "ok", reason=note or None),
        ResourceResult("irq_affinity", "irq:35", "skipped", reason="a container: 'quoted' \"text\" ü")])


def test_the_report_is_the_document_of_every_host_in_inventory_order(tmp_path):
    rep = Report(tmp_path, command="provision", args={"hosts": ["b", "a", "c"], "check": False},
                 hosts=["b", "a", "c"])
    first = json.loads(rep.path.read_text())
    assert first["finished"] is None and first["hosts"] == [{"host": h, "status": "pending"} for h in "bac"]
    rep.add(_result("a"))
    mid = json.loads(rep.path.read_text())
    assert [h["status"] for h in mid["hosts"]] == ["pending", "ok", "pending"]
    rep.add(_result("c"))
    rep.add(_result("b"))
    doc = json.loads(rep.write(finished=True).read_text())
    assert doc["command"] == "provision" and doc["args"]["check"] is False and doc["finished"]
    assert doc["hosts"] == [dict(asdict(_result(h)), recap=_result(h).recap) for h in "bac"]
    # What json.dumps(doc, indent=2) writes, byte for byte: the hosts' texts are joined, not re-encoded.
    assert rep.path.read_text() == json.dumps(doc, indent=2) + "\n"


def test_a_secret_known_after_a_host_was_written_is_masked_in_the_next_write(tmp_path):
    late = "late-s3cret-9f81"
    rep = Report(tmp_path, command="audit", args={}, hosts=["a", "b"])
    rep.add(_result("a", note=f"token {late}"))
    assert late in rep.path.read_text()  # not a secret yet
    MASK.add(late)
    rep.add(_result("b"))
    text = rep.path.read_text()
    assert late not in text and json.loads(text)["hosts"][0]["resources"][1]["reason"] == f"token {HIDDEN}"


def test_a_host_added_again_replaces_its_text(tmp_path):
    rep = Report(tmp_path, command="provision", args={}, hosts=["a"])
    rep.add(HostResult("a", status="failed", message="first"))
    rep.add(HostResult("a", status="ok", message="second"))
    assert json.loads(rep.path.read_text())["hosts"][0]["message"] == "second"


def test_no_hosts(tmp_path):
    rep = Report(tmp_path, command="audit", args={}, hosts=[])
    assert json.loads(rep.write(finished=True).read_text())["hosts"] == []


def test_what_a_host_prints_keeps_its_brackets():
    """rich read `[sysctl]` and values like `[2, 4]` as markup and dropped them from the operator's screen."""
    import io

    from rich.console import Console

    from bringup.engine.report import print_host

    r = HostResult("h[1]", status="unreachable", message="ssh to 10.0.0.1:22 failed: [Errno 111] refused",
                   round_trips=1, seconds=0.5, fact_errors={"nvidia.smi": "column [bold] shifted"}, resources=[
                       ResourceResult("triton", "file:/data/models/m/config.pbtxt", "changed",
                                      changes={"preferred_batch_size": [[2, 4], [2, 4, 8]]}, diff="+ dims: [3, 224]\n"),
                       ResourceResult("sysctl", "sysctl:net.core.busy_poll", "skipped", reason="no such key [red]"),
                       ResourceResult("files", "file:/etc/profile.d/ps1.sh", "changed", changes={"content": ["a", "b"]},
                                      diff="+PS1='\\[\\e[1;32m\\]\\u'\n+grep '\\[0-9]' x\n", error="ends with C:\\")],
                   reboot_required=True, reboot_reason="driver [550] loaded")
    out = io.StringIO()
    print_host(r, Console(file=out, width=300, color_system=None), check=False, diff=True)
    text = out.getvalue()
    for shown in ("h[1]", "[Errno 111] refused", "column [bold] shifted", "[triton] file:/data/models/m/config.pbtxt",
                  "preferred_batch_size: [2, 4] → [2, 4, 8]", "+ dims: [3, 224]", "[sysctl] sysctl:net.core.busy_poll",
                  "no such key [red]", "driver [550] loaded", "1 round trip(s), 0.50 s",
                  "+PS1='\\[\\e[1;32m\\]\\u'", "+grep '\\[0-9]' x", "ends with C:\\\n"):
        assert shown in text, (shown, text)


@pytest.mark.reliability(item=25, fault="a host never started read as all zeros in the recap", checks=("recap and report",))
def test_a_host_that_never_started_says_so_in_the_recap():
    from bringup.engine.report import recap_line
    from bringup.engine.results import HostResult

    line = recap_line(HostResult("b", status="not started", message="not started: the run was interrupted by SIGINT"))
    assert line.endswith("unreachable=0  (not started: the run was interrupted by SIGINT)"), line
    assert recap_line(HostResult("c")).endswith("unreachable=0")
