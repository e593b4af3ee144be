"""``dcgmi diag -r LEVEL -j`` as checklist lines: each test a line, per GPU where DCGM says which GPU.

Two document shapes are read:

- DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"gpu_ids": "0", "status": "Pass", "warnings": [...], "info": ...}]}]}], "version": ...}}``
  (NVIDIA/DCGM nvvs/src/JsonOutput.cpp).
- DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"entity_group": "GPU", "entity_id": 0, "status": "Pass", "warnings": [{"warning": ..., "error_id": ...}]}],
  "test_summary": {"status": ...}}]}]}, "entity_groups": [...], "metadata": {"version": ...}}``.

Banner text before the document (``Successfully ran diagnostic for group.``) is skipped.  A test is FAIL when any
result or its summary says Fail, WARN on Warn, PASS when every result passed, and a Skip/Not Run test is a PASS
that says so (DCGM skips tests a part does not support).  dcgmi absent, failing without a document, or printing
something that is not such a document: one named line (:func:`dcgm_lines`).
"""
from __future__ import annotations

import re
from typing import Any

from ..checks import Check, line
from ..errors import printable
from ..untrusted import Unreadable, loads

__all__ = ["GET_DCGM", "parse_diag", "DiagError", "dcgm_lines"]

AREA = "acceptance"
#: Where dcgmi comes from (docs/acceptance.md, "DCGM"): NVIDIA's DCGM package on the host; the dcgm-exporter image
#: carries no diagnostics (NVIDIA/dcgm-exporter#324) and runs DCGM embedded (#421).
GET_DCGM = ("install DCGM on the host from NVIDIA's CUDA repository (datacenter-gpu-manager-4-cuda12 or -cuda13 "
            "for DCGM 4, datacenter-gpu-manager for 3.x) and start nvidia-dcgm; the dcgm-exporter container "
            "has no diagnostics")


class DiagError(ValueError):
    """dcgmi's output is not a diagnostic document."""


def _document(text: str) -> dict:
    start = text.find("{")
    if start < 0:
        raise DiagError("no JSON document in dcgmi's output")
    try:
        # A key given twice is refused: Python's json keeps the last, so '"status": "Fail", "status": "Pass"' (or
        # the whole diagnostic given twice) read as the Pass.
        doc, stop = loads(text[start:], what="dcgmi's JSON", raw=True, unique=True, end=True)
    except Unreadable as e:
        raise DiagError(str(e).replace("dcgmi's JSON: not JSON (", "dcgmi's JSON does not parse (", 1)) from None
    if not isinstance(doc, dict):
        raise DiagError("dcgmi's JSON is not an object")
    rest = text[start + stop:]
    if "{" in rest:
        raise DiagError("dcgmi printed more than one document; which one is the run's result is not known")
    return doc


def _status(text: Any) -> str:
    s = str(text or "").strip().lower()
    if s in ("pass", "passed", "success"):
        return "PASS"
    if s in ("fail", "failed", "error"):
        return "FAIL"
    if s in ("warn", "warning"):
        return "WARN"
    if s in ("skip", "skipped", "not run", "notrun"):
        return "SKIP"
    return "?"


def _texts(value: Any) -> list[str]:
    """Warnings/info in any of the shapes DCGM prints: a string, a list of strings, a list of {warning: ...}."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        return [str(value.get("warning") or value.get("info") or value.get("message") or "")] if value else []
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [str(value)]


#: DCGM's GPU ids are nvidia-smi's indexes: a whole number, or several joined by commas (``gpu_ids`` "0,1").
_GPU_IDS = re.compile(r"[0-9]{1,4}(?:,[0-9]{1,4})*")


def _gpu_id(value: Any) -> tuple[str | None, str]:
    """A result's GPU id as text, and why it is no GPU's ("" where it is one): 1e308, -1, true, "0\x1b[31m" or
    [0, 1] named no GPU, and its result (a Pass) was shown as that GPU's PASS."""
    if value is None:
        return None, ""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10_000:
        return str(value), ""
    text = value.strip() if isinstance(value, str) else None
    if text is not None and _GPU_IDS.fullmatch(text):
        return text, ""
    shown = printable(value if isinstance(value, str) else repr(value))[:40]
    return shown, f"GPU id {shown} is no GPU index: its result is not read"


def parse_diag(text: str) -> dict:
    """dcgmi's output → ``{"version", "tests": [{"category", "name", "results": [{"gpu", "status",
    "warnings"}], "summary"}]}``; :class:`DiagError` when it is not a diagnostic document."""
    doc = _document(text)
    root = doc.get("DCGM GPU Diagnostic") or doc.get("DCGM Diagnostic")
    if not isinstance(root, dict) or not isinstance(root.get("test_categories"), list):
        raise DiagError("dcgmi's JSON has no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' test_categories")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    version = root.get("version") or meta.get("version")
    tests = []
    for cat in root["test_categories"]:
        if not isinstance(cat, dict):
            raise DiagError("a test category is not an object")
        if not isinstance(cat.get("tests") or [], list):
            raise DiagError("a test category's tests are not a list")
        for t in cat.get("tests") or []:
            if not isinstance(t, dict) or "name" not in t:
                raise DiagError("a test has no name")
            results = []
            if not isinstance(t.get("results") or [], list):
                raise DiagError(f"test {str(t['name'])[:60]}: its results are not a list")
            for r in t.get("results") or []:
                if not isinstance(r, dict):
                    raise DiagError(f"test {str(t['name'])[:60]}: a result is not an object")
                gpu = r.get("gpu_ids", r.get("gpu_id"))
                if gpu is None and str(r.get("entity_group", "GPU")).upper() == "GPU":
                    gpu = r.get("entity_id")
                gpu, bad = _gpu_id(gpu)
                results.append({"gpu": gpu, "status": "?" if bad else _status(r.get("status")),
                                "warnings": ([bad] if bad else []) + _texts(r.get("warnings"))
                                + _texts(r.get("errors"))})
            summary = t.get("test_summary") if isinstance(t.get("test_summary"), dict) else {}
            tests.append({"category": str(cat.get("category") or ""), "name": str(t["name"]), "results": results,
                          "summary": _status(summary.get("status")) if summary else None,
                          "summary_warnings": _texts(summary.get("warnings")) if summary else []})
    if not tests:
        raise DiagError("dcgmi's document lists no test")
    return {"version": version, "tests": tests}


def _worst(statuses: list[str]) -> str:
    for s in ("FAIL", "WARN", "?", "PASS", "SKIP"):
        if s in statuses:
            return s
    return "SKIP"


def dcgm_lines(level: int, found: str, rc: int | None, stdout: str, stderr: str,
               bus_ids: dict[str, str] | None = None) -> list[Check]:
    """The DCGM lines of a host: ``found`` is dcgmi's path ("" absent), ``rc``/``stdout``/``stderr`` its run
    (``rc`` None: not run).  ``bus_ids`` maps DCGM's GPU ids (nvidia-smi's indexes) to bus ids for subjects."""
    name = f"DCGM diagnostics (level {level})"
    if not found:
        return [line(AREA, name, "WARN", "not run: dcgmi is not installed on the host", GET_DCGM)]
    if rc is None:
        return []
    try:
        diag = parse_diag(stdout)
    except DiagError as e:
        said = " ".join((stderr or stdout).split())[:300]
        why = ("timed out (killed by timeout)" if rc in (124, 137) else f"exit {rc}") + f"; {e}"
        return [line(AREA, name, "FAIL", f"dcgmi diag -r {level} -j failed: {why}" + (f": {said}" if said else ""),
                     "systemctl status nvidia-dcgm (nv-hostengine must run); dcgmi diag -r 1 by hand shows why")]
    out: list[Check] = []
    bus_ids = bus_ids or {}
    for t in diag["tests"]:
        label = f"DCGM {t['name']}"
        per_gpu = [r for r in t["results"] if r["gpu"] is not None and "," not in r["gpu"]]
        if per_gpu and len(per_gpu) == len(t["results"]):
            for r in per_gpu:
                bus = bus_ids.get(r["gpu"])
                subject = f"GPU {bus}" if bus else f"GPU {r['gpu']}"
                out.append(_test_line(label, r["status"], r["warnings"], t["category"], subject))
            # A summary worse than every GPU's result is a line of its own, never hidden behind their PASS.
            summary = t["summary"]
            if summary in ("FAIL", "WARN", "?") and summary not in [r["status"] for r in per_gpu]:
                out.append(_test_line(label, summary, t["summary_warnings"], t["category"], "",
                                      "its summary, though no GPU's result says so"))
        else:
            # No result and no summary: DCGM said nothing of the test, which is no pass (nor a skip).
            statuses = [r["status"] for r in t["results"]] + ([t["summary"]] if t["summary"] else []) or ["?"]
            warns = [w for r in t["results"] for w in r["warnings"]] + t["summary_warnings"]
            out.append(_test_line(label, _worst(statuses), warns, t["category"], ""))
    out += _coverage(name, diag, bus_ids)
    if rc in (124, 137):
        out.append(line(AREA, name, "FAIL", f"dcgmi diag -r {level} -j timed out (killed by timeout) after "
                        "printing a document", "run dcgmi diag by hand: a test that does not end is a fault"))
    elif rc != 0 and all(k.status == "PASS" for k in out):
        out.append(line(AREA, name, "WARN", f"dcgmi diag -r {level} -j exited {rc} though every test it printed "
                        "passed", "run dcgmi diag by hand and read why it failed"))
    return out


#: DCGM's software tests (its "Deployment" category; DCGM 4 runs them as one test, "software"): host-wide checks whose
#: results name a GPU only where it failed (the GB10 capture: "software" lists GPU 0, Fail), so they say nothing of
#: which GPUs were diagnosed.
_HOST_WIDE = ("deployment", "software")


def _coverage(name: str, diag: dict, bus_ids: dict[str, str]) -> list[Check]:
    """The GPUs each per-GPU test's results name against those nvidia-smi lists (``bus_ids``'s keys): a listed GPU
    missing from such a test was not diagnosed by it (FAIL, by name), never a pass by silence.

    A per-GPU test is one outside DCGM's software tests (:data:`_HOST_WIDE`) whose every result names one GPU and
    which names a GPU that did not fail: DCGM lists each GPU it ran a per-GPU plugin on (the 8-GPU capture's
    "diagnostic", Pass on GPUs 0-7).  A test whose named GPUs all failed lists those failures, not the GPUs it ran
    on (their FAIL lines say it): no coverage is read from it.  A document of host-wide results only (level 1's
    software tests) says nothing per GPU: nothing to hold."""
    if not bus_ids:
        return []
    missing: dict[str, list[str]] = {}
    for t in diag["tests"]:
        gpus = [r["gpu"] for r in t["results"]]
        if (t["category"].strip().lower() in _HOST_WIDE or t["name"].strip().lower() in _HOST_WIDE or not gpus
                or any(g is None or "," in g for g in gpus)
                or all(r["status"] == "FAIL" for r in t["results"])):
            continue
        named = {g.strip() for g in gpus}
        for i in bus_ids:
            if i not in named:
                missing.setdefault(i, []).append(t["name"])
    if not missing:
        return []
    said = ", ".join(f"GPU {i} {bus_ids[i]} from {' and '.join(tests)}" for i, tests in missing.items())
    return [line(AREA, name, "FAIL", f"DCGM diagnosed {len(bus_ids) - len(missing)} of {len(bus_ids)} GPUs "
                 f"(missing: {said})",
                 "dcgmi discovery -l lists the GPUs DCGM sees; a GPU it lacks is not diagnosed: nvidia-smi, dmesg "
                 "(Xid), CUDA_VISIBLE_DEVICES in nv-hostengine's environment")]


def _test_line(label: str, status: str, warnings: list[str], category: str, subject: str, whose: str = "") -> Check:
    said = "; ".join(dict.fromkeys(" ".join(w.split()) for w in warnings if w.strip()))
    where = f"{category}: " if category else ""
    where += f"{whose}: " if whose else ""
    if status == "SKIP":
        return line(AREA, label, "PASS", f"{where}skipped by DCGM (not supported here)" + (f": {said}" if said else ""),
                    subject=subject)
    if status == "?":
        return line(AREA, label, "WARN", f"{where}status DCGM did not name" + (f": {said}" if said else ""),
                    "dcgmi diag by hand: read the result", subject=subject)
    seen = f"{where}{status.lower()}" + (f": {said}" if said else "")
    fix = "" if status == "PASS" else ("DCGM's message names the fault; nvidia-smi -q and dmesg (Xid) for the GPU; "
                                       "drain the host, RMA the part if it recurs")
    return line(AREA, label, status, seen, fix, subject=subject)
