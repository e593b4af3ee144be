"""The resource contract: read → plan (check, diff) → apply → re-read.

A resource declares one piece of desired state.  The engine batches the
``read()`` snippets of many resources into one round trip, hands each its own
output, and asks for a :class:`Plan`: the commands that would converge it,
the changes they make (``{what: (old, new)}``), and when there is nothing to
do, the reason why (Salt's ``comment``, pyinfra's ``noop``).  The engine runs
the commands of a whole role as one script, then reads again and plans again:
a resource that still has changes after applying did not converge.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Upload:
    """Data streamed from the control machine into a command on the host.

    ``local`` (an argv run on the control machine, ``docker save img``) writes
    the data on its stdout; ``remote`` (a shell command, ``docker load``)
    reads it on stdin.  Such a step runs in its own round trip.
    """

    local: list[str]
    remote: str
    what: str = ""


@dataclass
class Plan:
    """What a resource needs to do, as a value.

    ``commands`` empty means nothing to do and ``reason`` says why;
    ``skipped`` means the resource cannot apply on this host (``reason`` says
    why) and counts as skipped, not ok.
    """

    commands: list[str] = field(default_factory=list)
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    reason: str | None = None
    diff: str | None = None
    skipped: bool = False
    #: The resource cannot be planned (a unit that does not exist, say).
    error: str | None = None
    #: Facts this change makes stale (re-gathered after the role).
    invalidates: tuple[str, ...] = ()
    #: Why the host must reboot before this state takes effect (a kernel
    #: module replaced on disk, say); None when it need not.
    reboot: str | None = None
    #: Data to stream from the control machine (an image), applied in order.
    upload: Upload | None = None
    #: False for bookkeeping only (a record of what bringup wrote): the change notifies no handler.
    notifies: bool = True
    #: How many of the leading ``commands`` only check (the service's own check of a new config) and
    #: change nothing: the handlers a change owes are recorded on the host after them, so a refused
    #: change owes no restart.
    checks: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.commands) or self.upload is not None

    @classmethod
    def noop(cls, reason: str) -> "Plan":
        return cls(reason=reason)

    @classmethod
    def skip(cls, reason: str) -> "Plan":
        return cls(reason=reason, skipped=True)

    @classmethod
    def fail(cls, error: str) -> "Plan":
        return cls(error=error)


class Resource:
    """Base class; subclasses implement :meth:`read` and :meth:`plan`.

    ``notify`` names handlers of the role to run once after it when this
    resource changed.
    """

    kind: str = "resource"
    #: True when :meth:`read` only looks, prints nothing secret and may run beside other reads: the read
    #: script then runs it in a background lane (bringup.ssh.script.batch), its output kept in a 0700 file on the
    #: host until the lanes are done.  False, the default (a read that prints a file's content, an
    #: operator's guard command): it runs in the script's own shell, in order, straight to the connection.
    read_alongside: bool = False
    #: True when :meth:`read` bounds its own output (a kernel parameter's value through ``head -c``) and cannot
    #: hang: the read script runs it without the section bound's pipe, ``head`` and status capture
    #: (bringup.ssh.script.batch's ``small``): three processes fewer per read, which a rack of hosts multiplies.
    #: It holds for the class's :meth:`read_together` snippet too, when it has one.
    read_small: bool = False
    #: True when a change lasts only until the next boot (a kernel parameter's /proc value): the role persists
    #: it with a later resource, and a role that fails after applying it leaves it live, not persisted
    #: (:attr:`bringup.engine.results.HostResult.live_not_persisted`).
    live_only: bool = False

    def __init__(self, name: str, *, notify: list[str] | tuple[str, ...] = ()):
        self.name = name
        self.notify = tuple(notify)

    @property
    def id(self) -> str:
        """Stable id, ``kind:name`` (reports, errors)."""
        return f"{self.kind}:{self.name}"

    def read(self) -> str:
        """A shell snippet whose stdout tells the current state."""
        raise NotImplementedError

    @classmethod
    def read_together(cls, resources: list[Resource]) -> tuple[str, Callable[[str], list[str]]] | None:
        """One snippet that reads all of a host's ``resources`` of this class at once (one program for them all
        rather than one each: a rack of hosts multiplies every process), and how to split what it printed into
        what each one's :meth:`read` would have printed (ValueError: not split, each unreadable).  None, the
        default: each reads alone."""
        return None

    def plan(self, current: str) -> Plan:
        """Compare the state read from the host with the desired state."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def kv_lines(text: str) -> dict[str, str]:
    """Parse ``key=value`` lines (what read snippets print)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v
    return out
