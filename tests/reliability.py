"""The reliability results table (issue 12): ``docs/RELIABILITY.md``, written by the suite when asked to.

A test of a fault point or a hostile input class carries ::

    @pytest.mark.reliability(item=9, fault="host stops answering mid-write (traffic dropped)",
                             checks=("whole old or new file", "no leftovers", "next run converges"))

``item`` is the issue's item number, ``fault`` the fault point or input class (tests with the same
item and fault make one row), ``variants`` how many variants one run of the test tries (default 1;
a parametrized test counts once per parameter set on top of that, except where ``variants`` is its number of
parameter sets: then it names those, and each set counts once), ``checks`` what the test really
asserts on the host (words from :data:`CHECKS`, refused otherwise at collection).

A test run never writes the table by itself (the committed file is not a by-product of running tests):
only ``--reliability-out PATH`` does, at the end of a session in which at least one marked test ran, e.g.
``bash scripts/test.sh --reliability-out docs/RELIABILITY.md`` (the whole suite) or ``python -m pytest
tests/integration/test_X.py --reliability-out docs/RELIABILITY.md``.  It writes atomically (temporary file in
the same folder, then rename), holding a lock on that folder while it reads, merges and renames, since
several sessions may end in one checkout.  Without the option the markers are still checked at collection.

Partial runs merge, they never shrink the table: the file carries its per-test records as JSON in an HTML
comment; a test of this session replaces its record, and every other record stays as it was, with its
date: a test deselected here (``-k``, ``-m``, ``--deselect``), one left out by naming others
(``file.py::test_a``, ``--lf``), and every test of a file this session did not collect.  A row all of whose
records are older says "not run in this session" and the date of its last run.  A record goes away only
when its test is known to be gone: its file no longer exists, or the module (or class) that held it was
collected in this session and no longer yields it (renamed, removed, a parameter set dropped).  Merging was
chosen over "write only after the full suite" because the integration files have to run one at a time on
this machine: the committed table is the union of those runs, each row dated.
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

import pytest

MARKER = "reliability"

#: What a test can assert on the host, in the words the table prints.  Data-loss checks first.
DATA_LOSS_CHECKS = ("whole old or new file", "no leftovers", "next run converges")
CHECKS = DATA_LOSS_CHECKS + (
    "nothing touched",          # refused before connecting / exit 1: the host is as it was
    "nothing executed",         # the hostile value never ran as a command
    "machine left alone",       # a container changed nothing of the machine it runs on (IRQs)
    "secret never shown",       # not in output, diff, report or error
    "files root-only",          # mode 0600 root on the host
    "nothing sent",             # no file reached the host
    "rejected value not persisted",  # what the kernel refused is not in the file for the next boot
    "others' files kept",       # what bringup did not ship survives
    "old revision serving",     # rollback left the old revision up
    "one clear line",           # one line naming what, where, how to fix; no traceback
    "exit code",                # the documented exit code
    "recap and report",         # recap printed and report written
    "report written",           # the run's report says what happened (no recap checked)
    "no hang",                  # the run ends within its bound
    "nothing left running",     # no process the run started (or its children started) outlives it
    "data shown as data",       # markup or escape sequences from data printed as text, never read by the terminal
)

ISSUE_ITEMS = 18                 # issue 12 has items 1..18

DATA_START = "<!-- reliability-records"
DATA_END = "-->"

ORDER = ("failed", "error", "skipped", "not run", "passed")


@dataclass
class Record:
    """One collected test (one parameter set): what it tries, what it asserts, how it ended."""

    nodeid: str
    item: int
    fault: str
    variants: int
    checks: list[str]
    outcome: str = "not run"      # passed | failed | error | skipped | not run
    date: str = ""                # when the session that gave the outcome started, UTC ("" when never run)
    session: str = ""             # that session's id (two sessions can start within one second)

    @property
    def file(self) -> str:
        return self.nodeid.split("::", 1)[0]

    @property
    def test(self) -> str:
        return self.nodeid.split("::", 1)[-1].split("[", 1)[0]


def record_of(item: pytest.Item) -> Record | None:
    """The marker's arguments of a collected test, checked; ``None`` for an unmarked test."""
    mark = item.get_closest_marker(MARKER)
    if mark is None:
        return None
    if mark.args:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.reliability takes keywords only (item=, fault=, checks=)")
    kw = dict(mark.kwargs)
    try:
        num, fault = kw.pop("item"), kw.pop("fault")
    except KeyError as e:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.reliability needs {e.args[0]}=") from None
    variants = kw.pop("variants", 1)
    checks = list(kw.pop("checks", ()))
    if kw:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.reliability: unknown {', '.join(sorted(kw))}")
    if not isinstance(num, int) or not isinstance(variants, int) or variants < 1 or not fault:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.reliability: item and variants are whole numbers, "
                                "fault a text")
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.reliability: unknown check {unknown[0]!r}; "
                                f"known: {', '.join(CHECKS)}")
    return Record(item.nodeid, num, fault, variants, checks)


# --- the table ----------------------------------------------------------------------------------

@dataclass
class Row:
    item: int
    fault: str
    records: list[Record] = field(default_factory=list)

    def count(self, *outcomes: str) -> int:
        return sum(r.variants for r in self.records if r.outcome in outcomes)

    @property
    def variants(self) -> int:
        return sum(r.variants for r in self.records)

    @property
    def checks(self) -> list[str]:
        """Checks every test of the row asserts, in :data:`CHECKS` order (a row claims only their meet)."""
        common = set(self.records[0].checks).intersection(*(r.checks for r in self.records[1:]))
        return [c for c in CHECKS if c in common]


def rows_of(records: Iterable[Record]) -> list[Row]:
    rows: dict[tuple[int, str], Row] = {}
    for r in sorted(records, key=lambda r: (r.item, r.fault, r.nodeid)):
        rows.setdefault((r.item, r.fault), Row(r.item, r.fault)).records.append(r)
    return list(rows.values())


def outcome_words(row: Row) -> str:
    """The row's outcome in words, over the last result of each of its tests."""
    ran = [r for r in row.records if r.date]
    never = sum(r.variants for r in row.records if not r.date)
    words = [_tally(ran)] if ran else []
    if never:
        words.append(f"{never} never run")
    return "; ".join(words)


def last_run_words(row: Row, session: str) -> str:
    """``this session``, or ``not run in this session`` with the date(s) its results are from."""
    dates = sorted({r.date for r in row.records if r.date and r.session != session})
    if all(r.session == session for r in row.records):
        return "this session"
    now = sum(r.variants for r in row.records if r.session == session)
    if now:
        return f"this session ({now}); not run in this session: " + (", ".join(dates) or "never run")
    return "not run in this session; last run " + (", ".join(dates) or "never")


def _tally(records: list[Record]) -> str:
    total = sum(r.variants for r in records)
    passed = sum(r.variants for r in records if r.outcome == "passed")
    if passed == total:
        return f"all {total} passed"
    bad = [f"{sum(r.variants for r in records if r.outcome == o)} {o}" for o in ORDER[:-1]
           if any(r.outcome == o for r in records)]
    return f"{passed} of {total} passed, {', '.join(bad)}"


def data_loss_words(row: Row) -> str:
    """What the row's tests assert on the host; "data lost: none" only when all three data-loss checks are."""
    checks = row.checks
    if not checks:
        return "no host-side check in these tests"
    asserted = ", ".join(checks)
    if any(r.outcome in ("failed", "error") for r in row.records):
        return f"NOT shown: a test asserting {asserted} failed"
    if not any(r.outcome == "passed" for r in row.records):
        return f"not shown (nothing passed): {asserted}"
    claim = "data lost: none — " if set(DATA_LOSS_CHECKS) <= set(checks) else ""
    return f"{claim}{asserted} (asserted)"


def _cell(text: str) -> str:
    """Text as one table cell: no pipe to split the row, no ``<id>`` read as an HTML tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def render(records: list[Record], *, generated: str, command: str, session: str) -> str:
    """The whole Markdown file: header, one row per (item, fault), the records as JSON for the next merge."""
    rows = rows_of(records)
    files = sorted({r.file for r in records})
    total = sum(row.variants for row in rows)
    passed = sum(row.count("passed") for row in rows)
    ran_now = sum(r.variants for r in records if r.session == session)
    missing = sorted(set(range(1, ISSUE_ITEMS + 1)) - {r.item for r in records})
    lines = [
        "# Reliability results (issue 12)",
        "",
        "Generated by the test suite (`tests/reliability.py`, a pytest plugin loaded by `tests/conftest.py`):",
        "do not edit by hand.  Each row is a fault point or hostile input class of issue 12, tried by the",
        "tests marked `@pytest.mark.reliability(item=..., fault=..., checks=...)`; *Variants* counts every",
        "parameter set (and what a test tries in a loop).  *Checked on the host* lists only what every test of",
        "the row asserts (through `docker exec`, sshd's log, or the local file system for the write scripts),",
        "never what is assumed; \"data lost: none\" stands only where the row asserts all three: the whole old",
        "or whole new file, no leftover temporary files or half backups, and a next run that converges.",
        "",
        f"- Last written: {generated} by `{command}`",
        f"- Variants in the table: {total}, passed at their last run: {passed}, run in this session: {ran_now}",
        "- Written only on request (`--reliability-out docs/RELIABILITY.md`); a plain test run leaves it alone.",
        "- Partial runs merge: a test this session did not run (its file not collected, not named, or deselected",
        "  by `-k`/`-m`) keeps its last result and date, and its row says \"not run in this session\"; rows never",
        "  vanish because a part of the suite was run.  Regenerate all of it with `bash scripts/test.sh",
        "  --reliability-out docs/RELIABILITY.md`, or `python -m pytest tests/unit --reliability-out ...` and then",
        "  each integration file of the list below in turn (whole files: some tests build on the state an earlier",
        "  test of their file left, so `-m reliability` alone is not enough).",
        f"- From: {', '.join(f'`{f}`' for f in files)}",
        f"- Items of issue 12 with no row: {', '.join(map(str, missing)) or 'none'}",
        "",
        "| Item | Fault point / input class | Variants | Passed | Outcome | Last run "
        "| Checked on the host (data loss as asserted) | Tests |",
        "|---:|---|---:|---:|---|---|---|---|",
    ]
    for row in rows:
        tests = sorted({f"{Path(r.file).name}::{r.test}" for r in row.records})
        lines.append("| " + " | ".join([_cell(c) for c in (
            str(row.item), row.fault, str(row.variants), str(row.count("passed")),
            outcome_words(row), last_run_words(row, session), data_loss_words(row))]
            + ["<br>".join(_cell(t) for t in tests)]) + " |")
    # One record a line: a rerun's diff shows which tests changed.
    data = "[\n" + ",\n".join(json.dumps(asdict(r)) for r in sorted(records, key=lambda r: r.nodeid)) + "\n]"
    lines += ["", DATA_START, data.replace("--", "-\\u002d"), DATA_END, ""]
    return "\n".join(lines)


def read_records(text: str) -> list[Record]:
    """The records a previous :func:`render` embedded; none from a file without them."""
    start = text.find(DATA_START)
    if start < 0:
        return []
    body = text[start + len(DATA_START):]
    body = body[:body.find(DATA_END)]
    try:
        return [Record(**d) for d in json.loads(body)]
    except (ValueError, TypeError):
        return []


def merge(old: list[Record], session: list[Record], gone: set[str]) -> list[Record]:
    """This session's records over the old ones, less those of the tests in ``gone`` (see the module text)."""
    previous = {r.nodeid: r for r in old}
    out = {r.nodeid: r for r in old if r.nodeid not in gone}
    for r in session:
        before = previous.get(r.nodeid)
        if r.outcome == "not run" and before is not None and before.outcome != "not run":
            # Deselected here: keep the last result, with its marks as they are now.
            r = Record(r.nodeid, r.item, r.fault, r.variants, r.checks, before.outcome, before.date, before.session)
        out[r.nodeid] = r
    return list(out.values())


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# --- the plugin ---------------------------------------------------------------------------------

class ReliabilityPlugin:
    """Collects each marked test's outcome; writes the table when the session ran one of them."""

    def __init__(self, config: pytest.Config, out: Path | None):
        self.config = config
        self.out = out
        self.records: dict[str, Record] = {}
        #: Modules and classes collected whole in this session, and every node id they yielded.
        self.enumerated: set[str] = set()
        self.yielded: set[str] = set()
        self.ran = False
        self.written: int | None = None
        self.started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        self.session = uuid.uuid4().hex[:12]

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_make_collect_report(self, collector: pytest.Collector):
        # The innermost wrapper: it sees everything a module or class yields, before --lf or a node id
        # (file.py::test_a) narrows the list down.
        report = yield
        if report.passed and isinstance(collector, (pytest.Module, pytest.Class)):
            self.enumerated.add(collector.nodeid)
            self.yielded.update(node.nodeid for node in report.result)
        return report

    def gone(self, nodeid: str) -> bool:
        """Whether the test ``nodeid`` no longer exists: its file is gone, or the module or class nearest to it
        that this session collected whole did not yield it.  Unknown (not collected here): not gone."""
        parts = nodeid.split("::")
        if not (self.config.rootpath / parts[0]).exists():
            return True
        for k in range(len(parts) - 1, 0, -1):
            if "::".join(parts[:k]) in self.enumerated:
                return "::".join(parts[:k + 1]) not in self.yielded
        return False

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Runs before -k/-m deselect: every marked test collected here is a record, run or not.
        sets: dict[str, int] = {}
        for item in items:
            if getattr(item, "callspec", None) is not None:
                sets[item.nodeid.split("[")[0]] = sets.get(item.nodeid.split("[")[0], 0) + 1
        for item in items:
            rec = record_of(item)
            if rec is not None:
                # `variants=N` over N parameter sets counts the sets (N in all), not N for each (N squared).
                if rec.variants > 1 and rec.variants == sets.get(item.nodeid.split("[")[0]):
                    rec.variants = 1
                self.records[item.nodeid] = rec

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = self.records.get(report.nodeid)
        if rec is None:
            return
        self.ran = True
        rec.date, rec.session = self.started, self.session
        if report.failed:
            rec.outcome = "failed" if report.when == "call" else "error"
        elif report.skipped and rec.outcome not in ("failed", "error"):
            rec.outcome = "skipped"
        elif report.when == "call" and report.passed and rec.outcome == "not run":
            rec.outcome = "passed"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.out is None or not self.ran or self.config.getoption("collectonly"):
            return
        args = " ".join(self.config.invocation_params.args) or "(no arguments)"
        self.out.parent.mkdir(parents=True, exist_ok=True)
        # Sessions of several engineers end in one checkout: read, merge and rename under a lock on the
        # folder, so that no session's rows are lost to another's write in between.
        folder = os.open(self.out.parent, os.O_RDONLY)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            old = read_records(self.out.read_text(encoding="utf-8")) if self.out.exists() else []
            records = merge(old, list(self.records.values()), {r.nodeid for r in old if self.gone(r.nodeid)})
            write_atomically(self.out, render(records, generated=self.started, command=f"python -m pytest {args}",
                                              session=self.session))
        finally:
            os.close(folder)
        self.written = sum(r.variants for r in self.records.values() if r.session == self.session)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.written is not None:
            terminalreporter.write_line(f"reliability table: {self.out} ({self.written} variant(s) of this session "
                                        "merged with the earlier rows)")


def configure(config: pytest.Config) -> None:
    """Register the plugin (called from ``tests/conftest.py``; the marker is declared in pyproject.toml).

    It writes the table only where ``--reliability-out`` says; without it, it checks the markers.
    """
    out = config.getoption("--reliability-out")
    if not hasattr(config, "workerinput"):      # one writer, even under pytest-xdist
        config.pluginmanager.register(ReliabilityPlugin(config, Path(out) if out else None), "bringup-reliability")
