"""The figures bench, tune and tune-window write beside their results (issue 40 item 2): written as every page is,
a temporary file renamed over the name, never through a link or into a FIFO planted under it, and with the JSON and
CSV they go with, all or none.
"""
from __future__ import annotations

import json
import os
import threading
from datetime import datetime
from pathlib import Path

import pytest

from bringup.errors import InputError

from .test_latency import _pt

DOC = {"host": "h1", "model": "m", "finished": "2026-01-01T00:00:00+00:00",
       "points": [_pt(10, 300, conc=1), _pt(40, 1200, conc=8)]}
PNG = "h1-20260101T000000Z.png"


def _plant(folder: Path, kind: str, outside: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    at = folder / PNG
    if kind == "link":
        at.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(at)
    return at


@pytest.mark.reliability(item=40, fault="bench/tune figures: a link to a file outside, or a FIFO, planted under the "
                                        "PNG's name", variants=2,
                         checks=("others' files kept", "no hang", "no leftovers"))
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_figure_is_never_written_through_a_planted_link_or_into_a_fifo(tmp_path, kind):
    # Before: matplotlib's savefig(path) opened the name: the link's target (a file of someone else's) was
    # overwritten with the PNG, and a FIFO there held the bench for ever after measuring.
    from bringup.latency.results import write_all

    outside = tmp_path / "theirs.txt"
    outside.write_text("keep")
    at = _plant(tmp_path / "out", kind, outside)
    done: list = []
    t = threading.Thread(target=lambda: done.append(write_all(dict(DOC), tmp_path / "out", warn=lambda _s: None)),
                         daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():  # the FIFO's open waits for a reader: give it one, so the test ends, then fail
        with open(at, "rb") as f:
            f.read()
        pytest.fail(f"the figure's write waited on the FIFO at {at}")
    assert outside.read_text() == "keep"
    assert at.is_file() and not at.is_symlink() and at.read_bytes()[:4] == b"\x89PNG"
    assert done and done[0]["png"] == at
    assert [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")] == []


@pytest.mark.reliability(item=40, fault="bench/tune/tune-window: a folder under the PNG's name", variants=2,
                         checks=("one clear line", "no leftovers", "whole old or new file"))
@pytest.mark.parametrize("what", ["bench", "tune"])
def test_a_folder_under_the_figures_name_writes_none_of_the_results_files(tmp_path, what):
    # Before: the JSON and CSV were written, then savefig on the folder raised IsADirectoryError (a traceback
    # after measuring), leaving a result without its figure.
    from bringup.latency import results, tune_report

    out = tmp_path / "out"
    # A real tune's result (docs/examples/h200-tune), its name the one write_tune gives it.
    tuned = json.loads((Path(__file__).resolve().parents[2] / "docs/examples/h200-tune/tune.json").read_text())
    stamp = datetime.fromisoformat(tuned["finished"]).strftime("%Y%m%dT%H%M%SZ")
    name = PNG if what == "bench" else f"{tuned['host']}-tune-serving-{stamp}.png"
    (out / name).mkdir(parents=True)
    with pytest.raises(InputError) as e:
        if what == "bench":
            results.write_all(dict(DOC), out, warn=lambda _s: None)
        else:
            tune_report.write_tune(tuned, out)
    assert str(e.value).startswith(f"{out / name} is a folder") and "none of the 3 files" in str(e.value)
    assert sorted(p.name for p in out.iterdir()) == [name]  # no JSON, no CSV, no temporary file


@pytest.mark.reliability(item=40, fault="bench/tune --out elsewhere, the working folder's reports a link to a folder "
                                        "outside", variants=1,
                         checks=("others' files kept", "one clear line", "report written"))
def test_the_results_index_is_never_written_through_a_link_out_of_the_working_folder(tmp_path, monkeypatch):
    # Before: the index (reports/bench/index.json) was made and written through reports -> a folder elsewhere.
    from bringup.latency import results

    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "reports").symlink_to(outside)
    monkeypatch.chdir(work)
    said: list[str] = []
    paths = results.write_all(dict(DOC), tmp_path / "out", plot=False, warn=said.append)
    assert paths["json"].is_file() and paths["csv"].is_file()  # the results themselves, in --out
    assert list(outside.iterdir()) == []
    assert len(said) == 1 and said[0].startswith("WARN reports/bench/index.json: not updated (") and "\n" not in said[0]
    assert "symbolic link" in said[0] and str(outside) in said[0], said


@pytest.mark.reliability(item=40, fault="bench/tune results: a vaulted ansible_host (the URL's host) in the saved "
                                        "JSON and CSV", variants=2, checks=("secret never shown",))
@pytest.mark.parametrize("what", ["bench", "tune"])
def test_a_vault_value_in_a_result_is_masked_in_its_json_and_csv(tmp_path, what):
    # Before: json.dumps(doc) wrote the URL with the decrypted ansible_host into reports/bench/*.json, as any text
    # of the result (the console alone was masked).
    from bringup.latency import results, tune_report
    from bringup.secrets import MASK

    secret = "s3cr3t-host.internal"
    MASK.add(secret)  # as the inventory's vault teaches it (conftest gives the run's masker back after)
    if what == "bench":
        doc = {**DOC, "url": f"{secret}:8001", "points": [{**_pt(10, 300), "window": f"{secret} window"}]}
        paths = results.write_all(doc, tmp_path, plot=False, warn=lambda _s: None)
    else:
        tuned = json.loads((Path(__file__).resolve().parents[2] / "docs/examples/h200-tune/tune.json").read_text())
        tuned["url"] = f"{secret}:8001"
        paths = tune_report.write_tune(tuned, tmp_path, plot=False)
    for p in (paths["json"], paths["csv"]):
        assert secret not in p.read_text(), p
    doc = json.loads(paths["json"].read_text())
    assert doc["url"] == "********:8001"


def _no_point(doc: dict) -> dict:
    """``doc`` with one more point where no request finished in the window ("no point was measured")."""
    empty = {**_pt(0, 0, conc=16), "p95_ms": None, "p50_ms": None, "p99_ms": None, "items_per_s": None,
             "spread": None}
    return {**doc, "points": [*doc["points"], empty]}


@pytest.mark.reliability(item=40, fault="bench/tune/tune-window: a point where no request finished (p95_ms None), "
                                        "or a figure that cannot be drawn for another reason", variants=4,
                         checks=("report written", "one clear line", "no leftovers"))
@pytest.mark.parametrize("how", ["none point", "drawing fails"])
@pytest.mark.parametrize("what", ["bench", "tune"])
def test_a_result_is_written_whether_or_not_its_figure_can_be_drawn(tmp_path, monkeypatch, what, how):
    # Before: png_of ran before the files were written; errorbar raised TypeError on p95_ms None (or whatever the
    # drawing raised): no JSON, no CSV, and a traceback after measuring.
    from bringup.latency import plots, results, tune_report

    tuned = json.loads((Path(__file__).resolve().parents[2] / "docs/examples/h200-tune/tune.json").read_text())
    if how == "none point":
        doc = _no_point(dict(DOC))
        tuned["points"].append({**tuned["points"][-1], "p95_ms": None, "p50_ms": None, "p99_ms": None,
                                "items_per_s": None, "spread": None, "verdict": "no point was measured"})
    else:
        doc = dict(DOC)

        def broken(*_a, **_k):
            raise ValueError("cannot draw\nthis")

        monkeypatch.setattr(plots, "png_of", lambda plot, *args: broken())
    said: list[str] = []
    if what == "bench":
        paths = results.write_all(doc, tmp_path, warn=said.append)
    else:
        paths = tune_report.write_tune(tuned, tmp_path, warn=said.append)
    assert paths["json"].is_file() and paths["csv"].is_file()
    assert json.loads(paths["json"].read_text())["points"][-1]["p95_ms"] == (None if how == "none point" else
                                                                             (doc if what == "bench" else tuned)
                                                                             ["points"][-1]["p95_ms"])
    png = paths["json"].with_suffix(".png")
    if how == "none point":   # drawn, the unmeasured point left off
        assert paths["png"] == png and png.read_bytes()[:4] == b"\x89PNG"
        assert [s for s in said if "not drawn" in s] == []
    else:
        assert "png" not in paths and not png.exists()
        line = [s for s in said if "not drawn" in s]
        assert len(line) == 1 and line[0].startswith(f"WARN {png}: not drawn (ValueError: cannot draw this)")
        assert "\n" not in line[0] and str(paths["json"]) in line[0]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.reliability(item=40, fault="tune-window: a point where no request finished (p95_ms None)", variants=1,
                         checks=("report written",))
def test_the_window_sweeps_figure_leaves_off_a_point_where_nothing_was_measured():
    # Before: bench_figure drew p95_ms None through errorbar (TypeError), and tune-window's figure with it.
    from bringup.latency import plots

    doc = _no_point({**DOC, "slo_p95_ms": 50, "tune": {"chosen_window_us": 800, "why": "x"}})
    for plot in (plots.plot_doc, plots.plot_tune_window):
        assert plots.png_of(plot, doc)[:4] == b"\x89PNG"
