"""Kernel parameters: the live value under /proc/sys.

Persisting is a :class:`~bringup.resources.files.File` in ``/etc/sysctl.d``
that the role renders; this resource writes the live value, and only where it
differs.

A value may be a floor rather than an exact value (``keep``): a limit the host
already set larger (a buffer maximum, a backlog) is kept, never shrunk.
:func:`keep_larger` is the rule, shared by the live write and the role's file:
``floor`` keeps each whitespace-separated field at the larger of the host's and
the wanted (``tcp_rmem``'s min, default and max alike), ``range`` keeps the
wider of two ``low high`` ranges (the lower low, the higher high).
"""
from __future__ import annotations

import re
from typing import Callable

from ..ssh.command import sh
from ..errors import InputError
from .base import Plan, Resource

__all__ = ["Sysctl", "validate_key", "normalize_value", "keep_larger", "KEEP"]

#: How a kept value compares with the host's (see :func:`keep_larger`).
KEEP = ("floor", "range")

_KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_-]+)+$")
#: Longer values are cut or refused by the kernel's proc handlers.
MAX_VALUE = 1024
_VALUE = re.compile(r"^[A-Za-z0-9_.:,+/ -]+$")


def validate_key(key: object) -> str:
    """A sysctl key like ``net.core.somaxconn``; anything else is refused."""
    if not isinstance(key, str) or not _KEY.match(key):
        raise InputError(f"sysctl key {key!r} is malformed; expected dotted names like net.core.somaxconn")
    return key


def normalize_value(key: str, value: object) -> str:
    """The value as the kernel prints it: fields separated by single spaces."""
    if isinstance(value, bool):
        raise InputError(f"sysctl {key}: value {value!r} is a boolean; write 1 or 0")
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    if isinstance(value, float):
        raise InputError(f"sysctl {key}: value {value!r} is not an integer or word")
    if not isinstance(value, (int, str)):
        raise InputError(f"sysctl {key}: value {value!r} must be a number, word or list of numbers")
    if "\n" in str(value) or "\r" in str(value):
        raise InputError(f"sysctl {key}: value {value!r} spans lines; give one line")
    text = " ".join(str(value).split())
    if not text or not _VALUE.match(text):
        raise InputError(f"sysctl {key}: value {value!r} is malformed (letters, digits and spaces only)")
    if len(text) > MAX_VALUE:
        raise InputError(f"sysctl {key}: value is {len(text)} characters; the kernel takes at most {MAX_VALUE}")
    for field in text.split(" "):
        if re.fullmatch(r"-?\d+", field) and not -(2 ** 63) <= int(field) < 2 ** 63:
            raise InputError(f"sysctl {key}: {field} is out of the kernel's range (a signed 64-bit number)")
    return text


def keep_larger(key: str, want: str, have: str | None, keep: str, *, fields: tuple[str, ...] = (),
                origin: str = "profile") -> tuple[str, list[str]]:
    """The value to set so that the host's ``have`` is never shrunk, and a note per field kept from the host.

    ``keep`` is ``floor`` (each field the larger) or ``range`` (``low high``: the lower low, the higher high);
    ``fields`` names the fields in the notes (``min default max``).  A ``have`` that is missing or not the same
    count of whole numbers as ``want`` keeps nothing: ``want`` is set as given.

        keep_larger("net.ipv4.tcp_rmem", "4096 131072 16777216", "4096 131072 33554432", "floor",
                    fields=("min", "default", "max"))
        -> ("4096 131072 33554432", ["kept max 33554432: the host's is larger than the profile's 16777216"])
    """
    if keep not in KEEP:
        raise InputError(f"sysctl {key}: keep {keep!r} is not one of {', '.join(KEEP)}")
    w, h = want.split(), (have or "").split()
    if len(w) != len(h) or not all(re.fullmatch(r"-?\d+", x) for x in w + h):
        return want, []
    wi, hi = [int(x) for x in w], [int(x) for x in h]
    if keep == "range":
        if len(wi) != 2:
            raise InputError(f"sysctl {key}: a range keeps two fields (low high), not {len(wi)}")
        out = [min(wi[0], hi[0]), max(wi[1], hi[1])]
    else:
        out = [max(a, b) for a, b in zip(wi, hi)]
    notes = []
    for i, (a, b) in enumerate(zip(wi, out)):
        if a != b:
            name = f"{fields[i]} " if i < len(fields) else (f"field {i + 1} " if len(wi) > 1 else "")
            word = "lower" if keep == "range" and i == 0 else "larger"
            notes.append(f"kept {name}{b}: the host's is {word} than the {origin}'s {a}")
    return " ".join(map(str, out)), notes


class Sysctl(Resource):
    """One kernel parameter's live value.

        Sysctl("net.core.somaxconn", 4096)
        Sysctl("net.ipv4.tcp_rmem", "4096 131072 16777216", keep="floor", fields=("min", "default", "max"))

    With ``keep`` the value is a floor (or a ``range`` to widen), never a reason to shrink what the host set
    larger: :func:`keep_larger`, and the plan says what it kept.
    """

    kind = "sysctl"
    read_alongside = True
    read_small = True  # one head -c per key, bounded by itself
    live_only = True  # the role's /etc/sysctl.d file persists it

    def __init__(self, key: str, value: object, *, keep: str | None = None, fields: tuple[str, ...] = (),
                 origin: str = "profile", notify=()):
        super().__init__(validate_key(key), notify=notify)
        self.key = key
        self.value = normalize_value(key, value)
        self.proc = "/proc/sys/" + key.replace(".", "/")
        if keep is not None:
            keep_larger(key, self.value, self.value, keep)  # a keep this resource cannot apply is refused now
        self.keep, self.fields, self.origin = keep, tuple(fields), origin

    def read(self) -> str:
        # head -c, not the shell's read: a /proc/sys file answers its first read() only (dash reads a byte at a
        # time), and head bounds what it prints (a value is at most a page).
        return sh("p=%s; if [ ! -f \"$p\" ]; then echo absent; elif [ -w \"$p\" ]; then printf 'value='; "
                  "head -c 65536 -- \"$p\"; else printf 'readonly='; head -c 65536 -- \"$p\"; fi", self.proc)

    @classmethod
    def read_together(cls, resources: list[Resource]) -> tuple[str, Callable[[str], list[str]]]:
        """All the keys at once: a status line each (absent, value, readonly: shell built-ins), then one
        ``head -v`` of every file there is, each headed by its path; split back into what each key's
        :meth:`read` prints.  Paths are /proc/sys/ and a checked key: no space, no newline."""
        procs = [r.proc for r in resources]
        each = " ".join(["%s"] * len(procs))
        snippet = sh(f"for p in {each}; do if [ ! -f \"$p\" ]; then echo absent; elif [ -w \"$p\" ]; then "
                     "echo value; else echo readonly; fi; done; set --; "
                     f"for p in {each}; do if [ -f \"$p\" ]; then set -- \"$@\" \"$p\"; fi; done; "
                     "if [ \"$#\" -gt 0 ]; then head -v -c 65536 -- \"$@\"; fi", *procs, *procs)

        def split(out: str) -> list[str]:
            lines = out.split("\n", len(procs))
            if len(lines) <= len(procs) or any(w not in ("absent", "value", "readonly") for w in lines[:-1]):
                raise ValueError("not a status line per key")
            status, rest = lines[:-1], lines[-1]
            heads = list(re.finditer(r"(?m)^==> (/proc/sys/\S+) <==\n", rest))
            content: dict[str, str] = {}
            for k, m in enumerate(heads):
                end = heads[k + 1].start() - 1 if k + 1 < len(heads) else len(rest)  # head's blank line between
                content.setdefault(m.group(1), rest[m.end():max(end, m.end())])
            return ["absent\n" if w == "absent" else f"{w}={content.get(p, '')}" for w, p in zip(status, procs)]

        return snippet, split

    def plan(self, current: str) -> Plan:
        if current.startswith("readonly="):
            return Plan.skip(f"{self.key}: read-only here (a network namespace shows the machine's value, "
                             "{}, but cannot change it)".format(" ".join(current[9:].split())))
        if not current.startswith("value="):
            return Plan.skip(f"{self.key}: this kernel has no such key (hidden inside a network namespace, "
                             "or its module is not loaded)")
        have = " ".join(current[len("value="):].split())
        want, notes = self.value, []
        if self.keep:
            want, notes = keep_larger(self.key, self.value, have, self.keep, fields=self.fields, origin=self.origin)
        kept = f" ({'; '.join(notes)})" if notes else ""
        if have == want:
            return Plan.noop(f"{self.key} is already {want}{kept}")
        plan = Plan(commands=[sh("printf '%%s\\n' %s > %s", want, self.proc)], changes={self.key: (have, want)})
        plan.reason = f"{self.key}: {'; '.join(notes)}" if notes else None
        return plan
