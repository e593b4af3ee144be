"""``invoke audit --testinfra PATH``: a site's testinfra tests, run on each host beside the built-in audit.

Each selected host's tests run in a pytest process of their own (``python -m pytest --bringup-host=HOST``: the
name exactly, never read as a pattern nor as a URL), started by the host's audit worker as soon as its built-in
audit is done, so at most ``--forks`` hosts are in flight, each either auditing or running its tests.  A process per host, not ``pytest.main`` in this one:
pytest is not re-entrant (one session per process: its plugins, its module cache, its assertion rewriting),
hosts must run side by side, and a site's test that hangs, exits or crashes the interpreter then ends its own
host's run, never the audit.  The plugin (:mod:`.plugin`) writes each test's outcome as one line to a JSON
report, which becomes the host's :class:`~bringup.checklist.audit.Item` s: one recap, one JUnit file and one JSON
summary hold both.

Before any host is audited, the tests are collected once (``--collect-only``): a path without tests, a test
file that does not import, a pattern pytest refuses are bad input, one line and exit 1.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..child import Ended, run_bounded
from ..errors import InputError
from ..untrusted import loads
from ..userfile import home, kind, read_capped
from . import PLUGIN

if TYPE_CHECKING:
    from ..checklist.audit import Item
    from ..inventory.hosts import Host
    from ..engine.results import HostResult
    from ..ssh.stop import Stop

#: The most of pytest's output kept (its tail: what a failure's line quotes) and of its JSON report read.
OUTPUT_KEPT = 64 * 1024
REPORT_MAX = 64 << 20

__all__ = ["Suite", "TIMEOUT_S", "parse_timeout"]

#: Seconds a host's tests may take, all together, unless ``--testinfra-timeout`` says otherwise.
TIMEOUT_S = 600.0

#: What the audit counts a test's outcome as.
_OUTCOME = {"passed": "passed", "skipped": "skipped", "failed": "failed"}


@dataclass
class Suite:
    """A file or folder of testinfra tests, run per host with the audit's inventory and ``--set`` values."""

    path: Path
    #: The audit's inventories, in order (``--inventory``, once or more).
    inventory: tuple[Path, ...]
    overrides: tuple[str, ...] = ()
    #: The audit's vault passwords: (``--vault-password-file`` files, ``--vault-id`` values).
    vault: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    stop: Stop | None = None
    #: Seconds a host's tests may take, all together (``--testinfra-timeout``).
    timeout: float = TIMEOUT_S
    #: Whether the tests run with the inventory's become (``--testinfra-become``); else as the login user.
    become: bool = False
    #: Hosts whose tests did not run, and why (the JSON summary's ``testinfra.not_run``).
    not_run: dict[str, str] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, path: str, inventory, overrides, vault: tuple = (), timeout: str | float | None = None,
           become: bool = False) -> "Suite":
        """The suite at ``path``; a path that is not a test file or a folder is one line (bad input)."""
        p = Path(home(path))
        what = kind(p, InputError, f"--testinfra {path}")
        if what == "missing":
            raise InputError(f"--testinfra {path}: no such file or folder")
        if what == "file" and p.suffix != ".py":
            raise InputError(f"--testinfra {path}: not a Python file; give a testinfra test file (test_*.py) or "
                             "a folder of them")
        if what == "special":
            raise InputError(f"--testinfra {path}: neither a file nor a folder")
        given = inventory if isinstance(inventory, (list, tuple)) else [inventory] if inventory else []
        files, ids = (tuple(vault) + (None, None))[:2]

        def resolved(spec: str) -> str:  # [label@]FILE, FILE resolved as the inventories are
            label, at, f = spec.rpartition("@")
            return f"{label}{at}{Path(home(f)).resolve()}"

        vault = (tuple(map(resolved, files or ())), tuple(map(resolved, ids or ())))
        return cls(p.resolve(), tuple(Path(i).resolve() for i in given or ["hosts"]), tuple(overrides or ()), vault,
                   timeout=parse_timeout(timeout), become=become)

    def runs_as(self, host: Host) -> str | None:
        """Who the tests run as on ``host``, as its inventory says (None: the SSH config's or the local user's)."""
        import getpass

        c = host.connection
        if self.become and c.ansible_become:
            return c.ansible_become_user
        if c.ansible_connection == "local":
            return getpass.getuser()
        return c.ansible_user

    def root_notice(self, hosts: list[Host]) -> str | None:
        """One plain line when the tests run as root somewhere: the audit is check mode, the site's tests are
        not bound by it (bringup runs whatever they run)."""
        root = [h.name for h in hosts if self.runs_as(h) == "root"]
        if not root:
            return None
        how = "--testinfra-become" if self.become else "their login user is root"
        return (f"note: --testinfra runs the site's tests as root on {', '.join(root[:5])}"
                f"{f' and {len(root) - 5} more' if len(root) > 5 else ''} ({how}): the audit's check mode binds "
                "its own items only, a test that writes changes the host; log in as a user without root to keep "
                "them read-only")

    def summary(self) -> dict[str, Any]:
        """The JSON summary's ``testinfra`` part: the path, each host's counts, the hosts it did not run on."""
        return {"path": str(self.path), "hosts": self.counts, "not_run": self.not_run, "timeout_s": self.timeout,
                "become": self.become}

    def argv(self, host: str, report: Path, *extra: str) -> list[str]:
        # Nothing written in the operator's folder but the audit's reports: no .pytest_cache, and no .benchmarks
        # (pytest-benchmark, where installed, makes one at start).
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "-p", PLUGIN,
                f"--bringup-host={host}", *[f"--bringup-inventory={i}" for i in self.inventory],
                *[f"--bringup-set={s}" for s in self.overrides],
                *[f"--bringup-vault-password-file={f}" for f in self.vault[0]],
                *[f"--bringup-vault-id={i}" for i in self.vault[1]], f"--bringup-report={report}",
                f"--bringup-deadline={self.timeout:g}", f"--bringup-become={'yes' if self.become else 'no'}",
                *extra, str(self.path)]

    def _pytest(self, host: str, *extra: str) -> tuple[Ended, dict | None, str]:
        """Run pytest for ``host`` within :attr:`timeout` (:func:`bringup.child.run_bounded`: ended, with all it
        started, at the bound, on the run's stop, or with this process); returns how it ended, its report (None
        when it wrote none) and its output."""
        with tempfile.TemporaryDirectory(prefix="bringup-testinfra-") as d:
            report, log = Path(d) / "report.json", Path(d) / "output"
            with log.open("wb") as out:
                ended = run_bounded(self.argv(host, report, *extra), timeout=self.timeout, stop=self.stop,
                                    stdout=out, env=_env())
            text = _tail(log, OUTPUT_KEPT)
            try:
                # Keys given once: a test's outcome written twice is no report (which one counts is not known).
                got = loads(read_capped(report, REPORT_MAX, ValueError, missing="", unreadable="", too_large=""),
                            what="pytest's JSON report", nan=True, unique=True) if report.exists() else None
            except ValueError:
                got = None
        return ended, got, text

    def preflight(self, host: Host) -> None:
        """Collect the tests once, for ``host``: bad input is one line (InputError) before any host is audited."""
        ended, got, text = self._pytest(host.name, "--collect-only")
        rc = ended.rc
        where = f"--testinfra {self.path}"
        if ended.why == "timeout":
            raise InputError(f"{where}: collecting the tests did not end within {self.timeout:g} s "
                             "(--testinfra-timeout); does a test module wait for something when imported?")
        if ended.why is not None:
            return  # the run was stopped: it says so itself
        if got and got["collection_errors"]:
            e = got["collection_errors"][0]
            raise InputError(f"{where}: {e['where']} cannot be collected: {e['message']}")
        if rc == 5 or (got is not None and not got["collected"] and rc == 0):
            raise InputError(f"{where}: no tests there (pytest collects test_*.py files and their test_* "
                             "functions)")
        if rc != 0:
            raise InputError(f"{where}: pytest refused it (exit {rc}): {_last(text)}")

    def also(self, host: Host, result: HostResult) -> list[Item]:
        """The host's testinfra tests as audit items, run once its built-in audit reached it."""
        from ..checklist.audit import Item

        if result.status in ("unreachable", "interrupted", "not started") or (result.status == "failed"
                                                                              and result.message):
            self.not_run[host.name] = f"the host's audit ended {result.status}"
            return []
        if self.stop is not None and self.stop.requested:
            self.not_run[host.name] = f"interrupted by {self.stop.name} before it started"
            return []
        ended, got, text = self._pytest(host.name)
        rc, name = ended.rc, host.name
        if got is None and ended.why is None:
            self.not_run[name] = f"pytest ended ({_how(rc)}) before its report"
            return [Item(name, "testinfra", "pytest", "failed",
                         f"testinfra: pytest ended ({_how(rc)}) before its report: {_last(text)}")]
        got = got or {"collected": 0, "tests": [], "running": None, "collection_errors": []}
        # The test in flight when pytest was ended from outside has no outcome (its setup's may be recorded).
        running = (got.get("running") or {}).get("nodeid")
        got["tests"] = [t for t in got["tests"] if t["nodeid"] != running]
        found = [Item(name, "testinfra", e["where"], "failed", f"testinfra: {e['where']}: {e['message']}")
                 for e in got["collection_errors"]]
        unreachable = next((t for t in got["tests"] if t["unreachable"]), None)
        for t in got["tests"]:
            if t["unreachable"]:
                continue
            item = f"{t['nodeid'].split('::')[0]}::{t['test']}"
            outcome = _OUTCOME[t["outcome"]]
            found.append(Item(name, "testinfra", item, outcome,
                              f"{t['test']}: {t['message']}" if outcome != "passed" else ""))
        if unreachable is not None:
            # Every later test of an unreachable host fails with the same line: one item says it.
            found.append(Item(name, "testinfra", "unreachable", "unreachable", f"testinfra: {unreachable['message']}"))
        if ended.why is not None:
            found.append(self._ended(name, ended, got))
        elif got.get("exit") is None or rc < 0 or got.get("exit") in (2, 3, 4) or got.get("running"):
            # It ended by itself, but not as a session ends: a test's os._exit, a signal, pytest.exit() or an
            # internal error; what was running then, and the tests never run, count as failed.
            found.append(self._died(name, rc, got))
        self.counts[name] = {k: sum(i.outcome == k for i in found) for k in ("passed", "failed", "skipped",
                                                                             "unreachable")}
        return found

    def _died(self, name: str, rc: int, got: dict) -> Item:
        """The item of a host's tests whose pytest ended by itself before its session did (failed)."""
        from ..checklist.audit import Item

        running = (got.get("running") or {}).get("test")
        left = max(0, got["collected"] - len(got["tests"]))
        what = (f"while {running} was running" if running else "before its session ended") + \
            (f"; {left} of {got['collected']} tests not finished" if got["collected"] and left else "")
        self.not_run[name] = f"pytest ended ({_how(rc)}) {what}"
        return Item(name, "testinfra", "pytest", "failed", f"testinfra: pytest ended ({_how(rc)}) {what}")

    def _ended(self, name: str, ended: Ended, got: dict) -> Item:
        """The item of a host's tests ended from outside: at the bound (failed), or by the run's stop (skipped)."""
        from ..checklist.audit import INTERRUPTED, Item

        running = (got.get("running") or {}).get("test")
        left = max(0, got["collected"] - len(got["tests"]))
        what = (f"{running} was still running" if running else "pytest had not finished") + \
            (f"; {left} of {got['collected']} tests not finished" if got["collected"] else "")
        if ended.why == "timeout":
            self.not_run[name] = f"ended at --testinfra-timeout {self.timeout:g} s"
            return Item(name, "testinfra", "timeout", "failed",
                        f"testinfra: ended after {self.timeout:g} s (--testinfra-timeout): {what}")
        self.not_run[name] = f"interrupted by {ended.why}"
        return Item(name, "testinfra", INTERRUPTED, "skipped", f"testinfra: interrupted by {ended.why}: {what}")


def _env() -> dict[str, str]:
    """This process's environment, with this bringup first on the path (the tests import what the audit runs),
    the program's name for their hints, and no bytecode written: an audit leaves its report and nothing else,
    no ``__pycache__`` of pytest's rewritten tests beside the operator's test files."""
    import bringup

    from ..process import PROGRAM, PROGRAM_ENV

    here = str(Path(bringup.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    # The tests' hints ("export again (bringup audit ...)") name the program that runs the audit.
    return {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else ""), PROGRAM_ENV: PROGRAM,
            "PYTHONDONTWRITEBYTECODE": "1"}


def parse_timeout(value: str | float | None) -> float:
    """``--testinfra-timeout``: seconds > 0 (default :data:`TIMEOUT_S`); anything else is one line."""
    if value is None:
        return TIMEOUT_S
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise InputError(f"--testinfra-timeout {value!r}: give the seconds a host's tests may take, all "
                         f"together, as a number > 0 (default {TIMEOUT_S:g})")
    return seconds


def _how(rc: int) -> str:
    """How pytest's process ended, in words: ``killed by SIGKILL``, ``exit 3``."""
    import signal

    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def _tail(path: Path, n: int) -> str:
    """The last ``n`` bytes of pytest's output (what a failure's line quotes): a site test that printed
    gigabytes is not read whole."""
    with path.open("rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - n))
        return f.read(n).decode("utf-8", "replace")


def _last(text: str) -> str:
    """The last line pytest printed that says something (its error, or its summary)."""
    lines = [" ".join(l.split()) for l in text.splitlines() if l.strip() and not set(l.strip()) <= set("=!-_ ")]
    err = [l for l in lines if l.startswith(("ERROR", "E "))]
    return ((err or lines or ["no output"])[-1])[:300]
