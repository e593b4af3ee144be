"""Resources that only report: a reason to skip, a reason to fail, a check that must pass."""
from __future__ import annotations

from typing import Callable

from ..ssh.command import sh
from ..process import command
from .base import Plan, Resource

__all__ = ["Skip", "Unused", "Fail", "Probe", "unread_facts"]


class _Verdict(Resource):
    """Reads nothing: its plan, the ``verdict`` on ``text``, was settled when it was made."""

    read_alongside = True
    read_small = True  # prints nothing: no section bound's pipe around it
    #: Plan.skip or Plan.fail.
    verdict = staticmethod(Plan.fail)

    def __init__(self, name: str, text: str):
        super().__init__(name)
        self.text = text

    def read(self) -> str:
        return "true"

    @classmethod
    def read_together(cls, resources: list[Resource]) -> tuple[str, Callable[[str], list[str]]]:
        """A host's verdicts of one class read nothing together: one empty section, not one each."""
        return "true", lambda out: [""] * len(resources)

    def plan(self, current: str) -> Plan:
        return self.verdict(self.text)


class Skip(_Verdict):
    """Nothing to do on this host, and why (a GPU role on a host without a GPU)."""

    kind = "skip"
    verdict = staticmethod(Plan.skip)
    reason = property(lambda self: self.text, doc="Why there is nothing to do.")


class Unused(Skip):
    """Nothing to do because the inventory asks this role for nothing here (no engines, no models, no tuner).

    Unlike :class:`Skip` (the host cannot take the role's state), this is a choice, not a gap: the
    checklist passes it, saying what was not asked for.
    """

    kind = "unused"


class Fail(_Verdict):
    """The role cannot run on this host; ``error`` says why and what to do."""

    kind = "precondition"
    verdict = staticmethod(Plan.fail)
    error = property(lambda self: self.text, doc="Why, and what to do.")


def unread_facts(host, names: tuple[str, ...], what: str) -> "Fail | None":
    """A :class:`Fail` when a fact among ``names`` that decides whether ``what`` may be touched on this host
    could not be read (its value would be its default, e.g. "not a container"): the host is left alone, the
    fact and why named; None when all were read.  ``host``: a role's :class:`~bringup.engine.roles.HostContext`."""
    unread = getattr(host.facts, "unread", None)
    why = [f"{n} ({unread(n)})" for n in names if unread is not None and unread(n)]
    if not why:
        return None
    return Fail(f"{what}: facts unread", f"{what} not touched: the fact {'; '.join(why)} could not be read, and "
                f"{what} may only be changed when it is known; see why with `{command(f'facts --host {host.name}')}`, "
                "fix the host, run again")


class Probe(Resource):
    """A check that must pass once the role applied (``docker info`` lists a runtime, say).

        Probe("nvidia runtime", "docker info --format '{{json .Runtimes}}' | grep -q nvidia",
              fix="systemctl restart docker", wait=30)

    When the check fails the plan runs ``fix`` (if any), then retries the
    check for up to ``wait`` seconds; still failing, the step fails with
    ``hint``.  The re-read confirms.
    """

    kind = "probe"

    def __init__(self, name: str, check: str, *, fix: str | None = None, wait: float = 0, hint: str = "",
                 notify=()):
        super().__init__(name, notify=notify)
        self.check, self.fix, self.wait, self.hint = check, fix, wait, hint

    def read(self) -> str:
        return "if ( " + self.check + " ) >/dev/null 2>&1; then echo probe=ok; else echo probe=no; fi"

    def plan(self, current: str) -> Plan:
        if "probe=ok" in current:
            return Plan.noop(f"check passed: {self.name}")
        steps = [self.fix] if self.fix else []
        steps.append("\n".join([
            sh("end=$(( $(date +%%s) + %s ))", int(self.wait)),
            "until ( " + self.check + " ) >/dev/null 2>&1; do",
            sh("  if [ \"$(date +%%s)\" -ge \"$end\" ]; then echo %s; exit 1; fi",
               f"check failed: {self.name}" + (f" ({self.hint})" if self.hint else "")),
            "  sleep 1",
            "done",
        ]))
        return Plan(commands=steps, changes={self.name: ("failing", (self.fix or "wait") + " until it passes")})
