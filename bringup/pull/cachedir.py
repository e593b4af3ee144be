"""The pull cache folder (``--cache``): what it keeps under each name, and whether a folder can be one, checked
before anything is fetched (:func:`cache_problem`)."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import shown
from ..outfile import not_own_folder

__all__ = ["cache_problem"]


#: What the cache keeps under each name, and what it must be to be written: the state and the ``current`` link
#: are replaced by a rename, which no folder takes; the others are folders.
_CACHE_ENTRIES = {"state.json": ("its pull state", False), "current": ("the current link", False),
                  "repo.git": ("the repository", True), "revisions": ("the revisions' checkouts", True),
                  "reports": ("the converge reports", True), "pycache": ("the converges' bytecode", True)}


#: What a folder may hold besides :data:`_CACHE_ENTRIES` and still be taken as a new cache: a file system's own
#: (the cache on a disk of its own, made with mkfs).
_CACHE_OTHERS = frozenset({"lost+found"})


def cache_problem(cache: Path, textfile: Path | None = None) -> str | None:
    """A line when ``cache`` cannot hold a run's outcome (checked before anything is fetched, so that a run never
    converges and then fails to record it): the cache itself no folder, ``state.json`` or ``current`` a folder
    (a rename does not replace one), ``repo.git``, ``revisions``, ``reports`` or ``pycache`` (the converges'
    bytecode, written there and run from there) no folder or a symbolic link
    (:func:`bringup.outfile.not_own_folder`), or a folder holding other things (but ``textfile``, the run's
    ``--prometheus`` file, or its folder) and no pull cache (``--cache /``).  None when usable."""
    if not os.path.lexists(cache):
        return None  # made by the run
    if not os.path.isdir(cache):
        return f"--cache {shown(cache)} is no folder; give a folder (bringup makes it when missing)"
    try:
        inside = sorted(os.listdir(cache))
    except OSError as e:
        return f"--cache {shown(cache)}: {e.strerror or e}; give a folder this user can list and write"
    # (The operator's --prometheus textfile, or its folder, kept in the cache is the run's own too.)
    mine = os.path.relpath(os.path.abspath(textfile), cache).split(os.sep)[0] if textfile else None
    other = [n for n in inside if n not in _CACHE_ENTRIES and n not in _CACHE_OTHERS and n != mine]
    if other and not {"repo.git", "state.json"} & set(inside):
        # A folder holding other things and no pull cache (--cache / or /var/lib, a project's folder): the run
        # would put repo.git, revisions, the state and the current link among them, and rotate reports/ there.
        return (f"--cache {shown(cache)} holds other things ({shown(other[0])}{', ...' if len(other) > 1 else ''}) "
                "and no pull cache (no repo.git, "
                "no state.json): nothing was fetched; give a folder of its own, like /var/lib/bringup/pull "
                "(bringup makes it when missing)")
    for name, (what, folder) in _CACHE_ENTRIES.items():
        path = cache / name
        if not os.path.lexists(path):
            continue
        if not folder and os.path.isdir(path) and not os.path.islink(path):
            return (f"{shown(path)} is a folder where the cache keeps {what}: nothing was fetched; remove it "
                    f"(rmdir {shown(path)}), or give another --cache")
        why = not_own_folder(path) if folder else None
        if why:
            # A link is refused wherever it points: the run writes, rotates and prunes in these folders, and would
            # remove another folder's entries through it.
            return (f"{shown(path)} {why} where the cache keeps {what}: nothing was fetched; remove it, "
                    "or give another --cache")
    return None
