"""Package holds: ``apt-mark hold`` / ``dnf versionlock``, so upgrades leave them alone."""
from __future__ import annotations

import re

from ..ssh.command import join
from ..errors import InputError
from .base import Plan, Resource

__all__ = ["Hold"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*$")


class Hold(Resource):
    """Packages held at their installed version (or released with ``held=False``).

        Hold(["nvidia-headless-550-server", "nvidia-utils-550-server"])

    apt: the difference with ``apt-mark showhold`` is held in one command.
    dnf: ``dnf versionlock`` (the versionlock plugin must be installed).
    """

    kind = "hold"
    read_alongside = True

    def __init__(self, packages: list[str], *, manager: str = "apt", held: bool = True, notify=()):
        pkgs = list(dict.fromkeys(packages))
        if not pkgs:
            raise InputError("hold: the package list is empty")
        for n in pkgs:
            if not isinstance(n, str) or not _NAME.match(n):
                raise InputError(f"hold: package name {n!r} is malformed")
        if manager not in ("apt", "dnf"):
            raise InputError(f"hold: package manager {manager!r} is not supported (apt or dnf)")
        super().__init__(",".join(pkgs), notify=notify)
        self.packages, self.manager, self.held = pkgs, manager, held

    def read(self) -> str:
        if self.manager == "apt":
            return "apt-mark showhold"
        # "nvidia-driver-3:550.54.15-1.el9.*" per locked package, plus a header line.
        return "dnf -q versionlock list 2>/dev/null || true"

    def _held(self, current: str) -> set[str]:
        out = set()
        for line in current.splitlines():
            line = line.strip()
            if not line or " " in line:
                continue
            if self.manager == "apt":
                out.add(line.split(":")[0])
            else:
                # name-[epoch:]version-release.*: the name is what precedes the version.
                m = re.match(r"^(.+?)-(?:\d+:)?\d[^-]*-[^-]+$", line)
                if m:
                    out.add(m.group(1))
        return out

    def plan(self, current: str) -> Plan:
        held = self._held(current)
        if self.held:
            todo = [p for p in self.packages if p not in held]
            if not todo:
                return Plan.noop("held: " + ", ".join(self.packages))
            cmd = ("apt-mark hold -- " if self.manager == "apt" else "dnf -q -y versionlock add -- ") + join(todo)
            return Plan(commands=[cmd], changes={p: ("not held", "held") for p in todo})
        todo = [p for p in self.packages if p in held]
        if not todo:
            return Plan.noop("not held: " + ", ".join(self.packages))
        cmd = ("apt-mark unhold -- " if self.manager == "apt" else "dnf -q -y versionlock delete -- ") + join(todo)
        return Plan(commands=[cmd], changes={p: ("held", "not held") for p in todo})
