"""Ansible YAML inventories: hosts, nested groups and layered variables.

An existing Ansible inventory works unchanged::

    all:
      vars: {ansible_user: root}
      children:
        l40s:
          vars: {gpu_profile: l40s}
          hosts:
            trt-l40s-01: {ansible_host: 10.0.0.11}

Variable precedence, lowest first (the way Invoke layers its config, and the
way Ansible orders group depth): role defaults < ``all`` vars < parent group
< child group < host vars < ``--set`` values.  Values replace, they do not
merge (Ansible's ``hash_behaviour=replace``).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from .errors import InventoryError, InputError
from .process import command
from .secrets import MASK, resolve_refs
from .userfile import read_capped

__all__ = ["Inventory", "Host", "ConnectionVars", "load_inventory", "parse_set"]


class ConnectionVars(BaseModel):
    """The Ansible connection variables bringup honours, validated."""

    model_config = ConfigDict(extra="ignore")

    ansible_host: str | None = None
    ansible_port: int = Field(22, ge=1, le=65535)
    ansible_user: str | None = None
    ansible_ssh_private_key_file: str | None = None
    #: Text, ``{env: NAME}`` or ``{file: PATH}`` (see :mod:`bringup.secrets`); never shown.
    ansible_password: SecretStr | None = None
    ansible_connection: Literal["ssh", "local", "paramiko", "smart"] = "ssh"
    ansible_become: bool = False
    ansible_become_user: str = "root"
    ansible_become_password: SecretStr | None = None
    ssh_known_hosts: str = "~/.ssh/known_hosts"
    ssh_connect_timeout: float = Field(10, gt=0)
    #: Seconds between SSH keepalives on an idle session (0: none).
    ssh_keepalive_interval: int = Field(15, ge=0)
    #: Longest one round trip may take before the host counts as unreachable.
    command_timeout: float = Field(1800, gt=0)

    @field_validator("ansible_become_password", "ansible_password", mode="before")
    @classmethod
    def _one_line(cls, v: Any) -> Any:
        # Only text (or a resolved reference): pydantic's own error would name the value's type and more.
        text = v.get_secret_value() if isinstance(v, SecretStr) else v
        if v is not None and (not isinstance(text, str) or "\n" in text or "\r" in text):
            raise ValueError("must be one line of text")
        return v

    @field_validator("ansible_port", mode="before")
    @classmethod
    def _port_is_int(cls, v: Any) -> Any:
        # YAML gives "2222" for a quoted port; accept digits, refuse the rest.
        if isinstance(v, bool):
            raise ValueError("must be an integer")
        if isinstance(v, str) and v.strip().isdigit():
            return int(v)
        return v


_FIXES = {
    "ansible_port": "an integer 1-65535",
    "ansible_connection": "one of ssh, local",
    "ansible_become": "true or false",
    "ssh_connect_timeout": "a number of seconds > 0",
    "ssh_keepalive_interval": "a whole number of seconds >= 0 (0: no keepalives)",
    "command_timeout": "a number of seconds > 0",
    "ansible_password": "one line of text, {env: NAME} or {file: PATH}",
    "ansible_become_password": "one line of text, {env: NAME} or {file: PATH}",
}

#: Never printed, not even in an error about themselves.
_SECRETS = {"ansible_password", "ansible_become_password"}


@dataclass
class Host:
    """One inventory host: its name, groups (outermost first) and variables."""

    name: str
    groups: list[str]
    vars: dict[str, Any]
    connection: ConnectionVars = field(repr=False)

    @property
    def address(self) -> str:
        return self.connection.ansible_host or self.name


@dataclass
class Inventory:
    """A parsed inventory: hosts by name, and each group's member hosts."""

    path: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]

    def host(self, name: str) -> Host:
        """The host called ``name``; an unknown name suggests the closest."""
        try:
            return self.hosts[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.hosts), n=3, cutoff=0.4)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InventoryError(
                f"{self.path}: unknown host {name!r}{hint} (`{command('hosts')}` lists them)"
            ) from None

    def group(self, name: str) -> list[Host]:
        """The hosts of group ``name``, sorted by name."""
        if name not in self.groups:
            close = difflib.get_close_matches(name, list(self.groups), n=3, cutoff=0.4)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InventoryError(f"{self.path}: unknown group {name!r}{hint}")
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
        """``--limit PATTERN`` (Ansible's pattern syntax or ``@retry-file``, :mod:`bringup.patterns`):
        the hosts it names, among ``within`` (what ``--host``/``--group`` chose) or the whole inventory."""
        from .patterns import expand_limit

        names = set(expand_limit(pattern, list(self.hosts), self.groups))
        pool = within if within is not None else list(self.hosts.values())
        chosen = [h for h in pool if h.name in names]
        if not chosen:
            raise InputError(f"--limit {pattern!r} leaves no host of those selected; nothing to run")
        return chosen


#: Bounds on what an inventory may be: a bigger or deeper one is a mistake (``/dev/zero``, an alias bomb).
MAX_BYTES = 16 * 1024 * 1024
MAX_NODES = 1_000_000  # YAML nodes once every alias is expanded
MAX_GROUP_DEPTH = 64


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate and unhashable keys (a silent override is a trap) and documents
    that would expand past :data:`MAX_NODES` nodes; YAML 1.1 merge keys (``<<: *base``) work."""

    def construct_document(self, node):
        _expanded_size(node)
        return super().construct_document(node)


def _where(mark) -> str:
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


def _expanded_size(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded (shared nodes count each time they are used)."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in busy:
            raise InventoryError(f"{_where(node.start_mark)}: an alias refers to the node that contains it; "
                                 "a recursive structure is not an inventory")
        busy.add(id(node))
        if isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(v) for v in node.value)
        else:
            n = 1
        busy.discard(id(node))
        if n > MAX_NODES:
            raise InventoryError(
                f"{_where(node.start_mark)}: this value expands to more than {MAX_NODES:,} YAML nodes "
                "(aliases within aliases); write it out or use fewer nested aliases")
        sizes[id(node)] = n
        return n

    return size(root)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False):
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base`: its keys are defaults that the mapping's own keys override (YAML 1.1)
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise InventoryError(
                f"{_where(key_node.start_mark)}: a {type(key).__name__} cannot be a key; use a name "
                "(a `? [a, b]` or `? {...}` key is not one)") from None
        if key in seen:
            raise InventoryError(f"{_where(key_node.start_mark)}: duplicate key {key!r}; keep one of them")
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_text(path: Path) -> str:
    """The file's text: at most :data:`MAX_BYTES` bytes, strict UTF-8 (an error names the line)."""
    # Anything but a regular file is refused before it is opened: a pipe's or a terminal's read may never end.
    data = read_capped(path, MAX_BYTES, InventoryError,
                       not_regular=f"{path}: not a regular file (a folder, a pipe, a socket or a device); "
                                   "pass --inventory PATH of the YAML file",
                       missing=f"{path}: no such inventory file (pass --inventory PATH)",
                       unreadable=f"{path}: cannot read inventory: ",
                       too_large=f"{path}: larger than {MAX_BYTES // 2**20} MiB; is it the inventory? "
                                 "(pass --inventory PATH of the YAML file)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InventoryError(f"{path}:{line}:{column}: byte 0x{data[e.start]:02x} (offset {e.start}) is not "
                             "UTF-8; save the file as UTF-8") from None


def load_yaml(path: Path) -> Any:
    """Parse a YAML file; a syntax error names file, line and column."""
    text = _read_text(path)
    loader = _Loader(text)
    loader.name = str(path)  # marks name the file, not "<unicode string>"
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        m = e.problem_mark or e.context_mark
        where = f"{path}:{m.line + 1}:{m.column + 1}" if m else str(path)
        raise InventoryError(f"{where}: YAML error: {e.problem or e.context}; fix the syntax there") from None
    except yaml.YAMLError as e:  # pragma: no cover - unmarked errors are rare
        raise InventoryError(f"{path}: YAML error: {e}") from None
    except RecursionError:
        raise InventoryError(f"{path}: YAML nested too deeply to read; flatten it") from None
    finally:
        loader.dispose()


def _mapping(value: Any, where: str, path: Path) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InventoryError(f"{path}: {where} must be a mapping, got {type(value).__name__}")
    return value


def load_inventory(path: str | Path, overrides: dict[str, Any] | None = None) -> Inventory:
    """Load an Ansible YAML inventory; ``overrides`` are ``--set`` values."""
    path = Path(path)
    data = load_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: the top level must be a mapping of groups (all: ...)")
    # Ansible accepts top-level groups beside or instead of `all`.
    top = dict(data)
    root = _mapping(top.pop("all", None), "all", path)
    root_children = dict(_mapping(root.get("children"), "all.children", path))
    root_children.update(top)
    root = dict(root, children=root_children)

    group_vars: dict[str, dict] = {}
    group_depth: dict[str, int] = {}
    group_hosts: dict[str, set[str]] = {}
    host_vars: dict[str, dict] = {}
    host_groups: dict[str, set[str]] = {}
    parents: dict[str, set[str]] = {}

    def walk(name: str, node: Any, depth: int, parent: str | None, trail: tuple[str, ...]) -> None:
        if name in trail:
            raise InventoryError(f"{path}: group {name!r} contains itself ({' > '.join(trail + (name,))})")
        if depth > MAX_GROUP_DEPTH:
            raise InventoryError(f"{path}: group {name!r} is nested {depth} groups deep (under "
                                 f"{' > '.join(trail[:3])} > ...); at most {MAX_GROUP_DEPTH} levels")
        node = _mapping(node, f"group {name!r}", path)
        unknown = set(node) - {"hosts", "vars", "children"}
        if unknown:
            raise InventoryError(
                f"{path}: group {name!r} has unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                "a group holds only hosts, vars and children"
            )
        group_depth[name] = max(group_depth.get(name, 0), depth)
        group_vars.setdefault(name, {}).update(_mapping(node.get("vars"), f"{name}.vars", path))
        group_hosts.setdefault(name, set())
        if parent:
            parents.setdefault(name, set()).add(parent)
        for hname, hv in _mapping(node.get("hosts"), f"{name}.hosts", path).items():
            hname = str(hname)
            host_vars.setdefault(hname, {}).update(_mapping(hv, f"host {hname!r}", path))
            host_groups.setdefault(hname, set()).add(name)
            group_hosts[name].add(hname)
        for cname, cnode in _mapping(node.get("children"), f"{name}.children", path).items():
            walk(str(cname), cnode, depth + 1, name, trail + (name,))

    walk("all", root, 0, None, ())

    def ancestors(g: str) -> set[str]:
        out: set[str] = set()
        stack = [g]
        while stack:
            for p in parents.get(stack.pop(), ()):
                if p not in out:
                    out.add(p)
                    stack.append(p)
        return out

    # A host in a child group is a member of every ancestor group too.
    for hname, gs in host_groups.items():
        for g in list(gs):
            for a in ancestors(g):
                group_hosts[a].add(hname)
        gs.update(a for g in list(gs) for a in ancestors(g))
        gs.add("all")
        group_hosts["all"].add(hname)

    hosts: dict[str, Host] = {}
    for hname in sorted(host_vars):
        # Shallow groups first, deeper (more specific) ones override; ties by name.
        order = sorted(host_groups[hname], key=lambda g: (group_depth[g], g))
        merged: dict[str, Any] = {}
        for g in order:
            merged.update(group_vars[g])
        merged.update(host_vars[hname])
        merged.update(overrides or {})
        merged["inventory_hostname"] = hname
        merged["group_names"] = [g for g in order if g != "all"]
        # Secret references ({env: X}, {file: P}) become SecretStr here, before anything connects.
        merged = resolve_refs(merged, f"{path}: host {hname!r}")
        for var in _SECRETS:
            if isinstance(merged.get(var), str):
                merged[var] = SecretStr(merged[var])
            MASK.add(merged.get(var))
        try:
            conn = ConnectionVars.model_validate(merged)
        except ValidationError as e:
            err = e.errors()[0]
            var = str(err["loc"][0]) if err["loc"] else "?"
            fix = _FIXES.get(var, "a valid value")
            got = "a value, not shown" if var in _SECRETS else repr(merged.get(var))
            raise InventoryError(
                f"{path}: host {hname!r}: {var} must be {fix} (got {got})"
            ) from None
        hosts[hname] = Host(name=hname, groups=order, vars=merged, connection=conn)

    groups = {g: sorted(hs) for g, hs in group_hosts.items()}
    return Inventory(path=path, hosts=hosts, groups=groups)


def parse_set(items: list[str] | str | None) -> dict[str, Any]:
    """Parse ``--set k=v`` values; each value is read as YAML (``8``, ``true``, ``{a: 1}``)."""
    if not items:
        return {}
    if isinstance(items, str):
        items = [items]
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--set {item!r}: expected KEY=VALUE, e.g. --set sysctl_profile=network-latency")
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise InputError(f"--set {key}: value {raw!r} is not valid YAML ({getattr(e, 'problem', e)})") from None
    return out
