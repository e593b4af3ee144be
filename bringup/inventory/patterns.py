"""Ansible host patterns for ``--limit``: pure functions over host and group names.

    l40s:a10                 union: hosts of either group
    l40s:&rack2              intersection: hosts of l40s that are also in rack2
    l40s:!trt-l40s-03        exclusion
    trt-a10-*                shell-style wildcards on host and group names
    ~trt-(l40s|a10)-0[12]    a regular expression (Python's re.match, as Ansible)
    all, *                   every host
    @reports/last.retry      the host names in a file, one a line (a retry file: no patterns)
    l40s[0]  l40s[-1]        Ansible's subscripts of one group (or host): the first, the last;
    l40s[0:2]  l40s[3:]      the first three (inclusive, as Ansible's), the fourth to the last

Terms are separated by ``:`` or ``,``.  As in Ansible, the order of the terms
does not change the result: the plain terms are united first, then each
``&`` term intersects, then each ``!`` term removes; a pattern of only ``&``
and ``!`` terms starts from ``all``.  A term names groups when it matches a
group name, else hosts (a wildcard or a regular expression tries both).
Unlike Ansible, which warns and goes on, a term that matches nothing is an
error: a typo in a rollout's pattern must not silently shrink or widen it.

A subscript counts in Ansible's order of the group's hosts (``ansible --list-hosts 'g[0:2]'``): its own hosts
as read, then its children's, a generation at a time (:func:`~bringup.inventory.hosts.Inventory.ordered`);
``[x:y]`` includes ``y``.  An index past the group's end is an error, as in Ansible.  A subscript after a
wildcard (``l40s-*[0]``: Ansible counts the matches in the order its groups were read, hosts twice where
two groups match) is refused, and so is Ansible's removed ``[x-y]``.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InputError, quoted, shown
from ..process import command
from ..regexes import RegexTimeout, matcher, problem
from ..userfile import read_capped

__all__ = ["split_pattern", "order_terms", "match_pattern", "read_limit_file", "expand_limit", "retry_line",
           "retry_names"]

_WILD = re.compile(r"[*?\[]")


#: A term: a run of what separates no terms, a ``[...]`` whole (``g[0:2]``'s ``:`` is no separator).  A ``[`` that
#: is never closed stands for itself; a bracket's text holds no ``[`` (each character is read at most twice).
_TERM = re.compile(r"(?:\[[^\[\]]*\]|[^:,])+")
#: Ansible's subscript (its PATTERN_WITH_SUBSCRIPT): ``[i]``, ``[-i]``, ``[x:y]``, ``[x:]`` (and ``[x-y]``, removed).
_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$", re.DOTALL)
#: A subscript's number past this is read as this: slicing with it is what Ansible does with any larger one.
_LARGEST = 10 ** 18


def split_pattern(pattern: str) -> list[str]:
    """``'l40s:&rack2,!x'`` -> ``['l40s', '&rack2', '!x']`` (``:`` and ``,`` both separate terms, outside a
    subscript's brackets: ``'g[0:2]:h'`` -> ``['g[0:2]', 'h']``)."""
    return [t.strip() for t in _TERM.findall(pattern) if t.strip()]


def _number(digits: str) -> int:
    """A subscript's number, at most :data:`_LARGEST` (100,000 digits are no int Python reads)."""
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("-").lstrip("0") or "0"
    return sign * (int(digits) if len(digits) <= 18 else _LARGEST)


def _glob_hint(base: str, inner: str) -> str:
    """How to match names ending in ``[inner]`` as a wildcard did before subscripts: the regular expression of that
    one character class where ``inner`` is one (``[12]``, ``[1-3]``); else name the hosts or a group."""
    if re.fullmatch(r"[0-9]+|[0-9]-[0-9]", inner):
        rx = "~" + re.escape(base).replace(chr(92) + "-", "-") + "[" + inner + "]$"
        return (f"to match names ending in one of [{inner}] as a wildcard did, write the regular expression "
                f"'{shown(rx)}'")
    return "to pick names by number, write a regular expression (~trt-0[1-3]$) or name a group"


def _subscript(term: str, where: str, groups: Mapping[str, Sequence[str]] | None = None
               ) -> tuple[str, tuple[int, int | None] | None]:
    """``term`` without its subscript, and the subscript as Ansible reads it (``(i, None)``, or ``(x, y)`` with
    ``y`` -1 for "to the end"); a regular expression has none."""
    m = _SUBSCRIPT.match(term) if not term.startswith("~") else None
    if m is None:
        return term, None
    base, index, start, sep, end = m.groups()
    if sep == "-":
        if groups is not None and base not in groups and base not in ("*", "all"):
            # A wildcard's character class before subscripts (trt-0[1-3]): never sent to [1:3] (no group).
            raise InputError(f"{where}: {quoted(term, 80)}: [x-y] is no subscript Ansible takes, and "
                             f"{quoted(base, 60)} is no group; {_glob_hint(base, start + '-' + end)}")
        raise InputError(f"{where}: {quoted(term, 80)}: Ansible removed [x-y] subscripts; write "
                         f"{quoted(base + '[' + start + ':' + end + ']', 80)} (both ends included)")
    if base != "*" and (_WILD.search(base) or base.startswith("~")):
        raise InputError(f"{where}: {quoted(term, 80)}: a subscript after a wildcard counts hosts in the order "
                         "Ansible happened to read its groups; subscript one group (l40s[0:2]) instead")
    if index is not None:
        return base, (_number(index), None)
    return base, (_number(start), _number(end) if end else -1)


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


def _one(term: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]], where: str,
         ordered=None, plain: bool = False, names: "set[str] | None" = None) -> list[str]:
    """The hosts one term names, in inventory order.  ``ordered(group)``: the group's hosts in Ansible's order,
    for a subscript (none given: the order of ``groups``).  ``plain``: a term with no ``&``/``!``, where a host's
    own name is taken as it is first, as Ansible does (a host called web[1]); Ansible reads an ``&``/``!`` term's
    name as a group first (``all:!gpu`` drops group gpu's hosts, a host called gpu among them).  ``names``: the
    hosts as a set (one term of many looked up without a walk of the list)."""
    if plain and term in (names if names is not None else hosts):
        return [term]
    base, sub = _subscript(term, where, groups)
    if sub is not None:
        return _subscripted(term, base, sub, hosts, groups, where, ordered)
    if names is not None and term in names and term not in groups and not term.startswith("~") \
            and not _WILD.search(term):
        return [term]  # a host's name no group has, no pattern: itself (no walk of every name per term)
    if term == "*":
        term = "all"
    match = _matcher(term)
    named: set[str] = set()
    matched_group = False
    for g, members in groups.items():
        if match(g):
            matched_group = True
            named.update(members)
    # Hosts too where no group matched, or for a pattern; and, as Ansible does, for a term holding a dot (a host
    # gpu.example beside a group of that name).
    if not matched_group or term.startswith("~") or _WILD.search(term) or "." in term:
        named.update(h for h in hosts if match(h))
    if not named and not matched_group:
        close = difflib.get_close_matches(term, [*groups, *hosts], n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"{where}: '{shown(term)}' matches no host or group of the inventory{hint} "
                         f"(`{command('hosts')}` lists them)")
    return [h for h in hosts if h in named]


def _subscripted(term: str, base: str, sub: tuple[int, int | None], hosts: Sequence[str],
                 groups: Mapping[str, Sequence[str]], where: str, ordered) -> list[str]:
    """Ansible's ``_apply_subscript`` over the hosts of the one group (or host) ``base`` names, in Ansible's order."""
    if base == "*":
        base = "all"
    if base in groups:
        pool = list(ordered(base) if ordered is not None else groups[base])
    elif base in hosts:
        pool = [base]
    else:
        glob = re.compile(fnmatch.translate(term)).match
        if any(glob(h) for h in hosts) or any(glob(g) for g in groups):
            # Before subscripts, bringup read trt-0[12] as a wildcard: say how to write that one.
            inner = term[len(base) + 1:-1]
            raise InputError(f"{where}: {quoted(term, 80)} is Ansible's subscript [{inner}] of {quoted(base, 60)}, "
                             f"which matches no host or group; {_glob_hint(base, inner)}")
        _one(base, hosts, groups, where)  # its "matches no host or group" line, with the names close to it
        pool = []
    start, end = sub
    # Ansible's own rule: y of [x:y] included, [x:] to the last, [x:0] (0 is falsy) the one host x.
    if end:
        picked = pool[start:(len(pool) if end == -1 else end + 1)]
    elif -len(pool) <= start < len(pool):
        picked = [pool[start]]
    else:
        picked = []
    if not picked:
        has = (f"has {len(pool):,} host{'s' if len(pool) != 1 else ''} (0 to {len(pool) - 1}, or -1 for the last)"
               if pool else "has no host")
        raise InputError(f"{where}: {quoted(term, 80)} names no host: {quoted(base, 60)} {has}; "
                         f"`{command('hosts')}` lists them")
    keep = set(picked)
    return [h for h in hosts if h in keep]


def match_pattern(pattern: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]],
                  where: str = "--limit", ordered=None) -> list[str]:
    """The host names ``pattern`` selects, in inventory order (``hosts``); ``groups`` maps group -> hosts.

    An empty pattern, a term that names nothing, and a bad regular expression
    are one-line :class:`InputError` s naming ``where``.  ``ordered(group)``: the group's hosts in Ansible's
    order, which a subscript counts in (:meth:`~bringup.inventory.hosts.Inventory.ordered`).
    """
    terms = split_pattern(pattern)
    if not terms:
        raise InputError(f"{where}: empty host pattern; give e.g. 'l40s:&rack2:!trt-l40s-03' or 'trt-a10-*'")
    for t in terms:
        if t in ("&", "!"):
            raise InputError(f"{where}: {t!r} needs a name after it (e.g. ':&rack2', ':!trt-l40s-03')")
    chosen: list[str] = []
    have: set[str] = set()  # chosen as a set: a union of two 40,000-host groups was 1.6e9 list tests
    names = set(hosts)
    drop: set[str] = set()  # the ! terms come last (order_terms): dropped together, one pass
    for t in order_terms(terms):
        if t[0] == "&":
            keep = set(_one(t[1:], hosts, groups, where, ordered, names=names))
            chosen = [h for h in chosen if h in keep]
        elif t[0] == "!":
            drop.update(_one(t[1:], hosts, groups, where, ordered, names=names))
            continue
        else:
            got = _one(t, hosts, groups, where, ordered, plain=True, names=names)
            chosen += [h for h in got if h not in have]
            have.update(got)
            continue
        have = set(chosen)
    chosen = [h for h in chosen if h not in drop]
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
    said = shown(str(path))  # in its lines: cut and printable (a 100,000-character path was its line)
    raw = read_capped(path, LIMIT_FILE_MAX, InputError,
                      not_regular=f"--limit @{said}: not a regular file; give a retry file (reports/last.retry)",
                      missing=f"--limit @{said}: no such file (a retry file is written under reports/ only by a run "
                              "that had hosts fail)",
                      unreadable=f"--limit @{said}: cannot read it: ",
                      too_large=f"--limit @{said}: larger than {LIMIT_FILE_MAX // 1024} KiB; a retry file names one "
                                "host a line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"--limit @{said}: not UTF-8 text (byte {e.start}); a retry file names one host a line") \
            from None
    names = retry_names(text)
    if not names:
        raise InputError(f"--limit @{said}: the file names no host; nothing to run")
    return names


def expand_limit(limit: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]], ordered=None) -> list[str]:
    """``--limit``: a pattern, or ``@FILE`` (each line a host's name), in inventory order."""
    if limit.startswith("@"):
        where = f"--limit @{shown(limit[1:])}"
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
    return match_pattern(limit, hosts, groups, ordered=ordered)

