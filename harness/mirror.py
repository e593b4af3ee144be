"""This machine's Debian mirror, read from its apt sources (deb822 and one-line formats)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .recipe import SUITES

FALLBACK_MIRROR = "http://deb.debian.org/debian"


def debian_mirror() -> str:
    """Return this machine's Debian mirror, from its apt sources (a line for any sandbox suite).

    One Debian archive serves every suite: a mirror listed for bookworm builds trixie too.
    """
    if os.environ.get("BRINGUP_SANDBOX_MIRROR"):
        return os.environ["BRINGUP_SANDBOX_MIRROR"].rstrip("/")
    found: list[str] = []
    d = Path("/etc/apt/sources.list.d")
    # deb822 files: paragraphs of "Key: value" fields.
    for path in sorted(d.glob("*.sources")) if d.is_dir() else []:
        for para in re.split(r"\n\s*\n", path.read_text(errors="replace")):
            fields: dict[str, str] = {}
            for line in para.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
            if fields.get("enabled", "yes").lower() == "no":
                continue
            if "deb" in fields.get("types", "").split() and set(SUITES) & set(fields.get("suites", "").split()):
                found += fields.get("uris", "").split()
    # One-line format: deb [options] URI suite components...
    lists = [Path("/etc/apt/sources.list"), *(sorted(d.glob("*.list")) if d.is_dir() else [])]
    for path in lists:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(line) >= 3 and line[0] == "deb" and line[2] in SUITES:
                found.append(line[1])
    for uri in found:
        if uri.startswith(("http://", "https://")):
            return uri.rstrip("/")
    return FALLBACK_MIRROR
