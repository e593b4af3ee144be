"""paramiko's SSHConfig with the ``%`` tokens of a command (ProxyCommand, Match exec) quoted as shell words, and
the other keys' tokens computed only when their value holds them (see :class:`_Config`)."""
from __future__ import annotations

import getpass
import hashlib
import os
import re
import shlex
import socket
import time
import types
from typing import Callable

import paramiko

from ..child import DEVNULL, run_bounded

__all__ = ["_Config", "_UnsafeToken", "_DATA_TOKENS", "MatchExecTimeout", "MatchExec"]


class MatchExecTimeout(Exception):
    """``Match exec`` commands of one route that ran past its :class:`MatchExec` bound (the one in flight was ended,
    its process group and all)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class _Answer:
    """What paramiko reads of a command's run: ``.ok``."""

    def __init__(self, ok: bool) -> None:
        self.ok = ok


class MatchExec:
    """The ``Match exec`` commands of one host's route (its own look-up and its jump hosts'), in place of Invoke
    (``invoke.run(cmd, hide=..., warn=True).ok``, which waited for ever and kept all the output: ``Match exec
    "yes"``): each run by ``sh -c``, stdin /dev/null, its output discarded, ended with whatever it started when the
    route's one deadline passes, ``seconds`` (the host's ssh_connect_timeout) after the first began.

    A command (as expanded) runs once per route: paramiko decides each ``Match`` twice per look-up (its first pass
    and its final one), and a jump host's look-up may meet the same block; the answer of the first run is the
    answer (OpenSSH runs a ``Match exec`` once per ssh, unless ``Match final`` asks again).  ``ran`` counts the runs."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.ran = 0
        self._deadline: float | None = None
        self._answers: dict[str, bool] = {}

    def run(self, command: str, **_: object) -> _Answer:
        if command in self._answers:
            return _Answer(self._answers[command])
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self.seconds
        left = self._deadline - now
        if left <= 0:
            raise MatchExecTimeout(self.seconds)
        self.ran += 1
        ended = run_bounded(["/bin/sh", "-c", command], timeout=left, stdout=DEVNULL,
                            what="a Match exec command of the ssh config")
        if ended.why is not None:
            raise MatchExecTimeout(self.seconds)
        self._answers[command] = ended.rc == 0
        return _Answer(ended.rc == 0)

#: Keys whose value paramiko hands to a shell after expanding ``%`` tokens: every token's value is quoted.
_SHELL_KEYS = {"proxycommand", "match-exec"}
#: Tokens whose value comes from the inventory or the config (the host's address, user, port, name as written):
#: in a command they may hold only what no shell reads specially, however deeply the command nests shells.
_DATA_TOKENS = {"%h": "the host's address (ansible_host or HostName)", "%r": "the user (ansible_user or User)",
                "%p": "the port", "%n": "the host's name as written"}
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
#: Keys whose tokens make one part of a structure: a ProxyJump's ``[user@]host[:port]`` entries, an IdentityFile's
#: path.  A data token there is one host, user or port, holding none of the characters that split or add an entry
#: or a path step ('@', ',', ':', '/', a space; '.' or '..' alone): a user ``x@attacker:2222,y`` pasted by
#: ``ProxyJump %r@bastion`` added a jump host the config's author never named, a user ``../k`` made
#: ``IdentityFile ~/.ssh/keys/%r`` a key outside that folder.
_PARTS = {"proxyjump": re.compile(r"[A-Za-z0-9_.$+=%][A-Za-z0-9_.$+=%-]*"),
          "identityfile": re.compile(r"[^/\x00-\x1f\x7f]+")}  # an AD user (jdoe@corp.example) is one file name


class _UnsafeToken(Exception):
    """A data token (``%h``, ``%r``, ...) whose value holds shell characters, in a command a shell runs."""

    def __init__(self, token: str, key: str) -> None:
        super().__init__(token)
        self.token, self.key = token, key


class _Config(paramiko.SSHConfig):
    """paramiko's SSHConfig whose ``%`` tokens in a command (ProxyCommand, Match exec) are shell-quoted.

    paramiko pastes ``%h``/``%p``/``%r`` into the command as they are, one token after the other (so a host
    named ``x;touch /tmp/p`` runs ``touch`` on the control machine, and a host holding ``%r`` is expanded
    twice).  Here the command is expanded in one pass, each token's value quoted as one shell word, ``%%`` a
    ``%``: what OpenSSH 9.6 guards by refusing such names, and what ``ssh -W %h:%p`` expects of a plain one
    (``shlex.quote`` leaves ``10.0.0.1`` and ``gpu-01.example`` as they are).  Other keys are paramiko's.
    """

    def __init__(self, execs: MatchExec | None = None) -> None:
        super().__init__()
        #: paramiko's own Match logic, word for word, its ``invoke`` being ``execs``, the route's
        #: :class:`MatchExec` (the function's globals are paramiko.config's, that one name changed; paramiko
        #: itself is left as it is).
        self._does_match = types.MethodType(types.FunctionType(
            paramiko.SSHConfig._does_match.__code__,
            {**vars(paramiko.config), "invoke": execs if execs is not None else MatchExec(10.0)}, "_does_match",
            paramiko.SSHConfig._does_match.__defaults__, paramiko.SSHConfig._does_match.__closure__), self)

    @classmethod
    def read(cls, text: str, execs: MatchExec) -> "_Config":
        """The config ``text``, its ``Match exec`` commands run by ``execs``."""
        import io

        config = cls(execs)
        config.parse(io.StringIO(text))
        return config

    def _tokenize(self, config, target_hostname, key, value):  # noqa: ANN001 - paramiko's signature
        if key in _PARTS:
            return self._entry_tokens(config, target_hostname, key, value)
        if key not in _SHELL_KEYS:
            return self._plain_tokens(config, target_hostname, key, value)
        allowed = set(self._allowed_tokens(key))
        home = os.path.expanduser("~")
        # %l: the local host's name as it is, no DNS lookup for its domain (a command's token is a shell word).
        values = {**self._token_values(config, target_hostname, key), "%l": socket.gethostname}

        def one(m: re.Match) -> str:
            token = m.group(0)
            if token == "%%":
                return "%"
            if token == "~":
                return shlex.quote(home) if "~" in allowed else token
            if token in allowed and token in values:
                text = str(values[token]())
                if token in _DATA_TOKENS and (not _PLAIN.fullmatch(text) or text.startswith("-")):
                    # Quoting holds for one shell only: a command that hands the token to a second one
                    # (``sh -c "echo %h"``) would run it.  OpenSSH 9.6 refuses such names; so does bringup.
                    # A leading '-' is a program's option, not its argument: ``ssh %r@jump`` with a user
                    # ``-oProxyCommand=...`` runs that command (OpenSSH refuses such users and hosts too).
                    raise _UnsafeToken(token, key)
                return shlex.quote(text)
            return token

        return re.sub(r"%.|~", one, value, flags=re.S)

    def _entry_tokens(self, config, target_hostname, key, value):  # noqa: ANN001 - paramiko's signature
        """A ProxyJump's or an IdentityFile's tokens as paramiko expands them, once each data token the value holds
        (:data:`_DATA_TOKENS`) is known to be a single part of one entry or path step (:data:`_PARTS`), else
        :class:`_UnsafeToken`."""
        if "%" in value:
            values = self._token_values(config, target_hostname, key)
            for token in self._allowed_tokens(key):
                if token in _DATA_TOKENS and token in value and token in values:
                    text = str(values[token]())
                    if not _PARTS[key].fullmatch(text) or text in (".", ".."):
                        raise _UnsafeToken(token, key)
        return self._plain_tokens(config, target_hostname, key, value)

    def _plain_tokens(self, config, target_hostname, key, value):  # noqa: ANN001 - paramiko's signature
        """paramiko's own expansion of a key that is no command, with the same result, computing only the
        tokens the value holds: paramiko computes every token's value for every value of a key that allows
        them, the local domain name among them (``%l``: socket.getfqdn, a DNS lookup, for every IdentityFile
        of every host; seconds each where the control machine's own name does not resolve)."""
        allowed = self._allowed_tokens(key)
        if not allowed or ("%" not in value and "~" not in value):
            return value
        # In paramiko's order: each replaced in what the ones before left.
        for token, make in self._token_values(config, target_hostname, key).items():
            if token in allowed and token in value:
                value = value.replace(token, str(make()))
        return value

    @staticmethod
    def _token_values(config, target_hostname, key) -> dict[str, Callable[[], object]]:  # noqa: ANN001
        """Each token's value as paramiko computes it (``%l``: the local domain name, a DNS lookup), made only
        when asked for; in paramiko's order."""
        configured = target_hostname if key == "hostname" else config.get("hostname", target_hostname)
        port = config.get("port", paramiko.config.SSH_PORT)
        local_user = getpass.getuser()
        user = config.get("user", local_user)
        local = socket.gethostname().split(".")[0]
        home = os.path.expanduser("~")
        return {"%C": lambda: hashlib.sha1((local + target_hostname + repr(port) + user).encode()).hexdigest(),
                "%d": lambda: home, "%h": lambda: configured, "%L": lambda: local,
                "%l": lambda: paramiko.config.LazyFqdn(config, local), "%n": lambda: target_hostname,
                "%p": lambda: port, "%r": lambda: user, "%u": lambda: local_user, "~": lambda: home}
