"""A lock file shared by processes that build images in one state directory."""
from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    # Two test runs building at once would debootstrap into one directory.
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
