"""The ``bringup`` program: Invoke's, over the collection of bringup's tasks (:mod:`bringup.tasks`).

The checkout's ``tasks.py`` hands the same collection (``ns``) to ``invoke``, with its own ``sandbox``.  The
console script (:func:`main`) collects only the tasks its command line names when it begins with one
(``bringup provision ...``): the other task modules are not imported, and Invoke's parser copies no flags of
theirs; any other command line (``bringup --version``, a name that is no task's) gets the whole program.
"""
from __future__ import annotations

import sys
from types import ModuleType

import yaml

# Invoke reads its config files with the PyYAML it vendors (invoke.vendor.yaml: the pure-Python copy, ~8 ms of
# every command's start-up) unless packagers removed it, and then with the installed PyYAML (invoke.util's own
# fallback, as Debian's python3-invoke ships it).  bringup depends on PyYAML (its inventories), so Invoke is
# given that one from the start, as if unvendored: the same safe_load, imported once.
sys.modules.setdefault("invoke.vendor.yaml", yaml)

from invoke import Collection, Program  # noqa: E402 - after the PyYAML above

from . import __version__
from .process import keep_bytecode, reader_gone, stdout_gone

__all__ = ["TASKS", "collection", "ns", "program", "main", "given_twice"]

#: Every task of the program, in the order of ``--list``'s source: its name on the command line -> (its module
#: under bringup.tasks, its function).
TASKS: dict[str, tuple[str, str]] = {
    "provision": ("converge", "provision"), "plan": ("converge", "plan"), "facts": ("inspect", "facts"),
    "hosts": ("inspect", "hosts"), "audit": ("audit", "audit"), "checklist": ("checklist", "checklist"),
    "accept": ("accept", "accept"), "topology": ("inspect", "topology"), "bench": ("latency", "bench"),
    "tune-window": ("latency", "tune_window"), "tune": ("latency", "tune"), "engines": ("converge", "engines"),
    "drift": ("drift", "drift"), "pull": ("pull", "pull"), "fleet": ("pull", "fleet"),
}


def _module(name: str) -> ModuleType:
    """The task module ``name``, imported when asked for (each import written out: what imports what stays
    readable, to a reader and to tools)."""
    if name == "accept":
        from .tasks import accept as m
    elif name == "audit":
        from .tasks import audit as m
    elif name == "checklist":
        from .tasks import checklist as m
    elif name == "converge":
        from .tasks import converge as m
    elif name == "drift":
        from .tasks import drift as m
    elif name == "inspect":
        from .tasks import inspect as m
    elif name == "latency":
        from .tasks import latency as m
    elif name == "pull":
        from .tasks import pull as m
    else:
        raise KeyError(name)
    return m


def collection(names=None) -> Collection:
    """The tasks named (every task: None), in :data:`TASKS`' order."""
    return Collection(*(getattr(_module(module), function)
                        for name, (module, function) in TASKS.items() if names is None or name in names))


class _Program(Program):
    """``bringup ...``: Invoke's program, the bytecode flag restored once it parsed its core flags (it turns
    bytecode writing off for the whole process: :func:`bringup.process.keep_bytecode`)."""

    def parse_core(self, argv) -> None:
        def core() -> None:
            from invoke.exceptions import ParseError

            try:
                super(_Program, self).parse_core(argv)
            except ValueError as e:  # an int core flag given no number: Invoke let int()'s ValueError through
                given = str(e).rpartition(": ")[2]
                raise ParseError(f"error: a number is wanted (--list-depth N, -T N), got {given[:60]}") from None

        _masked(core)
        keep_bytecode()

    def parse_cleanup(self) -> None:
        """Invoke's (``--help TASK``, ``--list NAMESPACE``: their errors quote the word given), masked; a
        ``--list-format`` Invoke has no lister for is one line (it was an AttributeError traceback)."""
        def cleanup() -> None:
            from invoke.exceptions import ParseError

            fmt = self.args["list-format"].value if "list-format" in self.args else "flat"
            if fmt not in ("flat", "nested", "json"):
                raise ParseError(f"error: --list-format {ascii(str(fmt))[:60]}: give flat, nested or json")
            super(_Program, self).parse_cleanup()

        _masked(cleanup)

    def parse_tasks(self) -> None:
        """Invoke's, with a flag given twice named as such: Invoke's parser takes a flag's first value and reads
        the second as a task's name ("No idea what 'b' is!", of ``--name a --name b``), which says neither
        what was wrong nor which flag (``--allow-rollback`` given twice in a timer's unit and by hand); masked."""
        def tasks() -> None:
            from invoke.exceptions import ParseError

            try:
                super(_Program, self).parse_tasks()
            except ParseError as e:
                parser = getattr(self, "parser", None)
                known = {flag for ctx in [*getattr(parser, "contexts", {}).values(), getattr(parser, "initial", None)]
                         if ctx is not None for flag in ctx.flags}
                twice = given_twice(list(self.core.unparsed), str(e), known)
                if twice:
                    raise ParseError(twice) from None
                raise

        _masked(tasks)


def _masked(step) -> None:
    """``step()``, with the message of a parse error or an exit it raises through the masker: they quote the words
    given (``--help=https://u:TOKEN@h``: "No idea what '...' is!", ``--list=...``: "Sub-collection '...' not
    found!", a URL's password given twice), printed by Invoke before any run's masker is installed."""
    from invoke.exceptions import Exit, ParseError

    try:
        step()
    except (ParseError, Exit) as e:
        from .secrets import MASK

        text = str(e) if isinstance(e, ParseError) else e.message
        if isinstance(text, str) and MASK.mask(text) != text:
            raise (ParseError(MASK.mask(text)) if isinstance(e, ParseError) else
                   Exit(MASK.mask(text), code=e.code)) from None
        raise


def given_twice(argv: list[str], error: str, known: set[str] | None = None) -> str | None:
    """The line for Invoke's "No idea what 'WORD' is!" (``error``) where WORD is the value of a flag given a second
    time in ``argv``, or a switch given twice; None for any other error.  ``known``: the flags the tasks take
    (a flag none takes is unknown, however often given)."""
    if not (error.startswith("No idea what '") and error.endswith("' is!")):
        return None
    word = error[len("No idea what '"):-len("' is!")]
    if word.startswith("-") and (known is None or word in known) and \
            sum(t == word or t.startswith(word + "=") for t in argv) > 1:
        return f"error: {word[:60]} is given twice: give it once"  # a switch (--json --json)
    given: dict[str, list[str]] = {}  # flag -> its values, in order (--flag VALUE and --flag=VALUE alike)
    for i, token in enumerate(argv):
        if token.startswith("--") and "=" in token:
            flag, value = token.split("=", 1)
        elif token.startswith("-") and i + 1 < len(argv):
            flag, value = token, argv[i + 1]
        else:
            continue
        if known is not None and flag not in known:
            continue
        values = given.setdefault(flag, [])
        values.append(value)
        if len(values) > 1 and value == word:
            from .secrets import MASK  # masked whole, then cut: a URL's password cut from its '@' is not seen as one

            first, then = (ascii(MASK.mask(v))[:60] for v in (values[0], word))
            return f"error: {flag[:60]} is given twice ({first}, then {then}): it takes one value; give it once"
    return None


def _program(namespace: Collection) -> _Program:
    return _Program(namespace=namespace, version=__version__, name="bringup", binary="bringup")


def __getattr__(name: str):
    """``ns`` and ``program``: the whole collection and its program, made when first asked for (tasks.py, the
    kept help texts, tests)."""
    if name == "ns":
        return globals().setdefault("ns", collection())
    if name == "program":
        return globals().setdefault("program", _program(__getattr__("ns")))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def named(argv: list[str]) -> set[str] | None:
    """The tasks a command line (after the program's name) may run: where it begins with a task's name, every
    task whose name is one of its words (Invoke runs several tasks of one line; a flag's value that happens to
    be a task's name only costs that task's import); None (the whole program) otherwise."""
    if not argv or argv[0] not in TASKS:
        return None
    return {word for word in argv if word in TASKS}


def main() -> None:
    """Run the program (the ``bringup`` console script's end, after :func:`bringup.entry.main`).

    A reader that goes away (``bringup --help | head``) ends the program as it ends ``git log | head``:
    quietly, exit 141 (128 + SIGPIPE), no traceback.
    """
    names = named(sys.argv[1:])
    program = _program(collection(names)) if names else __getattr__("program")
    try:
        program.run()
        sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_gone():
            raise
        reader_gone()
