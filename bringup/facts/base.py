"""What a fact is: a shell command and a pure parser of its output.

A fact is a small class, in the manner of pyinfra's facts::

    class OsRelease(Fact):
        name = "os.release"
        command = "cat /etc/os-release"
        default = {}

        @staticmethod
        def process(output: str) -> dict:
            ...

All facts of a host are gathered together in one remote round trip
(:mod:`bringup.facts.gather`): each ``command`` runs in its own subshell with
stderr discarded, and its stdout alone is handed to ``process``.  ``process``
is pure (text in, JSON-able value out), so it is tested on recorded real
outputs without any host.
"""
from __future__ import annotations

from typing import Any, ClassVar


class Fact:
    """Base class of facts; subclasses set the class attributes below."""

    #: Stable id, dotted: ``<subsystem>.<what>``; names the fact in ``invoke facts``.
    name: ClassVar[str]
    #: POSIX sh snippet run on the host; its stdout is parsed.
    command: ClassVar[str]
    #: A program the fact needs; when it is missing the fact is ``default``.
    requires_command: ClassVar[str | None] = None
    #: The value when the command is missing or prints nothing.
    default: ClassVar[Any] = None

    @staticmethod
    def process(output: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class UntrustedOutput(ValueError):
    """A command output that cannot be trusted: cut short, or malformed in a way that would
    silently shift or drop values.  A parser raises it; :func:`bringup.facts.gather.gather`
    turns it into a fact error (its message is the one line shown) and the fact's default."""


def strip_comments(text: str) -> str:
    """Drop ``#`` comment lines (fixture headers) from recorded output."""
    return "\n".join(l for l in text.splitlines() if not l.startswith("#"))


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel CPU list (``0-3,8,10-11``) into sorted ints; empty → [].

    A range that runs backwards (``5-3``) is no CPU list the kernel prints (a cut or garbled
    output): :class:`UntrustedOutput`, not ``[]``.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if hi < lo:
                raise UntrustedOutput(f"CPU list {text.strip()!r}: range {part} runs backwards")
            cpus.update(range(lo, hi + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def format_cpulist(cpus: list[int] | set[int]) -> str:
    """Format CPUs as the kernel's compact list (``0-3,8``)."""
    out: list[str] = []
    s = sorted(set(cpus))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)
