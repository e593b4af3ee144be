"""The ``bringup`` console script: the core help and task list without importing Invoke.

``bringup``, ``bringup --help`` / ``-h`` and ``bringup --list`` / ``-l`` print texts kept in
``bringup/data/`` (what Invoke prints for them, refreshed by ``scripts/kept_help.py`` and held to it by
tests/unit/test_cli_help.py), so they cost the interpreter's start-up and one file read; Invoke and
the tasks (:mod:`bringup.cli`) load for everything else, ``bringup provision --help`` included.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import standins
from .process import finish, freeze_at_exit, quiet_gc, reader_gone, set_program

__all__ = ["main", "DATA", "KEPT"]

DATA = Path(__file__).resolve().with_name("data")
#: argv (after the program name) -> the kept text that answers it.
KEPT = {(): "help.txt", ("--help",): "help.txt", ("-h",): "help.txt",
        ("--list",): "list.txt", ("-l",): "list.txt"}


def main() -> None:
    # Hints name the program the user ran ("bringup facts --host h1"), not the checkout's invoke.
    set_program("bringup")
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
    # The program's start: the collector runs rarely, the run's objects frozen once imported and at exit (the
    # bytecode setting follows Invoke's parse, in bringup.cli's program).
    quiet_gc()
    freeze_at_exit()
    standins.place()
    from .cli import main as cli_main

    try:
        cli_main()
    except SystemExit as e:  # Invoke's program ends with sys.exit(code) where a task failed
        finish(e.code)
    finish(0)
