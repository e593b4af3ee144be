"""known_hosts files named by the inventory (``ssh_known_hosts``, ``UserKnownHostsFile``): what is no file bringup
may read and add to is refused before anything connects, its content never quoted (a wrong path may name a secret
file).  Split from :mod:`bringup.ssh.sshconfig`; asked by its input check and again by each login
(:mod:`bringup.ssh.jumps`).
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from ..secrets import Vaulted
from ..userfile import read_regular

__all__ = ["known_hosts_problem", "known_hosts_shown", "KNOWN_HOSTS_MAX"]

def known_hosts_shown(given: str, path: Any = None) -> str:
    """A known_hosts file as messages name it: its path, or "the known_hosts file (vaulted)" when a vault gave it."""
    return "the known_hosts file (vaulted)" if isinstance(given, Vaulted) else f"known_hosts file {path or given}"


#: The largest known_hosts file read (bytes): a fleet's file of 100,000 hosts is ~50 MiB.
KNOWN_HOSTS_MAX = 64 << 20
_ENTRY = re.compile(r"(?:@[a-z-]+\s+)?\S+\s+[A-Za-z0-9@.+-]{3,80}\s+[A-Za-z0-9+/]+={0,3}(?:\s.*)?")
#: Verdicts on known_hosts files already read, by what ``stat`` said of them: a fleet shares one file, read once
#: for all its hosts by the input check (and again only when it changed before the connection).
_KNOWN_HOSTS_SEEN: dict[tuple, str | None] = {}


def known_hosts_problem(path: Path) -> str | None:
    """Why ``path`` is no known_hosts file bringup may read and add to, or None (a missing one is made).  Its
    content is never quoted: a wrong path may name a secret file.  Asked by the input check
    (:func:`check_routes`), before anything connects, and again by each login."""
    if "\x00" in str(path):  # os.stat raises ValueError for it: a traceback, or an "internal error"
        return "a path holding a NUL byte"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return "a folder, not a file" if stat.S_ISDIR(st.st_mode) else "not a regular file"
    if st.st_size > KNOWN_HOSTS_MAX:
        return f"larger than {KNOWN_HOSTS_MAX >> 20} MiB, not a known_hosts file"
    seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if seen in _KNOWN_HOSTS_SEEN:
        return _KNOWN_HOSTS_SEEN[seen]
    why = _known_hosts_text(path)
    _KNOWN_HOSTS_SEEN[seen] = why
    return why


def _known_hosts_text(path: Path) -> str | None:
    try:
        # Without waiting: a pipe put there since the look above opens at once, and is refused.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "not a regular file"
            data = read_regular(fd, KNOWN_HOSTS_MAX)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if len(data) > KNOWN_HOSTS_MAX:
        return f"larger than {KNOWN_HOSTS_MAX >> 20} MiB, not a known_hosts file"
    for n, raw in enumerate(data.split(b"\n"), 1):
        text = raw.decode("utf-8", "replace").strip()
        if text and not text.startswith("#") and not _ENTRY.fullmatch(text):
            return f"line {n} is not a known_hosts entry (hosts, key type, key): not a known_hosts file"
    return None
