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
    assert said == (f"WARN {index}: not a regular file (a symbolic link, a pipe, a device or a folder); left as it is "
                    f"and {result} "
                    "not listed in it: move it away (the checklist finds results of other --out folders through it)")
    assert sorted(p.name for p in index.parent.iterdir()) == ["h1-20260101T000000Z.json", "index.json"]
    assert index.is_symlink() if kind == "zero" else True


@pytest.mark.reliability(item=40, fault="reports/bench/index.json a planted link to a JSON file only root may read "
                                        "(a registry's credentials): its text was rewritten as the index, mode 0644",
                         checks=("secret never shown", "others' files kept"))
def test_an_index_that_is_a_link_to_a_private_file_is_never_read_nor_rewritten(tmp_path):
    index = tmp_path / "bench" / "index.json"
    index.parent.mkdir()
    private = tmp_path / "config.json"
    private.write_text('{"auths": {"nvcr.io": {"auth": "SeCrEtToKeN"}}}')
    private.chmod(0o600)
    index.symlink_to(private)
    result = tmp_path / "bench" / "h1-20260101T000000Z.json"
    result.write_text("{}")
    said = remember("h1", result, index)
    assert said.startswith(f"WARN {index}: not a regular file (a symbolic link, ") and "SeCrEt" not in said, said
    assert index.is_symlink() and "h1" not in private.read_text()
    assert sorted(p.name for p in index.parent.iterdir()) == ["h1-20260101T000000Z.json", "index.json"]


@pytest.mark.reliability(item=40, fault="reports/bench/index.json listing one large file under 200 spellings "
                                        "(d/../x, d/../d/../x): each read whole, minutes of reading", variants=2,
                         checks=("no hang",))
def test_an_index_reads_one_file_once_and_no_more_entries_than_it_keeps(tmp_path, monkeypatch):
    from bringup.latency import verdict

    (tmp_path / "d").mkdir()
    big = tmp_path / "big.json"
    big.write_text("[]")
    others = [tmp_path / f"r{i}.json" for i in range(80)]
    for p in others:
        p.write_text("[]")
    spellings = [str(tmp_path) + "/d/.." * i + "/big.json" for i in range(1, 201)]
    (tmp_path / "index.json").write_text(json.dumps({"h1": spellings + [str(p) for p in others]}))
    read = []
    real = verdict.read_capped
    monkeypatch.setattr(verdict, "read_capped", lambda p, *a, **kw: (read.append(str(p)), real(p, *a, **kw))[1])
    assert verdict.latest("h1", tmp_path) is None
    index_reads = [p for p in read if not p.endswith("index.json")]
    # The newest 50 entries (as remember() keeps them), the big file once whatever its spellings.
    assert index_reads == [str(p) for p in others[-50:]], index_reads[:3]
    read.clear()
    (tmp_path / "index.json").write_text(json.dumps({"h1": spellings}))
    verdict.latest("h1", tmp_path)
    assert len([p for p in read if p.endswith("big.json")]) == 1


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


# --- F5: audit --export-testinfra DIR: what lies in a host's folder ------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "zero", "link out", "folder"])
def test_an_exported_folders_module_that_is_no_file_is_named_and_left_untouched(tmp_path, kind):
    from types import SimpleNamespace

    from bringup.errors import InputError
    from bringup.testinfra.export import MARK, refuse_foreign

    out, mine = tmp_path / "d", tmp_path / "d" / "loc" / "test_mine.py"
    mine.parent.mkdir(parents=True)
    (mine.parent / "test_sysctl.py").write_text(MARK + " (x)\n" + "x = 1\n" * 10_000)  # ours, longer than the read
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text(MARK + " (planted)\n")
    if kind == "fifo":
        os.mkfifo(mine)
    elif kind == "zero":
        mine.symlink_to("/dev/zero")
    elif kind == "link out":
        mine.symlink_to(elsewhere)
    else:
        mine.mkdir()
    with pytest.raises(InputError) as e:
        _bounded(lambda: refuse_foreign(out, [SimpleNamespace(name="loc")]))
    why = ("is a symbolic link out of its folder" if kind in ("zero", "link out") else
           "is not a regular file (a pipe, a device or a folder)")
    assert str(e.value) == (f"--export-testinfra: {mine} {why}, not a module bringup wrote; it is never replaced: "
                            "move it or export into another folder")
    assert os.path.lexists(mine) and (mine.is_symlink() if kind in ("zero", "link out") else True)


def test_a_link_inside_the_folder_to_a_module_of_ours_is_read(tmp_path):
    from types import SimpleNamespace

    from bringup.testinfra.export import MARK, refuse_foreign

    d = tmp_path / "d" / "loc"
    d.mkdir(parents=True)
    (d / "test_a.py").write_text(MARK + " (x)\n")
    (d / "test_b.py").symlink_to("test_a.py")
    refuse_foreign(tmp_path / "d", [SimpleNamespace(name="loc")])


# --- F12: a saved acceptance line's unit is compared exactly ------------------------------------------------------

@pytest.mark.parametrize("unit", ["GB/S", "gb/s", "GB/s", "MB/s", ""])
def test_a_saved_figure_in_a_unit_accept_does_not_write_on_that_line_is_not_checked(tmp_path, unit):
    from datetime import datetime, timedelta, timezone

    from bringup.acceptance.saved import checklist_lines

    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    when = now - timedelta(minutes=1)
    saved = {"area": "acceptance", "name": "GPU memory", "status": "PASS", "seen": "fine", "unit": unit,
             "limit": None, "value": 1}
    (tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json").write_text(json.dumps(
        {"host": "gpu-01", "measured_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "lines": [saved]}))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert (k.status, k.value, k.unit) == ("WARN", None, "")
    assert k.seen.startswith(f"not checked: its figure 1.0 in {unit or 'no unit'} is not one accept writes on this "
                             "line (a rate in GB/s on a rate line, a temperature in °C) [saved as PASS: fine]"), k.seen


def test_a_saved_clock_line_with_its_temperature_is_read_as_written(tmp_path):
    from datetime import datetime, timedelta, timezone

    from bringup.acceptance.saved import checklist_lines

    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    when = now - timedelta(minutes=1)
    saved = {"area": "acceptance", "name": "clocks under load", "status": "PASS", "seen": "no slowdown",
             "unit": "°C", "limit": None, "value": 61.0}
    (tmp_path / f"gpu-01-{when.strftime('%Y%m%dT%H%M%SZ')}.json").write_text(json.dumps(
        {"host": "gpu-01", "measured_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "lines": [saved]}))
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert (k.status, k.value, k.unit) == ("PASS", 61.0, "°C") and k.seen.startswith("no slowdown")


# --- F12: a saved bench point's counts are whole numbers ----------------------------------------------------------

@pytest.mark.parametrize("key,value,why", [("batch", 1.5, "is not a whole number"),
                                           ("concurrency", 2.5, "is not a whole number"),
                                           ("batch", 0, "is out of range (1..1e+06)")])
def test_a_bench_point_of_a_fractional_batch_is_not_checked(tmp_path, key, value, why):
    from datetime import datetime, timedelta, timezone

    from bringup.checklist.pages import latency_checks
    from tests.unit.test_host_numbers import bench_doc

    doc = bench_doc(datetime.now(timezone.utc) - timedelta(hours=1))
    (tmp_path / "h1-20261204T110000Z.json").write_text(json.dumps(doc))
    (k,) = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 50}, tmp_path)
    assert k.status == "PASS"
    doc["points"][0][key] = value
    (tmp_path / "h1-20261204T110000Z.json").write_text(json.dumps(doc))
    (k,) = latency_checks({"inventory_hostname": "h1", "latency_slo_p95_ms": 50}, tmp_path)
    assert k.status == "WARN" and k.seen == (f"not checked: the saved result is unreadable (point 0's {key} "
                                             f"{value} {why}) ({tmp_path / 'h1-20261204T110000Z.json'})"), k.seen


# --- F12: a trial record that is no JSON is described, never quoted ------------------------------------------------

@pytest.mark.parametrize("text,why", [("SECRETTOKEN=abc123\n", "Expecting value at line 1 column 1"),
                                      ('{"kind": "x", "token": "SECRETTOKEN', "Unterminated string starting at "
                                                                              "at line 1 column 24"),
                                      ("", "empty"), ("[" * 100_000, "nested more than")])
def test_a_trial_record_parse_error_names_the_kind_of_text_never_its_content(text, why):
    from bringup.errors import BringupError
    from bringup.latency.trial import parse_trial

    with pytest.raises(BringupError) as e:
        parse_trial(text, "/etc/bringup/triton-trial.json on h1")
    said = str(e.value)
    assert said.startswith(f"/etc/bringup/triton-trial.json on h1: not readable JSON ({why}"), said
    assert "SECRET" not in said and "abc123" not in said and "[[" not in said and "\n" not in said
    assert said.endswith(": not a trial record bringup wrote, or cut; remove /etc/bringup/triton-trial.json on h1 "
                         "once the model serves what it should")


# --- F12: fleet's table of a large answer is laid out in one pass ---------------------------------------------------

def test_fleets_table_of_20000_series_is_printed_in_seconds():
    import io
    import time

    from rich.console import Console

    from bringup.pull.fleet import note_lines, render_table, summarize

    now = 1_800_000_000.0
    series = [{"metric": {"__name__": "bringup_pull_status", "host": f"h{i:05d}", "status": "applied"},
               "value": [now, "1"]} for i in range(20_000)]
    series += [{"metric": {"__name__": "bringup_pull_last_run_timestamp_seconds", "host": f"h{i:05d}"},
                "value": [now, str(now + 600)]} for i in range(0, 20_000, 10)]   # 2,000 notes
    out = Console(file=io.StringIO(), width=120, record=True)
    started = time.monotonic()
    fleet = summarize(series, now=now)
    out.print(render_table(fleet), highlight=False, soft_wrap=True)
    out.print("\n".join(note_lines(fleet)), markup=False, highlight=False, soft_wrap=True)
    took = time.monotonic() - started
    assert took < 10, f"{took:.1f} s for 20,000 series (a rich Table of them took about 30 s)"
    text = out.export_text().splitlines()
    assert text[0] == "pull fleet (revision unknown)" and text[1].split() == [
        "host", "state", "revision", "last", "success", "last", "run", "last", "refusal"]
    assert text[2].split() == ["h00000", "stale", "-", "never", "never", "-"]
    assert text[3].split()[:2] == ["h00001", "stale"] and len(text) == 2 + 20_000 + 2_000


# --- F12: parsed facts from a file are held to the shapes and ranges their parser makes ----------------------------

def _saved_facts(tmp_path, change) -> Path:
    """The H200's real facts, parsed, saved as `invoke facts` writes them, ``change(cpu.topology)`` applied."""
    from bringup.facts.gather import parse_raw
    from bringup.facts import ALL_FACTS
    from tests.unit.fixture_hosts import FIX

    raw = json.loads((FIX / "h200-vm" / "facts-raw.json").read_text())["raw"]
    facts, _ = parse_raw(ALL_FACTS, raw)
    facts = json.loads(json.dumps(facts))
    change(facts["cpu.topology"])
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"host": "h200-vm", "facts": facts}))
    return path


def test_real_parsed_facts_load_from_a_file(tmp_path):
    from bringup.facts.gather import load_facts

    facts, _ = load_facts(_saved_facts(tmp_path, lambda t: None), "h200-vm")
    assert facts["cpu.topology"]["cpu_count"] > 0


def _numa_huge(t):
    t["numa_nodes"]["0"] = list(range(1_000_000))


DAMAGED_TOPOLOGY = {
    "numa node of a million CPUs": (_numa_huge, "numa_nodes.0 holds CPU {n}, not one of its online and offline CPUs"),
    "cpu id text": (lambda t: t["cpus"][0].update(cpu="x"), "cpus[0].cpu 'x' is not a number"),
    "core_count -5": (lambda t: t.update(core_count=-5), "core_count -5 is out of range (0..65536)"),
    "cpu_count 1.5": (lambda t: t.update(cpu_count=1.5), "cpu_count 1.5 is not a whole number"),
    "cpu_count beside online": (lambda t: t.update(cpu_count=2), "online lists {n} CPU(s), cpu_count says 2"),
    "sibling of no CPU": (lambda t: t["smt_siblings"].append([0, 4096]),
                          "smt_siblings.{last} holds CPU 4096, not one of its online and offline CPUs"),
}


@pytest.mark.parametrize("change,why", DAMAGED_TOPOLOGY.values(), ids=DAMAGED_TOPOLOGY.keys())
def test_a_saved_topology_out_of_shape_is_one_line_naming_the_field(tmp_path, change, why):
    from bringup.errors import InputError
    from bringup.facts.gather import load_facts

    path = _saved_facts(tmp_path, change)
    topo = json.loads(path.read_text())["facts"]["cpu.topology"]
    n = len(topo["online"]) if "online lists" in why else topo["cpu_count"] + len(topo["offline"])
    why = why.format(n=n, last=len(topo["smt_siblings"]) - 1)
    with pytest.raises(InputError) as e:
        load_facts(path, "h200-vm")
    assert str(e.value) == (f"--facts {path}: fact cpu.topology: {why}, not what `invoke facts` writes; save it with: "
                            "invoke facts --host h200-vm > FILE")


# --- saved results read through the one guarded reader (read_capped's inside) ---------------------------------------

def _accept_result(folder: Path, host: str, when, status: str = "PASS") -> Path:
    line = {"area": "acceptance", "name": "host-to-device bandwidth", "status": status, "seen": "measured",
            "unit": "GB/s", "limit": 50.0, "value": 55.0}
    p = folder / f"{host}-{when.strftime('%Y%m%dT%H%M%SZ')}.json"
    p.write_text(json.dumps({"host": host, "measured_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "lines": [line]}))
    return p


@pytest.mark.reliability(item=40, fault="reports/accept/<host>-<time>.json a symbolic link out of its folder: a result "
                                        "kept elsewhere (or any file) was read as this host's PASS (bench results "
                                        "were refused)", variants=1, checks=("one clear line",))
@pytest.mark.parametrize("how", ["the file", "a folder on the way"])
def test_a_saved_acceptance_result_through_a_link_out_of_its_folder_is_refused(tmp_path, how):
    from datetime import datetime, timedelta, timezone

    from bringup.acceptance.saved import checklist_lines

    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    folder, elsewhere = tmp_path / "reports" / "accept", tmp_path / "elsewhere"
    folder.mkdir(parents=True)
    elsewhere.mkdir()
    real = _accept_result(elsewhere, "gpu-01", now - timedelta(minutes=1))
    if how == "the file":
        (folder / real.name).symlink_to(real)
        read = folder
    else:
        (folder / "sub").symlink_to(elsewhere)
        read = folder / "sub"
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, read, now=now)
    if how == "the file":
        assert (k.status, k.seen) == ("WARN", f"{folder / real.name}: not a saved acceptance result (a symbolic link "
                                              "out of its folder)"), k.seen
    else:  # the folder the checklist was given is the link itself: its own files are read
        assert k.status == "PASS", k.seen


def test_a_saved_acceptance_result_linked_within_its_folder_is_read(tmp_path):
    from datetime import datetime, timedelta, timezone

    from bringup.acceptance.saved import checklist_lines

    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    (tmp_path / "keep").mkdir()
    real = _accept_result(tmp_path / "keep", "gpu-01", now - timedelta(minutes=1))
    (tmp_path / real.name).symlink_to(Path("keep") / real.name)
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert k.status == "PASS", k.seen


@pytest.mark.reliability(item=40, fault="a saved bench result swapped for a link out of its folder between the look "
                                        "and the open was read", checks=("one clear line",))
def test_a_bench_result_swapped_for_a_link_after_the_look_is_refused(tmp_path, monkeypatch):
    # The refusal is judged on what was opened (its descriptor), not a look at the name before the open.
    from bringup import userfile
    from bringup.latency import verdict

    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"kind": "bringup-bench", "host": "h1", "finished": "2026-01-01T00:00:00+00:00"}))
    folder = tmp_path / "bench"
    folder.mkdir()
    p = folder / "h1-20260101T000000Z.json"
    p.write_text("{}")
    real_open = os.open

    def swapping(path, *a, **kw):
        if os.fspath(path) == os.fspath(p):
            p.unlink()
            p.symlink_to(outside)
        return real_open(path, *a, **kw)

    monkeypatch.setattr(userfile.os, "open", swapping)
    skipped: list = []
    assert verdict.latest("h1", folder, skipped=skipped) is None
    assert skipped == [(p, "a symbolic link out of its folder")]
