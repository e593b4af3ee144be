"""Ansible's YAML inventory format (``all:`` / ``children:`` / ``hosts:`` / ``vars:``), as a mapping already
loaded (:mod:`.yamlfile`), into :class:`~.model.SourceData`.

Host names may hold ranges (``trt-l40s-0[1:4]``) and a port (``gpu01:2222`` sets ``ansible_port``), as in
Ansible's ``yaml`` plugin.  Stricter than Ansible: a key other than hosts/vars/children in a group, and
a group that contains itself, are refused rather than skipped.
"""
from __future__ import annotations

from typing import Any

from .ini import split_port
from .model import SourceData, SourceError, Value, text_name, var_name
from .yamlfile import KeyLines
from .ranges import RangeError, expand

__all__ = ["MAX_GROUP_DEPTH", "parse_yaml_inventory"]

MAX_GROUP_DEPTH = 64


def _mapping(value: Any, where: str, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SourceError(f"{path}: {where} must be a mapping, got {type(value).__name__}",
                          f"a group, its hosts, a host or vars that is a {type(value).__name__}, not a mapping")
    return value


def parse_yaml_inventory(data: Any, path: str, lines: KeyLines | None = None) -> SourceData:
    """``data`` (the loaded file ``path``) as an inventory; a wrong shape raises :class:`SourceError`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SourceError(f"{path}: the top level must be a mapping of groups (all: ...)",
                          "the top level is not a mapping of groups (all: ...)")
    out = SourceData(path)
    out.group("all")
    # Ansible accepts top-level groups beside or instead of `all`.
    top = dict(data)
    root = _mapping(top.pop("all", None), "all", path)
    lines = lines or KeyLines()

    def at(mapping: dict, key: Any) -> str:
        line = lines.of(mapping).get(key)
        return f"{path}:{line}" if line else path

    def walk(name: str, node: Any, depth: int, trail: tuple[str, ...], where: str) -> None:
        if name in trail:
            raise SourceError(f"{path}: group {name!r} contains itself ({' > '.join(trail + (name,))})",
                              "a group that contains itself")
        if depth > MAX_GROUP_DEPTH:
            raise SourceError(f"{path}: group {name!r} is nested {depth} groups deep (under "
                              f"{' > '.join(trail[:3])} > ...); at most {MAX_GROUP_DEPTH} levels",
                              f"groups nested more than {MAX_GROUP_DEPTH} levels deep")
        node = _mapping(node, f"group {name!r}", path)
        unknown = set(node) - {"hosts", "vars", "children"}
        if unknown:
            raise SourceError(f"{path}: group {name!r} has unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                              "a group holds only hosts, vars and children",
                              "a group with a key other than hosts, vars and children")
        group = out.group(name, where)
        gvars = _mapping(node.get("vars"), f"{name}.vars", path)
        for k, v in gvars.items():
            group.vars[var_name(k, f"{at(gvars, k)}: group {name!r}", out.doubts)] = Value(v, at(gvars, k))
        hosts = _mapping(node.get("hosts"), f"{name}.hosts", path)
        for pattern, hv in hosts.items():
            pattern = text_name(pattern, "host", f"{at(hosts, pattern)}: group {name!r}")
            hv = _mapping(hv, f"host {pattern!r}", path)
            variables = {var_name(k, f"{at(hv, k)}: host {pattern!r}", out.doubts): Value(v, at(hv, k))
                         for k, v in hv.items()}
            try:
                hname, port = split_port(pattern)
                if port is not None:
                    variables = {"ansible_port": Value(port, at(hosts, pattern)), **variables}
                names = expand(hname)
            except RangeError as e:
                raise SourceError(f"{path}: group {name!r}: {e}", "a host range or port that cannot be read") from None
            for h in names:
                out.add_host(name, h, dict(variables), f"{at(hosts, pattern)}: group {name!r}")
        children = _mapping(node.get("children"), f"{name}.children", path)
        for cname, cnode in children.items():
            cat = at(children, cname)
            cname = text_name(cname, "group", f"{cat}: children of group {name!r}")
            out.add_child(name, cname, cat)
            walk(cname, cnode, depth + 1, trail + (name,), cat)

    walk("all", root, 0, (), at(data, "all"))
    for name, node in top.items():  # a top-level group beside `all`: a child of `all` once all are read
        walk(text_name(name, "group", at(data, name)), node, 1, (), at(data, name))
    return out
