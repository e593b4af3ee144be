"""Packages through apt or dnf, with optional version pins.

Like pyinfra's ``ensure_packages``: the difference is computed once and one
install command covers every missing package.
"""
from __future__ import annotations

import fnmatch
import re

from ..ssh.command import join, sh
from ..errors import InputError
from .base import Plan, Resource

__all__ = ["Packages"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*$")
_VERSION = re.compile(r"^[A-Za-z0-9.+~:*_-]+$")

#: apt waits for a held dpkg lock this long before failing (seconds).
APT_LOCK_TIMEOUT = 300


class Packages(Resource):
    """Packages present (optionally at pinned versions) or absent.

        Packages({"docker.io": None, "nvidia-utils-550-server": "550.*"}, manager="apt")

    A version may be exact (``24.0.7-0ubuntu4``) or a glob (``550.*``).
    """

    kind = "packages"
    read_alongside = True

    def __init__(self, packages: dict[str, str | None] | list[str], *, manager: str = "apt",
                 present: bool = True, allow_change_held: bool = False, lock_timeout: int = APT_LOCK_TIMEOUT,
                 notify=()):
        pkgs = dict.fromkeys(packages) if isinstance(packages, (list, tuple)) else dict(packages)
        if not pkgs:
            raise InputError("packages: the list is empty")
        for n, v in pkgs.items():
            if not isinstance(n, str) or not _NAME.match(n):
                raise InputError(f"package name {n!r} is malformed")
            if v is not None and (not isinstance(v, str) or not _VERSION.match(v)):
                raise InputError(f"package {n}: version {v!r} is malformed")
        if manager not in ("apt", "dnf"):
            raise InputError(f"package manager {manager!r} is not supported (apt or dnf)")
        super().__init__(",".join(pkgs), notify=notify)
        self.packages, self.manager, self.present = pkgs, manager, present
        #: Packages this resource pins may be held (apt-mark hold): changing the pin is deliberate.
        self.allow_change_held = allow_change_held
        #: Seconds apt waits for a dpkg lock held by another process before failing.
        self.lock_timeout = int(lock_timeout)

    def read(self) -> str:
        names = list(self.packages)
        if self.manager == "apt":
            return "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' -- " + join(names) + " || true"
        return "rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE} ii\\n' -- " + join(names) + " | grep -v 'not installed' || true"

    def _installed(self, current: str) -> dict[str, str]:
        have = {}
        for line in current.splitlines():
            parts = line.split()
            # Status-Abbrev: wanted action, then state; "hi" is installed and held.
            if len(parts) >= 3 and parts[2][1:2] == "i":
                have[parts[0].split(":")[0]] = parts[1]
        return have

    def plan(self, current: str) -> Plan:
        have = self._installed(current)
        changes: dict = {}
        if not self.present:
            gone = [n for n in self.packages if n in have]
            if not gone:
                return Plan.noop(f"{', '.join(self.packages)} not installed")
            for n in gone:
                changes[n] = (have[n], "absent")
            if self.manager == "apt":
                cmd = "DEBIAN_FRONTEND=noninteractive apt-get -q -y " + sh(
                    "-o DPkg::Lock::Timeout=%s", self.lock_timeout) + self._held_flag() + " remove -- " + join(gone)
            else:
                cmd = "dnf -y -q remove -- " + join(gone)
            return Plan(commands=[cmd], changes=changes)
        want: list[str] = []
        for n, v in self.packages.items():
            cur = have.get(n)
            if cur is not None and (v is None or fnmatch.fnmatchcase(cur, v)):
                continue
            changes[n] = (cur or "absent", v or "latest")
            want.append(n if v is None else (f"{n}={v}" if self.manager == "apt" else f"{n}-{v}"))
        if not want:
            return Plan.noop("all installed: " + ", ".join(f"{n} {have[n]}" for n in self.packages))
        if self.manager == "apt":
            install = ("DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends --allow-downgrades "
                       + sh("-o DPkg::Lock::Timeout=%s", self.lock_timeout) + " -o Acquire::Retries=3"
                       + self._held_flag()
                       + " -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install -- "
                       + join(want))
            cmd = _with_fresh_lists(install, self.lock_timeout)
        else:
            cmd = "dnf -y -q install -- " + join(want)
        return Plan(commands=[cmd], changes=changes)

    def _held_flag(self) -> str:
        return " --allow-change-held-packages" if self.allow_change_held else ""


#: What apt says when its package lists are missing (a fresh cloud image) or older than the mirror.
_STALE_LISTS = ("Unable to locate package", "has no installation candidate", "was not found",
                "Failed to fetch", "404  Not Found")


def _with_fresh_lists(install: str, lock_timeout: int) -> str:
    """``install``; when it fails because the lists are missing or stale, ``apt-get update`` and once more.

    No update on the common path (a no-op or an install from current lists costs nothing extra); the
    retry is said in the output, so a failure after it is apt's own word on the refreshed lists.
    """
    stale = "|".join(_STALE_LISTS)
    return "(\n" + "\n".join([
        f"out=$({install} 2>&1); rc=$?; printf '%s\\n' \"$out\"",
        "[ \"$rc\" -eq 0 ] && exit 0",
        sh("printf '%%s' \"$out\" | grep -qE %s || exit \"$rc\"", stale),
        "echo 'bringup: the package lists are missing or stale: apt-get update, then the install once more'",
        # One broken third-party source fails the update while the others refreshed: install anyway.
        "DEBIAN_FRONTEND=noninteractive apt-get -q update " + sh("-o DPkg::Lock::Timeout=%s", lock_timeout)
        + " -o Acquire::Retries=3 || echo \"bringup: apt-get update exited $? (a source failed); installing anyway\"",
        install,
    ]) + "\n)"
