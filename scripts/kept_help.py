"""Write bringup/data/{help,list}.txt, the kept answers of `bringup --help` and `bringup --list`, from what
Invoke's program prints for them: run after a task or its docstring changed.

    python scripts/kept_help.py

tests/unit/test_cli_help.py holds the kept texts to :func:`live_text`.
"""
from __future__ import annotations

import contextlib
import io

from bringup.entry import DATA, KEPT

__all__ = ["live_text", "refresh"]


def live_text(args: tuple[str, ...]) -> str:
    """What Invoke's program prints for ``bringup *args`` (80 columns, as in a pipe)."""
    from bringup.cli import program

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        program.run(["bringup", *args], exit=False)
    return out.getvalue()


def refresh() -> None:
    """Write the kept texts from Invoke's output."""
    for args, name in KEPT.items():
        if args and args[0].startswith("--"):
            (DATA / name).write_text(live_text(args), encoding="utf-8")


if __name__ == "__main__":
    refresh()
