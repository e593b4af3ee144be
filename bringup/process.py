"""What a bringup program does with its own process: its name in hints, a reader that went away, bytecode, the exit.

Standard library only, and nothing happens on import: the programs (the ``bringup`` console script in
:mod:`bringup.entry`, Invoke's ``tasks.py`` in a checkout) call these at their start; a library user of
bringup's modules keeps its process as it was.
"""
from __future__ import annotations

import sys
from typing import NoReturn

__all__ = ["PROGRAM", "PROGRAM_ENV", "set_program", "command", "stdout_gone", "terminal_gone", "reader_gone", "keep_bytecode", "freeze_at_exit",
           "RUN_GC_THRESHOLD", "quiet_gc", "freeze_imports", "finish"]

#: The program the user runs, as a hint names it: ``invoke`` in a checkout (``tasks.py``), ``bringup`` from an
#: installed copy (:func:`bringup.entry.main` sets it before the tasks are imported).
PROGRAM = "invoke"
#: The environment variable that hands :data:`PROGRAM` to a child that names commands too: the pytest that
#: ``audit --testinfra`` starts per host (its plugin reads it).
PROGRAM_ENV = "BRINGUP_PROGRAM"


def set_program(name: str) -> None:
    """Name the running program in every hint from here on (:func:`command`)."""
    global PROGRAM
    PROGRAM = name


def command(args: str) -> str:
    """A command as the user types it to the program running: ``command("facts --host h1")`` is
    ``invoke facts --host h1`` in a checkout and ``bringup facts --host h1`` from an installed copy."""
    return f"{PROGRAM} {args}"


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


def terminal_gone(fd: int) -> bool:
    """Whether ``fd`` is a terminal that hung up (the operator's SSH session or terminal window gone: every write
    there fails with EIO from then on); if so, it is pointed at /dev/null, so that what the program still says on
    its way out (a run stopped in order, its recap, Python's last flush at exit) has nowhere to fail.  A file on a
    failing disk (EIO too) is no terminal: False, and its error stands."""
    import os
    import select

    try:
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        if not any(ev & select.POLLHUP for _, ev in poll.poll(0)):
            return False
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
    except (OSError, ValueError):
        return False
    return True


def reader_gone() -> NoReturn:
    """End as ``git log | head`` ends when the reader closed the pipe: quietly, exit 141 (128 + SIGPIPE)."""
    import os

    # Python flushes stdout once more at exit: point it at /dev/null so that flush has nowhere to fail.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(141)


def keep_bytecode() -> None:
    """Let this process cache the bytecode of what it imports from here on, as the interpreter allows.

    Invoke's program turns bytecode writing off for the whole process (``sys.dont_write_bytecode``,
    unless ``--write-pyc``) so that a ``tasks.py`` leaves no ``.pyc`` behind.  The tasks import their
    modules when they run (bringup's runner, inventory, resources; the project's roles), so in a
    checkout (``pip install -e .``, the README's set-up) those were compiled again by every run: 0.5-1 s
    of a whole no-op on the benchmark's machine.  Called after Invoke set the flag (``tasks.py`` is
    compiled by then, and stays uncached); only ``-B`` / ``PYTHONDONTWRITEBYTECODE`` keep the rest uncached.
    """
    sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)


def _freeze_survivors() -> None:
    """At exit: collect the cyclic garbage once (its finalizers run, ``__del__`` and weakref callbacks),
    then freeze what survives.  After :func:`freeze_imports` that collection walks only what the run made
    since (a sysctl no-op: ~53,000 objects walked before, ~450 after), and still finalizes the run's own
    garbage (kept, not dropped: tests/unit/test_cli_help.py).  The interpreter's teardown after atexit runs
    its cyclic collector again over every object the run made while it clears the modules; frozen objects are
    freed by reference counting without those walks: ~50 ms of each whole-process run on the benchmark's
    machine (audit 1.24 -> 1.19 s, sysctl no-op 0.68 -> 0.63 s, 15 alternated runs each).  What only becomes cyclic garbage during
    that teardown is not finalized, which Python does not promise anyway (``object.__del__``)."""
    import gc

    gc.collect()
    gc.freeze()


#: The young generation's collection threshold during a run (Python's default is 700): net container
#: allocations between two collections.  A no-op made ~75,000 of them, so Python collected ~105 times, and
#: every tenth collection walked the older generation too, with the full collections walking every object
#: the imports made: ~50 ms of a sysctl no-op's CPU on the benchmark's machine.  Raised, not switched off, so
#: a long run (tune, a rack of hosts) still collects its cyclic garbage, at most this many objects behind.
RUN_GC_THRESHOLD = 100_000

_QUIET = False


def quiet_gc() -> None:
    """At the program's start: the cyclic collector runs rarely (:data:`RUN_GC_THRESHOLD`), and
    :func:`freeze_imports` freezes what the run imported, so no collection walks the modules again."""
    import gc

    global _QUIET
    _QUIET = True
    gen0, gen1, gen2 = gc.get_threshold()
    if gen0:  # 0: the collector switched off by the caller, left so
        gc.set_threshold(max(gen0, RUN_GC_THRESHOLD), gen1, gen2)


def freeze_imports() -> None:
    """Once a run has imported what it runs with (its tasks call it as the hosts start): move every object
    to the collector's permanent generation, so no collection, the one at exit included
    (:func:`_freeze_survivors`), walks the modules, classes and functions again.  Only in a program that
    started with :func:`quiet_gc`: a library user's process keeps its collector as it was."""
    if _QUIET:
        import gc

        gc.freeze()


def freeze_at_exit() -> None:
    """Register :func:`_freeze_survivors` to run at exit (once, however often this is called)."""
    import atexit

    atexit.unregister(_freeze_survivors)
    atexit.register(_freeze_survivors)


def finish(code: object) -> NoReturn:
    """End the program with ``code`` (a ``SystemExit``'s), without the interpreter's teardown where it does no work
    the run needs.

    A finished run leaves some 600 modules and what they hold; the interpreter's teardown clears them one by one
    and joins the threads: ~9 ms of a sysctl no-op's whole process on the benchmark's machine, after everything
    the run did is on disk and on the terminal.  What of the teardown matters is done first: the ``atexit``
    handlers run (bringup's own, :func:`_freeze_survivors`, finalizes the cyclic garbage; a caller's too), and
    stdout and stderr are flushed; then the process ends (``os._exit``).  The ordinary exit is taken instead
    while a thread the interpreter would wait for still runs (a non-daemon thread), where ``code`` is a message
    to print rather than a status, or where a flush fails (a reader gone: :func:`reader_gone`'s exit)."""
    import threading

    me = threading.current_thread()
    if (me is not threading.main_thread() or not (code is None or isinstance(code, int))
            or any(t is not me and not t.daemon and t.is_alive() for t in threading.enumerate())):
        sys.exit(code)
    import atexit
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)  # the ordinary exit says (or, stdout's reader gone, ends as bringup.cli's handler does)
    atexit._run_exitfuncs()  # what the interpreter's exit runs first, in the same order (last registered first)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # an atexit handler's own output, to a reader that has gone: nothing left to say it to
    os._exit(int(code or 0) & 0xFF)
