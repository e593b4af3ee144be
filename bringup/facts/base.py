"""What a fact is: a shell command and a pure parser of its output.

A fact is a small class, in the manner of pyinfra's facts::

    class OsRelease(Fact):
        name = "os.release"
        command = "cat /etc/os-release"
        process = staticmethod(parse_os_release)

Defining the class registers it (``__init_subclass__``): :data:`FACTS_BY_NAME` and :data:`ALL_FACTS`
are read-only views of one registry, in gathering order (:func:`rank`: the package's table of its facts;
a fact it does not name comes after, in definition order).  A name already taken, or one not
``<subsystem>.<what>``, is refused when the class is defined.

All facts of a host are gathered together in one remote round trip
(:mod:`bringup.facts.gather`): each ``command`` runs in its own subshell with
stderr discarded, and its stdout alone is handed to ``process``.  ``process``
is pure (text in, JSON-able value out), so it is tested on recorded real
outputs without any host.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

#: Every fact class by name, in gathering order: filled by :meth:`Fact.__init_subclass__`.
_REGISTRY: dict[str, type["Fact"]] = {}
#: A fact's place in the gathering order (:func:`rank`); a fact it does not name comes after, in definition order.
_RANK: dict[str, int] = {}


def rank(order) -> None:
    """Keep the registry in the order of ``order`` (fact names), whichever fact module is imported first: the
    package imports its modules on demand (:func:`bringup.facts.named`), so definition order varies by run."""
    _RANK.clear()
    _RANK.update({name: i for i, name in enumerate(order)})
    _sort()


def _sort() -> None:
    # Stable: facts of equal rank (those no order names) keep their definition order.  In place, so that the
    # read-only views below stay views of it.
    ordered = sorted(_REGISTRY.items(), key=lambda kv: _RANK.get(kv[0], len(_RANK)))
    _REGISTRY.clear()
    _REGISTRY.update(ordered)


class Fact:
    """Base class of facts; subclasses set the class attributes below and are registered by it."""

    #: Stable id, dotted: ``<subsystem>.<what>``; names the fact in ``invoke facts``.
    name: ClassVar[str]
    #: POSIX sh snippet run on the host; its stdout is parsed.
    command: ClassVar[str]
    #: A program the fact needs; when it is missing the fact is ``default``.
    requires_command: ClassVar[str | None] = None
    #: The value when the command is missing, prints nothing or is refused; unless a fact sets it,
    #: what its parser makes of no output (``process("")``), set when the class is defined.
    default: ClassVar[Any] = None
    #: Whether the command prints something on every host where it runs (its ``requires_command`` there): an
    #: empty output is then a reading failure (the script lost it), named, never the fact's default read as true.
    always_prints: ClassVar[bool] = False
    #: Whether the parser takes bytes that are not UTF-8 itself (kept as surrogate escapes by the transport):
    #: otherwise such an output is garbled, named, and not parsed.
    reads_bytes: ClassVar[bool] = False
    #: Where the parsed value holds CPU lists (lists of CPU ids, or None), as dotted paths, ``*`` for every key
    #: of a mapping or entry of a list (``"numa_nodes.*"``): a saved facts file is checked there, so that a CPU
    #: list written as text (``"0-15"``) is named, not planned as the characters '0', '-', '1', '5'.
    cpu_lists: ClassVar[tuple[str, ...]] = ()
    #: Whether the command for some keys (:meth:`command_for`) only reads kernel parameter files and prints a
    #: bounded answer, so it cannot hang: the fact script runs it in its own shell, without a lane, the section
    #: bound's pipe or timeout(1) (bringup.ssh.script.batch's ``small``, as ``Resource.read_small``).  The
    #: whole fact (:attr:`command`) always runs under the per-fact limit.
    read_small: ClassVar[bool] = False

    @classmethod
    def command_for(cls, keys: Sequence[str]) -> str | None:
        """A command that prints what :attr:`command` prints, for ``keys`` of the fact alone (its readers said
        they read no other: a role's ``fact_keys``), parsed by the same :meth:`process`; None (the default): the
        fact is read whole.  Run as :attr:`command` is, under the same per-fact time limit."""
        return None

    @staticmethod
    def saved_problem(value: Any) -> str:
        """What keeps ``value``, this fact as a saved ``--facts`` file holds it already parsed, from being one its
        parser makes ('' when nothing: the default checks only the kind and :attr:`cpu_lists`).  A fact whose
        checks plan from its numbers names the field and why (``cpus[0].cpu is text``, ``numa_nodes.0 holds CPU
        999999 of 2``): an edited file is one line, not planned as read."""
        return ""

    @staticmethod
    def process(output: str) -> Any:  # pragma: no cover - abstract
        """The pure parser: ``process = staticmethod(parse_x)`` in a subclass."""
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is None:  # a shared base of facts, not a fact
            return
        where = f"{cls.__module__}.{cls.__qualname__}"
        if not isinstance(name, str) or not re.fullmatch(r"[a-z]+\.[a-z_]+", name):
            raise TypeError(f"fact {where}: name {name!r} is not <subsystem>.<what> (lowercase, one dot)")
        if name in _REGISTRY:
            other = _REGISTRY[name]
            raise TypeError(f"fact {where}: name {name!r} is taken by {other.__module__}.{other.__qualname__}")
        if not isinstance(getattr(cls, "command", None), str) or cls.process is Fact.process:
            raise TypeError(f"fact {where}: set command (a sh snippet) and process = staticmethod(parser)")
        if "default" not in cls.__dict__:
            try:
                cls.default = cls.process("")
            except Exception as e:  # noqa: BLE001 - said in one line, at definition
                raise TypeError(f"fact {where}: process('') raised {type(e).__name__}: {e}; set default") from None
        _REGISTRY[name] = cls
        _sort()


class _Registered(Sequence):
    """Every registered fact class, in gathering order (a live, read-only view)."""

    def __getitem__(self, index):  # type: ignore[override]
        return list(_REGISTRY.values())[index]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __iter__(self) -> Iterator[type[Fact]]:
        return iter(list(_REGISTRY.values()))

    def __repr__(self) -> str:
        return f"ALL_FACTS({', '.join(_REGISTRY)})"


#: Every fact class in gathering order.
ALL_FACTS: Sequence[type[Fact]] = _Registered()
#: A fact's ``name`` → its class.
FACTS_BY_NAME: Mapping[str, type[Fact]] = MappingProxyType(_REGISTRY)


class UntrustedOutput(ValueError):
    """A command output that cannot be trusted: cut short, or malformed in a way that would
    silently shift or drop values.  A parser raises it; :func:`bringup.facts.gather.gather`
    turns it into a fact error (its message is the one line shown) and the fact's default."""


def undecodable(output: str) -> str | None:
    """Where ``output`` holds bytes that are not UTF-8 (the transport keeps them as surrogate escapes), in one
    line: how many and the first line holding one, shown with ``\\xNN`` escapes; None for clean text."""
    bad = [i for i, ch in enumerate(output) if "\udc80" <= ch <= "\udcff"]
    if not bad:
        return None
    start = output.rfind("\n", 0, bad[0]) + 1
    end = output.find("\n", bad[0])
    text = output[start:end if end >= 0 else len(output)]
    shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return (f"{len(bad)} byte(s) not UTF-8 (garbled output), the first on line {output.count(chr(10), 0, bad[0]) + 1}: "
            f"{shown[:100]!r}")


#: The most digits of a whole number a fact reads from a host's text (an IRQ, a CPU, a GPU count).
WHOLE_DIGITS_MAX = 18


def ascii_whole(text: str, most: int = WHOLE_DIGITS_MAX) -> bool:
    """Whether ``text`` is a whole number as the kernel and the tools print one: ASCII digits, at most ``most``.
    ``str.isdigit`` also took ``²`` (int() then failed: the fact's error was Python's "invalid literal for int()"),
    ``٣`` (read as 3) and 5,000 digits (past Python's conversion limit: the error told the operator to call
    ``sys.set_int_max_str_digits()``)."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


#: The highest CPU id read in a CPU list (Linux's NR_CPUS is 8192 at most): ``0-99999999999999999999`` from a host
#: or a file is no list of CPUs, and expanding it would hold the run for ever and take all memory.
CPU_ID_MAX = (1 << 16) - 1


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel CPU list (``0-3,8,10-11``) into sorted ints; empty → [].

    A range that runs backwards (``5-3``), or a CPU id above :data:`CPU_ID_MAX`, is no CPU list the kernel
    prints (a cut, garbled or forged output): :class:`UntrustedOutput`, not ``[]`` and never expanded.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        ends = part.split("-", 1)
        if any(len(x.strip()) > 5 or (ascii_whole(x.strip()) and int(x) > CPU_ID_MAX) for x in ends):
            raise UntrustedOutput(f"CPU list {_shown_list(text)}: {_shown_list(part)} names a CPU above "
                                  f"{CPU_ID_MAX} (no machine has one)")
        if not all(ascii_whole(x.strip()) for x in ends):
            raise UntrustedOutput(f"CPU list {_shown_list(text)} is garbled (not a CPU list the kernel prints)")
        if len(ends) == 2:
            lo, hi = (int(x) for x in ends)
            if hi < lo:
                raise UntrustedOutput(f"CPU list {_shown_list(text)}: range {part} runs backwards")
            cpus.update(range(lo, hi + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def _shown_list(text: str) -> str:
    text = text.strip()
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def format_cpulist(cpus: list[int] | set[int]) -> str:
    """Format CPUs as the kernel's compact list (``0-3,8``)."""
    out: list[str] = []
    s = sorted(set(cpus))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)
