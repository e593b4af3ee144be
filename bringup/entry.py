"""The ``bringup`` console script: the core help and task list without importing Invoke.

``bringup``, ``bringup --help`` / ``-h`` and ``bringup --list`` / ``-l`` print texts kept in
``bringup/data/`` (what Invoke prints for them, refreshed by :func:`refresh` and held to it by
tests/unit/test_cli_help.py), so they cost the interpreter's start-up and one file read; Invoke and
the tasks (``bringup.cli``) load for everything else, ``bringup provision --help`` included.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

__all__ = ["main", "reader_gone", "stdout_gone", "refresh", "live_text"]

DATA = Path(__file__).resolve().with_name("data")
#: argv (after the program name) -> the kept text that answers it.
KEPT = {(): "help.txt", ("--help",): "help.txt", ("-h",): "help.txt",
        ("--list",): "list.txt", ("-l",): "list.txt"}


def main() -> None:
    name = KEPT.get(tuple(sys.argv[1:]))
    if name:
        try:
            text = (DATA / name).read_text(encoding="utf-8")
        except OSError:
            text = ""
        if text:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except BrokenPipeError:
                reader_gone()
            return
    from .cli import main as cli_main

    cli_main()


def stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (a BrokenPipeError that is not stdout's is a bug
    to show, not a reader that went away)."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def reader_gone() -> NoReturn:
    """End as ``git log | head`` ends when the reader closed the pipe: quietly, exit 141 (128 + SIGPIPE)."""
    import os

    # Python flushes stdout once more at exit: point it at /dev/null so that flush has nowhere to fail.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(141)


def live_text(args: tuple[str, ...]) -> str:
    """What Invoke's program prints for ``bringup *args`` (80 columns, as in a pipe)."""
    import contextlib
    import io

    from .cli import program

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        program.run(["bringup", *args], exit=False)
    return out.getvalue()


def refresh() -> None:
    """Write the kept texts from Invoke's output: ``python -c 'from bringup.entry import refresh; refresh()'``."""
    for args, name in KEPT.items():
        if args and args[0].startswith("--"):
            (DATA / name).write_text(live_text(args), encoding="utf-8")
