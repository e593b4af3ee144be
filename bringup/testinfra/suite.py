"""``invoke audit --testinfra PATH``: a site's testinfra tests, run on each host beside the built-in audit.

Each selected host's tests run in a pytest process of their own (``python -m pytest --bringup-host=HOST``: the
name exactly, never read as a pattern nor as a URL), started by the host's audit worker as soon as its built-in
audit is done, so at most ``--forks`` hosts are in flight, each either auditing or running its tests.  A process per host, not ``pytest.main`` in this one:
pytest is not re-entrant (one session per process: its plugins, its module cache, its assertion rewriting),
hosts must run side by side, and a site's test that hangs, exits or crashes the interpreter then ends its own
host's run, never the audit.  The plugin (:mod:`.plugin`) writes each test's outcome as one line to a JSON
report, which becomes the host's :class:`~bringup.audit.Item` s: one recap, one JUnit file and one JSON
summary hold both.

Before any host is audited, the tests are collected once (``--collect-only``): a path without tests, a test
file that does not import, a pattern pytest refuses are bad input, one line and exit 1.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from . import PLUGIN

if TYPE_CHECKING:
    from ..audit import Item
    from ..inventory import Host
    from ..results import HostResult
    from ..stop import Stop

__all__ = ["Suite"]

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
    #: Hosts whose tests did not run, and why (the JSON summary's ``testinfra.not_run``).
    not_run: dict[str, str] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, path: str, inventory, overrides, vault: tuple = ()) -> "Suite":
        """The suite at ``path``; a path that is not a test file or a folder is one line (bad input)."""
        p = Path(path).expanduser()
        if not p.exists():
            raise InputError(f"--testinfra {path}: no such file or folder")
        if p.is_file() and p.suffix != ".py":
            raise InputError(f"--testinfra {path}: not a Python file; give a testinfra test file (test_*.py) or "
                             "a folder of them")
        if not (p.is_file() or p.is_dir()):
            raise InputError(f"--testinfra {path}: neither a file nor a folder")
        given = inventory if isinstance(inventory, (list, tuple)) else [inventory] if inventory else []
        files, ids = (tuple(vault) + (None, None))[:2]

        def resolved(spec: str) -> str:  # [label@]FILE, FILE resolved as the inventories are
            label, at, f = spec.rpartition("@")
            return f"{label}{at}{Path(f).expanduser().resolve()}"

        vault = (tuple(map(resolved, files or ())), tuple(map(resolved, ids or ())))
        return cls(p.resolve(), tuple(Path(i).resolve() for i in given or ["hosts"]), tuple(overrides or ()), vault)

    def summary(self) -> dict[str, Any]:
        """The JSON summary's ``testinfra`` part: the path, each host's counts, the hosts it did not run on."""
        return {"path": str(self.path), "hosts": self.counts, "not_run": self.not_run}

    def argv(self, host: str, report: Path, *extra: str) -> list[str]:
        # Nothing written in the operator's folder but the audit's reports: no .pytest_cache, and no .benchmarks
        # (pytest-benchmark, where installed, makes one at start).
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "-p", PLUGIN,
                f"--bringup-host={host}", *[f"--bringup-inventory={i}" for i in self.inventory],
                *[f"--bringup-set={s}" for s in self.overrides],
                *[f"--bringup-vault-password-file={f}" for f in self.vault[0]],
                *[f"--bringup-vault-id={i}" for i in self.vault[1]], f"--bringup-report={report}", *extra,
                str(self.path)]

    def _pytest(self, host: str, *extra: str) -> tuple[int, dict | None, str]:
        """Run pytest for ``host``; returns its exit code, its report (None when it wrote none) and its output."""
        with tempfile.TemporaryDirectory(prefix="bringup-testinfra-") as d:
            report, log = Path(d) / "report.json", Path(d) / "output"
            with log.open("wb") as out:
                proc = subprocess.Popen(self.argv(host, report, *extra), stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
                rc = self._wait(proc)
            text = log.read_text("utf-8", "replace")
            got = json.loads(report.read_text()) if report.exists() else None
        return rc, got, text

    def _wait(self, proc: subprocess.Popen) -> int:
        """The process's exit code; a second signal to the audit (abandon) ends its whole group."""
        while True:
            try:
                return proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                if self.stop is not None and self.stop.abandoned:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                    return proc.wait()

    def preflight(self, host: Host) -> None:
        """Collect the tests once, for ``host``: bad input is one line (InputError) before any host is audited."""
        rc, got, text = self._pytest(host.name, "--collect-only")
        where = f"--testinfra {self.path}"
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
        from ..audit import Item

        if result.status in ("unreachable", "interrupted", "not started") or (result.status == "failed"
                                                                              and result.message):
            self.not_run[host.name] = f"the host's audit ended {result.status}"
            return []
        if self.stop is not None and self.stop.requested:
            self.not_run[host.name] = f"interrupted by {self.stop.name} before it started"
            return []
        rc, got, text = self._pytest(host.name)
        name = host.name
        if got is None:
            self.not_run[name] = f"pytest ended (exit {rc}) before its report"
            return [Item(name, "testinfra", "pytest", "failed",
                         f"testinfra: pytest ended (exit {rc}) before its report: {_last(text)}")]
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
        self.counts[name] = {k: sum(i.outcome == k for i in found) for k in ("passed", "failed", "skipped",
                                                                             "unreachable")}
        return found


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


def _last(text: str) -> str:
    """The last line pytest printed that says something (its error, or its summary)."""
    lines = [" ".join(l.split()) for l in text.splitlines() if l.strip() and not set(l.strip()) <= set("=!-_ ")]
    err = [l for l in lines if l.startswith(("ERROR", "E "))]
    return ((err or lines or ["no output"])[-1])[:300]
