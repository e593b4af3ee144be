"""Operating-system facts: ``os.release``, ``os.kernel``, ``os.boot_id``."""
from __future__ import annotations

import re
import shlex
from typing import Any

from .base import Fact

__all__ = ["OsRelease", "OsKernel", "OsBootId", "parse_os_release", "parse_uname"]


def _unquote(value: str) -> str:
    """Undo os-release shell quoting (``"a b"``, ``'a'``, backslash escapes)."""
    value = value.strip()
    if not value:
        return ""
    try:
        parts = shlex.split(value, posix=True)
    except ValueError:  # unbalanced quote: keep what is there, minus the quote
        return value.strip("\"'")
    return " ".join(parts)


def parse_os_release(output: str) -> dict[str, str]:
    """``/etc/os-release`` → its keys, plus lower-case convenience keys.

    Convenience keys: ``id``, ``version_id``, ``codename`` (``VERSION_CODENAME``,
    else ``UBUNTU_CODENAME``, else the word in parentheses of ``VERSION``) and
    ``pretty_name``; each is ``""`` when the file does not say.
    """
    keys: dict[str, str] = {}
    for line in output.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            continue
        keys[key] = _unquote(value)
    if not keys:
        return {}
    codename = keys.get("VERSION_CODENAME") or keys.get("UBUNTU_CODENAME") or ""
    if not codename:
        # The first "(...)": found with str.find, linear (a search for \(([^)]*)\) was quadratic on "((((...").
        version = keys.get("VERSION", "")
        at = version.find("(")
        end = version.find(")", at + 1) if at >= 0 else -1
        if end >= 0:
            inside = version[at + 1:end].split()
            codename = inside[0].lower() if inside else ""
    out: dict[str, str] = dict(keys)
    out["id"] = keys.get("ID", "")
    out["version_id"] = keys.get("VERSION_ID", "")
    out["codename"] = codename
    out["pretty_name"] = keys.get("PRETTY_NAME", "")
    return out


class OsRelease(Fact):
    name = "os.release"
    command = "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release"
    process = staticmethod(parse_os_release)


_ARCH_RE = re.compile(
    r"^(x86_64|amd64|aarch64|arm64|armv[0-9]+[a-z]*|i[3-6]86|ppc64(le)?|s390x|riscv64|loongarch64|mips64(el)?)$"
)


def _version_tuple(release: str) -> list[int]:
    m = re.match(r"([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?", release)
    if not m:
        return []
    return [int(g) for g in m.groups() if g is not None]


def parse_uname(output: str) -> dict[str, Any]:
    """Kernel identity → ``{sysname, release, version, machine, release_tuple}``.

    Accepts the fact's own ``key=value`` lines, ``uname -srm`` and ``uname -a``.
    Missing parts are ``""``; ``release_tuple`` is e.g. ``[6, 18, 44]``.
    """
    fields = {"sysname": "", "release": "", "version": "", "machine": ""}
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    if any(re.match(r"^(sysname|release|version|machine)=", l) for l in lines):
        for l in lines:
            k, _, v = l.partition("=")
            if k in fields:
                fields[k] = v.strip()
    elif lines:
        toks = lines[0].split()
        if len(toks) == 3:  # uname -srm
            fields["sysname"], fields["release"], fields["machine"] = toks
        elif len(toks) >= 3:  # uname -a: s n r v... m [p] [i] [o]
            fields["sysname"], fields["release"] = toks[0], toks[2]
            rest = toks[3:]
            arch_idx = [i for i, t in enumerate(rest) if _ARCH_RE.match(t)]
            if arch_idx:
                first = arch_idx[0]
                fields["machine"] = rest[first]
                fields["version"] = " ".join(rest[:first])
            else:
                fields["version"] = " ".join(rest)
        elif toks:
            fields["sysname"] = toks[0]
            if len(toks) > 1:
                fields["release"] = toks[1]
    if not any(fields.values()):
        return {}
    out: dict[str, Any] = dict(fields)
    out["release_tuple"] = _version_tuple(fields["release"])
    return out


class OsKernel(Fact):
    name = "os.kernel"
    command = (
        "printf 'sysname=%s\\nrelease=%s\\nversion=%s\\nmachine=%s\\n'"
        ' "$(uname -s)" "$(uname -r)" "$(uname -v)" "$(uname -m)"'
    )
    process = staticmethod(parse_uname)


class OsBootId(Fact):
    name = "os.boot_id"
    command = "cat /proc/sys/kernel/random/boot_id"

    @staticmethod
    def process(output: str) -> str | None:
        value = output.strip()
        return value or None
