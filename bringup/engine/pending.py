"""Handlers a host is owed, kept on the host itself so that a fault cannot lose them.

A role's write script records the handlers it will owe (``role:handler``,
one a line, in :data:`PENDING_FILE`) before it writes anything, and the
handler script removes them once they all ran.  A run cut off in between (a
dropped connection, a signal, a failed handler) leaves them there: the next
run reads the file with the resources' state, in the same round trip, and
runs them even when nothing changes.

    owed = PendingHandlers()
    owed.load(output_of(owed.read()))
    owed.earlier("docker")                                # handlers a cut-off run left owed
    script = owed.owe("docker", ["restart docker"])      # run before the writes
    script = owed.settled("docker", ["restart docker"])  # run after the handlers; then owed.forget(...)
"""
from __future__ import annotations

from ..ssh.command import sh
from ..ssh.script import SECTION_MAX
from ..errors import BringupError
from ..resources.files import write_file

__all__ = ["PendingHandlers", "PENDING_FILE"]

#: One ``role:handler`` a line; absent when nothing is owed.
PENDING_FILE = "/var/lib/bringup/pending-handlers"


class PendingHandlers:
    """The handlers owed on one host: what the file said at the start, and what this run recorded."""

    id = "pending-handlers"
    #: Read with the resources (batched in their script), in the script's own shell: it prints the file.
    read_alongside = False
    #: What the file holds, through ``head -c`` one byte past the read script's section bound: bounded by itself,
    #: and a file over the bound reads as cut (unreadable) as it did under the bound's pipe.  An absent file (the
    #: usual case) costs the shell's own test alone.
    read_small = True

    def __init__(self, path: str = PENDING_FILE):
        self.path = path
        self._owed: dict[str, list[str]] = {}  # what the file holds (or will, once a recording ran)
        self._earlier: dict[str, list[str]] = {}  # what it held when this run read it

    def read(self) -> str:
        """Shell printing the file (nothing when absent); batched with the resources' reads."""
        return sh("if [ -f %s ]; then head -c %s -- %s; fi", self.path, SECTION_MAX + 1, self.path)

    def load(self, text: str | None) -> None:
        for line in (text or "").splitlines():
            role, sep, name = line.partition(":")
            if sep and role and name:
                _add(self._owed, role, [name])
                _add(self._earlier, role, [name])

    def earlier(self, role: str) -> list[str]:
        """The handlers of ``role`` an earlier run left owed (and this run has not run yet)."""
        return list(self._earlier.get(role, []))

    def owe(self, role: str, names: list[str]) -> str:
        """Shell recording ``names`` as owed by ``role`` (atomically); '' when they are recorded already."""
        for n in names:
            if "\n" in n or not n:
                raise BringupError(f"role {role}: a handler name must be one non-empty line, not {n!r}")
        if all(n in self._owed.get(role, []) for n in names):
            return ""
        _add(self._owed, role, names)
        return self._script(self._owed)

    def settled(self, role: str, names: list[str]) -> str:
        """Shell removing ``names`` of ``role`` from the file ('' when none is there); then :meth:`forget`."""
        if not any(n in self._owed.get(role, []) for n in names):
            return ""
        return self._script({r: [n for n in ns if r != role or n not in names] for r, ns in self._owed.items()})

    def forget(self, role: str, names: list[str]) -> None:
        """``names`` of ``role`` ran and were removed from the file."""
        for d in (self._owed, self._earlier):
            kept = [n for n in d.get(role, []) if n not in names]
            if kept:
                d[role] = kept
            else:
                d.pop(role, None)

    def _script(self, owed: dict[str, list[str]]) -> str:
        lines = [f"{r}:{n}" for r, ns in owed.items() for n in ns]
        body = write_file(self.path, ("\n".join(lines) + "\n").encode(), mode="0644") if lines \
            else sh("rm -f -- %s", self.path)
        # A subshell of its own: its `set -e` and traps must not leak into the steps around it.
        return f"( {body}\n) || exit $?"


def _add(owed: dict[str, list[str]], role: str, names: list[str]) -> None:
    have = owed.setdefault(role, [])
    have.extend(n for n in names if n not in have)
