"""Ansible's INI inventory format, read as Ansible's ``ini`` inventory plugin reads it.

    gpu00 ansible_host=10.0.0.9            # before any section: group ``ungrouped``
    [kube-node]
    gpu[01:04] ansible_user=ops gpu_count=8
    gpu09:2222 note="two words"            # host:port sets ansible_port
    [kube-node:vars]
    gpu_profile=l40s
    [k8s-cluster:children]
    kube-node

Host lines are split as a shell would (``shlex``, ``#`` starts a comment); each ``key=value`` value, and
each ``[group:vars]`` value (the text after the first ``=``, not split), is read with Python's
``ast.literal_eval`` where it parses (``8`` is a number, ``True`` a boolean, ``"a b"`` and ``'a b'`` text,
``[1, 2]`` a list), else kept as text (``yes`` stays the text ``yes``).  A ``[group:vars]`` or a child
group that is never declared is an error at the end, naming the line, as in Ansible.
"""
from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any, Collection

from .model import SourceData, SourceError, Value, check_name, var_name
from ...errors import printable
from .ranges import RangeError, expand

__all__ = ["parse_ini", "parse_value", "split_port"]

#: The longest line read (a host line with its variables; a PEM certificate inline is a few KiB).
MAX_LINE = 256 * 1024
_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_GROUPNAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
_BRACKETED_HOSTPORT = re.compile(r"^\[(.+)\]:([0-9]+)$")
#: The words of a shell line that sets variables (``export DB_PASSWORD=x`` of a .env file), never a host's name.
_SHELL_WORDS = frozenset({"export", "readonly", "declare", "typeset", "local"})
#: An environment variable's assignment as a .env writes it (``OPENAI_API_KEY=...``, upper case): a host named
#: ``local`` or ``declare`` with its own lower-case variables (``local rack=r12``) is a host, as Ansible lists it.
_ENV_ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=")
_HOSTPORT = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$")


def parse_value(text: str) -> Any:
    """An INI value as Ansible types it: a Python literal where ``ast.literal_eval`` reads one, else the text.
    A literal holding what no inventory value is (``...``, ``1j``, a tuple or a set as a key) stays text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
        return _plain(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


_KEYS = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    # What Ansible keeps of a literal: tuples and sets as lists, bytes as text.
    if isinstance(value, (tuple, list, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, _KEYS) for k in value):
            raise TypeError("a key that is not a name or a number")
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if not isinstance(value, _KEYS):  # Ellipsis, complex
        raise TypeError(f"a {type(value).__name__}")
    return value


def split_port(pattern: str) -> tuple[str, int | None]:
    """``host:2222`` -> (``host``, 2222); ``[::1]:22`` -> (``::1``, 22); a range's colons are not a port."""
    for rx in (_BRACKETED_HOSTPORT, _HOSTPORT):
        m = rx.match(pattern)
        if m:
            digits = m.group(2).lstrip("0") or "0"
            if len(digits) > 5:  # (int() of 5000 digits is a ValueError; no port has more than 5)
                raise RangeError(f"host {printable(m.group(1)[:64])!r}: a port of {len(m.group(2)):,} digits; "
                                 "a port is 1-65535")
            return m.group(1), int(digits)
    return pattern, None


def parse_ini(text: str, path: str, known: Collection[str] = ()) -> SourceData:
    """The inventory in ``text`` (the file ``path``); a line Ansible would refuse raises :class:`SourceError`.
    ``known``: the groups the sources read before this one declared; a ``[group:children]`` or
    ``[group:vars]`` may name them, as Ansible resolves against everything read so far."""
    data = SourceData(path)
    data.group("all")
    data.group("ungrouped")
    for g in known:
        data.group(g)
    pending: dict[str, dict] = {}
    group, state = "ungrouped", "hosts"
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        at = f"{path}:{lineno}"
        if len(line) > MAX_LINE:
            # shlex splits a line in time that grows with its square (1 MiB: 7 s; 2 MiB: 45 s).
            raise SourceError(f"{at}: a line of {len(line):,} characters (at most {MAX_LINE:,}); no host line is "
                              "that long: put large values in host_vars/ or group_vars/ files",
                              f"a line of more than {MAX_LINE:,} characters")

        def fail(msg: str, kind: str) -> SourceError:
            return SourceError(f"{at}: {msg}", kind)

        m = _SECTION.match(line)
        if m:
            group, state = m.group(1), m.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise fail(f"section [{group}:{state}] has unknown kind {state!r}; "
                           f"write [{group}], [{group}:vars] or [{group}:children]",
                           "a section header of an unknown kind (not [group], [group:vars] or [group:children])")
            if group not in data.groups:
                if state == "vars" and group not in pending:
                    pending[group] = {"line": lineno, "state": state}
                data.group(group, at)
            if group in pending and state != "vars":
                _declare(group, pending, data)
            continue
        if line.startswith("[") and line.endswith("]"):
            raise fail(f"{line!r} is not a section header; write [group], [group:vars] or [group:children] "
                       "with no spaces", "a line in brackets that is not a section header")
        if state == "hosts":
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as e:
                raise fail(f"cannot split host line ({e}); close the quote", "a host line with an open quote") from None
            if not tokens:
                continue
            try:
                pattern, port = split_port(tokens[0])
            except RangeError as e:
                raise fail(str(e), "a host port that cannot be read") from None
            if tokens[0].endswith(":") and port is None:
                raise fail(f"host {tokens[0]!r} ends in ':' with no port; write host:PORT or the host alone",
                           "a host name ending in ':' with no port")
            if pattern == "---":
                raise fail("'---' is not a host: is this YAML with a syntax error?",
                           "'---' is not a host: is this YAML with a syntax error?")
            if tokens[0] in _SHELL_WORDS and len(tokens) > 1 and _ENV_ASSIGNMENT.match(tokens[1]) and not any(
                    t.startswith("ansible_") for t in tokens[1:]):
                # ansible-inventory lists a host "export" with the .env's variables; its values are someone's
                # secrets, shown by `hosts --host export`, and the host would be dialed: refused, never quoted.
                raise fail(f"a shell `{tokens[0]} NAME=value` line (a .env or shell file?), not an inventory host; its "
                           "text is not shown: check that --inventory names an Ansible inventory",
                           "a shell `export NAME=value` line, not an inventory host")
            variables: dict[str, Value] = {}
            if port is not None:
                variables["ansible_port"] = Value(port, at)
            for tok in tokens[1:]:
                key, sep, val = tok.partition("=")
                if not sep or not key:
                    raise fail(f"expected key=value after the host name, got {tok!r}; quote a value that "
                               "holds spaces (key=\"a b\")", "a host variable that is not key=value")
                variables[var_name(key, f"{at}: host {tokens[0]!r}", data.doubts)] = Value(parse_value(val), at)
            try:
                names = expand(pattern)
            except RangeError as e:
                raise fail(str(e), "a host range that cannot be expanded") from None
            for name in names:
                data.add_host(group, name, dict(variables), at)
        elif state == "vars":
            key, sep, val = line.partition("=")
            if not sep or not key.strip():
                raise fail(f"expected key=value in [{group}:vars], got {line!r}",
                           "a line of a [group:vars] section that is not key=value")
            key = var_name(key.strip(), f"{at}: [{group}:vars]", data.doubts)
            data.group(group).vars[key] = Value(parse_value(val.strip()), at)
        else:  # children
            m = _GROUPNAME.match(line)
            if not m:
                raise fail(f"expected a group name in [{group}:children], got {line!r}",
                           "a line of a [group:children] section that is not a group name")
            child = m.group(1)
            check_name(child, "group", at)
            if child not in data.groups:
                pending.setdefault(child, {"line": lineno, "state": "children", "parents": []})
                pending[child].setdefault("parents", []).append(group)
            else:
                data.add_child(group, child)
    for name, decl in pending.items():
        if decl["state"] == "vars":
            raise SourceError(f"{path}:{decl['line']}: [{name}:vars] is for group {name!r}, which is declared "
                              f"nowhere; add [{name}] (its hosts) or [{name}:children]",
                              "a [group:vars] section for a group declared nowhere")
        raise SourceError(f"{path}:{decl['line']}: [{decl['parents'][-1]}:children] names group {name!r}, which "
                          f"is declared nowhere; add [{name}] with its hosts, or remove the line",
                          "a [group:children] section naming a group declared nowhere")
    return data


def _declare(group: str, pending: dict[str, dict], data: SourceData) -> None:
    decl = pending.pop(group)
    for parent in decl.get("parents", ()):
        data.add_child(parent, group)
        if parent in pending and pending[parent]["state"] == "children":
            _declare(parent, pending, data)
