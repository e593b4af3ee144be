"""Where ``ssh`` would connect for a host: ``~/.ssh/config``, Ansible's ssh arguments, jump hosts.

Pure: it reads files and variables, opens nothing.  The result (:class:`Route`) is what
:mod:`bringup.ssh.connection` dials.

Ansible's ssh connection runs ``ssh`` with, in this order: ``ansible_ssh_args``, ``-o Port=``
(``ansible_port``, when set), ``-o IdentityFile=`` (``ansible_ssh_private_key_file``), ``-o User=``
(``ansible_user``), ``ansible_ssh_common_args``, ``ansible_ssh_extra_args``, then the host
(``ansible_host`` or the inventory name).  ``ssh`` takes the first value it obtains for each option, the
command line before the config file, so inventory variables win over ``~/.ssh/config``, and within the
arguments the earlier one wins.  Here every such option becomes a line of a ``Host *`` block placed before
the config file's text, and paramiko's own :class:`paramiko.SSHConfig` (first value wins, as in OpenSSH)
looks the host up: the token expansion of ``ProxyCommand %h:%p`` then sees the values ``ssh`` would.

An ssh option that bringup cannot honour is refused with one line naming it (:mod:`bringup.ssh.sshargs`, whose
:data:`~bringup.ssh.sshargs.NO_EFFECT` lists the ones accepted because they change nothing bringup does);
known_hosts files are checked by :mod:`bringup.ssh.knownhosts`.
"""
from __future__ import annotations

import getpass
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InventoryError
from ..inventory.addresses import address_problem
from ..inventory.hosts import Host
from ..secrets import HIDDEN, Vaulted
from ..userfile import home, read_capped
from .keyfile import check_keys, key_problem
from .knownhosts import known_hosts_problem, known_hosts_shown
from .sshargs import REFUSED_CONFIG, SSH_ARG_VARS, parse_ssh_args, refuse
from .sshtokens import _DATA_TOKENS, MatchExec, MatchExecTimeout, _Config, _UnsafeToken

__all__ = ["Endpoint", "Route", "Routes", "route", "check_routes", "MAX_HOPS"]

#: Jump hosts in one chain, all hops counted (a ProxyJump of a jump host adds its own).
MAX_HOPS = 8
#: An ssh config file larger than this is no ssh config (OpenSSH's own are a few KiB).
MAX_CONFIG_BYTES = 1 << 20
#: Characters no ssh_config value written from the inventory may hold: a newline would start a line of its
#: own (a ``ProxyCommand`` smuggled in through ``ansible_user``), NUL and the other controls are no text.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Endpoint:
    """One SSH server to log in to: the target or a jump host before it."""

    #: The name as written (the inventory's address, or the ProxyJump entry): what messages say.
    name: str
    hostname: str
    port: int
    user: str
    #: Keys to offer, and only them; empty: the agent and ~/.ssh's default keys (paramiko's look-up).
    identity_files: tuple[str, ...] = ()
    #: Jump hosts to go through first, outermost first (ProxyJump).
    jumps: tuple["Endpoint", ...] = ()
    #: A command whose stdin/stdout is the connection (ProxyCommand, its %h/%p/%r expanded).
    proxy_command: str | None = None
    #: Which of hostname, port and user a vault held: never shown (``where`` prints ``********`` for them).
    hidden: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        host = HIDDEN if "hostname" in self.hidden or isinstance(self.hostname, Vaulted) else self.hostname
        return f"{host}:{HIDDEN if 'port' in self.hidden else self.port}"

    @property
    def label(self) -> str:
        """The name as messages say it: ``********`` when a vault gave it (a jump host of vaulted arguments)."""
        return HIDDEN if "name" in self.hidden or isinstance(self.name, Vaulted) else self.name


@dataclass(frozen=True)
class Route:
    """How to reach one inventory host."""

    target: Endpoint
    #: known_hosts files, the first one written by accept-new.
    known_hosts: tuple[str, ...]
    #: "yes", "accept-new", or None (the run's choice: strict unless --accept-new-host-keys).
    strict: str | None = None
    connect_timeout: float = 10.0
    #: Where ``connect_timeout`` came from, as messages name it: ``ssh_connect_timeout`` (also its default) or
    #: ``ConnectTimeout`` (the ssh config, or ``-o`` in the ssh arguments).
    connect_timeout_by: str = "ssh_connect_timeout"
    #: Seconds between keepalives (0: none).
    keepalive: int = 15
    #: The ssh config file read, if any.
    config_file: str | None = None


def _block(lines: list[tuple[str, str]], where: str) -> str:
    """The inventory's options as a ``Host *`` block; a value holding a newline or another control character
    is refused (it would write a line of its own into the config paramiko reads)."""
    for k, v in lines:
        if _CONTROL.search(str(v)):
            raise refuse(where, f"the {k} value {str(v)!r} holds a control character (a newline would add an "
                                 "ssh option of its own); give it on one line, in plain text")
    return "Host *\n" + "".join(f"  {k} {v}\n" for k, v in lines)


def _shown(path: str | None) -> str | None:
    """A config file's path as messages name it: ``********`` when a vault gave it (an f-string would print a
    :class:`Vaulted`'s text, and ``~`` expanded is a text the masker does not know)."""
    return HIDDEN if isinstance(path, Vaulted) else path


def _read_config(path: str, where: str) -> str:
    p = Path(home(path))
    shown = HIDDEN if isinstance(path, Vaulted) else p
    data = read_capped(p, MAX_CONFIG_BYTES, lambda line: refuse(where, line),
                       missing=f"ssh config file {shown} does not exist; fix the path (or give -F none)",
                       unreadable=f"cannot read ssh config file {shown}: ",
                       too_large=f"ssh config file {shown} is larger than {MAX_CONFIG_BYTES >> 20} MiB: no ssh "
                                 "config; fix the path",
                       not_regular=f"ssh config file {shown} is not a regular file (a folder, a pipe or a device); "
                                   "name the config file itself")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse(where, f"ssh config file {shown} is not UTF-8 text") from None
    if "\x00" in text:
        raise refuse(where, f"ssh config file {shown} holds NUL bytes: no ssh config; fix the path")
    _shape(text, where, str(shown))
    return text


#: An ssh_config line: a keyword (letters and digits), then a value after spaces or '='.
_LINE = re.compile(r"\s*(?:#.*)?|\s*[A-Za-z][A-Za-z0-9]*(?:\s*=\s*|\s+)\S.*")


def _shape(text: str, where: str, config: str | None) -> None:
    """Every line of ``text`` is blank, a comment or ``Keyword value``; else one line naming the line NUMBER
    only: a file that is no ssh_config (``/etc/shadow``) is never quoted back."""
    for n, line in enumerate(text.splitlines(), 1):
        if not _LINE.fullmatch(line):
            raise refuse(where, f"ssh config {config or '(arguments)'} line {n} is not 'Keyword value': "
                                 "is this an ssh config file? Fix the path or the line")


def _lookup(text: str, name: str, where: str, config: str | None, execs: MatchExec, shown: str | None = None
            ) -> dict[str, Any]:
    try:
        found = _Config.read(text, execs).lookup(name)
    except _UnsafeToken as e:
        if e.key == "identityfile":
            raise refuse(where, f"IdentityFile pastes {e.token} ({_DATA_TOKENS[e.token]}) into a key file's path, and "
                                 "its value holds '/' or a control character, or is '.' or '..' (a path "
                                 "step out of the key folder): set it to a plain host name, address or user (letters, "
                                 "digits and . _ - $ + =)") from None
        if e.key == "proxyjump":
            raise refuse(where, f"ProxyJump pastes {e.token} ({_DATA_TOKENS[e.token]}) into its list of jump hosts, "
                                 "and its value holds a character that splits or adds an entry ('@', ',', ':', "
                                 "'/', a space, ...) or starts with '-': set it to a plain host name, address or "
                                 "user (letters, digits and . _ - $ + =)") from None
        key = "ProxyCommand" if e.key == "proxycommand" else "Match exec"
        raise refuse(where, f"{key} pastes {e.token} ({_DATA_TOKENS[e.token]}) into a shell command, and its "
                             "value holds characters a shell reads (quotes, $, `, ;, |, &, spaces, ...) or starts "
                             "with '-' (a program's option): set it to a plain host name, address or user (letters, "
                             "digits and . _ - @ : , + = / %, not first '-')"
                      ) from None
    except MatchExecTimeout as e:
        raise refuse(where, f"a Match exec command of ssh config {config or '(arguments)'} ran past {e.seconds:g} s "
                             "(ssh_connect_timeout, for all of the host's Match exec commands together) and was "
                             "ended; make it finish quickly, or remove it") from None
    except Exception as e:  # noqa: BLE001 - paramiko's ConfigParseError and its kin: the file's fault
        # paramiko's words quote the line: a file that is no ssh config (a secret) is not shown back.
        raise refuse(where, f"ssh config {config or '(arguments)'} cannot be read for {shown or _shown(name)}: "
                             f"{type(e).__name__}; check the file's syntax") from None
    shown = _shown(name) if shown is None else shown
    for key, why in REFUSED_CONFIG.items():
        if found.get(key):
            raise refuse(where, f"ssh config {config} sets {key} for {shown}: {why}")
    return dict(found)


def _int(value: Any, what: str, where: str, low: int = 1, high: int = 65535) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if not low <= n <= high:
        raise refuse(where, f"{what} must be a whole number {low}-{high} (got {value!r})")
    return n


def _via(found: dict[str, Any], where: str, config_text: str, config: str | None, chain: tuple[str, ...],
         execs: MatchExec, secret: bool = False) -> tuple[tuple[Endpoint, ...], str | None]:
    """The jump hosts or the proxy command ``found`` names: the first of the two set wins (OpenSSH's rule;
    paramiko's result keeps the order options were first obtained in)."""
    for key in found:
        if key == "proxycommand" and found[key]:
            return (), _text(found[key])
        if key == "proxyjump" and found[key] and str(found[key]).lower() != "none":
            hops: list[Endpoint] = []
            # Jump hosts a vault named (vaulted ssh arguments, a -J rendered from a vaulted value) are never shown:
            # neither their name, address, port nor user; nor those their own config names behind them.
            secret = isinstance(found[key], Vaulted) or secret
            for spec in str(found[key]).split(","):
                hops.append(_hop(spec.strip(), where, config_text, config, chain, execs, secret))
            # A hop's own jumps go before it: the chain is flattened, outermost first.
            return tuple(hops), None
    return (), None


def _hop(spec: str, where: str, config_text: str, config: str | None, chain: tuple[str, ...], execs: MatchExec,
         secret: bool = False) -> Endpoint:
    """One ProxyJump entry, ``[user@]host[:port]`` or ``ssh://[user@]host[:port]``, looked up in the config;
    ``secret``: a vault gave it, and no message shows it."""
    m = re.fullmatch(r"(?:ssh://)?(?:([^@\s]+)@)?(\[[^\]]+\]|[^:@\s/]+)(?::(\d+))?/?", spec)
    if not m:
        raise refuse(where, f"ProxyJump entry {HIDDEN if secret else repr(spec)} is not [user@]host[:port]")
    user, name, port = m.group(1), m.group(2).strip("[]"), m.group(3)
    shown = HIDDEN if secret else name
    if len(chain) >= MAX_HOPS:
        raise refuse(where, f"more than {MAX_HOPS} jump hosts in one chain"
                             f"{'' if secret else ' (' + ' > '.join(chain) + ' > ...)'}")
    first = [("User", user)] if user else []
    first += [("Port", port)] if port else []
    found = _lookup(_block(first, where) + config_text, name, where, config, execs, shown)
    # A loop is the same host at the same port (127.0.0.1:98 through 127.0.0.1:1 is two sshds).
    at = f"{name}:{found.get('port', 22)}"
    if at in chain:
        way = "the chain is vaulted" if secret else " > ".join(chain + (at,))
        raise refuse(where, f"jump host {shown} reaches itself through ProxyJump ({way})")
    jumps, command = _via(found, where, config_text, config, chain + (at,), execs, secret)
    keys = check_keys(tuple(found.get("identityfile") or ()), {}, f"ssh config {config}", f"{where}: jump host {shown}")
    hidden = frozenset({"name", "hostname", "port", "user"}) if secret else frozenset()
    # A jump host is dialed as the target is: its address held to the same rule (bringup.ssh.connection).
    address = str(found.get("hostname") or name)
    why = address_problem(address)
    if why:
        raise refuse(where, f"jump host {shown}: its address {HIDDEN if secret else repr(address)} is {why}")
    return Endpoint(name=name, hostname=address,
                    port=_int(found.get("port", 22), f"the port of jump host {shown}", where),
                    user=str(found.get("user") or getpass.getuser()),
                    identity_files=keys, jumps=jumps, proxy_command=command, hidden=hidden)


def route(host: Host, default_config: str = "~/.ssh/config") -> Route:
    """How ``ssh`` (as Ansible runs it) reaches ``host``; raises one line for an option bringup cannot honour.
    Its ``Match exec`` commands (the host's and its jump hosts') run once each, all within the host's
    ssh_connect_timeout (:class:`~bringup.ssh.sshtokens.MatchExec`).  Worked out anew at each call: a run asks its
    :class:`Routes`, which works each host's out once."""
    return _route(host, default_config, MatchExec(float(host.connection.ssh_connect_timeout)))


def _route(host: Host, default_config: str, execs: MatchExec) -> Route:
    name = f"host {host.name!r}"
    v, c = host.vars, host.connection
    given = c.model_fields_set  # the connection variables the inventory set (a default is not "set")
    lines: list[tuple[str, str]] = []
    config: str | None = None
    config_var = ""  # the variable whose -F names the config file
    per_var: dict[str, list[tuple[str, str]]] = {}
    for var in SSH_ARG_VARS:
        if v.get(var) in (None, ""):
            per_var[var] = []
            continue
        per_var[var], named = parse_ssh_args(v[var], f"{name}: {var}")
        if named:
            config, config_var = named, var
    lines += per_var["ansible_ssh_args"]
    if "ansible_port" in given:
        lines.append(("Port", str(c.ansible_port)))
    if c.ansible_ssh_private_key_file:
        lines.append(("IdentityFile", c.ansible_ssh_private_key_file))
    if c.ansible_user:
        lines.append(("User", c.ansible_user))
    lines += per_var["ansible_ssh_common_args"] + per_var["ansible_ssh_extra_args"]

    if config is None and v.get("ssh_config") not in (None, ""):
        config = _text(v["ssh_config"])  # (a Vaulted kept: every message names it ********)
        where = f"{name}: ssh_config"
    else:
        where = f"{name}: {config_var} -F" if config is not None else name
    if config is not None and config.lower() == "none":
        config_text, config = "", None
    elif config is not None:
        config_text = _read_config(config, where)
    elif Path(home(default_config)).is_file():
        config, config_text = default_config, _read_config(default_config, name)
    else:
        config_text = ""
    # bringup's own default user (root) comes last: after the inventory and the config file.
    shown_config = _shown(config)
    found = _lookup(_block(lines, name) + config_text + "\nHost *\n  User root\n", host.address, name,
                    shown_config, execs)
    # What a vault gave (an ssh argument's value, ansible_user, ...) is a Vaulted again once paramiko read it back:
    # a message quoting the port or the user then shows ``********``.
    vaulted = {str.__str__(x) for x in [*(val for _, val in lines), *(v.get(k) for k in ("ansible_host", "ansible_user",
               "ansible_port"))] if isinstance(x, Vaulted)}
    if vaulted:
        found = {k: Vaulted(x) if isinstance(x, str) and x in vaulted else x for k, x in found.items()}
    hidden = frozenset(k for k in ("hostname", "port", "user") if isinstance(found.get(k), Vaulted))
    jumps, command = _via(found, name, config_text, shown_config, (f"{host.address}:{found.get('port', 22)}",),
                          execs)
    identity = tuple(found.get("identityfile") or ())
    if c.ansible_ssh_private_key_file:
        # Only the inventory's key, as before: another key would hide a wrong path.
        identity = (home(c.ansible_ssh_private_key_file),)
        why = key_problem(identity[0])
        if why:
            where = host.sources.get("ansible_ssh_private_key_file", "the inventory")
            raise refuse(name, f"ansible_ssh_private_key_file {c.ansible_ssh_private_key_file!r} ({where}): {why}; "
                                "set it to the private key's path, or remove it to use ssh-agent and ~/.ssh's keys")
    else:
        given_by = {home(str.__str__(val)): f"{var}, vaulted" if isinstance(val, Vaulted) else var
                    for var in SSH_ARG_VARS for k, val in per_var[var] if k == "IdentityFile"}
        identity = check_keys(identity, given_by, f"ssh config {shown_config}", name)
    # The address as ssh_config and the inventory name it (a host's name stands in for a missing ansible_host):
    # never a pattern written into known_hosts, nor a port or user Fabric would read out of it.  Said here, by the
    # input check, before any host is connected to (bringup.ssh.connection asks again at the login).
    address = _text(found.get("hostname") or host.address)
    why = address_problem(str(address))
    if why is not None:
        raise refuse(name, f"the address to connect to is {why}; set ansible_host (or HostName in the ssh config) "
                            "to the host's name or IP address")
    target = Endpoint(name=host.address, hostname=address,
                      port=_int(found.get("port", 22), "the port", name), user=_text(found.get("user")),
                      identity_files=identity, jumps=jumps, proxy_command=command, hidden=hidden)
    strict = found.get("stricthostkeychecking")
    if strict is not None:
        s = str(strict).lower()
        if s in ("yes", "ask"):  # no one to ask: as strict as yes
            strict = "yes"
        elif s in ("accept-new", "no", "off"):
            # "no" is taken as accept-new: a key that CHANGED is still refused.
            strict = "accept-new"
        else:
            raise refuse(name, f"StrictHostKeyChecking {strict!r} must be yes, accept-new or no")
    # The inventory's ssh_known_hosts first when it is set (accept-new writes there), then UserKnownHostsFile.
    # A path a vault gave stays Vaulted: messages name it "the known_hosts file (vaulted)".
    own = _keep(home(c.ssh_known_hosts), v.get("ssh_known_hosts"))
    files = found.get("userknownhostsfile")
    named = [_keep(home(p), files) for p in str(files or "").split()]
    known = tuple(dict.fromkeys(([own] if "ssh_known_hosts" in given or not named else []) + named))
    for given_path in known:  # a file that is no known_hosts file: one line now, not a failed login later
        why = known_hosts_problem(Path(home(given_path)))
        if why is not None:
            by = "ssh_known_hosts" if given_path == own and "ssh_known_hosts" in given else "UserKnownHostsFile"
            raise refuse(name, f"{known_hosts_shown(given_path)} (set by {by}): {why}; name a known_hosts file "
                                f"(ssh_known_hosts, UserKnownHostsFile), or a path where bringup may make one")
    # bringup's own variables win over ConnectTimeout and ServerAliveInterval; their defaults do not.
    timeout, timeout_by = float(c.ssh_connect_timeout), "ssh_connect_timeout"
    if "ssh_connect_timeout" not in given and found.get("connecttimeout") is not None:
        timeout, timeout_by = float(_int(found["connecttimeout"], "ConnectTimeout", name, 1, 86400)), "ConnectTimeout"
    alive = int(c.ssh_keepalive_interval)
    if "ssh_keepalive_interval" not in given and found.get("serveraliveinterval") is not None:
        alive = _int(found["serveraliveinterval"], "ServerAliveInterval", name, 0, 86400)
    return Route(target=target, known_hosts=known, strict=strict, connect_timeout=timeout,
                 connect_timeout_by=timeout_by, keepalive=alive, config_file=config)


def _keep(text: str, given: Any) -> str:
    """``text`` (made from ``given``) a :class:`Vaulted` again when ``given`` was one."""
    return Vaulted(text) if isinstance(given, Vaulted) else text


def _text(value: Any) -> str:
    """``value`` as text, a Vaulted kept as one (``str()`` of it would be plain text)."""
    return value if isinstance(value, str) else str(value)


class Routes:
    """The routes of one run's hosts, each worked out once (its ssh config looked up, its ``Match exec`` commands
    run, its key files checked) and kept for every later use in the run: the input's check (:func:`check_routes`),
    the connection opened ahead, the run's own, a reconnect after a reboot.  A refusal is kept too, and raised
    again.  One per run, handed to whatever connects (:func:`bringup.ssh.connection.connect`'s ``routes``): no
    global; the hosts are told apart by name (an inventory's names are unique).  Safe across threads: a host's route
    is worked out by one of them, the others waiting for it."""

    def __init__(self, default_config: str = "~/.ssh/config") -> None:
        self.default_config = default_config
        self._lock = threading.Lock()
        self._each: dict[str, threading.Lock] = {}
        self._got: dict[str, Route | InventoryError] = {}

    def of(self, host: Host) -> Route:
        """``host``'s route (:func:`route`), worked out at the first call of the run."""
        with self._lock:
            one = self._each.setdefault(host.name, threading.Lock())
        with one:
            got = self._got.get(host.name)
            if got is None:
                try:
                    got = route(host, self.default_config)
                except InventoryError as e:
                    got = e
                self._got[host.name] = got
        if isinstance(got, InventoryError):
            raise InventoryError(str(got)) from None
        return got


def check_routes(hosts: list[Host], routes: Routes | None = None) -> Routes:
    """Every host's route worked out (kept in ``routes``, a new one when None, which is returned): a refusal is
    raised before anything connects."""
    routes = routes if routes is not None else Routes()
    for h in hosts:
        if h.connection.ansible_connection != "local":
            routes.of(h)
    return routes
