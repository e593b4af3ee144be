"""What every inventory source gives: groups (their variables, child groups, hosts) and hosts (their
variables), each variable with where it was set.  The sources build it, :mod:`bringup.inventory.hosts` merges
it; nothing here reads a file."""
from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Value", "GroupDef", "SourceData", "SourceError", "MAX_HOSTS", "unsafe_name", "check_name",
           "too_many_hosts", "var_name_problem", "var_name_doubt", "var_name", "text_name", "VAR_NAME_KIND",
           "MAX_VAR_NAME"]

#: C0 controls (NUL, newline, ESC, ...), DEL and C1 controls: never in a name that reaches a terminal or a path.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


#: The most hosts an inventory may hold, its host ranges expanded (100 lines of `h[0000:9999]` were a million
#: hosts, over a minute and 2.4 GB); 40,000 hosts load in seconds.
MAX_HOSTS = 200_000


def too_many_hosts(where: str) -> str:
    return (f"{where}: the inventory holds more than {MAX_HOSTS:,} hosts (its host ranges expanded); bringup takes "
            "at most that many: is a range a typo? Split the inventory")


class SourceError(ValueError):
    """A source that cannot be read as an inventory: the message is the whole line (file, line, what, fix).
    ``kind`` says what is wrong in words that quote nothing of the file: all an error about a file that
    ansible-vault encrypted whole may say (:func:`~.yamlfile.sealed_error`)."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


def unsafe_name(name: str) -> str | None:
    """Why ``name`` cannot be a group or host name, or None when it can.

    A name becomes a path (``group_vars/NAME``, ``host_vars/NAME.yml``) and a line on a terminal, so it may
    not be empty, ``.`` or ``..``, hold a ``/``, or hold a control character (NUL, newline, ESC, ...).
    Ansible only warns about most of these (``ansible-inventory`` lists a group ``a/b``); bringup refuses
    them, since ``group_vars/../x`` would read a file outside the inventory's folder.  What Ansible merely
    warns about and is harmless here (``-``, ``web-01``, ``a.b``) is accepted."""
    if not name:
        return "is empty"
    if name in (".", ".."):
        return "is a path step ('.' or '..')"
    if "/" in name:
        return "holds '/'"
    if _CONTROL.search(name):
        return "holds a control character (a newline, NUL, ESC, ...)"
    if not name.strip():
        return "is only spaces"
    if not name.isprintable() and any(unicodedata.category(c) in ("Cf", "Zl", "Zp") for c in name):
        # U+202E turns the text after it around, U+2028 is a line break, U+200B and a BOM are unseen
        return "holds an invisible or line-breaking Unicode character (U+202E, U+2028, U+200B, a BOM, ...)"
    return None


def _ipv6(name: str) -> bool:
    try:
        ipaddress.IPv6Address(name.split("%", 1)[0])
    except ValueError:
        return False
    return True


def secret_like_host(name: str) -> str | None:
    """Why a host ``name`` is a line of some other file rather than a host, told without quoting it, or None.

    Ansible lists a ``.env`` file's ``DB_PASSWORD=hunter2x`` and a ``.pgpass`` line ``db:5432:db:user:pw`` as host
    names; a listing then shows the secret.  A host name never holds ``=``, nor a ``:`` once its ``:PORT`` is read,
    unless it is an IPv6 address."""
    if "=" in name:
        return ("holds '=' (a KEY=value line: a .env or config file, or a variable written where a host goes; in an "
                "INI inventory a host's variables follow its name after a space, a group's go under [group:vars])")
    if ":" in name and not _ipv6(name):
        return ("holds ':' and is no IPv6 address (a line of a colon-separated file such as ~/.pgpass or "
                "/etc/passwd; a host's port is written host:PORT, once)")
    return None


def check_name(name: str, kind: str, at: str) -> None:
    """Raise :class:`SourceError` (one line naming ``at``, the name and the fix) when ``name`` is unsafe.  A host
    name that looks like a line of a secrets file (:func:`secret_like_host`) is refused without being quoted."""
    if kind == "host":
        like = secret_like_host(name)
        if like is not None:
            raise SourceError(f"{at}: a host name (not shown) {like}; check that --inventory names an Ansible "
                              "inventory", "a host name that is a line of some other file")
    why = unsafe_name(name)
    if why is not None:
        shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "..."
        raise SourceError(f"{at}: {kind} name {shown} {why}; rename the {kind} (letters, digits, '-', '_' and '.' "
                          "are safe): a name is also a file name under group_vars/ or host_vars/",
                          f"a {kind} name that {why}")


#: A variable's name as Ansible takes it (``ansible.utils.vars.validate_variable_name``, ansible-core 2.19): an ASCII
#: identifier, not one of Jinja's constants.  Ansible 2.19 accepts another name with a deprecation warning (an error from
#: 2.23), and so does bringup (:func:`var_name_doubt`, one ``warning:`` line): a hyphenated ``my-var`` in an unrelated
#: group_vars file must not reject the inventory.  What is no name at all is refused (:func:`var_name_problem`): a key
#: ``"ansible_user\nbecome_pw"`` showed as a row ``ansible_user`` in ``hosts --host`` while ansible_user was unset, and
#: YAML's ``1``, ``~`` or ``true`` became the names "1", "None", "True".
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JINJA_WORDS = frozenset({"True", "False", "None", "true", "false", "none", "not"})
_NAME_RULE = "a variable's name starts with a letter or '_' and holds only ASCII letters, digits and '_' (Ansible's rule)"
#: The longest variable name taken (Ansible's own are under 40 characters; a longer key is pasted data).
MAX_VAR_NAME = 256
#: What a variable name that is none is, in words that quote nothing: all a file encrypted whole may say of it.
VAR_NAME_KIND = "a variable name that is none"


def _shown(key: Any) -> str:
    if isinstance(key, str):
        return repr(key) if len(key) <= 80 else repr(key[:80]) + "..."
    what = ("null" if key is None else "a boolean" if isinstance(key, bool) else "a number"
            if isinstance(key, (int, float)) else f"a {type(key).__name__}")
    return f"{key!r} ({what}, not text)"


def var_name_problem(key: Any) -> str | None:
    """Why ``key`` can be no variable's name at all (refused), or None: not text, empty, longer than
    :data:`MAX_VAR_NAME`, or holding a space, a control character (newline, NUL, ESC) or another character that is
    not printable (an invisible or line-breaking one).  A printable name that is not Ansible's form is
    :func:`var_name_doubt`'s."""
    if isinstance(key, str) and key and key.isprintable() and not any(c.isspace() for c in key):
        if len(key) <= MAX_VAR_NAME:
            return None
        return (f"{_shown(key)} is not a variable name: it is {len(key):,} characters long (at most {MAX_VAR_NAME}); "
                "rename it")
    return f"{_shown(key)} is not a variable name: {_NAME_RULE}; rename it"


def var_name_doubt(key: str) -> str | None:
    """Why the printable name ``key`` is not Ansible's form (a hyphen, a dot, a leading digit, ``true``), or None: such
    a name is accepted, as ansible-core 2.19 accepts it, with this said once as a warning."""
    if _VAR_NAME.fullmatch(key) and key not in _JINJA_WORDS:
        return None
    return (f"variable name {_shown(key)} is not Ansible's form: {_NAME_RULE}; taken, as ansible-core 2.19 takes it "
            "with a deprecation warning (a later release, 2.23, refuses it): rename it")


def var_name(key: Any, at: str, doubts: list[tuple[str, str]]) -> str:
    """``key`` as a variable's name, else :class:`SourceError` (one line naming ``at`` and the key, its ``kind``
    :data:`VAR_NAME_KIND`); a name that is not Ansible's form is taken and ``(at, key)`` added to ``doubts``."""
    why = var_name_problem(key)
    if why is not None:
        raise SourceError(f"{at}: {why}", VAR_NAME_KIND)
    if var_name_doubt(key) is not None:
        doubts.append((at, key))
    return key


def text_name(key: Any, kind: str, at: str) -> str:
    """``key`` (a host pattern or a group name as YAML or JSON gave it) when it is text, else :class:`SourceError`:
    YAML reads ``~``, ``true``, ``1.5`` as null, a boolean, a number, which became the names "None", "True", "1.5"
    (ansible-inventory refuses them: "Host pattern None must be a string")."""
    if isinstance(key, str):
        return key
    raise SourceError(f"{at}: {kind} name {_shown(key)} must be text; write the name in quotes")


@dataclass(frozen=True)
class Value:
    """A variable's value and where it was set (``file:line`` where the reader knows the line)."""

    value: Any
    origin: str


@dataclass
class GroupDef:
    vars: dict[str, Value] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    #: ``hosts`` as a set, kept beside it by :meth:`SourceData.add_host`: a membership test per host stays
    #: constant time (a group of 40,000 hosts made the list test quadratic).
    host_set: set[str] = field(default_factory=set, repr=False, compare=False)
    #: ``children`` as a set, the same way (a group of 40,000 child groups, as generated inventories have).
    child_set: set[str] = field(default_factory=set, repr=False, compare=False)


@dataclass
class SourceData:
    """One inventory source read: ``path`` is its file (or folder, or script)."""

    path: str
    groups: dict[str, GroupDef] = field(default_factory=dict)
    hosts: dict[str, dict[str, Value]] = field(default_factory=dict)
    #: Variable names taken that are not Ansible's form (``my-var``), as ``(where, name)``: one warning each
    #: (:func:`var_name`).
    doubts: list[tuple[str, str]] = field(default_factory=list)

    def group(self, name: str, at: str | None = None) -> GroupDef:
        """The group ``name`` (declared now if new); an unsafe name is refused naming ``at`` (else the file)."""
        found = self.groups.get(name)
        if found is None:
            check_name(name, "group", at or self.path)
            found = self.groups[name] = GroupDef()
        return found

    def add_host(self, group: str, host: str, variables: dict[str, Value], at: str | None = None) -> None:
        known = self.hosts.get(host)
        if known is None:
            check_name(host, "host", at or self.path)
            if len(self.hosts) >= MAX_HOSTS:
                raise SourceError(too_many_hosts(at or self.path))
            known = self.hosts[host] = {}
        known.update(variables)
        gd = self.group(group, at)
        if host not in gd.host_set:
            gd.host_set.add(host)
            gd.hosts.append(host)

    def add_child(self, parent: str, child: str, at: str | None = None) -> None:
        self.group(child, at)
        gd = self.group(parent, at)
        if child not in gd.child_set:
            gd.child_set.add(child)
            gd.children.append(child)
