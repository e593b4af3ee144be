"""Issue 31 part 2: dcgmi diag -j read into lines (bringup.acceptance.dcgm), and the refusal to load a host
whose Triton serves requests (bringup.acceptance.serving).

DCGM: the public capture is one test object of a real DCGM 4 document (NVIDIA/DCGM#215, the ``diagnostic``
test on 8 GPUs, all Pass; tests/fixtures/hosts/public/dcgmi-diag-r3-v4-8gpu-diagnostic-excerpt.txt).  It is an
excerpt, so each test here wraps it in the document DCGM 4 prints around its tests ("DCGM Diagnostic" >
"test_categories" > a category's "tests", then "metadata"), and the failing variant changes GPU 5's status to
"Fail" with a warning in the shape DCGM 4 prints ({"warning", "error_id", ...}); the DCGM 3.x shape ("DCGM GPU
Diagnostic", "gpu_ids") is written from NVIDIA/DCGM nvvs/src/JsonOutput.cpp's description of it.

Triton: the metrics are the captured tests/fixtures/triton/metrics-2.51-summary.txt (add's
nv_inference_request_success 50); the second read is that text with the counter moved to 53, built here.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.acceptance.dcgm import DiagError, dcgm_lines, parse_diag
from bringup.acceptance.serving import UNREACHABLE, compute_apps, refusal, request_count

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def excerpt() -> str:
    text = "".join(l for l in (FIX / "hosts/public/dcgmi-diag-r3-v4-8gpu-diagnostic-excerpt.txt").read_text()
                   .splitlines(keepends=True) if not l.startswith("#"))
    return text.rstrip().rstrip(",")  # the excerpt ends with the comma before the next test


def v4_document(test_text: str) -> str:
    return ('Successfully ran diagnostic for group.\n{"DCGM Diagnostic": {"test_categories": [{"category": '
            '"Stress", "tests": [' + test_text + ']}]}, "metadata": {"version": "4.1.0"}}')


BUS = {str(i): f"00000000:{0x18 + i:02X}:00.0" for i in range(8)}


def test_the_real_dcgm4_test_passes_per_gpu():
    diag = parse_diag(v4_document(excerpt()))
    assert diag["version"] == "4.1.0"
    (t,) = diag["tests"]
    assert (t["name"], t["summary"], [r["gpu"] for r in t["results"]]) == ("diagnostic", "PASS",
                                                                          [str(i) for i in range(8)])
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 0, v4_document(excerpt()), "", BUS)
    assert [(k.status, k.name) for k in lines] == [("PASS", "DCGM diagnostic")] * 8
    assert lines[5].subject == "GPU 00000000:1D:00.0" and lines[0].area == "acceptance"


def test_a_gpu_failing_a_dcgm_test_fails_that_gpu():
    test = json.loads(excerpt())
    test["results"][5].update(status="Fail", warnings=[{"error_category": 4, "error_id": 25, "error_severity": 2,
                                                        "warning": "GPU 5 had an uncorrectable ECC error"}])
    test["test_summary"]["status"] = "Fail"
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 226, v4_document(json.dumps(test)), "", BUS)
    failed = [k for k in lines if k.status == "FAIL"]
    assert [(k.subject, k.seen) for k in failed] == [
        ("GPU 00000000:1D:00.0", "Stress: fail: GPU 5 had an uncorrectable ECC error")]
    assert "Xid" in failed[0].fix


def test_the_dcgm3_shape_is_read_too():
    doc = {"DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"gpu_ids": "0,1", "status": "PASS"}]}]},
        {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
            {"gpu_ids": "0", "status": "PASS"}, {"gpu_ids": "1", "status": "FAIL",
                                                  "warnings": ["Memory error on GPU 1"]}]}]},
        {"category": "Integration", "tests": [{"name": "PCIe", "results": [{"gpu_ids": "0", "status": "SKIP"}]}]}],
        "version": "3.3.9"}}
    lines = dcgm_lines(1, "/usr/bin/dcgmi", 0, json.dumps(doc), "", {})
    assert [(k.name, k.status, k.subject) for k in lines] == [
        ("DCGM Denylist", "PASS", ""), ("DCGM GPU Memory", "PASS", "GPU 0"), ("DCGM GPU Memory", "FAIL", "GPU 1"),
        ("DCGM PCIe", "PASS", "GPU 0")]
    assert "skipped by DCGM" in lines[3].seen


@pytest.mark.reliability(item=31, fault="dcgmi absent on the host",
                         checks=('one clear line',))
def test_dcgmi_absent_is_one_warn_saying_how_to_get_it():
    (k,) = dcgm_lines(1, "", None, "", "")
    assert k.status == "WARN" and "not installed" in k.seen and "datacenter-gpu-manager" in k.fix


@pytest.mark.reliability(item=31, fault="dcgmi failing, timing out or printing no diagnostic document",
                         checks=('one clear line',))
@pytest.mark.parametrize("rc, out, err, said", [
    (255, "", "Error: unable to establish a connection to the specified host: localhost",
     "exit 255; no JSON document in dcgmi's output: Error: unable to establish a connection"),
    (124, "", "", "timed out (killed by timeout)"),
    (0, '{"DCGM Diagnostic": {"test_categories": [', "", "dcgmi's JSON does not parse"),
    (0, '{"something": 1}', "", "no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' test_categories"),
])
def test_dcgmi_failing_or_not_json_is_one_named_fail(rc, out, err, said):
    (k,) = dcgm_lines(2, "/usr/bin/dcgmi", rc, out, err)
    assert k.status == "FAIL" and k.name == "DCGM diagnostics (level 2)" and said in k.seen, k.seen


def test_a_cut_dcgm_document_is_refused():
    with pytest.raises(DiagError):
        parse_diag(v4_document(excerpt())[:-40])


# --- Triton serving ---------------------------------------------------------------------------------------------

def metrics(n: int) -> str:
    text = (FIX / "triton/metrics-2.51-summary.txt").read_text()
    assert 'nv_inference_request_success{model="add",version="1"} 50\n' in text
    return text.replace('nv_inference_request_success{model="add",version="1"} 50\n',
                        f'nv_inference_request_success{{model="add",version="1"}} {n}\n')


def test_the_captured_metrics_count_requests():
    assert request_count(metrics(50)) == 50.0
    assert request_count(UNREACHABLE + " URLError") is None and request_count("not prometheus {") is None


def test_requests_rising_refuse():
    why = refusal(metrics(50), metrics(53), "", 8002, 3)
    assert why == "Triton is serving requests (nv_inference_request_success rose by 3 in 3 s on its metrics port 8002)"


def test_an_idle_triton_is_no_reason_to_refuse_even_holding_the_gpu():
    assert refusal(metrics(50), metrics(50), "1234, /opt/tritonserver/bin/tritonserver\n", 8002, 3) is None


def test_silent_metrics_and_a_gpu_process_refuse_naming_it():
    why = refusal(UNREACHABLE + " URLError", UNREACHABLE + " URLError", "1234, tritonserver\n", 8002, 3)
    assert "tritonserver (pid 1234)" in why and "metrics port 8002 did not answer" in why


def test_nothing_running_is_no_reason():
    assert refusal(UNREACHABLE, UNREACHABLE, "", 8002, 3) is None
    assert compute_apps("No running processes found\n") == []


@pytest.mark.reliability(item=40, fault="Triton's metrics with a series printed twice (a doubled or double-scraped "
                         "text) summed, and a request count that fell between the reads, read as idle: the GPUs loaded "
                         "under a serving Triton", variants=4, checks=("one clear line",))
def test_a_series_twice_or_a_count_that_fell_refuses_never_idle():
    row = 'nv_inference_request_success{model="add",version="1"} 50\n'
    doubled = metrics(50).replace(row, row + row.replace('model="add",version="1"', 'version="1",model="add"'))
    # The first read doubled (100), the second whole (53 after 3 requests): summed, 53 < 100 read as idle.
    for first, second in ((doubled, metrics(53)), (metrics(50), doubled)):
        why = refusal(first, second, "", 8002, 3)
        assert why == ("Triton's metrics port 8002 answered values that are no counts (nv_inference_request_success"
                       "{model='add',version='1'} printed twice), so whether requests are being served cannot be told")
    # A queue length printed twice is no count either.
    queued = metrics(50) + '\n' + 'nv_inference_pending_request_count{model="m"} 0\n' * 2
    assert "nv_inference_pending_request_count{model='m'} printed twice" in refusal(metrics(50), queued, "", 8002, 3)
    # A count that fell: a restart between the reads (or a read not Triton's) tells nothing of what was served.
    why = refusal(metrics(53), metrics(50), "", 8002, 3)
    assert "nv_inference_request_success fell from 53 to 50 in 3 s" in why and "cannot be told" in why


def test_the_real_gb10_document_failing_its_software_test():
    """A whole ``dcgmi diag -r 1 -j`` a GB10 printed (DCGM 4.2.3, exit 226; tests/fixtures/hosts/public/
    dcgmi-diag-r1-json-gb10-fail-dcgm4.txt): the Deployment test 'software' failed on GPU 0 for persistence mode."""
    text = "".join(l for l in (FIX / "hosts/public/dcgmi-diag-r1-json-gb10-fail-dcgm4.txt").read_text()
                   .splitlines(keepends=True) if not l.startswith("#"))
    diag = parse_diag(text)
    assert [t["name"] for t in diag["tests"]][0] == "software"
    lines = dcgm_lines(1, "/usr/bin/dcgmi", 226, text, "", {"0": "0000000F:01:00.0"})
    failed = [k for k in lines if k.status == "FAIL"]
    assert [(k.name, k.subject) for k in failed] == [("DCGM software", "GPU 0000000F:01:00.0")], lines
    assert "Persistence mode for GPU 0 is disabled" in failed[0].seen


def test_the_refusal_sees_queued_requests_and_other_programs_beside_an_idle_triton():
    # A trickle slower than one request per window: no success yet, but requests waiting in Triton's queue.
    queued = metrics(50) + '\nnv_inference_pending_request_count{model="resnet50",version="1"} 2\n'
    why = refusal(metrics(50), queued, "", 8002, 3)
    assert why and "2 request(s) in its queues" in why
    # Triton idle, a training job on the GPUs: the load would slow it.
    apps = "1234, /opt/tritonserver/bin/tritonserver\n4321, python3 train.py\n"
    why = refusal(metrics(50), metrics(50), apps, 8002, 3)
    assert why and "python3 train.py (pid 4321)" in why and "idle Triton" in why
    # Triton's own Python backend stubs are Triton, not another program.
    assert refusal(metrics(50), metrics(50), "1234, tritonserver\n99, triton_python_backend_stub\n", 8002, 3) is None


@pytest.mark.reliability(item=40, fault="a DCGM document that contradicts itself or its exit status",
                         variants=5, checks=("one clear line",))
def test_a_dcgm_document_at_odds_with_itself_or_its_exit_is_never_a_plain_pass():
    """Found by a hostile-input review: each of these read as PASS."""
    # A summary saying Fail while each GPU's result passed: a line of its own, FAIL.
    test = json.loads(excerpt())
    test["test_summary"]["status"] = "Fail"
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 226, v4_document(json.dumps(test)), "", BUS)
    assert [k.status for k in lines] == ["PASS"] * 8 + ["FAIL"]
    assert lines[-1].subject == "" and "its summary, though no GPU's result says so" in lines[-1].seen
    # A test with no result and no summary: DCGM said nothing of it.
    for empty in ({"name": "memory", "results": []}, {"name": "memory"}):
        (k,) = dcgm_lines(1, "/usr/bin/dcgmi", 0, v4_document(json.dumps(empty)), "", {})
        assert k.status == "WARN" and "status DCGM did not name" in k.seen, k
    # Two documents, a Pass then a Fail: which one is the run's is not known.
    failing = json.loads(excerpt())
    failing["results"][0]["status"] = "Fail"
    two = v4_document(excerpt()) + "\n" + v4_document(json.dumps(failing))
    (k,) = dcgm_lines(1, "/usr/bin/dcgmi", 226, two, "", BUS)
    assert k.status == "FAIL" and "more than one document" in k.seen
    # Every test passed, yet dcgmi failed, or was killed by its time limit.
    for rc, status, words in ((1, "WARN", "exited 1 though every test it printed passed"),
                              (137, "FAIL", "timed out (killed by timeout)")):
        lines = dcgm_lines(3, "/usr/bin/dcgmi", rc, v4_document(excerpt()), "", BUS)
        assert [k.status for k in lines[:8]] == ["PASS"] * 8 and lines[-1].status == status, lines
        assert words in lines[-1].seen


def test_a_gpu_dcgm_did_not_diagnose_fails_by_name():
    # The real 8-GPU result with GPU 7's result removed: nvidia-smi lists 8, DCGM diagnosed 7.
    test = json.loads(excerpt())
    test["results"] = [r for r in test["results"] if str(r.get("entity_id")) != "7"]
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 0, v4_document(json.dumps(test)), "", BUS)
    failed = [k for k in lines if k.status == "FAIL"]
    assert [(k.name, k.seen) for k in failed] == [
        ("DCGM diagnostics (level 3)", "DCGM diagnosed 7 of 8 GPUs (missing: GPU 7 00000000:1F:00.0 from diagnostic)")]
    assert not [k for k in dcgm_lines(3, "/usr/bin/dcgmi", 0, v4_document(excerpt()), "", BUS) if k.status != "PASS"]


def gb10_document() -> str:
    """The real DCGM 4 ``dcgmi diag -r 1 -j`` of a GB10 (tests/fixtures/hosts/public/...gb10-fail-dcgm4.txt): its
    "software" test names GPU 0 alone, Fail (persistence mode off)."""
    return "".join(l for l in (FIX / "hosts/public/dcgmi-diag-r1-json-gb10-fail-dcgm4.txt").read_text()
                   .splitlines(keepends=True) if not l.startswith("#"))


def test_a_software_test_naming_only_its_failing_gpu_is_no_missing_gpus():
    # DCGM's software test names a GPU only where it failed: on an 8-GPU host with GPU 0's persistence mode off it
    # names GPU 0 alone.  It added a false "DCGM diagnosed 1 of 8 GPUs" FAIL beside the real one.
    lines = dcgm_lines(1, "/usr/bin/dcgmi", 226, gb10_document(), "", BUS)
    assert [(k.status, k.name, k.subject) for k in lines] == [("FAIL", "DCGM software", "GPU 00000000:18:00.0")]
    assert "Persistence mode for GPU 0 is disabled" in lines[0].seen
    # Beside a per-GPU test that lists its 8 GPUs: still no coverage FAIL; with GPU 7 gone from it, the FAIL names it.
    gb10 = json.loads(gb10_document())
    gb10["DCGM Diagnostic"]["test_categories"].append({"category": "Stress", "tests": [json.loads(excerpt())]})
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 226, json.dumps(gb10), "", BUS)
    assert [(k.status, k.name) for k in lines] == [("FAIL", "DCGM software")] + [("PASS", "DCGM diagnostic")] * 8
    gb10["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"].pop()
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 226, json.dumps(gb10), "", BUS)
    assert [(k.status, k.seen) for k in lines if k.name == "DCGM diagnostics (level 3)"] == [
        ("FAIL", "DCGM diagnosed 7 of 8 GPUs (missing: GPU 7 00000000:1F:00.0 from diagnostic)")]


def test_a_per_gpu_test_naming_only_the_gpus_it_failed_on_is_no_missing_gpus():
    # The real 8-GPU diagnostic with only GPU 5's result left, a Fail: DCGM named the failure, not the GPUs it ran on.
    test = json.loads(excerpt())
    test["results"] = [dict(test["results"][5], status="Fail", warnings=[{"warning": "GPU 5 had an uncorrectable "
                                                                                      "ECC error", "error_id": 25}])]
    test["test_summary"]["status"] = "Fail"
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 226, v4_document(json.dumps(test)), "", BUS)
    assert [(k.status, k.subject) for k in lines] == [("FAIL", "GPU 00000000:1D:00.0")]
    # Naming GPU 5 as a Pass alone, though: a per-GPU list without the other 7, which were not diagnosed.
    test["results"][0]["status"] = "Pass"
    lines = dcgm_lines(3, "/usr/bin/dcgmi", 226, v4_document(json.dumps(test)), "", BUS)
    assert lines[-1].status == "FAIL" and lines[-1].seen.startswith("DCGM diagnosed 1 of 8 GPUs (missing: GPU 0 ")
