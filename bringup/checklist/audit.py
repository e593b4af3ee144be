"""`invoke audit`: is each host in the state its roles declare?  Check mode only.

The audit of a role is (a) its declared resources planned in check mode
against the host: each plan already knows what is and what the role wants;
and (b) the runtime promises its files do not show, the items of the role's
optional ``audit(host)`` hook (:class:`bringup.engine.auditkit.Expect`).  Both run
through :class:`bringup.engine.runner.HostRun` in check mode: one connection per
host (the inventory's, host keys checked), the declared facts gathered once,
every read in one batched round trip, nothing written.

Output: one line per failed item, ``host: what is, what is wanted``, then a
summary line per host; JUnit XML and a JSON summary under ``reports/``.
Exit 0 when every item holds, 2 on drift or a failed item, 4 when a host is
unreachable (one line).
"""
from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..engine.auditkit import finding
from ..errors import printable
from ..inventory.hosts import Host
from ..outfile import write_atomic
from ..resources.guard import Unused
from ..engine.roles import HostContext, Role
from ..engine.results import HostResult, ResourceResult
from ..engine.runner import Options, run_host, run_hosts
from ..ssh.stop import Stop
from ..engine.templates import Templates

if TYPE_CHECKING:
    from ..engine.ahead import Ahead

__all__ = ["AuditedRole", "Item", "INTERRUPTED", "items", "run_audit", "exit_code"]


class AuditedRole(Role):
    """A role whose resources include its audit items (``audit(host)``, optional)."""

    def resources(self, ctx: HostContext) -> list:
        return super().resources(ctx) + self.audit(ctx)


@dataclass
class Item:
    """One audited item of one host: ``passed``, ``failed`` or ``skipped``, and one line saying why."""

    host: str
    role: str
    item: str
    outcome: str
    message: str = ""


#: The item of checks a signal stopped half way (``also``'s: a site's tests): skipped, and printed.
INTERRUPTED = "interrupted"


def _item(host: str, r: ResourceResult) -> Item:
    if r.status == "ok":
        return Item(host, r.role, r.id, "passed", r.reason or "")
    if r.status == "skipped" and r.reason:
        return Item(host, r.role, r.id, "skipped", r.reason)
    if r.status == "skipped":
        return Item(host, r.role, r.id, "failed", f"{r.id}: skipped without a reason")
    if r.status == "failed":
        return Item(host, r.role, r.id, "failed", f"{r.id}: {r.error}")
    return Item(host, r.role, r.id, "failed", finding(r.id, r.changes, r.diff, r.reason))


def items(result: HostResult) -> list[Item]:
    """The audit's items of one host's check-mode result; a host that could not be audited is one item."""
    out = [_item(result.host, r) for r in result.resources]
    if result.status in ("unreachable", "failed", "interrupted") and result.message:
        # A host a signal cut short was not audited to its end: its checks left are skipped, as a site's tests
        # a signal stopped are (INTERRUPTED), never a failed check (failed=1 in the recap, a JUnit failure); the
        # run's exit code is the signal's, and converge's recap counts it no failure either.
        outcome = {"unreachable": "unreachable", "interrupted": "skipped"}.get(result.status, "failed")
        out.append(Item(result.host, "", result.status, outcome, f"{result.status}: {result.message}"))
    return out


def exit_code(found: list[Item]) -> int:
    """4 when a host was unreachable, else 2 when any item failed, else 0."""
    if any(i.outcome == "unreachable" for i in found):
        return 4
    return 2 if any(i.outcome == "failed" for i in found) else 0


def summary_line(host: str, found: list[Item]) -> str:
    """``sandbox-01 : passed=17 failed=2 skipped=3 unreachable=0``"""
    n = {k: sum(i.outcome == k for i in found) for k in ("passed", "failed", "skipped", "unreachable")}
    return f"{host} : passed={n['passed']} failed={n['failed']} skipped={n['skipped']} unreachable={n['unreachable']}"


#: What XML 1.0 cannot hold, not even as a character reference, and :func:`printable` keeps (U+FFFE, U+FFFF).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """``text`` as a JUnit attribute holds it: its control characters written out (:func:`printable`), so that
    an ESC or a NUL that a host, a ProxyCommand or a site's test said neither makes the file XML no reader
    parses nor acts on a terminal that shows it."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", printable(text))


def junit_xml(by_host: dict[str, list[Item]]) -> ET.ElementTree:
    """JUnit XML (what CI systems read): a test suite per host, a test case per item."""
    root = ET.Element("testsuites", name="bringup audit")
    for host, found in by_host.items():
        suite = ET.SubElement(root, "testsuite", name=_xml(host), tests=str(len(found)),
                              failures=str(sum(i.outcome == "failed" for i in found)),
                              errors=str(sum(i.outcome == "unreachable" for i in found)),
                              skipped=str(sum(i.outcome == "skipped" for i in found)))
        for i in found:
            case = ET.SubElement(suite, "testcase", classname=_xml(f"{host}.{i.role or 'host'}"), name=_xml(i.item))
            tag = {"failed": "failure", "unreachable": "error", "skipped": "skipped"}.get(i.outcome)
            if tag:
                ET.SubElement(case, tag, message=_xml(f"{host}: {i.message}"))
    return ET.ElementTree(root)


def run_audit(hosts: list[Host], roles: list[Role], role_vars: dict[str, dict], templates: Templates,
              reports: Path, *, forks: int = 10, accept_new_host_keys: bool = False,
              say: Callable[[str], None] = print, stop: Stop | None = None,
              ahead: Ahead | None = None, also: Callable[[Host, HostResult], list[Item]] | None = None,
              extra: Callable[[], dict] | None = None) -> tuple[int, list[HostResult]]:
    """Audit ``roles`` on ``hosts`` in check mode; print the findings; JUnit XML + JSON land in ``reports``.

    Each host's lines are printed as soon as that host is done.  Returns the exit code and the hosts'
    results; after ``stop`` was requested (a signal) the hosts not yet started are left out of the reports'
    items and listed as ``not_started``.  ``ahead``: the hosts' connections and facts opened while the
    audit prepared (:mod:`bringup.engine.ahead`).  ``also(host, result)``: more items of a host, found by its worker
    right after its check-mode run (``--testinfra``: the site's tests), printed, counted and reported with the
    host's own; ``extra()``: more keys of the JSON summary.
    """
    audited = [AuditedRole(r.name, r.module) for r in roles]
    by_host: dict[str, list[Item]] = {}
    trips: dict[str, int] = {}
    more: dict[str, list[Item]] = {}

    def run(host: Host, *args) -> HostResult:
        result = run_host(host, *args)
        if also is not None and result.status != "not started":
            more[host.name] = also(host, result)
        return result

    def done(result: HostResult) -> None:
        if result.status == "not started":
            return
        found = items(result) + more.get(result.host, [])
        by_host[result.host] = found
        trips[result.host] = result.round_trips
        for i in found:
            if i.outcome in ("failed", "unreachable"):
                say(f"{result.host}: {i.message}")
            elif i.item.startswith(f"{Unused.kind}:"):
                say(f"{result.host}: not audited: {i.message}")
            elif i.item == INTERRUPTED:
                say(f"{result.host}: {i.message}")
        say(summary_line(result.host, found))

    opts = Options(check=True, forks=forks, accept_new_host_keys=accept_new_host_keys, ahead=ahead)
    results = run_hosts(hosts, audited, role_vars, opts, templates, on_result=done, stop=stop, run=run)
    by_host = {h.name: by_host[h.name] for h in hosts if h.name in by_host}
    found = [i for f in by_host.values() for i in f]
    # A run a signal stopped exits with the signal's code (the task's), and its report says the same.
    code = stop.exit_code if stop is not None and stop.requested else exit_code(found)
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    junit = reports / f"{stamp}-audit.xml"
    write_atomic(junit, ET.tostring(junit_xml(by_host).getroot(), encoding="utf-8", xml_declaration=True))
    summary = {
        "hosts": list(by_host), "roles": [r.name for r in roles], "exit": code,
        **{k: sum(i.outcome == k for i in found) for k in ("passed", "failed", "skipped", "unreachable")},
        "round_trips": {h: trips[h] for h in by_host}, "results": [asdict(i) for i in found], "junit": str(junit),
        "not_started": [r.host for r in results if r.status == "not started"],
        "interrupted": stop.name if stop is not None and stop.requested else None,
        **(extra() if extra is not None else {}),
    }
    write_atomic(reports / f"{stamp}-audit.json", json.dumps(summary, indent=2) + "\n")
    return code, results
