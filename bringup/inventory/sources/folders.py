"""The one guarded listing of a folder tree an inventory reads: inventory folders (``-i DIR``) and vars folders
(``group_vars/<name>/``).  A link back to a folder already listed (a loop) is listed once; a tree nested more than
:data:`MAX_DIR_DEPTH` folders deep or holding more than :data:`MAX_DIRS` folders is refused, as is a folder that
cannot be listed, each with one line."""
from __future__ import annotations

import os
from pathlib import Path

from .model import SourceError

__all__ = ["MAX_DIR_DEPTH", "MAX_DIRS", "listed"]

#: The deepest folder read below the one named, and the most folders read in one tree (3000 nested folders ended in
#: a RecursionError after 14 s, a link to a parent folder never ended; real ones nest a level or two).
MAX_DIR_DEPTH = 16
MAX_DIRS = 1000


def listed(folder: Path, top: Path, seen: set[str], depth: int, what: str, advice: str) -> list[str] | None:
    """The names in ``folder``, sorted; None where it was listed already (``seen``: the real paths listed in this
    tree, from ``top``, ``depth`` folders down).  ``what`` names the tree ("an inventory folder") and ``advice`` ends
    the line refusing it."""
    real = os.path.realpath(folder)
    if real in seen:  # a link back to a folder already read (a loop): read once
        return None
    seen.add(real)
    if depth > MAX_DIR_DEPTH or len(seen) > MAX_DIRS:
        raise SourceError(f"{top}: {what} nested more than {MAX_DIR_DEPTH} folders deep or holding more than "
                          f"{MAX_DIRS} folders; {advice}")
    try:
        return sorted(os.listdir(folder))
    except OSError as e:
        raise SourceError(f"{folder}: cannot list the folder: {e.strerror or e}") from None
