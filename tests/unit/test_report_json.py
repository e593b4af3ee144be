"""The run's JSON report: the document json.dumps gives, rewritten as each host ends, secrets masked."""
import json
from dataclasses import asdict

from bringup.report import Report
from bringup.runner import HostResult, ResourceResult
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
