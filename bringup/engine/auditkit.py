"""What a role promises beyond its files, and how an audit finding reads.

A role's declared resources already say, planned in check mode, what differs
from what the role writes.  A role's runtime promises (a service answering, a
port listening, a model ready) are items of its optional ``audit(host)`` hook:
an :class:`Expect` is a read snippet and a judge that turns the snippet's
output into one line, ``what is, what is wanted``, or None when the promise
holds.  An Expect is a resource, so the audit reads it in the same batched
round trip as every other resource of the host.

    def audit(host):
        return [http_ok("triton /v2/health/ready", "http://127.0.0.1:8000/v2/health/ready"),
                tcp_listening("dcgm exporter", {"metrics": 9400})]
"""
from __future__ import annotations

from typing import Callable

from ..ssh.command import sh
from ..resources.base import Plan, Resource

__all__ = ["Expect", "http_ok", "tcp_listening", "listening", "finding"]

#: A judge: the read snippet's output -> None (as promised) or one line, ``what is, what is wanted``.
Judge = Callable[[str], "str | None"]


class Expect(Resource):
    """A runtime promise of a role, checked by ``invoke audit`` (never applied: nothing writes it).

        Expect("unit dcgm-exporter", sh("systemctl is-active -- %s", "dcgm-exporter"),
               lambda out: None if out.strip() == "active" else f"unit dcgm-exporter is {out.strip()}, want active")

    A broken promise plans a step that fails naming it: only provisioning the
    role can make it true, so the audit (check mode) reports it as drift.
    ``needs``: an earlier Expect this one follows from (a port from its container
    running); when that one is broken this one is not judged, so one cause is one
    finding, and it is skipped naming the cause.  List it after what it needs.
    """

    kind = "expect"
    read_alongside = True

    def __init__(self, name: str, read: str, judge: Judge, *, needs: "Expect | None" = None):
        super().__init__(name)
        self.snippet, self.judge, self.needs = read, judge, needs
        #: The judge's line of the last plan (None: as promised, or not judged yet).
        self.broken: str | None = None

    def read(self) -> str:
        return self.snippet

    def plan(self, current: str) -> Plan:
        if self.needs is not None and self.needs.broken:
            self.broken = self.needs.broken  # what follows from this one is not judged either
            return Plan.skip(f"not checked: {self.broken}")
        line = self.broken = self.judge(current)
        if line is None:
            return Plan.noop(f"as promised: {self.name}")
        return Plan(commands=[sh("echo %s >&2; exit 1", line)], changes={self.name: (line, "as the role promises")})


def http_ok(name: str, url: str, *, needs: Expect | None = None) -> Expect:
    """``url`` answers HTTP 200 (from the host itself): ``<name> answers 503, want 200``."""
    def judge(out: str) -> str | None:
        code = out.strip() or "no answer"
        return None if code == "200" else f"{name} answers {code}, want 200"

    return Expect(name, sh("curl -s -o /dev/null -w '%%{http_code}' --max-time 5 %s || true", url), judge, needs=needs)


def tcp_listening(what: str, ports: dict[str, int] | int, *, needs: Expect | None = None) -> Expect:
    """Each port (``{label: port}``, or one port) has a TCP listener on the host."""
    def judge(out: str) -> str | None:
        up = listening(out)
        if isinstance(ports, int):
            return None if ports in up else f"nothing listens on TCP port {ports} ({what})"
        missing = [f"{k} {int(p)}" for k, p in ports.items() if int(p) not in up]
        return f"{what}: nothing listens on TCP port(s) {', '.join(missing)}" if missing else None

    return Expect(f"{what} listening", "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", judge, needs=needs)


def listening(text: str | None) -> set[int]:
    """TCP ports in LISTEN state (``0A``), from /proc/net/tcp{,6}."""
    ports = set()
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) > 3 and f[3] == "0A" and ":" in f[1]:
            ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def finding(rid: str, changes: dict, diff: str | None = None, reason: str | None = None) -> str:
    """A resource ``rid`` (``kind:name``) that would change, as one line: what is, what the role wants.

    ``changes`` is ``{what: (is, want)}`` as a plan records it; a file's
    content is told from its diff (the lines it lacks and those it has that the
    role does not write); an :class:`Expect` carries its judge's line.
    """
    kind, _, name = rid.partition(":")
    if kind == Expect.kind and name in changes:
        return str(changes[name][0])
    if any(k in changes and _pair(changes[k])[0] == "absent" for k in ("content", "state")):
        return f"{name} is missing"
    if "content" in changes and diff:
        lines = diff.splitlines()[2:]
        lacks = [l[1:].strip() for l in lines if l.startswith("+") and l[1:].strip()]
        extra = [l[1:].strip() for l in lines if l.startswith("-") and l[1:].strip()]
        words = [f"lacks {l}" for l in lacks[:3]] + [f"has {l}, which the role does not write" for l in extra[:3]]
        return f"{name} " + ("; ".join(words) or "differs from what the role writes")
    if list(changes) == [name]:
        old, new = _pair(changes[name])
        return f"{name} is {_words(old)}, want {_words(new)}"
    what = "; ".join("{} is {}, want {}".format(k, *map(_words, _pair(v))) for k, v in changes.items())
    return f"{rid}: {what or reason or 'not as the role wants it'}"


def _words(v) -> str:
    return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _pair(v) -> tuple:
    """A change as ``(is, want)``; a plan's tuples arrive as lists from the run's results."""
    return tuple(v) if isinstance(v, (list, tuple)) and len(v) == 2 else (v, "?")
