"""Kernel parameters: the live value under /proc/sys.

Persisting is a :class:`~bringup.resources.files.File` in ``/etc/sysctl.d``
that the role renders; this resource writes the live value, and only where it
differs.
"""
from __future__ import annotations

import re

from ..command import sh
from ..errors import InputError
from .base import Plan, Resource

__all__ = ["Sysctl", "validate_key", "normalize_value"]

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


class Sysctl(Resource):
    """One kernel parameter's live value.

        Sysctl("net.core.somaxconn", 4096)
    """

    kind = "sysctl"
    read_alongside = True
    live_only = True  # the role's /etc/sysctl.d file persists it

    def __init__(self, key: str, value: object, *, notify=()):
        super().__init__(validate_key(key), notify=notify)
        self.key = key
        self.value = normalize_value(key, value)
        self.proc = "/proc/sys/" + key.replace(".", "/")

    def read(self) -> str:
        return sh("p=%s; if [ ! -f \"$p\" ]; then echo absent; elif [ -w \"$p\" ]; then printf 'value='; "
                  "cat -- \"$p\"; else printf 'readonly='; cat -- \"$p\"; fi", self.proc)

    def plan(self, current: str) -> Plan:
        if current.startswith("readonly="):
            return Plan.skip(f"{self.key}: read-only here (a network namespace shows the machine's value, "
                             "{}, but cannot change it)".format(" ".join(current[9:].split())))
        if not current.startswith("value="):
            return Plan.skip(f"{self.key}: this kernel has no such key (hidden inside a network namespace, "
                             "or its module is not loaded)")
        have = " ".join(current[len("value="):].split())
        if have == self.value:
            return Plan.noop(f"{self.key} is already {self.value}")
        return Plan(commands=[sh("printf '%%s\\n' %s > %s", self.value, self.proc)],
                    changes={self.key: (have, self.value)})
