"""Where a project's content lives: its roles/ and templates/ folders.

A checkout (or an operator's folder) with ``roles/`` wins; otherwise the
roles and templates installed with bringup are used, so an installed copy
works from any folder that holds a ``hosts`` file.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["content_root"]


def content_root(start: Path | None = None) -> Path:
    """The folder holding ``roles/`` and ``templates/``."""
    here = (start or Path.cwd()).resolve()
    # A folder with roles/ is a project of its own, templates/ or not: never
    # fall through to the shipped roles from there.
    if (here / "roles").is_dir():
        return here
    repo = Path(__file__).resolve().parent.parent
    if (repo / "roles").is_dir() and (repo / "templates").is_dir():
        return repo  # an editable install or a checkout on sys.path
    import bringup_content  # type: ignore[import-not-found]  # installed copy of the content

    return Path(bringup_content.__file__).parent
