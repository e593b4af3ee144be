"""A host's facts: gathered in one round trip, or read back from a saved `invoke facts`."""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from ..ssh.command import sh
from ..errors import InputError, printable, said
from ..process import command
from ..untrusted import Unreadable, loads
from ..userfile import read_capped
from ..ssh.script import KILLED, READ_LANES, SECTION_MAX, TIMED_OUT, batch, split
from .base import Fact, UntrustedOutput, undecodable


def fact_snippet(fact: type[Fact], keys: list[str] | None = None) -> str:
    """The snippet for one fact (for ``keys`` of it alone: :meth:`Fact.command_for`); a missing
    ``requires_command`` prints nothing."""
    return _snippet(fact, keys)[0]


def _snippet(fact: type[Fact], keys: list[str] | None) -> tuple[str, bool]:
    """:func:`fact_snippet`, and whether it is small (the command for keys of a ``read_small`` fact)."""
    keyed = fact.command_for(keys) if keys else None
    command = keyed or fact.command
    if fact.requires_command:
        command = sh("command -v %s >/dev/null 2>&1 || exit 0\n", fact.requires_command) + command
    return command, keyed is not None and fact.read_small


#: The most one fact's command may take on the host (seconds): ``nvidia-smi -q`` on eight GPUs without persistence
#: mode takes tens of seconds; one that hangs (a GPU fallen off the bus) is ended there, alone, and named, instead
#: of holding every fact until the connection's ``command_timeout``.
FACT_TIME_S = 180


def collect_raw(transport, facts: list[type[Fact]], keys: dict[str, list[str]] | None = None
                ) -> dict[str, dict[str, Any]]:
    """Run all ``facts`` on the host at once; each fact's raw output: ``{name: {"rc", "output"}}``
    (``rc`` None: the script stopped before the fact ended; ``"cut": True`` too: the fact printed more than
    :data:`~bringup.ssh.script.SECTION_MAX` and was cut there, alone, the others read; ``rc``
    :data:`~bringup.ssh.script.TIMED_OUT`: the fact ran past :data:`FACT_TIME_S` and was stopped, alone).
    ``invoke facts --raw`` saves this.  ``keys``: ``{fact: keys}`` read in part (:func:`bringup.engine.roles.fact_keys`).
    """
    if not facts:
        return {}
    script, token = facts_script(facts, keys)
    res = transport.run_script(script)
    raw = raw_of(facts, res.stdout, token)
    if res.rc and all(r["rc"] is None and not r["output"] for r in raw.values()) and (res.stderr or "").strip():
        # The whole answer was refused (the transport's cap, a shell that never ran the script): each fact
        # says the transport's own line, not "stopped early" that names no cause.
        why = said(res.stderr, 300)
        for r in raw.values():
            r["why"] = why
    return raw


def facts_script(facts: list[type[Fact]], keys: dict[str, list[str]] | None = None) -> tuple[str, str]:
    """The one script that reads all ``facts`` (each under :data:`FACT_TIME_S`), and its token for :func:`raw_of`."""
    keys = keys or {}
    snippets = [_snippet(f, keys.get(f.name)) for f in facts]
    return batch([(f.name, cmd) for f, (cmd, _) in zip(facts, snippets)], lanes=READ_LANES,
                 section_max=SECTION_MAX, time_limit_s=FACT_TIME_S,
                 small={i for i, (_, small) in enumerate(snippets) if small})


def raw_of(facts: list[type[Fact]], stdout: str, token: str) -> dict[str, dict[str, Any]]:
    """Each fact's raw output (:func:`collect_raw`'s shape) from what :func:`facts_script`'s script printed."""
    return {f.name: {"rc": sec.rc, "output": sec.output, **({"cut": True} if sec.cut else {})}
            for f, sec in zip(facts, split(stdout, token, [f.name for f in facts], section_max=SECTION_MAX))}


def parse_raw(facts: list[type[Fact]], raw: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Each fact's parser on its raw output (:func:`collect_raw`'s, or a saved bundle's); ``(values, errors)``.

    A parser that fails on a host's output yields the fact's default and an entry in ``errors``: one odd
    fact must not stop a run.  An output the parser refuses as untrusted (cut short, shifted columns) gives
    its own one-line message; any other failure is named by its exception type.  A fact ``raw`` lacks is
    left out.
    """
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for fact in facts:
        if fact.name not in raw:
            continue
        rc, output = raw[fact.name].get("rc", 0), raw[fact.name].get("output") or ""
        if raw[fact.name].get("cut") or len(output) > SECTION_MAX:
            errors[fact.name] = (f"output cut at {_size(SECTION_MAX)}: the command printed more (a program "
                                 "streaming without end?); not read")
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        if rc in (TIMED_OUT, KILLED):
            errors[fact.name] = (f"no answer within {FACT_TIME_S} s: stopped (a program that hangs?), after "
                                 + (f"{len(output)} characters of output" if output.strip() else "no output"))
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        if rc is None:
            why = raw[fact.name].get("why")
            errors[fact.name] = (f"no output: {said(str(why), 300)}" if why
                                 else "no output (the fact script stopped early)")
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        if not output.strip():
            empty = _empty_is_unread(fact, raw)
            if empty:
                errors[fact.name] = empty
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        garbled = None if fact.reads_bytes else undecodable(output)
        if garbled:
            errors[fact.name] = garbled
            values[fact.name] = copy.deepcopy(fact.default)
            continue
        try:
            values[fact.name] = fact.process(output)
        except UntrustedOutput as e:
            errors[fact.name] = " ".join(str(e).split())
            values[fact.name] = copy.deepcopy(fact.default)
        except Exception as e:  # noqa: BLE001 - reported, the run goes on
            errors[fact.name] = _unread(e)
            values[fact.name] = copy.deepcopy(fact.default)
    return values, errors


def _unread(e: Exception) -> str:
    """A parser's own error, in one line; a number of thousands of digits (past Python's conversion limit, whose
    message tells the operator to call sys.set_int_max_str_digits()) in the command's words: no tool prints one."""
    if isinstance(e, ValueError) and "sys.set_int_max_str_digits" in str(e):
        return "a number of thousands of digits in the command's output, which no tool prints: the output is damaged"
    return " ".join(f"{type(e).__name__}: {e}".split())


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _empty_is_unread(fact: type[Fact], raw: dict[str, dict[str, Any]]) -> str | None:
    """Why an empty output of ``fact`` is a reading failure, or None when empty is what the host said.

    A fact that :attr:`~Fact.always_prints` printed nothing: without a ``requires_command`` that is always a
    lost output; with one, when another fact of the same program printed something (the program is there, and
    it prints even its own errors on stdout).  A missing program leaves every fact of it empty: its default."""
    if not fact.always_prints:
        return None
    if not fact.requires_command:
        return "empty output: the command always prints something here (output lost?)"
    from .base import FACTS_BY_NAME  # the facts defined so far: those gathered are (no other module imported)

    said = [name for name, entry in raw.items() if name != fact.name and name in FACTS_BY_NAME
            and FACTS_BY_NAME[name].requires_command == fact.requires_command and isinstance(entry, dict)
            and (entry.get("output") or "").strip()]
    if not said:
        return None
    return (f"empty output while {', '.join(sorted(said))} printed {fact.requires_command}'s answer "
            "(output lost?)")


def gather(transport, facts: list[type[Fact]], keys: dict[str, list[str]] | None = None
           ) -> tuple[dict[str, Any], dict[str, str]]:
    """Run all ``facts`` on the host at once and parse them; returns ``(values, errors)`` (:func:`parse_raw`).
    No facts wanted (roles that declare ``FACTS = ()``): no round trip.  ``keys``: facts read in part."""
    return parse_raw(facts, collect_raw(transport, facts, keys))


def ahead_key(roles: list[str], facts: list[type[Fact]], keys: dict[str, list[str]] | None = None) -> str:
    """What names a run's state read kept on the host for the next run to read ahead (``Transport.run_script``'s
    ``keep``): the roles it runs, the facts it gathers and their keys, and bringup's version; another selection
    (another project's roles too) keeps its own.  A read kept under it is only taken where it is the very script
    the run builds."""
    import hashlib

    from .. import __version__

    text = repr((__version__, list(roles), [f.name for f in facts],
                 sorted((k, list(v)) for k, v in (keys or {}).items())))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def lock_and_gather(transport, who: str, facts: list[type[Fact]], keys: dict[str, list[str]] | None = None,
                    ahead: str | None = None) -> tuple[dict[str, Any], dict[str, str]] | None:
    """Take the host's run lock for the run ``who`` (``Transport.hold_run_lock``: raises its one line when held)
    and gather ``facts`` in the same round trip, once the lock is held: ``(values, errors)`` as :func:`gather`;
    None when the facts still need their own round trip (no lock taken: ``ansible_connection: local``; no
    facts wanted; a script too long for the holder's command line)."""
    if not facts:
        transport.hold_run_lock(who)
        return None
    script, token = facts_script(facts, keys)
    res = transport.hold_run_lock(who, script, ahead=ahead)
    return None if res is None else parse_raw(facts, raw_of(facts, res.stdout, token))


#: The largest saved facts file read (a host's facts are well under a megabyte).
FACTS_FILE_MAX = 64 * 1024 * 1024


def load_facts(path, host: str) -> tuple[dict, dict]:
    """A saved ``invoke facts`` JSON: ``(facts, fact errors)``; a bad file is one line.

    A file is trusted no further than its shape: a fact of the wrong kind (a list where ``invoke facts``
    writes a mapping) is refused; what the file lacks, :func:`missing_facts` names.
    """
    from . import ALL_FACTS

    p = Path(path)
    save = "save it with: " + command(f"facts --host {host} > FILE")
    # Read as any saved file (a cap; a pipe, a device or a folder is no file, never waited on or read without end).
    raw = read_capped(p, FACTS_FILE_MAX, InputError, missing=f"--facts {p}: no such file; {save}",
                      unreadable=f"--facts {p}: ", not_regular=f"--facts {p}: not a regular file; {save}",
                      too_large=f"--facts {p}: larger than {FACTS_FILE_MAX // (1024 * 1024)} MiB, not a facts "
                                f"file; {save}")
    try:
        # Keys given once (json keeps the last: a second "nvidia.query" would replace the first unseen); NaN and
        # numbers of up to 4,000 digits read, as the facts' own check names them ("pcie_width_current is a
        # 400-digit number"); longer, or nested past any facts file, one line here (never Python's own advice).
        doc = loads(raw, what=f"--facts {p}", nan=True, digits=4000)
    except Unreadable as e:
        raise InputError(f"{e}; {save}") from None
    if isinstance(doc, dict) and "host" in doc and doc["host"] != host:
        # Another host's facts would judge this host's hardware (all PASS) without a word: refused.  A file with no
        # "host" (a rack vendor's captured outputs) is taken as the operator names it.
        other = printable(str(doc["host"]))[:80]
        raise InputError(f"--facts {p}: the facts of host {other!r}, not of {host!r}; give the file saved from "
                         f"{host}, or gather it again: " + command(f"facts --host {host} > FILE"))
    if isinstance(doc, dict) and isinstance(doc.get("raw"), dict):
        # `invoke facts --raw` (or a rack vendor's captured outputs in its shape): the same parsers as a live run.
        raw = doc["raw"]
        for name, entry in raw.items():
            if isinstance(entry, str):
                raw[name] = entry = {"rc": 0, "output": entry}
            if not (isinstance(entry, dict) and isinstance(entry.get("output", ""), str)
                    and (entry.get("rc", 0) is None or isinstance(entry.get("rc", 0), int))):
                raise InputError(f"--facts {p}: raw.{name} is not a command's output (text, or "
                                 f"{{rc, output}}); save it with: {command(f'facts --raw --host {host} > FILE')}")
        return parse_raw(ALL_FACTS, raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("facts"), dict):
        raise InputError(f"--facts {p}: neither a \"facts\" nor a \"raw\" mapping; {save}")
    facts = doc["facts"]
    bad = _bad_number(facts, "")
    if bad:
        raise InputError(f"--facts {p}: fact {bad[0]} is {bad[1]}, no reading a host gives (NaN, Infinity or beyond "
                         f"2^53); {save}")
    errors = doc.get("errors") if isinstance(doc.get("errors"), dict) else {}
    errors = {str(k): str(v) for k, v in errors.items()}
    for fact in ALL_FACTS:
        if fact.name not in facts:
            continue
        want, have = fact.default, facts[fact.name]
        if have is not None and want is not None and type(have) is not type(want):
            raise InputError(f"--facts {p}: fact {fact.name} is {_kind(have)}, `{command('facts')}` writes "
                             f"{_kind(want)}; {save}")
        for spec in fact.cpu_lists:
            for where, value in _at(have, spec.split("."), ""):
                seen = _not_cpu_list(value)
                if seen:
                    raise InputError(f"--facts {p}: fact {fact.name} {where} {seen}; `{command('facts')}` writes "
                                     f"a list of CPU ids like [0, 1, 2]; {save}")
        why = fact.saved_problem(have)
        if why:
            raise InputError(f"--facts {p}: fact {fact.name}: {why}, not what `{command('facts')}` writes; {save}")
    return facts, errors


#: No fact a host gives is a number beyond this (JSON's exact integers; bytes of memory are far below it).
_MAX_NUMBER = 2 ** 53


def _bad_number(value, where: str, depth: int = 0) -> tuple[str, str] | None:
    """The first number in a saved fact that no host gives (NaN, Infinity, 1e308, a 400-digit integer) as
    (where, what), or None.  Python's JSON reads all of these; a check would print ``x nan`` as a PASS."""
    if isinstance(value, bool) or value is None or isinstance(value, str) or depth > 64:
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return where, repr(value)
        return (where, f"{value:.3g}" if isinstance(value, float) else f"a {len(str(abs(value)))}-digit number") \
            if abs(value) > _MAX_NUMBER else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        found = _bad_number(inner, f"{where}.{key}" if where else str(key), depth + 1)
        if found:
            return found
    return None


def _at(value, parts: list[str], where: str):
    """``(path, value)`` for each value at the dotted path ``parts`` (``*``: every key or entry) in ``value``."""
    if not parts:
        yield where, value
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    else:
        items = [(head, value[head])] if isinstance(value, dict) and head in value else []
    for key, inner in items:
        yield from _at(inner, rest, f"{where}.{key}" if where else str(key))


def _not_cpu_list(value) -> str:
    """What keeps ``value`` from being a CPU list (None is one: not known), '' when it is one."""
    if value is None:
        return ""
    if not isinstance(value, list):
        return f"is {_kind(value)} ({repr(value)[:60]})"
    bad = [c for c in value if isinstance(c, bool) or not isinstance(c, int) or c < 0]
    return f"holds {repr(bad[0])[:60]}, not a CPU id" if bad else ""


def _kind(value) -> str:
    return {dict: "a mapping", list: "a list", str: "text", int: "a number", float: "a number",
            bool: "true/false"}.get(type(value), type(value).__name__)


def missing_facts(facts: dict) -> list[str]:
    """The facts ``invoke facts`` writes that a saved file lacks (the checks reading them read nothing)."""
    from . import ALL_FACTS

    return [f.name for f in ALL_FACTS if f.name not in facts]

