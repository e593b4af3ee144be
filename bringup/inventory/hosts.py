"""Ansible inventories: hosts, nested groups and layered variables, merged in Ansible's precedence.

An existing Ansible inventory works unchanged: YAML or INI, with host ranges, ``group_vars/`` and
``host_vars/`` beside it, a folder of inventories, several ``--inventory`` paths, an inventory script or
``ansible-inventory --list`` output.  Each source is read by :mod:`bringup.inventory.sources`; this module
merges what they give (the one place that does) and validates the connection variables::

    all:
      vars: {ansible_user: root}
      children:
        l40s:
          vars: {gpu_profile: l40s}
          hosts:
            trt-l40s-0[1:4]: {ansible_host: 10.0.0.11}

Variable precedence, lowest first (Ansible's, as ``ansible-inventory --list`` shows it): role defaults <
``all``'s inventory vars < other groups' inventory vars (by depth, then ``ansible_group_priority``, then
name) < ``group_vars/all`` < ``group_vars/<group>`` (same order) < the host's inventory vars <
``host_vars/<host>`` < ``--set`` values.  Values replace, they do not merge (Ansible's
``hash_behaviour=replace``).  Each host keeps where each variable came from (:attr:`Host.sources`).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr, ValidationError

from ..errors import InventoryError, InputError, printable, quoted, shown
from .sources import GroupDef, SourceError, Value, base_dir, read_source
from .sources.model import MAX_HOSTS, SourceData, too_many_hosts, var_name_doubt, var_name_problem
from .sources.templating import render
from .sources.varsdirs import load_vars
from .sources.yamlfile import load_yaml_lines
from .sources.yamlinv import MAX_GROUP_DEPTH
from ..process import command
from ..userfile import home
from ..secrets import MASK, Vaulted, credential_value, resolve_refs
from .connvars import ALIAS_NAMES, ALIASES, FIXES, SECRET_VARS, SECRETS, ConnectionVars, become_problem, take_aliases
from .vault import Vault

__all__ = ["Inventory", "Host", "ConnectionVars", "SECRET_VARS", "load_inventory", "parse_set"]


@dataclass
class Host:
    """One inventory host: its name, groups (outermost first) and variables."""

    name: str
    groups: list[str]
    vars: dict[str, Any]
    connection: ConnectionVars = field(repr=False)
    #: The inventory's values as Ansible gives them (``ansible-inventory --host``), before bringup resolves
    #: secret references; and where each was set: ``file[:line] (group G)``, ``file (host H)``, ``--set``.
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    sources: dict[str, str] = field(default_factory=dict, repr=False)
    #: Variables whose ``{{ ... }}`` bringup does not render, with why (:mod:`bringup.inventory.sources.templating`):
    #: refused where bringup uses them (:func:`refuse_unrendered`).
    unrendered: dict[str, str] = field(default_factory=dict, repr=False)
    #: Why the host's become is not one bringup does (:func:`~.connvars.become_problem`), as one line naming where it
    #: was set, or None: refused where bringup connects to this host (:meth:`refuse_become`), never for the others
    #: of an inventory shared with Ansible, whose hosts may become through su or doas.
    become_refused: str | None = field(default=None, repr=False)

    def refuse_become(self) -> None:
        """One line, :class:`InventoryError`, when bringup cannot become as the host's variables ask."""
        if self.become_refused:
            raise InventoryError(self.become_refused)

    def refuse_unrendered(self, names) -> None:
        """One line, :class:`InventoryError`, when a variable of ``names`` (those a caller uses) holds a template
        bringup does not render."""
        for var in sorted(set(names) & self.unrendered.keys()):
            raise InventoryError(unrendered_line(self.name, var, self.raw.get(var), self.sources.get(var, "?"),
                                                 self.unrendered[var]))

    @property
    def address(self) -> str:
        return self.connection.ansible_host or self.name


def unrendered_line(host: str, var: str, value: Any, source: str, why: str) -> str:
    shown = "a value, not shown" if var in SECRET_VARS else repr(value)[:100]
    return (f"{source}: host {host!r}: {var} = {shown}: {why}; bringup renders only plain {{{{ name }}}} "
            "references: write the value itself there, or set it with --set")


@dataclass
class Inventory:
    """A parsed inventory: hosts by name, and each group's member hosts."""

    path: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]
    #: Every source given (``--inventory`` more than once), ``path`` being the first.
    paths: list[Path] = field(default_factory=list)
    #: What was taken with a doubt, one line each (no ``warning:`` prefix): a variable name that is not Ansible's
    #: form (``my-var``), as ansible-core 2.19 takes it with a deprecation warning.  The tasks print them on stderr.
    warnings: list[str] = field(default_factory=list)
    #: Each group's own hosts and children as read, in order: what :meth:`ordered` walks.
    defs: dict[str, GroupDef] = field(default_factory=dict, repr=False)
    #: The host names in the order the sources gave them (``hosts`` is sorted by name).
    read_order: list[str] = field(default_factory=list, repr=False)

    def ordered(self, name: str) -> list[str]:
        """Group ``name``'s hosts in Ansible's order (``Group.get_hosts``), which ``--limit 'g[0:2]'`` counts in: its
        own hosts as read, then its children's, a generation at a time (each generation's groups in the order
        written: Ansible's own order past the first is a set's), each host once."""
        out: list[str] = []
        seen_hosts: set[str] = set()
        level, seen_groups = [name], {name}
        while level:
            for g in level:
                for h in self._own_hosts(g):
                    if h not in seen_hosts and h in self.hosts:
                        seen_hosts.add(h)
                        out.append(h)
            nxt = []
            for g in level:
                children = list(self.defs[g].children) if g in self.defs else []
                if g == "all" and "ungrouped" in children:  # Ansible makes it all's first child, as written or not
                    children.remove("ungrouped")
                    children.insert(0, "ungrouped")
                for c in children:
                    if c not in seen_groups:
                        seen_groups.add(c)
                        nxt.append(c)
            level = nxt
        return out

    def _own_hosts(self, g: str) -> list[str]:
        """Group ``g``'s own hosts in Ansible's order; ``ungrouped`` as Ansible's reconcile leaves it: those read
        into it that no other group took, then each host of no group (``all: hosts:``'s), in the order read."""
        own = self.defs[g].hosts if g in self.defs else []
        if g != "ungrouped":
            return own
        members = set(self.groups.get("ungrouped", ()))
        first = [h for h in own if h in members]
        rest = members.difference(first)
        return first + [h for h in self.read_order if h in rest]

    def host(self, name: str) -> Host:
        """The host called ``name``; an unknown name suggests the closest."""
        try:
            return self.hosts[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.hosts), n=3, cutoff=0.4)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InventoryError(
                f"{self.path}: unknown host '{shown(name)}'{hint} (`{command('hosts')}` lists them)"
            ) from None

    def group(self, name: str) -> list[Host]:
        """The hosts of group ``name``, sorted by name."""
        if name not in self.groups:
            close = difflib.get_close_matches(name, list(self.groups), n=3, cutoff=0.4)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InventoryError(f"{self.path}: unknown group '{shown(name)}'{hint}")
        return [self.hosts[h] for h in sorted(self.groups[name])]

    def select(self, host: str | None = None, hosts: str | None = None,
               group: str | None = None) -> list[Host]:
        """Hosts chosen by ``--host``, ``--hosts a,b`` and ``--group G`` (united)."""
        names: list[str] = []
        if host:
            names.append(host)
        if hosts:
            names.extend(h.strip() for h in hosts.split(",") if h.strip())
        chosen = [self.host(n) for n in names]
        if group:
            chosen.extend(self.group(group))
        if not chosen:
            raise InputError("no host selected: give --host NAME, --hosts a,b or --group G")
        seen: dict[str, Host] = {}
        for h in chosen:
            seen.setdefault(h.name, h)
        return list(seen.values())

    def limit(self, pattern: str, within: list[Host] | None = None) -> list[Host]:
        """``--limit PATTERN`` (Ansible's pattern syntax or ``@retry-file``, :mod:`bringup.inventory.patterns`):
        the hosts it names, among ``within`` (what ``--host``/``--group`` chose) or the whole inventory."""
        from .patterns import expand_limit

        names = set(expand_limit(pattern, list(self.hosts), self.groups, self.ordered))
        pool = within if within is not None else list(self.hosts.values())
        chosen = [h for h in pool if h.name in names]
        if not chosen:
            raise InputError(f"--limit '{shown(pattern)}' leaves no host of those selected; nothing to run")
        return chosen


def _paths(path: str | Path | list | tuple) -> list[Path]:
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    if not paths:
        raise InventoryError("no inventory given: pass --inventory PATH (a file or a folder; repeatable)")
    # ~ and ~user as Ansible expands them (-i '~/hosts' quoted, a path in a script); an unknown user's stays as written.
    return [Path(home(str(p))) for p in paths]


def _depths(groups: dict[str, GroupDef], where: str) -> dict[str, int]:
    """Each group's depth as Ansible counts it: the longest path of children from ``all`` (``all`` is 0)."""
    parents: dict[str, list[str]] = {g: [] for g in groups}
    for g, gd in groups.items():
        for c in gd.children:
            parents.setdefault(c, []).append(g)
    depth: dict[str, int] = {}

    def of(g: str, trail: tuple[str, ...]) -> int:
        if g in depth:
            return depth[g]
        if g in trail:
            raise InventoryError(f"{where}: group {g!r} contains itself ({' > '.join(trail[trail.index(g):] + (g,))}); "
                                 "remove one of those children lines")
        if len(trail) > MAX_GROUP_DEPTH:
            raise InventoryError(f"{where}: group {g!r} is nested more than {MAX_GROUP_DEPTH} groups deep; "
                                 f"at most {MAX_GROUP_DEPTH} levels")
        d = 0 if g == "all" else 1 + max((of(p, trail + (g,)) for p in parents[g]), default=0)
        depth[g] = d
        return d

    for g in groups:
        of(g, ())
    return depth


def _priority(gd: GroupDef, name: str, where: str) -> int:
    v = gd.vars.get("ansible_group_priority")
    if v is None:
        return 1
    try:
        return int(v.value)
    except (TypeError, ValueError):
        raise InventoryError(f"{v.origin}: group {name!r}: ansible_group_priority must be a whole number "
                             f"(got {v.value!r})") from None


def load_inventory(path: str | Path | list, overrides: dict[str, Any] | None = None,
                   vault: Vault | None = None) -> Inventory:
    """Load Ansible inventories (files or folders, several in order); ``overrides`` are ``--set`` values;
    ``vault`` holds the passwords of what ansible-vault encrypted (:mod:`bringup.inventory.vault`).

    Each source is read by :mod:`bringup.inventory.sources`; here they are merged, with ``group_vars/``
    and ``host_vars/`` beside each one, in Ansible's precedence (lowest first): ``all``'s inventory vars <
    other groups' inventory vars < ``group_vars/all`` < ``group_vars/<group>`` < the host's inventory vars
    < ``host_vars/<host>`` < ``--set``; groups in Ansible's order (depth, ``ansible_group_priority``, name).
    """
    paths = _paths(path)
    where = ", ".join(map(str, paths))
    groups: dict[str, GroupDef] = {"all": GroupDef(), "ungrouped": GroupDef()}
    host_vars: dict[str, dict[str, Value]] = {}
    known: set[str] = set()  # the groups read so far: a later INI [g:children] may name them (Ansible's rule)
    doubts: list[tuple[str, str]] = []  # variable names not Ansible's form, where each was met: one warning a name
    hollow: list[str] = []  # the sources that gave nothing but empty groups (/etc/shadow read as YAML): named once
    listings: dict = {}  # group_vars/, host_vars/ listed once for this load; the bytes it read, folders' files too
    for p in paths:
        for src in read_source(p, vault, known, listings):
            doubts.extend(src.doubts)
            if not src.hosts and not any(gd.vars or gd.children for gd in src.groups.values()):
                hollow.append(_hollow(src))
            for g, gd in src.groups.items():
                mine = groups.setdefault(g, GroupDef())
                mine.vars.update(gd.vars)
                for c in gd.children:
                    if c not in mine.child_set:
                        mine.child_set.add(c)
                        mine.children.append(c)
                for h in gd.hosts:  # a set beside the list: linear in the hosts, not quadratic
                    if h not in mine.host_set:
                        mine.host_set.add(h)
                        mine.hosts.append(h)
            for h, hv in src.hosts.items():
                host_vars.setdefault(h, {}).update(hv)
            if len(host_vars) > MAX_HOSTS:  # each source holds at most MAX_HOSTS; several together too
                raise InventoryError(too_many_hosts(src.path))
    for gd in groups.values():
        for c in gd.children:
            groups.setdefault(c, GroupDef())
    # Every group without a parent is a child of all (Ansible's reconcile).
    has_parent = {c for gd in groups.values() for c in gd.children}
    for g in groups:
        if g != "all" and g not in has_parent and g not in groups["all"].child_set:
            groups["all"].child_set.add(g)
            groups["all"].children.append(g)
    depth = _depths(groups, where)
    parents: dict[str, set[str]] = {g: set() for g in groups}
    for g, gd in groups.items():
        for c in gd.children:
            parents[c].add(g)

    known_ancestors: dict[str, set[str]] = {}

    def ancestors(g: str) -> set[str]:
        if g in known_ancestors:
            return known_ancestors[g]
        out: set[str] = set()
        known_ancestors[g] = out
        stack = [g]
        while stack:
            for par in parents.get(stack.pop(), ()):
                if par not in out:
                    out.add(par)
                    stack.append(par)
        return out

    host_groups: dict[str, set[str]] = {h: set() for h in host_vars}
    for g, gd in groups.items():
        for h in gd.hosts:
            host_groups[h].add(g)
    for h, gs in host_groups.items():
        gs.update(a for g in list(gs) for a in ancestors(g))
        gs.add("all")
        if gs - {"all", "ungrouped"}:
            gs.discard("ungrouped")
        else:
            gs.add("ungrouped")
    members: dict[str, set[str]] = {g: set() for g in groups}
    for h, gs in host_groups.items():
        for g in gs:
            members[g].add(h)

    priority = {g: _priority(gd, g, where) for g, gd in groups.items()}
    dirs = list(dict.fromkeys(base_dir(p) for p in paths))
    files_cache: dict[tuple[str, str, str], list[dict[str, Value]]] = {}

    def from_dirs(kind: str, name: str) -> list[dict[str, Value]]:
        out = []
        for d in dirs:
            key = (str(d), kind, name)
            if key not in files_cache:
                try:
                    files_cache[key] = load_vars(
                        d / kind, name, lambda f, inside: load_yaml_lines(f, vault=vault, inside=inside), listings,
                        doubts)
                except SourceError as e:
                    raise InventoryError(str(e)) from None
            out.extend(files_cache[key])
        return out

    hosts: dict[str, Host] = {}
    for hname in sorted(host_vars):
        order = sorted(host_groups[hname], key=lambda g: (depth[g], priority[g], g))
        others = [g for g in order if g != "all"]
        layers: list[tuple[dict[str, Value], str]] = [(groups["all"].vars, "group all")]
        layers += [(groups[g].vars, f"group {g}") for g in others]
        # ansible_group_priority orders the groups; Ansible keeps it out of the variables.
        layers = [({k: v for k, v in m.items() if k != "ansible_group_priority"}, who) for m, who in layers]
        layers += [(m, "group all") for m in from_dirs("group_vars", "all")]
        for g in others:
            layers += [(m, f"group {g}") for m in from_dirs("group_vars", g)]
        layers.append((host_vars[hname], f"host {hname}"))
        layers += [(m, f"host {hname}") for m in from_dirs("host_vars", hname)]
        layers.append(({k: Value(v, "--set") for k, v in (overrides or {}).items()}, "--set"))
        raw: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for layer, who in layers:
            for k, v in layer.items():
                raw[k] = v.value
                sources[k] = v.origin if who == "--set" else f"{v.origin} ({who})"
        merged = dict(raw)
        merged["inventory_hostname"] = hname
        merged["group_names"] = others
        # Plain {{ name }} references are rendered; any other template is named where bringup uses it.
        merged, unrendered = render(merged)
        for var in sorted(unrendered.keys() & (ConnectionVars.model_fields.keys() | ALIAS_NAMES)):
            raise InventoryError(unrendered_line(hname, var, raw[var], sources.get(var, where), unrendered[var]))
        taken = take_aliases(merged)
        merged = _host_vars(merged, hname, where)
        conn, become_refused = _connection(merged, hname, where, taken, sources)
        hosts[hname] = Host(name=hname, groups=order, vars=merged, connection=conn, raw=raw, sources=sources,
                            unrendered=unrendered, become_refused=become_refused)

    doubts += [("--set", k) for k in (overrides or {}) if var_name_doubt(k)]
    warnings = _doubted(doubts)
    if not hosts:
        warnings += hollow or [f"{where}: no host in the inventory; check that --inventory names an Ansible "
                                "inventory (YAML, INI, a script or a folder of them) with hosts in it"]
    return Inventory(path=paths[0], hosts=hosts, groups={g: sorted(hs) for g, hs in members.items()}, paths=paths,
                     defs=groups, read_order=list(host_vars), warnings=warnings)


def _hollow(src: SourceData) -> str:
    """One line for a source that gave no host, variable or child group (Ansible: "Unable to parse ... as an
    inventory source", "provided hosts list is empty"): its path and how it read, none of its text (a file such as
    /etc/shadow reads as YAML whose group names are its lines)."""
    n = len(src.groups.keys() - {"all", "ungrouped"})
    got = f"only {n:,} empty group name{'s' if n != 1 else ''}" if n else "nothing"
    return (f"{src.path}: no host found in it (it read as {got}); check that --inventory names an Ansible inventory "
            "(YAML, INI, a script or a folder of them)")


def _doubted(doubts: list[tuple[str, str]]) -> list[str]:
    """One line per variable name of ``doubts`` (``(where, name)``), at its first place, with how many more."""
    first: dict[str, tuple[str, int]] = {}
    for at, name in doubts:
        where, n = first.get(name, (at, 0))
        first[name] = (where, n + 1)
    return [f"{where}: {var_name_doubt(name)}" + (f" (and {n - 1:,} more place{'s' if n > 2 else ''})" if n > 1 else "")
            for name, (where, n) in first.items()]


#: Variables ssh reads as plain text (an address, a port, a user, a path, ssh's own arguments): a secret reference
#: there becomes what a ``!vault`` value is, a :class:`Vaulted` (text everywhere it is used, ``********`` wherever
#: it is rendered, its text in the run's masker), not a :class:`SecretStr` that only a password variable takes.
SECRET_TEXT_VARS = frozenset(ConnectionVars.model_fields.keys() - SECRETS) | {
    "ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args", "ssh_config"}


def _host_vars(merged: dict[str, Any], hname: str, where: str) -> dict[str, Any]:
    # Secret references ({env: X}, {file: P}) become SecretStr here, before anything connects.
    merged = resolve_refs(merged, f"{where}: host {hname!r}")
    for var in SECRET_TEXT_VARS & merged.keys():
        if isinstance(merged[var], SecretStr):
            merged[var] = Vaulted(merged[var].get_secret_value())
    for var in SECRETS:
        value = merged.get(var)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # YAML's 12345 (or INI's): Ansible logs in with the text "12345"; true/yes stays refused (quote it).
            value = str(value)
        if isinstance(value, str):
            merged[var] = SecretStr(value)
        # (resolve_refs masked its text, under this name or the alias it came from: a plain word such as "root" as
        # a value standing alone, never inside /root/data.)
    return merged


def _connection(merged: dict[str, Any], hname: str, where: str, taken: dict[str, str] | None = None,
                sources: dict[str, str] | None = None) -> tuple[ConnectionVars, str | None]:
    """The host's connection variables, and why its become is not one bringup does (None when it is); ``taken``:
    the variables set under another of Ansible's names (:func:`take_aliases`): named as written; ``sources``: where
    each variable was set (``file:line (host h1)``, ``--set``): a refusal names that place."""
    def place(name: str) -> str:
        # `--set ansible_port=1e308` was told as an error of the inventory's file, a file that does not hold it.
        src = (sources or {}).get(name, where)
        return src.rsplit(" (", 1)[0] if src.endswith(")") else src

    try:
        conn = ConnectionVars.model_validate(merged)
    except ValidationError as e:
        err = e.errors()[0]
        var = str(err["loc"][0]) if err["loc"] else "?"
        fix = FIXES.get(var, "a valid value")
        value = merged.get(var)
        got = "a value, not shown" if var in SECRETS or isinstance(value, SecretStr) else repr(value)
        said = str(err.get("msg", "")).removeprefix("Value error, ")
        name = (taken or {}).get(var, var)
        where = place(name)
        if var == "ansible_host" and said.startswith("a number"):  # its own reason: what the resolver would do
            raise InventoryError(f"{where}: host {hname!r}: {name} {got} is {said}") from None
        raise InventoryError(f"{where}: host {hname!r}: {name} must be {fix} (got {got})") from None
    problem = become_problem(conn, merged, taken)
    return conn, (f"{place(problem.split(' ', 1)[0])}: host {hname!r}: {problem}" if problem else None)  # (it starts so)


def parse_set(items: list[str] | str | None) -> dict[str, Any]:
    """Parse ``--set k=v`` values; each value is read as YAML (``8``, ``true``, ``{a: 1}``), by the loader and
    within the limits of an inventory's YAML (depth, aliases, digits, keys)."""
    if not items:
        return {}
    if isinstance(items, str):
        items = [items]
    out: dict[str, Any] = {}
    for n, item in enumerate(items, 1):
        key, sep, raw = item.partition("=")
        key = key.strip()
        # An item that gives a credential a value ('db_password hunter2x') is told by its place, never quoted.
        shown = f"#{n} (it names a credential, so it is not shown)" if credential_value(item) else None
        if not sep or not key:
            raise InputError(f"--set {shown or quoted(printable(item))}: expected KEY=VALUE, e.g. "
                             "--set sysctl_profile=network-latency")
        if var_name_problem(key):  # "a\nb" showed as a row "a" in `hosts --host`
            raise InputError(f"--set {shown}: the part before '=' is no variable name; write it as NAME=VALUE"
                             if shown else f"--set: {var_name_problem(key)}")
        bad = _NOT_YAML.search(raw)
        if bad:
            raise InputError(f"--set {printable(key)}: the value holds the control character "
                             f"U+{ord(bad.group()):04X} (at {bad.start() + 1}), which YAML does not allow; "
                             "write the value without it")
        if not raw.strip():
            out[key] = ""
            continue
        try:
            out[key] = load_yaml_lines(Path(f"--set {printable(key)}"), raw)[0]
        except InventoryError as e:
            raise InputError(str(e)) from None
    return out


#: What the YAML reader refuses (its NON_PRINTABLE): said here in one line, before the reader's two-line error.
_NOT_YAML = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]")
