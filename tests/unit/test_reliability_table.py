"""The reliability table's plugin (tests/reliability.py): fake outcomes in, table out.

Rendering and merging are checked on records made here; the plugin itself runs in a pytest subprocess
on a throw-away test file (its own conftest loads the plugin, ``--reliability-out`` points into
tmp_path), so the committed docs/RELIABILITY.md is never touched by this test.  That a plain run of the
suite's own tests leaves docs/RELIABILITY.md alone is checked on the real file (its bytes and its mtime).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability import DATA_LOSS_CHECKS, Record, merge, read_records, render

REPO = Path(__file__).resolve().parents[2]
NOW = "2026-12-03 10:00:00 UTC"
EARLIER = "2026-12-02 08:00:00 UTC"


def rec(nodeid, item=9, fault="host stops answering", variants=1, checks=DATA_LOSS_CHECKS, outcome="passed",
        date=NOW) -> Record:
    session = {NOW: "now", EARLIER: "before"}.get(date, "")
    return Record(nodeid, item, fault, variants, list(checks), outcome, date, session)


def row(text: str, fault: str) -> list[str]:
    """The cells of the table row of ``fault``."""
    [line] = [ln for ln in text.splitlines() if ln.startswith("| ") and f" {fault} |" in ln]
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_rows_group_by_item_and_fault_and_count_variants():
    text = render([rec("tests/integration/t.py::test_a[x]"), rec("tests/integration/t.py::test_a[y]"),
                   rec("tests/unit/u.py::test_b", variants=3, checks=DATA_LOSS_CHECKS + ("no hang",)),
                   rec("tests/unit/u.py::test_c", item=13, fault="alias bomb", checks=("exit code",))],
                  generated=NOW, command="python -m pytest tests", session="now")
    item, fault, variants, passed, outcome, last, checked, tests = row(text, "host stops answering")
    assert (item, variants, passed, outcome, last) == ("9", "5", "5", "all 5 passed", "this session")
    # "data lost: none" only for the checks every test of the row asserts, and only with all three of them.
    assert checked == ("data lost: none — whole old or new file, no leftovers, next run converges (asserted)")
    assert tests == "t.py::test_a<br>u.py::test_b"
    assert row(text, "alias bomb")[6] == "exit code (asserted)"
    assert text.index("| 9 |") < text.index("| 13 |")
    assert "`tests/integration/t.py`, `tests/unit/u.py`" in text and "python -m pytest tests" in text
    assert "- Items of issue 12 with no row: 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 14, 15, 16, 17, 18\n" in text


def test_a_failure_is_counted_and_no_data_loss_claim_is_made():
    text = render([rec("t.py::a", variants=2), rec("t.py::b", outcome="failed"), rec("t.py::c", outcome="skipped"),
                   rec("t.py::d", fault="no checks", checks=())], generated=NOW, command="pytest", session="now")
    cells = row(text, "host stops answering")
    assert cells[2:5] == ["4", "2", "2 of 4 passed, 1 failed, 1 skipped"]
    assert cells[6].startswith("NOT shown: a test asserting whole old or new file")
    assert row(text, "no checks")[6] == "no host-side check in these tests"


def test_a_row_not_run_in_this_session_keeps_its_last_result_and_says_so():
    old = [rec("tests/integration/t.py::test_a", date=EARLIER),
           rec("tests/integration/gone.py::test_old", fault="removed test", date=EARLIER),
           rec("tests/unit/u.py::test_deselected", fault="deselected", date=EARLIER),
           rec("tests/unit/u.py::test_renamed", fault="renamed", date=EARLIER)]
    session = [rec("tests/unit/u.py::test_deselected", fault="deselected", outcome="not run", date=""),
               rec("tests/unit/u.py::test_new", fault="new", outcome="failed"),
               rec("tests/unit/u.py::test_never", fault="never", outcome="not run", date="")]
    # This session collected u.py only, and test_renamed is known gone (u.py no longer yields it); t.py and
    # gone.py were not collected at all.
    merged = merge(old, session, {"tests/unit/u.py::test_renamed"})
    text = render(merged, generated=NOW, command="pytest tests/unit/u.py -k new", session="now")
    assert {r.nodeid for r in merged} == {
        "tests/integration/t.py::test_a", "tests/integration/gone.py::test_old", "tests/unit/u.py::test_deselected",
        "tests/unit/u.py::test_new", "tests/unit/u.py::test_never"}  # test_renamed: its file ran without it
    assert row(text, "host stops answering")[4:6] == ["all 1 passed", f"not run in this session; last run {EARLIER}"]
    assert row(text, "deselected")[4:6] == ["all 1 passed", f"not run in this session; last run {EARLIER}"]
    assert row(text, "never")[3:6] == ["0", "1 never run", "not run in this session; last run never"]
    assert row(text, "new")[4:6] == ["0 of 1 passed, 1 failed", "this session"]


def test_the_records_survive_the_file_whatever_the_fault_says():
    records = [rec("t.py::a", fault="a -- b | c <!-- x -->", checks=("no hang",))]
    text = render(records, generated=NOW, command="pytest", session="now")
    assert read_records(text) == records
    assert "| a -- b \\| c &lt;!-- x --&gt; |" in text  # neither a pipe nor a tag breaks the row
    assert read_records("# a hand-made file\n") == []


CONFTEST = """
from tests import reliability

def pytest_addoption(parser):
    parser.addoption("--reliability-out")

def pytest_configure(config):
    config.addinivalue_line("markers", "reliability: a row")
    reliability.configure(config)
"""

TESTS = """
import pytest

@pytest.mark.reliability(item=9, fault="pause", checks=("no leftovers",))
@pytest.mark.parametrize("n", [1, 2, 3])
def test_pause(n):
    assert n != 3

@pytest.mark.reliability(item=11, fault="signal", variants=2)
def test_signal():
    pass

@pytest.mark.reliability(item=11, fault="skipped")
def test_skipped():
    pytest.skip("no such host")

def test_unmarked():
    pass
"""


def _pytest(folder: Path, *args: str, out: bool = True) -> subprocess.CompletedProcess:
    """pytest in ``folder`` (its cache on: ``--lf`` needs it), writing the table to ``out.md`` unless not ``out``."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *(["--reliability-out", str(folder / "out.md")]
                                                                   if out else []), *args],
                          cwd=folder, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO),
                                                                                     "PATH": "/usr/bin:/bin"})


@pytest.fixture()
def suite(tmp_path) -> Path:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_faults.py").write_text(TESTS)
    return tmp_path


def test_the_plugin_writes_the_outcomes_of_a_session_and_merges_a_partial_one(suite):
    out = suite / "out.md"
    assert _pytest(suite, "--collect-only").returncode == 0 and not out.exists()
    r = _pytest(suite, "-k", "unmarked")
    assert r.returncode == 0 and not out.exists(), "no marked test ran: nothing written"

    r = _pytest(suite)
    assert r.returncode == 1 and "reliability table:" in r.stdout, r.stdout + r.stderr
    text = out.read_text()
    assert row(text, "pause")[2:5] == ["3", "2", "2 of 3 passed, 1 failed"]
    assert row(text, "signal")[2:6] == ["2", "2", "all 2 passed", "this session"]
    assert row(text, "skipped")[4] == "0 of 1 passed, 1 skipped"
    assert "test_unmarked" not in text
    assert [p.name for p in suite.iterdir() if p.name.startswith(".out.md")] == []  # temp file renamed away

    # A partial run (-k) rewrites its rows and keeps the others, dated, as not run in this session.
    first = row(text, "signal")
    r = _pytest(suite, "-k", "pause")
    assert r.returncode == 1, r.stdout + r.stderr
    text = out.read_text()
    assert row(text, "signal")[4] == "all 2 passed"
    assert row(text, "signal")[5].startswith("not run in this session; last run ") and first[5] == "this session"
    assert row(text, "pause")[5] == "this session"


def test_a_plain_run_writes_no_table(suite):
    """Without --reliability-out nothing is written, neither the table of the folder nor anything else."""
    docs = suite / "docs"
    docs.mkdir()
    (docs / "RELIABILITY.md").write_text("the committed table\n")
    before = {p: p.stat().st_mtime_ns for p in suite.rglob("*")}
    r = _pytest(suite, "-p", "no:cacheprovider", out=False)
    assert r.returncode == 1 and "1 failed, 4 passed, 1 skipped" in r.stdout, r.stdout + r.stderr
    assert "reliability table:" not in r.stdout
    # Python's bytecode and pytest-benchmark's folder aside (neither is this plugin's).
    after = {p: p.stat().st_mtime_ns for p in suite.rglob("*") if not {"__pycache__", ".benchmarks"} & set(p.parts)}
    assert after == before and (docs / "RELIABILITY.md").read_text() == "the committed table\n"
    # A marker with an unknown check is still refused.
    (suite / "test_faults.py").write_text(TESTS.replace('"no leftovers"', '"nothing lost, promise"'))
    r = _pytest(suite, "-p", "no:cacheprovider", out=False)
    assert r.returncode != 0 and "unknown check 'nothing lost, promise'" in r.stdout + r.stderr


def test_the_suites_own_plain_run_leaves_docs_reliability_alone():
    table = REPO / "docs" / "RELIABILITY.md"
    before = (table.read_bytes(), table.stat().st_mtime_ns)
    # A marked test of the suite, run as a developer runs one file: it passes, and nothing is written.
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
                        "test_what_is_not_a_public_key_is_named", "tests/unit/test_openpgp_key.py"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout + r.stderr
    assert (table.read_bytes(), table.stat().st_mtime_ns) == before


def test_a_partial_write_keeps_every_row_not_run_with_its_last_result(suite):
    out = suite / "out.md"
    assert _pytest(suite).returncode == 1
    full = out.read_text()
    variants = full.split("- Variants in the table: ", 1)[1].split(",", 1)[0]
    assert variants == "6"

    # Re-running what failed (--lf), one test by its node id, one parameter set: every row stays, and those not
    # run keep their last result and date.
    for args in (["--lf"], ["test_faults.py::test_signal"], ["test_faults.py::test_pause[1]"]):
        r = _pytest(suite, *args)
        assert r.returncode in (0, 1) and "reliability table:" in r.stdout, (args, r.stdout + r.stderr)
        text = out.read_text()
        assert text.split("- Variants in the table: ", 1)[1].split(",", 1)[0] == "6", (args, text)
        assert {f: row(text, f)[2:5] for f in ("pause", "signal", "skipped")} == {
            "pause": ["3", "2", "2 of 3 passed, 1 failed"], "signal": ["2", "2", "all 2 passed"],
            "skipped": ["1", "0", "0 of 1 passed, 1 skipped"]}, (args, text)
    assert row(text, "signal")[5].startswith("not run in this session; last run ")
    assert row(text, "pause")[5].startswith("this session (1); not run in this session: ")

    # A test that is gone (renamed), a parameter set dropped: their records go once their module is collected.
    (suite / "test_faults.py").write_text(TESTS.replace("def test_skipped", "def test_skipped_renamed")
                                          .replace("[1, 2, 3]", "[1, 2]"))
    assert _pytest(suite, "test_faults.py::test_signal").returncode == 0
    text = out.read_text()
    assert "test_faults.py::test_skipped\"" not in text and "test_pause[3]" not in text
    assert " skipped |" not in text  # its row had that test only; the renamed one was not collected here
    assert row(text, "pause")[2:4] == ["2", "2"] and row(text, "signal")[5] == "this session"


def test_a_marker_with_an_unknown_check_stops_collection(suite):
    (suite / "test_faults.py").write_text(TESTS.replace('"no leftovers"', '"nothing lost, promise"'))
    r = _pytest(suite)
    assert r.returncode != 0 and "unknown check 'nothing lost, promise'" in r.stdout + r.stderr
    assert not (suite / "out.md").exists()


def test_variants_naming_the_parameter_sets_count_each_set_once(tmp_path):
    # 78 parametrized tests of the suite give their number of parameter sets as variants: each set counted that
    # many times (11 sets of variants=11 made a row of 121).  variants=N over N sets names the sets; over
    # another number of sets it is tries per set.
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sets.py").write_text('''
import pytest

@pytest.mark.reliability(item=12, fault="four sets named", variants=4)
@pytest.mark.parametrize("k", "abcd")
def test_sets(k):
    pass

@pytest.mark.reliability(item=12, fault="two tries a set", variants=2)
@pytest.mark.parametrize("k", "abc")
def test_tries(k):
    pass
''')
    assert _pytest(tmp_path).returncode == 0
    text = (tmp_path / "out.md").read_text()
    assert row(text, "four sets named")[2:5] == ["4", "4", "all 4 passed"]
    assert row(text, "two tries a set")[2:5] == ["6", "6", "all 6 passed"]
