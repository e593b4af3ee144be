"""Ansible host patterns for ``--limit``: pure functions over host and group names.

    l40s:a10                 union: hosts of either group
    l40s:&rack2              intersection: hosts of l40s that are also in rack2
    l40s:!trt-l40s-03        exclusion
    trt-a10-*                shell-style wildcards on host and group names
    ~trt-(l40s|a10)-0[12]    a regular expression (Python's re.match, as Ansible)
    all, *                   every host
    @reports/last.retry      the host names in a file, one a line (a retry file: no patterns)

Terms are separated by ``:`` or ``,``.  As in Ansible, the order of the terms
does not change the result: the plain terms are united first, then each
``&`` term intersects, then each ``!`` term removes; a pattern of only ``&``
and ``!`` terms starts from ``all``.  A term names groups when it matches a
group name, else hosts (a wildcard or a regular expression tries both).
Unlike Ansible, which warns and goes on, a term that matches nothing is an
error: a typo in a rollout's pattern must not silently shrink or widen it.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InputError, quoted
from ..process import command
from ..regexes import RegexTimeout, matcher, problem
from ..userfile import read_capped

__all__ = ["split_pattern", "order_terms", "match_pattern", "read_limit_file", "expand_limit", "retry_line",
           "retry_names"]

_WILD = re.compile(r"[*?\[]")


def split_pattern(pattern: str) -> list[str]:
    """``'l40s:&rack2,!x'`` -> ``['l40s', '&rack2', '!x']`` (``:`` and ``,`` both separate terms)."""
    return [t.strip() for t in re.split(r"[:,]", pattern) if t.strip()]


def order_terms(terms: Sequence[str]) -> list[str]:
    """Ansible's order of operations: plain terms, then ``&`` terms, then ``!`` terms; ``all`` when no plain one."""
    plain = [t for t in terms if t[0] not in "&!"]
    inter = [t for t in terms if t[0] == "&"]
    excl = [t for t in terms if t[0] == "!"]
    return (plain or ["all"]) + inter + excl


#: The most time a ``--limit ~REGEX`` may take against all the inventory's names (40,000 take ~0.1 s).
LIMIT_REGEX_S = 5.0

#: The largest retry file read (``--limit @FILE``): a line per host.
LIMIT_FILE_MAX = 1024 * 1024


def _matcher(term: str):
    if term.startswith("~"):
        why = problem(term[1:])  # the one rule for a regular expression from data (length, validity, repeats)
        if why is not None:
            raise InputError(f"--limit: {quoted(term, 80)} {why}; fix it or drop the leading ~ (name groups instead)")
        rx = re.compile(term[1:])
        # Other patterns backtrack too ((a|a)*$, a dozen [a-z]* in a row): every name it is matched against, all
        # together, within LIMIT_REGEX_S.
        try:
            timed = matcher(rx.pattern, LIMIT_REGEX_S)
        except Exception as e:  # (the regex package refusing what re took)
            raise InputError(f"--limit: {quoted(term, 80)} is not a regular expression bringup can run "
                             f"({e or type(e).__name__}); "
                             "fix it or drop the leading ~") from None

        def match(name: str) -> bool:
            try:
                return timed(name)
            except RegexTimeout:
                raise InputError(f"--limit: {quoted(term)} took over {LIMIT_REGEX_S:g} s to match the inventory's "
                                 "names (it backtracks: a repeat of alternatives that overlap, or many repeats in a "
                                 "row); write it more simply, or name a group") from None
        return match
    if _WILD.search(term):
        return re.compile(fnmatch.translate(term)).match
    return lambda name: name == term


def _one(term: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]], where: str) -> list[str]:
    """The hosts one term names, in inventory order."""
    if term == "*":
        term = "all"
    match = _matcher(term)
    named: set[str] = set()
    matched_group = False
    for g, members in groups.items():
        if match(g):
            matched_group = True
            named.update(members)
    if not matched_group or term.startswith("~") or _WILD.search(term):
        named.update(h for h in hosts if match(h))
    if not named and not matched_group:
        close = difflib.get_close_matches(term, [*groups, *hosts], n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"{where}: {term!r} matches no host or group of the inventory{hint} "
                         f"(`{command('hosts')}` lists them)")
    return [h for h in hosts if h in named]


def match_pattern(pattern: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]],
                  where: str = "--limit") -> list[str]:
    """The host names ``pattern`` selects, in inventory order (``hosts``); ``groups`` maps group -> hosts.

    An empty pattern, a term that names nothing, and a bad regular expression
    are one-line :class:`InputError` s naming ``where``.
    """
    terms = split_pattern(pattern)
    if not terms:
        raise InputError(f"{where}: empty host pattern; give e.g. 'l40s:&rack2:!trt-l40s-03' or 'trt-a10-*'")
    for t in terms:
        if t in ("&", "!"):
            raise InputError(f"{where}: {t!r} needs a name after it (e.g. ':&rack2', ':!trt-l40s-03')")
    chosen: list[str] = []
    for t in order_terms(terms):
        if t[0] == "&":
            keep = set(_one(t[1:], hosts, groups, where))
            chosen = [h for h in chosen if h in keep]
        elif t[0] == "!":
            drop = set(_one(t[1:], hosts, groups, where))
            chosen = [h for h in chosen if h not in drop]
        else:
            chosen += [h for h in _one(t, hosts, groups, where) if h not in chosen]
    order = {h: i for i, h in enumerate(hosts)}
    return sorted(chosen, key=order.__getitem__)


def retry_line(name: str) -> str:
    """``name`` as a retry file's line (without its newline): as it is, but behind a ``\\`` when it begins
    with ``#`` (a comment otherwise) or ``\\``.  A host name holds no newline (:func:`~.sources.model.unsafe_name`)."""
    return "\\" + name if name.startswith(("#", "\\")) else name


def retry_names(text: str) -> list[tuple[int, str]]:
    """The host names of a retry file's ``text`` with their line numbers, as :func:`retry_line` wrote them:
    lines split at ``\\n`` only (``\\r\\n`` taken too), each name exactly as written (spaces kept); blank lines
    and ``#`` comments skipped; a leading ``\\`` dropped."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line[:-1] if line.endswith("\r") else line
        if not line.strip() or line.startswith("#"):
            continue
        out.append((n, line[1:] if line.startswith("\\") else line))
    return out


def read_limit_file(path: str | Path) -> list[str]:
    """The host names of a retry file (``--limit @FILE``), one a line (:func:`retry_names`)."""
    return [name for _, name in read_limit_lines(path)]


def read_limit_lines(path: str | Path) -> list[tuple[int, str]]:
    """The host names of a retry file (``--limit @FILE``) with their line numbers (:func:`retry_names`)."""
    raw = read_capped(path, LIMIT_FILE_MAX, InputError,
                      not_regular=f"--limit @{path}: not a regular file; give a retry file (reports/last.retry)",
                      missing=f"--limit @{path}: no such file (a retry file is written under reports/ only by a run "
                              "that had hosts fail)",
                      unreadable=f"--limit @{path}: cannot read it: ",
                      too_large=f"--limit @{path}: larger than {LIMIT_FILE_MAX // 1024} KiB; a retry file names one "
                                "host a line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"--limit @{path}: not UTF-8 text (byte {e.start}); a retry file names one host a line") \
            from None
    names = retry_names(text)
    if not names:
        raise InputError(f"--limit @{path}: the file names no host; nothing to run")
    return names


def expand_limit(limit: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]]) -> list[str]:
    """``--limit``: a pattern, or ``@FILE`` (each line a host's name), in inventory order."""
    if limit.startswith("@"):
        where = f"--limit {limit}"
        names: set[str] = set()
        known = set(hosts)
        for n, line in read_limit_lines(limit[1:]):
            # A retry file names hosts, each taken literally (`fd00::2` holds the pattern separator, `web[1]` a
            # glob); a line that is no host's name is refused, never read as a pattern: `*` would run every host.
            # The line is named by its number, never quoted: the file may be no retry file (@/etc/shadow).
            if line not in known:
                close = difflib.get_close_matches(line, list(hosts), n=3, cutoff=0.6)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(f"{where}: line {n} is not a host of the inventory{hint}; a retry file names hosts, "
                                 "one a line (give a pattern such as a group or '*' as --limit PATTERN)")
            names.add(line)
        return [h for h in hosts if h in names]
    return match_pattern(limit, hosts, groups)

