"""The ``bringup://`` backend of pytest-testinfra: a host of bringup's inventory, reached as bringup reaches it.

    pytest --hosts='bringup://trt-l40s-01' site_tests/
    pytest --hosts='bringup://l40s:&rack2:!trt-l40s-03' --bringup-inventory=ops/hosts site_tests/

What follows ``bringup://`` is a host of the inventory or an Ansible host pattern, as ``--limit`` takes it
(:mod:`bringup.inventory.patterns`; testinfra splits ``--hosts`` on commas, so unite with ``:``).  The inventory is
``--bringup-inventory`` (the plugin), else ``$BRINGUP_INVENTORY``, else ``./hosts``; ``--bringup-set KEY=VALUE``
overrides variables as ``--set`` does.

Every command goes through bringup's own transport (:func:`bringup.ssh.connection.connect`): one connection per
host, kept for the session (TCP_NODELAY), the inventory's ``ansible_host``/``ansible_port``/``ansible_user``/
``ansible_ssh_private_key_file``, host keys checked against ``ssh_known_hosts`` (an unknown or changed key is
refused, in bringup's words), ``ansible_become`` through sudo as bringup does it (``ansible_become_password``
answers sudo's own prompt only, never a NOPASSWD sudo's command), ``ansible_connection: local``, and
``command_timeout`` (a silent host is cut off, never waited on).  testinfra's ``--sudo`` and ``host.sudo(user)``
become that user the same way.  A host that could not be reached stays unreachable for the session: every later
command fails at once with the same line.

``host.backend.vars`` is the host's variables as bringup merges them (every role's defaults < the inventory <
``--bringup-set``), validated by every role; the plugin's ``bringup_vars`` fixture returns them.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import secrets
import threading
import time
import urllib.parse
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from testinfra.backend import base

from ..ssh.command import sh
from ..errors import BringupError, InputError, Unreachable
from . import SCHEME, register

if TYPE_CHECKING:
    from ..ssh.connection import Transport
    from ..inventory.hosts import Host, Inventory
    from ..engine.roles import Role

__all__ = ["BringupBackend", "SETTINGS", "Settings", "INVENTORY_ENV", "inventory", "expand", "every_role",
           "merged_vars", "host_spec", "close_all"]

#: The environment variable naming the inventory when ``--bringup-inventory`` is not given.
INVENTORY_ENV = "BRINGUP_INVENTORY"
#: How testinfra's sudo wrapping marks the user (a NUL: never part of a shell command).
_SUDO = "\0bringup-sudo:"
#: Ends the process group of each ``timeout`` whose command line holds the mark (``%s``) as :meth:`run` puts it,
#: ``: MARK;`` (not as this script spells it: it runs under a ``timeout`` of its own): the host's bound of one
#: command (:meth:`bringup.ssh.connection.Transport._bounded`) leads the group of all that command started.
END_MARKED = ("m=%s; for p in /proc/[0-9]*; do [ \"$(cat \"$p/comm\" 2>/dev/null)\" = timeout ] || continue; "
              "case \"$(tr '\\000' ' ' < \"$p/cmdline\" 2>/dev/null)\" in *\": $m;\"*) g=\"${p#/proc/}\"; "
              "kill -TERM \"-$g\" 2>/dev/null; sleep 1; kill -KILL \"-$g\" 2>/dev/null;; esac; done; true")


@dataclasses.dataclass
class Settings:
    """What the plugin's options set for the process: the inventory and the ``--set`` overrides."""

    inventory: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    accept_new_host_keys: bool = False
    #: The vault passwords: (password files, ``label@file`` ids), as ``--vault-password-file``/``--vault-id``.
    vault: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    #: Whether the inventory's ``ansible_become`` applies (``--bringup-become no``: the tests run as the login
    #: user; a test's own ``host.sudo()`` still becomes, as it asks).
    become: bool = True
    #: ``(seconds, monotonic end)`` of ``--bringup-deadline``: no command runs on a host past the end.
    deadline: tuple[float, float] | None = None

    def left(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline[1] - time.monotonic()

    def paths(self) -> list[Path]:
        """The inventories, in the order given (``--bringup-inventory``, once or more)."""
        return [Path(p) for p in self.inventory] or [Path(os.environ.get(INVENTORY_ENV) or "hosts")]


SETTINGS = Settings()
_lock = threading.Lock()
_inventories: dict[tuple, Inventory] = {}
_roles: dict[Path, list[Role]] = {}
#: Every backend made in this process, to close their connections at the session's end.
_made: weakref.WeakSet = weakref.WeakSet()


def inventory() -> Inventory:
    """The inventory the settings name, with their overrides; read once per process."""
    from ..inventory.hosts import load_inventory, parse_set
    from ..inventory.vault import vault_from_options

    paths = SETTINGS.paths()
    key = (tuple(p.resolve() for p in paths), SETTINGS.overrides, SETTINGS.vault)
    with _lock:
        if key not in _inventories:
            _inventories[key] = load_inventory([str(p) for p in paths], overrides=parse_set(list(SETTINGS.overrides)),
                                               vault=vault_from_options(*SETTINGS.vault))
        return _inventories[key]


def expand(pattern: str) -> list[str]:
    """The inventory's hosts that ``pattern`` names: a host's own name, an Ansible pattern or ``@retry-file``."""
    from ..inventory.patterns import expand_limit, match_pattern

    inv = inventory()
    if pattern in inv.hosts:
        return [pattern]
    if pattern.startswith("@"):
        return expand_limit(pattern, list(inv.hosts), inv.groups, inv.ordered)
    return match_pattern(pattern, list(inv.hosts), inv.groups, where=f"--hosts {SCHEME}://{pattern}",
                         ordered=inv.ordered)


def host_spec(name: str) -> str:
    """``bringup://NAME`` with the name quoted, so that testinfra's URL parsing gives it back whole."""
    return f"{SCHEME}://{urllib.parse.quote(name, safe='')}"


def every_role() -> list[Role]:
    """Every role of the project (``content_root()``, the shipped roles otherwise), in their order; loaded once."""
    from ..project import content_root
    from ..engine.roles import load_roles

    root = content_root()
    with _lock:
        if root not in _roles:
            order, roles = load_roles(root)
            _roles[root] = [roles[r] for r in order]
        return _roles[root]


def merged_vars(host: Host) -> dict[str, Any]:
    """``host``'s variables as a run merges them (role defaults < inventory < overrides), every role's check passed."""
    from ..engine.runner import prepare

    return prepare([host], every_role())[host.name]


class BringupBackend(base.BaseBackend):
    """A host of bringup's inventory; see the module."""

    NAME = SCHEME

    def __init__(self, hostspec: str, *args: Any, **kwargs: Any):
        self.name = urllib.parse.unquote(hostspec)
        super().__init__(self.name, *args, **kwargs)
        self._encoding = "utf-8"  # what bringup's transport decodes with (undecodable bytes kept as surrogates)
        self._transport: Transport | None = None
        self._unreachable: Unreachable | None = None
        self._vars: dict[str, Any] | None = None
        self._open_lock = threading.Lock()
        _made.add(self)

    @classmethod
    def get_hosts(cls, host: str, **kwargs: Any) -> list[str]:
        if not host:
            raise InputError(f"{SCHEME}:// needs a host or a pattern of the inventory: {SCHEME}://trt-l40s-01, "
                             f"{SCHEME}://l40s:&rack2")
        return [urllib.parse.quote(n, safe="") for n in expand(urllib.parse.unquote(host))]

    @property
    def inventory_host(self) -> Host:
        """The host as the inventory defines it (name, groups, inventory variables, connection variables);
        without its become under ``--bringup-become no``."""
        h = inventory().host(self.name)
        if not SETTINGS.become and h.connection.ansible_become:
            h = dataclasses.replace(h, connection=h.connection.model_copy(update={"ansible_become": False}))
        return h

    @property
    def vars(self) -> dict[str, Any]:
        """The host's merged variables: every role's defaults < the inventory < ``--bringup-set``."""
        if self._vars is None:
            self._vars = merged_vars(self.inventory_host)
        return self._vars

    def transport(self) -> Transport:
        """The host's one connection, opened on first use; an unreachable host raises the same line each time."""
        from ..ssh.connection import connect

        with self._open_lock:
            if self._unreachable is not None:
                raise self._unreachable
            if self._transport is None:
                try:
                    self._transport = connect(self.inventory_host, SETTINGS.accept_new_host_keys)
                except Unreachable as e:
                    self._unreachable = e
                    raise
            return self._transport

    @staticmethod
    def quote(command: str, *args: str) -> str:
        """testinfra's ``host.run("ls %s", path)``: each argument quoted by bringup (:func:`bringup.ssh.command.sh`)."""
        return sh(command, *args) if args else command

    def get_sudo_command(self, command: str, sudo_user: str | None) -> str:
        # testinfra wraps a command in sudo here (``--sudo``, ``with host.sudo(user)``, nested): bringup's
        # become does it instead, so the wrapping only marks the user, and run() takes the innermost.
        return f"{_SUDO}{sudo_user or 'root'}\0{command}"

    def command(self, command: str, *args: str) -> tuple[str, str | None]:
        """The script for ``host.run(command, *args)`` and the user testinfra's sudo asks for (None: no sudo)."""
        script, user = self.get_command(command, *args), None
        while script.startswith(_SUDO):
            user, _, script = script[len(_SUDO):].partition("\0")
        return script, user

    def becoming(self, t: Transport, user: str | None) -> Transport:
        """``t``, or a view of it that becomes ``user`` as bringup's ``ansible_become`` does: the same
        connection, sudo wrapped around each script, the inventory's become password answering sudo's prompt."""
        c = t.host.connection
        if user is None or (c.ansible_become and c.ansible_become_user == user):
            return t
        view = copy.copy(t)
        view.host = dataclasses.replace(t.host, connection=c.model_copy(
            update={"ansible_become": True, "ansible_become_user": user}))
        return view

    @contextlib.contextmanager
    def bounded(self, t: Transport, what: str) -> Iterator[None]:
        """Round trips of ``t`` inside end by ``--bringup-deadline`` (each limited to what is left of it, so the
        host's own timeout ends them there too); past it, ``what`` is not run.  Nothing without a deadline."""
        left = SETTINGS.left()
        if left is None:
            yield
            return
        bound = SETTINGS.deadline[0]  # type: ignore[index]
        if left <= 0:
            raise BringupError(f"not run, the session's bound of {bound:g} s (--bringup-deadline) "
                               f"has passed: {what}")
        try:
            with t.limited(left):
                yield
        except Unreachable:
            if (SETTINGS.left() or 0) <= 1:
                raise BringupError(f"ended at the session's bound of {bound:g} s "
                                   f"(--bringup-deadline): {what}") from None
            raise

    def run(self, command: str, *args: str, **kwargs: Any) -> base.CommandResult:
        script, user = self.command(command, *args)
        t = self.becoming(self.transport(), user)
        # A mark of this command on the host (its process's command line), to end it there when the test is
        # interrupted: the host's own timeout would let it run on to command_timeout.
        mark = f"bringup-testinfra-{secrets.token_hex(6)}"
        try:
            with self.bounded(t, script):
                res = t.run_command(f": {mark}; {script}")  # one-liners: no script on stdin
        except Unreachable as e:
            with self._open_lock:
                self._unreachable = e
            raise
        except KeyboardInterrupt:
            self.end_remote(t, mark)
            raise
        return self.result(res.rc, self.encode(script), res.stdout, res.stderr)

    def end_remote(self, t: Transport, mark: str) -> None:
        """End, on the host, the command marked ``mark`` that an interrupted test left running there: the process
        group of its ``timeout`` (TERM, then KILL a second later).  Best effort, within a few seconds: a host
        that does not answer ends it at its own timeout.  On a local host the transport ends what it waited for;
        what it had not yet got hold of (the interrupt came while it was starting it) is ended here."""
        from ..ssh.connection import LocalTransport

        if isinstance(t, LocalTransport):
            _end_local(mark)
            return
        try:
            with t.limited(5):
                t.run_command(sh(END_MARKED, mark))
        except (BringupError, OSError, EOFError):
            pass

    def encode(self, data: str) -> bytes:
        return data.encode("utf-8", "surrogateescape")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8", "surrogateescape")

    def close(self) -> None:
        with self._open_lock:
            t, self._transport = self._transport, None
        if t is not None:
            t.close()


def _end_local(mark: str, looks: int = 3) -> None:
    """Kill the process group of each process of this machine that leads its group and whose command line
    holds ``: mark;`` (a local host's command starts in a session of its own); looked for ``looks`` times,
    0.1 s apart, as one interrupted while it was started may only now be running its command."""
    from ..child import end_group

    for look in range(looks):
        if look:
            time.sleep(0.1)
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                if f": {mark};".encode() in (p / "cmdline").read_bytes() and os.getpgid(int(p.name)) == int(p.name):
                    end_group(int(p.name))
            except OSError:  # ProcessLookupError included: gone meanwhile
                continue


def close_all() -> None:
    """Close the connection of every backend made in this process."""
    for b in list(_made):
        b.close()


register()
