"""The pytest plugin of the ``bringup://`` testinfra backend (entry point ``pytest11``: loaded by any pytest
where bringup is installed; ``-p bringup.testinfra.plugin`` loads it from a checkout).

- registers the backend with testinfra (``testinfra.backend.BACKENDS``), which finds backends by URL scheme;
- ``--bringup-inventory PATH``, repeatable (else ``$BRINGUP_INVENTORY``, else ``./hosts``) and ``--bringup-set KEY=VALUE``;
  ``--bringup-vault-password-file FILE`` and ``--bringup-vault-id LABEL@FILE`` open its ansible-vault secrets;
- expands each ``bringup://PATTERN`` of ``--hosts`` into the inventory's hosts before testinfra parses it as a
  URL (a ``?`` wildcard or a ``[12]`` class would not survive that); a pattern that names nothing, or a bad
  inventory, is one ``ERROR:`` line (pytest's usage error, exit 4) before any test runs;
- ``--bringup-host NAME``, repeatable: exactly that host of the inventory, never read as a pattern nor as part
  of a URL (``fd00::2``, ``a,b``, ``web[1]``, a name holding ``;``, a space or ``%``); what ``invoke audit
  --testinfra`` passes;
- the ``bringup_vars`` fixture: the host's merged variables (``host.backend.vars``);
- a test that failed because its host was unreachable (or sudo refused, or its variables are bad) reports
  bringup's one line instead of a traceback;
- ``--bringup-become no``: the inventory's ``ansible_become`` does not apply: the tests run as the login user
  (``invoke audit --testinfra`` passes it unless ``--testinfra-become``); a test's own ``host.sudo()`` still
  becomes, as it asks;
- ``--bringup-deadline SECONDS``: no command runs on a host past SECONDS from the session's start (each round
  trip is limited to what is left, so the host's own ``timeout`` ends it there too); a test interrupted
  (Ctrl-C, or the audit ending it) ends the command it had running on the host;
- a failure's report, its captured output and its log never show a secret: the inventory's passwords and
  every vaulted or referenced value are masked (:data:`bringup.secrets.MASK`), in plain pytest as in the audit;
- ``--bringup-report FILE``: every test's outcome as one line, JSON (what ``invoke audit --testinfra`` reads),
  written again after each test, with the test in flight, so that a run ended from outside still says how far
  it got;
- started by the audit (:func:`bringup.child.run_bounded`), the session ends with the audit, even one killed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..errors import BringupError, InventoryError, Unreachable
from ..outfile import write_atomic
from . import SCHEME, register

register()

#: Longest one-line message kept for a test (an assertion's whole explanation collapsed onto one line).
LINE_MAX = 400


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bringup", "bringup's testinfra backend (--hosts=bringup://HOST-OR-PATTERN)")
    group.addoption("--bringup-inventory", dest="bringup_inventory", action="append", default=[], metavar="PATH",
                    help="bringup's inventory (Ansible YAML or INI, a folder, a script) for bringup:// hosts; "
                         "repeatable, read in order; default $BRINGUP_INVENTORY, else ./hosts")
    group.addoption("--bringup-set", dest="bringup_set", action="append", default=[], metavar="KEY=VALUE",
                    help="variable override, as bringup's --set (highest precedence); repeatable")
    group.addoption("--bringup-vault-password-file", dest="bringup_vault_password_file", action="append",
                    default=[], metavar="FILE", help="the inventory's vault password file, as bringup's "
                                                    "--vault-password-file; repeatable")
    group.addoption("--bringup-vault-id", dest="bringup_vault_id", action="append", default=[],
                    metavar="LABEL@FILE", help="a vault id's password file, as bringup's --vault-id; repeatable")
    group.addoption("--bringup-host", dest="bringup_host", action="append", default=[], metavar="NAME",
                    help="exactly this host of the inventory (its name as the inventory spells it, never a "
                         "pattern); repeatable; added to --hosts")
    group.addoption("--bringup-become", dest="bringup_become", default="yes", choices=("yes", "no"),
                    help="no: the inventory's ansible_become does not apply, the tests run as the login user "
                         "(default yes)")
    group.addoption("--bringup-deadline", dest="bringup_deadline", default=None, type=float, metavar="SECONDS",
                    help="no command runs on a host past SECONDS from the session's start")
    group.addoption("--bringup-report", dest="bringup_report", default=None, metavar="FILE",
                    help="write each test's outcome, one line each, as JSON to FILE")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    import os
    import time

    from ..child import watch_parent
    from ..process import PROGRAM_ENV, set_program
    from .backend import INVENTORY_ENV, SETTINGS

    watch_parent()  # started by the audit: this session ends with it, even when it is killed
    if os.environ.get(PROGRAM_ENV) in ("bringup", "invoke"):  # run by `bringup audit --testinfra`: its hints say so
        set_program(os.environ[PROGRAM_ENV])
    SETTINGS.become = config.getoption("bringup_become") != "no"
    deadline = config.getoption("bringup_deadline")
    if deadline is not None and not deadline > 0:
        raise pytest.UsageError(f"--bringup-deadline {deadline:g}: give a number of seconds > 0")
    SETTINGS.deadline = None if deadline is None else (deadline, time.monotonic() + deadline)
    SETTINGS.inventory = tuple(config.getoption("bringup_inventory") or ())
    SETTINGS.overrides = tuple(config.getoption("bringup_set") or ())
    SETTINGS.vault = (tuple(config.getoption("bringup_vault_password_file") or ()),
                      tuple(config.getoption("bringup_vault_id") or ()))
    hosts = getattr(config.option, "hosts", None)
    exact = config.getoption("bringup_host") or []
    if (hosts and f"{SCHEME}://" in hosts) or exact:
        try:
            config.option.hosts = ",".join(filter(None, [expand_hosts(hosts or ""), exact_hosts(exact)]))
        except InventoryError as e:
            raise pytest.UsageError(f"{e}; bringup:// hosts read --bringup-inventory PATH, else "
                                    f"${INVENTORY_ENV}, else ./hosts") from None
        except BringupError as e:
            raise pytest.UsageError(str(e)) from None
    if config.getoption("bringup_report"):
        config.pluginmanager.register(Recorder(Path(config.getoption("bringup_report"))), "bringup-report")


def expand_hosts(hosts: str) -> str:
    """testinfra's ``--hosts`` with each ``bringup://PATTERN`` replaced by ``bringup://NAME`` per host it names."""
    from .backend import expand, host_spec

    out: list[str] = []
    for spec in hosts.split(","):
        spec = spec.strip()
        if spec.startswith(f"{SCHEME}://"):
            out += [host_spec(n) for n in expand(spec[len(SCHEME) + 3:])]
        elif spec:
            out.append(spec)
    return ",".join(dict.fromkeys(out))


def exact_hosts(names: list[str]) -> str:
    """``--bringup-host`` names as testinfra's ``--hosts``: each one a host of the inventory, spelled exactly."""
    from .backend import host_spec, inventory

    hosts = inventory().hosts
    for n in names:
        if n not in hosts:
            raise BringupError(f"--bringup-host {n!r}: no such host in the inventory (`invoke hosts` lists them)")
    return ",".join(dict.fromkeys(host_spec(n) for n in names))


def pytest_unconfigure(config: pytest.Config) -> None:
    from .backend import close_all

    close_all()


@pytest.fixture(scope="module")
def bringup_vars(host) -> dict[str, Any]:
    """The host's variables as bringup merges them: every role's defaults < the inventory < ``--bringup-set``."""
    from .backend import BringupBackend

    if not isinstance(host.backend, BringupBackend):
        pytest.fail(f"bringup_vars needs a {SCHEME}:// host (--hosts={SCHEME}://NAME), not "
                    f"{host.backend.get_pytest_id()}", pytrace=False)
    try:
        return host.backend.vars
    except BringupError as e:
        pytest.fail(str(e), pytrace=False)


def host_of(item: pytest.Item):
    """The testinfra host an item runs against (None when it takes no ``host``)."""
    spec = getattr(item, "callspec", None)
    return spec.params.get("_testinfra_host") if spec is not None else None


def display_name(item: pytest.Item) -> str:
    """The item's name without its host's id: ``test_ntp``, ``test_sysctl[net.core.somaxconn]``."""
    name = item.name
    host = host_of(item)
    if host is not None:
        hid = host.backend.get_pytest_id()
        name = name.replace(f"[{hid}]", "").replace(f"{hid}-", "").replace(f"-{hid}", "")
    return name


def one_line(e: BaseException) -> str:
    """Why a test failed, as one line: bringup's own line, or the assertion with its explanation collapsed."""
    from ..secrets import MASK

    if isinstance(e, Unreachable):
        text = f"unreachable: {e}"
    elif isinstance(e, BringupError):
        text = str(e)
    else:
        # The assertion's own lines in one: its message; the statement, with pytest's explanation ("+ where").
        lines = [" ".join(l.split()) for l in str(e).splitlines() if l.strip()]
        text = "".join((" " if l.startswith(("+", "-", "?")) else "; ") + l for l in lines)[2:] if lines else ""
        if not isinstance(e, AssertionError) and type(e).__name__ not in ("Failed", "Skipped"):
            text = f"{type(e).__name__}: {text}" if text else type(e).__name__
        text = text or "assertion failed"
    return _cut(MASK.mask_lines(text))


def _cut(text: str) -> str:
    return text if len(text) <= LINE_MAX else text[:LINE_MAX - 1] + "…"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    host = host_of(item)
    report.bringup_test = display_name(item)
    report.bringup_host = host.backend.get_hostname() if host is not None else None
    if call.excinfo is not None and report.failed:
        e = call.excinfo.value
        report.bringup_line = one_line(e)
        report.bringup_unreachable = isinstance(e, Unreachable)
        if isinstance(e, (Unreachable, BringupError)):
            # bringup's one line, not a traceback through the transport.
            report.longrepr = f"{report.bringup_host or item.nodeid}: {report.bringup_line}"
    mask_report(report)
    return report


def mask_report(report: pytest.TestReport) -> None:
    """``report`` with no secret in what pytest prints and writes of it: its failure's text (an assertion's
    values, a traceback's locals), its captured output and log.  A report without a secret is left as it is
    (its colours, its structure for other plugins)."""
    from ..secrets import MASK

    if report.longrepr is not None and not isinstance(report.longrepr, tuple):  # a tuple: a skip's reason
        text = str(report.longrepr)
        masked = MASK.mask_lines(text)
        if masked != text:
            report.longrepr = masked
    elif isinstance(report.longrepr, tuple):
        path, line, reason = report.longrepr
        report.longrepr = (path, line, MASK.mask_lines(reason))
    report.sections = [(title, MASK.mask_lines(content)) for title, content in report.sections]


class Recorder:
    """Each test's outcome as one line (worst phase wins), and collection errors; JSON at the session's end."""

    RANK = {"passed": 0, "skipped": 1, "failed": 2}

    def __init__(self, path: Path):
        self.path = path
        self.tests: dict[str, dict[str, Any]] = {}
        self.errors: list[dict[str, str]] = []
        self.collected = 0
        #: Each test's name without its host's id, by node id; the test in flight (its node id), if any.
        self.names: dict[str, str] = {}
        self.running: str | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        self.names = {i.nodeid: display_name(i) for i in session.items}
        self.write(None)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        self.running = nodeid
        self.write(None)

    def pytest_runtest_logfinish(self, nodeid: str, location) -> None:
        self.running = None
        self.write(None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        got = self.tests.setdefault(report.nodeid, {
            "test": getattr(report, "bringup_test", report.nodeid), "nodeid": report.nodeid,
            "host": getattr(report, "bringup_host", None), "outcome": "passed", "message": "",
            "unreachable": False})
        if report.failed:
            line = getattr(report, "bringup_line", None) or _last_line(report)
            if report.when != "call" and not getattr(report, "bringup_unreachable", False):
                line = f"{report.when}: {line}"
        elif report.skipped:
            line = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr or "")
            line = line.removeprefix("Skipped: ")
        else:
            return
        if self.RANK[report.outcome] > self.RANK[got["outcome"]]:
            got.update(outcome=report.outcome, message=line,
                       unreachable=bool(getattr(report, "bringup_unreachable", False)))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append({"where": report.nodeid or ".", "message": _last_line(report)})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write(int(exitstatus))

    def write(self, exitstatus: int | None) -> None:
        """The report so far (``exit`` None: the session has not ended), replacing the last one whole."""

        running = None if self.running is None else {"nodeid": self.running,
                                                     "test": self.names.get(self.running, self.running)}
        write_atomic(self.path, json.dumps({"exit": exitstatus, "collected": self.collected,
                                            "tests": list(self.tests.values()), "running": running,
                                            "collection_errors": self.errors}, indent=1) + "\n")


def _last_line(report) -> str:
    """A failure's own words from pytest's text: its last ``E`` line (the exception), else the whole text on
    one line (an import file mismatch says what in three)."""
    from ..secrets import MASK

    lines = [l.strip() for l in str(report.longrepr or "").splitlines() if l.strip()]
    said = [l[1:].strip() for l in lines if l.startswith("E ")]
    return _cut(MASK.mask_lines(" ".join((said[-1] if said else " ".join(lines) or "failed").split())))
