"""Regular expressions an operator writes (``--limit ~...``, ``gpu_profiles`` name matches): bounded work.

Python's ``re`` backtracks without limit: a repeat inside a repeat (``(a+)+``), or a few repeats side by side
over the same characters, against a long enough text takes hours.  What is written is checked once, where the
input is read (:func:`problem`: too long, not a regular expression, a repeat of a repeated part); what runs
against a host's text runs under a deadline (:func:`search`, through the ``regex`` package, which takes a
timeout and reads Python's ``re`` syntax) on at most :data:`SUBJECT_MAX` characters of it.
"""
from __future__ import annotations

import re

__all__ = ["REGEX_MAX", "SUBJECT_MAX", "SEARCH_TIMEOUT_S", "RegexTimeout", "nested_repeat", "huge_repeat", "problem",
           "search", "matcher"]

#: The longest regular expression taken (a host pattern or a GPU name match is a few dozen characters).
REGEX_MAX = 256
#: The most of a text searched: NVML's names fit in 96 bytes (``NVML_DEVICE_NAME_V2_BUFFER_SIZE``), host names
#: in 253; what is longer was not written by either.
SUBJECT_MAX = 256
#: The most one search may take.
SEARCH_TIMEOUT_S = 1.0


class RegexTimeout(ValueError):
    """A search ran past :data:`SEARCH_TIMEOUT_S`."""


def _parts(av, sre) -> list:
    """Every sub-pattern nested in a node's argument ``av``, whatever holds it (a group, a branch, a look-around, a
    conditional (?(1)...|...), an atomic group): directly, or in a tuple or list."""
    out: list = []
    for part in (av if isinstance(av, (tuple, list)) else (av,)):
        if isinstance(part, sre.SubPattern):
            out.append(part)
        elif isinstance(part, (tuple, list)):
            out.extend(x for x in part if isinstance(x, sre.SubPattern))
    return out


def _repeats(sre) -> tuple:
    return (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT))


def nested_repeat(pattern: str) -> bool:
    """Whether ``pattern`` (valid) holds a repeat inside a repeat (``(a+)+``, inside any group, atomic ones too):
    backtracking that may never end."""
    from re import _parser as sre  # the parse tree re itself builds (3.11: re._parser)

    reps = _repeats(sre)
    stack: list = [(sre.parse(pattern), False)]
    while stack:
        items, inside = stack.pop()
        for op, av in items:
            if op in reps:
                lo, hi, sub = av
                if inside and hi != 0:
                    return True
                stack.append((sub, inside or hi is sre.MAXREPEAT or hi > 1))
            else:
                stack.extend((part, inside) for part in _parts(av, sre))
    return False


def huge_repeat(pattern: str) -> int | None:
    """The first repeat count of ``pattern`` (valid), multiplied by the counts of the repeats it is nested in, that
    is over :data:`SUBJECT_MAX` (``.{99999999}``, ``a{300,}``, ``((.{200}){200}){200}``), or None: the ``regex``
    package compiles a counted repeat unrolled, 18 GB and over a minute for ``.{99999999}`` (2 GB for three nested
    counts of 200 inside atomic groups), and no text searched (a host or GPU name) is longer than SUBJECT_MAX, so
    such a count can match nothing."""
    from re import _parser as sre

    reps = _repeats(sre)
    stack: list = [(sre.parse(pattern), 1)]
    while stack:
        items, times = stack.pop()
        for op, av in items:
            if op in reps:
                lo, hi, sub = av
                n = times * max(lo, 1 if hi is sre.MAXREPEAT else hi)
                if n > SUBJECT_MAX:
                    return n
                stack.append((sub, n))
            else:
                stack.extend((part, times) for part in _parts(av, sre))
    return None


def problem(pattern: str) -> str | None:
    """Why ``pattern`` is refused, in words that follow its name; None when it is taken."""
    if len(pattern) > REGEX_MAX:
        return f"is {len(pattern)} characters; at most {REGEX_MAX} are taken"
    try:
        re.compile(pattern)
    except re.error as e:
        return f"is not a regular expression ({e})"
    except RecursionError:
        return "nests too deep to be read"
    if nested_repeat(pattern):
        return "repeats a repeated part (like (a+)+), which can take hours to match; write it without the nested repeat"
    times = huge_repeat(pattern)
    if times is not None:
        return (f"repeats a part {times:,} times; at most {SUBJECT_MAX} (no name searched is longer), "
                "since a larger count takes gigabytes to compile")
    return None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` is found in the first :data:`SUBJECT_MAX` characters of ``text``; a search that runs
    past :data:`SEARCH_TIMEOUT_S` raises :class:`RegexTimeout`."""
    import regex

    try:
        return regex.search(pattern, text[:SUBJECT_MAX], timeout=SEARCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise RegexTimeout(f"{pattern!r} took over {SEARCH_TIMEOUT_S:g} s against {text[:60]!r}") from None


def matcher(pattern: str, budget_s: float):
    """``pattern``'s ``match`` (anchored at the start, as ``re.match``) for many texts, all of them together within
    ``budget_s`` seconds: past it, a call raises :class:`RegexTimeout` (``(a|a)*$`` against 42 characters ran
    over a minute; side-by-side repeats are not caught by :func:`nested_repeat`)."""
    import time

    import regex

    rx = regex.compile(pattern)
    end = time.monotonic() + budget_s

    def match(text: str) -> bool:
        try:
            return rx.match(text, timeout=max(end - time.monotonic(), 0.001)) is not None
        except TimeoutError:
            raise RegexTimeout(f"{pattern!r} took over {budget_s:g} s") from None

    return match
