"""What every inventory source gives: groups (their variables, child groups, hosts) and hosts (their
variables), each variable with where it was set.  The sources build it, :mod:`bringup.inventory` merges
it; nothing here reads a file."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Value", "GroupDef", "SourceData", "SourceError"]


class SourceError(ValueError):
    """A source that cannot be read as an inventory: the message is the whole line (file, line, what, fix)."""


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


@dataclass
class SourceData:
    """One inventory source read: ``path`` is its file (or folder, or script)."""

    path: str
    groups: dict[str, GroupDef] = field(default_factory=dict)
    hosts: dict[str, dict[str, Value]] = field(default_factory=dict)

    def group(self, name: str) -> GroupDef:
        return self.groups.setdefault(name, GroupDef())

    def add_host(self, group: str, host: str, variables: dict[str, Value]) -> None:
        self.hosts.setdefault(host, {}).update(variables)
        members = self.group(group).hosts
        if host not in members:
            members.append(host)

    def add_child(self, parent: str, child: str) -> None:
        self.group(child)
        kids = self.group(parent).children
        if child not in kids:
            kids.append(child)
