"""The acceptance probe (bringup/acceptance/probe.py) run for real, against a TEST DOUBLE of libcuda.so.1.

harness/doubles/fake_libcuda.c is a stand-in for NVIDIA's library (no GPU here): the few driver API symbols the
probe calls, copies that sleep for size / rate, and modes for the faults: no GPU, cuInit refusing, the GPU
lost on the 2nd device copy (CUDA_ERROR_LAUNCH_FAILED), a copy that never returns.  It is built here with gcc
into a temporary folder and loaded through BRINGUP_LIBCUDA; nvidia-smi is a stand-in script too
(BRINGUP_NVIDIA_SMI), one that knows only the old clocks_throttle_reasons field name.  Each fault must come back
as one named error in the probe's one JSON document, within its bound, with no process left behind.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.acceptance.judge import judge
from harness.doubles.libcuda import build_fake_libcuda

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "bringup" / "acceptance" / "probe.py"

OLD_SMI = """#!/bin/sh
# TEST DOUBLE of nvidia-smi of an older driver: clocks_event_reasons is not a field it knows.
case "$1" in
  *clocks_event_reasons*) echo 'Field "clocks_event_reasons.active" is not a valid field to query.'; exit 2;;
esac
echo "0, 00000000:18:00.0, 0x0000000000000040, 93, 1410"
echo "1, 00000000:19:00.0, 0x0000000000000000, 60, 1980"
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    return build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))


@pytest.fixture(scope="module")
def smi(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("smi") / "nvidia-smi"
    p.write_text(OLD_SMI)
    p.chmod(0o755)
    return p


def run(lib: Path, mode: str, *args: str, gpus: int = 2, smi: Path | None = None, lib_env: str | None = None):
    env = {**os.environ, "FAKE_CUDA_MODE": mode, "FAKE_CUDA_GPUS": str(gpus),
           "BRINGUP_LIBCUDA": lib_env if lib_env is not None else str(lib),
           "BRINGUP_NVIDIA_SMI": str(smi) if smi else "/nonexistent/nvidia-smi"}
    p = subprocess.Popen([sys.executable, str(PROBE), "--size-mib", "2", "--repeats", "3", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
    assert err == "", err  # never a traceback
    lines = out.splitlines()
    assert len(lines) == 1, out  # one JSON document
    return p.returncode, json.loads(lines[0]), p.pid


def alive(pid: int) -> bool:
    """Whether any process of the probe's session (pgid = its pid: start_new_session) is left."""
    try:
        os.killpg(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_two_gpus_measured_with_pairs_and_a_load_read_by_the_old_field(lib, smi):
    rc, doc, p = run(lib, "ok", "--seconds", "2", smi=smi)
    assert rc == 0 and doc["error"] is None
    assert [g["bus_id"] for g in doc["gpus"]] == ["00000000:18:00.0", "00000000:19:00.0"]
    assert all(g["h2d_gbs"] > 0 and g["d2h_gbs"] > 0 and g["d2d_gbs"] > 0 and len(g["h2d_runs"]) == 3
               for g in doc["gpus"])
    assert [(x["src"], x["dst"], x["peer_access"]) for x in doc["pairs"]] == [(0, 1, True)]
    assert doc["load"]["field"] == "clocks_throttle_reasons.active"
    assert doc["load"]["samples"] and doc["load"]["rounds"]["0"] > 0
    # The stand-in nvidia-smi shows GPU 0 in HW thermal slowdown: the judge fails it, not GPU 1.
    clocks = {k.subject: k.status for k in judge(doc, {}, {}) if k.name == "clocks under load"}
    assert clocks == {"GPU 00000000:18:00.0": "FAIL", "GPU 00000000:19:00.0": "PASS"}
    assert not alive(p)


@pytest.mark.parametrize("mode, error", [
    ("nogpu", "the CUDA driver sees no GPU (cuDeviceGetCount: 0)"),
    ("initfail", "cuInit: CUDA_ERROR_NO_DEVICE (100)"),
])
def test_no_usable_gpu_is_one_named_error(lib, mode, error):
    rc, doc, _ = run(lib, mode)
    assert (rc, doc["error"], doc["gpus"]) == (1, error, [])
    lines = judge(doc, {}, {})
    assert [(k.status, k.seen) for k in lines] == [("FAIL", error)]


@pytest.mark.reliability(item=31, fault="acceptance probe on a host without libcuda.so.1",
                         checks=('one clear line', 'no hang'))
def test_no_libcuda_is_named_with_its_fix(lib):
    rc, doc, _ = run(lib, "ok", lib_env="")  # the real name, libcuda.so.1: this machine has no driver
    if doc["error"] is None:
        pytest.fail("this machine has a real libcuda.so.1: the test needs one without it")
    assert (rc, doc["error"]) == (1, "libcuda.so.1 not found: install the NVIDIA driver")
    assert "provision --roles nvidia_driver" in judge(doc, {}, {})[0].fix


@pytest.mark.reliability(item=31, fault="a GPU lost mid-test (CUDA_ERROR_LAUNCH_FAILED on a copy)",
                         checks=('one clear line', 'no hang'))
def test_a_gpu_lost_mid_test_is_that_gpus_named_error(lib):
    rc, doc, _ = run(lib, "lost", gpus=1)
    assert doc["gpus"][0]["error"] == "cuMemcpyDtoD_v2: CUDA_ERROR_LAUNCH_FAILED (719)"
    lines = judge(doc, {}, {})
    assert [(k.status, k.name, k.subject) for k in lines] == [("FAIL", "copies", "GPU 00000000:18:00.0")]


@pytest.mark.reliability(item=31, fault="a GPU copy that never returns",
                         checks=('one clear line', 'no hang', 'no leftovers'))
def test_a_copy_that_never_returns_ends_the_probe_at_its_watchdog(lib):
    import time

    t0 = time.monotonic()
    env_run = run(lib, "hang", "--watchdog", "1", "--seconds", "1")
    took = time.monotonic() - t0
    rc, doc, p = env_run
    assert rc == 3
    assert doc["error"] == ("first copies on GPU 0 (00000000:18:00.0) did not return within 1 s (watchdog): "
                            "the GPU hangs or is lost")
    assert took < 30  # bounded: the watchdog, not the test's 60 s timeout, ended it
    assert not alive(p)  # the stuck copy's thread ended with the process


@pytest.mark.parametrize("rc, stdout, stderr, said", [
    (124, "", "", "the probe did not finish within 130 s and was killed (timeout)"),
    (137, "", "", "the probe did not finish within 130 s and was killed (timeout)"),
    (127, "", "sh: 1: python3: not found", "python3 not found on the host"),
    (1, "Traceback (most recent call last):\n  ...\nSyntaxError: invalid syntax", "",
     "the probe printed no result (exit 1): Traceback"),
    (0, '{"probe": 1, "error": null, "gpus": [], "pairs": [], "load": null}\n', "", None),
])
def test_what_the_host_returned_becomes_the_probes_document_or_a_named_error(rc, stdout, stderr, said):
    from bringup.acceptance.remote import probe_result

    doc = probe_result(rc, stdout, stderr, 130)
    if said is None:
        assert doc == {"probe": 1, "error": None, "gpus": [], "pairs": [], "load": None}
    else:
        assert said in doc["error"] and doc["gpus"] == []


# ---------------------------------------------------------------------------------------------------------
# nvidia-smi during the load, read bounded (issue 40 item 3, host side)

@pytest.mark.reliability(item=40, fault="nvidia-smi during accept's load: streams /dev/zero, hangs, or leaves a child "
                         "holding its stdout, or prints no row of its fields", variants=4,
                         checks=("one clear line", "no hang", "nothing left running"))
@pytest.mark.parametrize("script, said", [
    ("exec cat /dev/zero", "nvidia-smi printed more than 1048576 bytes (not read)"),
    ("exec sleep 60", "nvidia-smi did not answer within 2 s"),
    ("( exec sleep 61.{pid} ) & echo '0, 00000000:18:00.0, 0x1, 45, 1980'", None),
    ("printf 'garbage\\033[2J\\n'", "nvidia-smi printed no row of the 5 fields asked: 'garbage\\x1b[2J'"),
])
def test_nvidia_smi_during_the_load_is_read_bounded(tmp_path, monkeypatch, script, said):
    """Before, subprocess.run read the whole answer into the probe's memory on the host under test (a /dev/zero
    flood of 300 MB: 900 MB resident), and a child left holding the pipe held each read to its 10 s bound."""
    import time

    from bringup.acceptance import probe

    monkeypatch.setattr(probe, "SMI_S", 2)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script.replace("{pid}", str(os.getpid())) + "\n")
    smi.chmod(0o755)
    start = time.monotonic()
    got = probe.Smi(str(smi)).read(1.0)
    took = time.monotonic() - start
    for _ in range(40):   # a process SIGKILLed a moment ago may still be on its way out
        left = [p for p in os.listdir("/proc") if p.isdigit() and _has(p, f"61.{os.getpid()}".encode())]
        if not left:
            break
        time.sleep(0.05)
    assert not left, left
    if said is None:
        assert got["gpus"] == [{"index": "0", "bus_id": "00000000:18:00.0", "reasons": "0x1",
                                "temperature_c": "45", "sm_mhz": "1980"}] and took < 2, (got, took)
    else:
        assert got.get("error") == said, got
        assert took < 8   # a flood is cut at once; a hang at its bound (for each of the two field names)


def _has(pid: str, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return mark in f.read()
    except OSError:
        return False
