"""What a checklist line is made of: :class:`Check`, :func:`line`, and the version matrix shipped with bringup.

A role's optional ``checks(host)`` hook returns :func:`line` values, and a role reading what a Triton
release needs takes it from :func:`load_matrix`; the rack checklist (:mod:`bringup.checklist`) collects and
renders the lines.  Roles import this module, not the report.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources as ilr
from typing import Any

__all__ = ["Check", "line", "load_matrix"]


@dataclass
class Check:
    """One checklist line: PASS / WARN / FAIL, what was seen, a one-line fix."""

    name: str
    status: str  # PASS | WARN | FAIL
    seen: str
    fix: str = ""
    area: str = "platform"

    def __post_init__(self) -> None:
        if self.status not in ("PASS", "WARN", "FAIL"):
            raise ValueError(f"status {self.status!r} not in PASS, WARN, FAIL")


def line(area: str, name: str, status: str, seen: str, fix: str = "") -> Check:
    """One checklist line: ``area`` groups it (platform, gpu, software, tuning, latency)."""
    return Check(name, status, seen, fix, area)


def load_matrix() -> dict[str, Any]:
    """The version matrix shipped with bringup (``bringup/data/version_matrix.yaml``)."""
    import yaml

    return yaml.safe_load(ilr.files("bringup").joinpath("data/version_matrix.yaml").read_text())
