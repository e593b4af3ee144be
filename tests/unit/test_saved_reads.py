"""Saved files read back (the bench index, exported testinfra modules, saved acceptance lines, parsed facts, bench
points, trial records): a pipe, a device or a folder never hangs or exhausts memory, a damaged value is named, and
a file's content is never quoted in an error."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from bringup.latency.results import remember


def _bounded(fn, seconds: float = 20.0):
    """``fn()``'s result, failing (instead of hanging the suite) when it takes longer than ``seconds``."""
    got: dict = {}

    def run():
        try:
            got["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            got["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s (a hang)"
    if "error" in got:
        raise got["error"]
    return got["value"]


# --- F4: reports/bench/index.json ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_an_index_that_is_no_file_is_named_left_alone_and_leaves_no_temporary_file(tmp_path, kind):
    index = tmp_path / "bench" / "index.json"
    index.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(index)
    elif kind == "zero":
        index.symlink_to("/dev/zero")
    else:
        index.mkdir()
    result = tmp_path / "bench" / "h1-20260101T000000Z.json"
    result.write_text("{}")
    said = _bounded(lambda: remember("h1", result, index))
    assert said == (f"WARN {index}: not a regular file (a pipe, a device or a folder); left as it is and {result} "
                    "not listed in it: move it away (the checklist finds results of other --out folders through it)")
    assert sorted(p.name for p in index.parent.iterdir()) == ["h1-20260101T000000Z.json", "index.json"]
    assert index.is_symlink() if kind == "zero" else True


def test_an_index_is_written_and_a_damaged_one_started_anew_and_said(tmp_path):
    index, result = tmp_path / "index.json", tmp_path / "h1-20260101T000000Z.json"
    assert remember("h1", result, index) is None
    assert json.loads(index.read_text()) == {"h1": [str(result.resolve())]}
    index.write_text("SECRETTOKEN=abc123")
    said = remember("h2", result, index)
    assert said.startswith(f"WARN {index}: was no index (JSON: not JSON (Expecting value at line 1 column 1)): "
                           "started anew") and "SECRET" not in said
    assert json.loads(index.read_text()) == {"h2": [str(result.resolve())]}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_bench_prints_the_index_line(tmp_path, monkeypatch):
    from bringup.latency import results

    monkeypatch.chdir(tmp_path)
    said = []
    (tmp_path / "reports" / "bench" / "index.json").mkdir(parents=True)
    doc = {"host": "h1", "finished": "2026-01-01T00:00:00+00:00", "points": []}
    results.write_all(doc, tmp_path / "out", plot=False, warn=said.append)
    assert len(said) == 1 and said[0].startswith("WARN reports/bench/index.json: not a regular file")
