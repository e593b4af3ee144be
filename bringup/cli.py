"""The ``bringup`` program: Invoke's, over the collection of bringup's tasks (:mod:`bringup.tasks`).

The checkout's ``tasks.py`` hands the same collection (``ns``) to ``invoke``, with its own ``sandbox``.
"""
from __future__ import annotations

import sys

from invoke import Collection, Program

from . import __version__
from .process import keep_bytecode, reader_gone, stdout_gone
from .tasks.accept import accept
from .tasks.audit import audit
from .tasks.checklist import checklist
from .tasks.converge import engines, plan, provision
from .tasks.drift import drift
from .tasks.inspect import facts, hosts, topology
from .tasks.latency import bench, tune, tune_window
from .tasks.pull import fleet, pull

__all__ = ["ns", "program", "main"]

ns = Collection(provision, plan, facts, hosts, audit, checklist, accept, topology, bench, tune_window, tune, engines,
                drift, pull, fleet)


class _Program(Program):
    """``bringup ...``: Invoke's program, the bytecode flag restored once it parsed its core flags (it turns
    bytecode writing off for the whole process: :func:`bringup.process.keep_bytecode`)."""

    def parse_core(self, argv) -> None:
        super().parse_core(argv)
        keep_bytecode()


program = _Program(namespace=ns, version=__version__, name="bringup", binary="bringup")


def main() -> None:
    """Run the program (the ``bringup`` console script's end, after :func:`bringup.entry.main`).

    A reader that goes away (``bringup --help | head``) ends the program as it ends ``git log | head``:
    quietly, exit 141 (128 + SIGPIPE), no traceback.
    """
    try:
        program.run()
        sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_gone():
            raise
        reader_gone()
