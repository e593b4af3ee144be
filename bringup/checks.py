"""What a checklist line is made of: :class:`Check`, :func:`line`, and the version matrix shipped with bringup.

A role's optional ``checks(host)`` hook returns :func:`line` values, and a role reading what a Triton
release needs takes it from :func:`load_matrix`; the rack checklist (:mod:`bringup.checklist.pages`) collects and
renders the lines.  Roles import this module, not the report.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .errors import printable
from .shipped import shipped_yaml

__all__ = ["STATUSES", "Check", "line", "line_json", "not_checked", "dated_ahead", "load_matrix", "printable",
           "summary_counts", "verdict", "worst_first"]

STATUSES = ("PASS", "WARN", "FAIL")


@dataclass
class Check:
    """One checklist line: PASS / WARN / FAIL, what was seen, a one-line fix."""

    name: str
    status: str  # PASS | WARN | FAIL
    seen: str
    fix: str = ""
    area: str = "platform"
    #: The one device the line is about ("GPU 00000000:18:00.0", "mlx5_0 port 1"), "" for the host: the pages
    #: gather a device's lines into one row of a table, a column per check.
    subject: str = ""
    #: A measured figure and the limit it is held against (same ``unit``), for the pages to draw.
    value: float | None = None
    limit: float | None = None
    unit: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} not in PASS, WARN, FAIL")
        # Every text comes from hosts: a control character (an ANSI escape in a GPU name) or a byte that was not
        # UTF-8 must neither act on a terminal nor stop a page from being written.
        for key in ("name", "seen", "fix", "area", "subject", "unit"):
            setattr(self, key, printable(getattr(self, key)))
        # A line made of an inventory's value: a secret in it (a vaulted value, of any length, standing alone)
        # is ******** on every page (HTML, Markdown, JSON) and in the console.  Its name and subject are the
        # check's and the device's ('GPU 1 ECC volatile errors', 'mlx5_0 port 1'): never masked here, a vault
        # encrypted whole registers '1' and 'docker' (saved lines are matched by name); a name made of an
        # inventory's value masks it where it is made (the GPU class line's profile, checklist.pages).
        from .secrets import MASK

        for key in ("seen", "fix"):
            setattr(self, key, MASK.mask_lines(getattr(self, key)))


def line(area: str, name: str, status: str, seen: str, fix: str = "", *, subject: str = "",
         value: float | None = None, limit: float | None = None, unit: str = "") -> Check:
    """One checklist line: ``area`` groups it (platform, gpu, health, software, tuning, latency, acceptance);
    ``subject`` the device it is about, ``value``/``limit``/``unit`` a measured figure against its limit."""
    return Check(name, status, seen, fix, area, subject, value, limit, unit)


def not_checked(area: str, name: str, needs, fact_errors: dict | None, *, subject: str = "") -> Check | None:
    """The line a check gives in place of its verdict when a fact it ``needs`` could not be read (``fact_errors``:
    the gathering's, each fact's own line says what was seen): WARN "not checked: <fact> unreadable", never a
    PASS and never a verdict on the hardware; None when every fact it needs was read."""
    bad = [f for f in needs if f in (fact_errors or {})]
    if not bad:
        return None
    return line(area, name, "WARN", "not checked: " + ", ".join(f"{f} unreadable" for f in bad),
                f"read the host again; the line of fact {bad[0]} says what its command printed", subject=subject)


def dated_ahead(area: str, name: str, later: list, what: str, fix: str = "") -> list[Check]:
    """The WARN line for saved results dated in the future and passed over (``later``, the first named; none: no
    line): ``what`` says what they are ("saved result(s) named for a time in the future"), ``fix`` adds to the
    advice.  A result from the future is no measurement yet, and it would hide every later one."""
    if not later:
        return []
    return [line(area, name, "WARN", f"{len(later)} {what}, not read: {later[0]}"
                 + (f" and {len(later) - 1} more" if len(later) > 1 else ""),
                 "remove them (or set this machine's clock right)" + (f"; {fix}" if fix else ""))]


def summary_counts(checks: Iterable[Check]) -> dict[str, int]:
    """How many lines of each status."""
    counts = {s: 0 for s in STATUSES}
    for c in checks:
        counts[c.status] += 1
    return counts


def verdict(checks: Iterable[Check]) -> str:
    """The worst status of the lines: FAIL if any fails, else WARN if any warns, else PASS."""
    counts = summary_counts(checks)
    return "FAIL" if counts["FAIL"] else "WARN" if counts["WARN"] else "PASS"


def worst_first(checks: Iterable[Check]) -> list[Check]:
    """The lines FAIL first, then WARN, then PASS, each status in its given order: what to act on leads."""
    return sorted(checks, key=lambda c: -STATUSES.index(c.status))


def line_json(k: Check) -> dict:
    """One line as JSON (the checklist's page, a saved acceptance result): the device and the measured figure only
    when the line has them."""
    out = {"status": k.status, "area": k.area, "name": k.name, "seen": k.seen, "fix": k.fix}
    if k.subject:
        out["subject"] = k.subject
    if k.value is not None or k.limit is not None:
        out.update(value=k.value, limit=k.limit, unit=k.unit)
    return out


def load_matrix() -> dict[str, Any]:
    """The version matrix shipped with bringup (``bringup/data/version_matrix.yaml``)."""
    return shipped_yaml("version_matrix.yaml")
