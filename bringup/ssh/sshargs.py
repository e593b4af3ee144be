"""Ansible's ssh arguments (``ansible_ssh_args``, ``ansible_ssh_common_args``, ``ansible_ssh_extra_args``) as the
ssh_config lines bringup honours, and what a vault gave in them taught to the run's masker.

Split from :mod:`bringup.ssh.sshconfig` (which looks a host up with these lines before its config file's text):
an option bringup cannot honour is refused with one line naming it (:data:`NO_EFFECT` lists the ones accepted
because they change nothing bringup does); words of vaulted arguments that may be secret are masked wherever the
run prints them (:func:`remember_words`).
"""
from __future__ import annotations

import re
import shlex

from ..errors import InventoryError
from ..userfile import home
from ..secrets import HIDDEN, MASK, Masker, Vaulted

__all__ = ["SSH_ARG_VARS", "HONOURED", "NO_EFFECT", "REFUSED_CONFIG", "parse_ssh_args", "remember_words", "refuse"]

#: Ansible's variables of extra ssh arguments, in the order Ansible puts them on the command line
#: (``ansible_ssh_args`` first; the inventory's Port/IdentityFile/User come between it and the others).
SSH_ARG_VARS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args")

#: ``-o`` options bringup honours (their ssh_config spelling).
HONOURED = {k.lower(): k for k in ("HostName", "Port", "User", "IdentityFile", "ProxyJump", "ProxyCommand",
                                   "StrictHostKeyChecking", "UserKnownHostsFile", "ConnectTimeout",
                                   "ServerAliveInterval")}
#: ``-o`` options accepted though they change nothing here: connection sharing (bringup keeps one connection
#: per host for the whole run), compression, logging, and the keepalive count (the run's watchdog decides).
NO_EFFECT = {"controlmaster", "controlpersist", "controlpath", "compression", "loglevel", "batchmode",
             "serveralivecountmax", "tcpkeepalive", "requesttty"}
#: ssh's one-letter options that take an argument (``man ssh``); the others are flags.
_TAKES_ARG = set("BbcDEeFIiJLlmOopQRSWw")
#: Flags that change nothing here: -C compression, -q quiet, -T/-t tty, -v verbose.
_NO_EFFECT_FLAGS = set("CqTtv")
#: One-letter options with an argument that bringup honours, as the ssh_config key they set.
_LETTER_KEYS = {"p": "Port", "i": "IdentityFile", "l": "User", "J": "ProxyJump"}
#: ssh_config keys of a file that bringup cannot honour: they change whom the host key is checked as, or how
#: the login proves itself, and skipping them would fail later with a misleading error.
REFUSED_CONFIG = {"include": "paramiko's SSHConfig does not read Include; name the included file with "
                              "ssh_config or -F, or copy its hosts into the file",
                   "hostkeyalias": "host keys are checked under the host's own name",
                   "certificatefile": "certificate logins are not supported; use a key"}


def refuse(where: str, what: str) -> InventoryError:
    return InventoryError(f"{where}: {what}")


def _option(text: str, where: str) -> tuple[str, str]:
    """``Key=Value``, ``Key Value`` or ``Key = Value`` (what ``-o`` takes) as (key, value)."""
    m = re.fullmatch(r"\s*([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*?)\s*", text, re.S)
    if not m or not m.group(2):
        raise refuse(where, f"-o {text!r} is not KEY=VALUE; write it as -o Name=value")
    return m.group(1), m.group(2)


def parse_ssh_args(text: str, where: str) -> tuple[list[tuple[str, str]], str | None]:
    """``ssh`` arguments (one of :data:`SSH_ARG_VARS`) as ssh_config lines (key, value), in order, and the
    ``-F`` config file (or None).  An option bringup cannot honour raises one line naming it."""
    if not isinstance(text, str):
        raise refuse(where, f"must be text (ssh arguments), got {type(text).__name__}")
    if not MASK.is_secret(text):
        return _parse_ssh_args(text, where, secret=False)
    # What the arguments start (a ProxyCommand's program, whose own error names it; a Match exec) prints their
    # words, which bringup never renders itself: the run's masker learns each of them.
    remember_words(text)
    # A vault's arguments: splitting them loses the value's type, so each word and each option's key and value
    # is a Vaulted again (hidden wherever it is rendered), and a refusal is said with every part masked.
    try:
        return _parse_ssh_args(text, where, secret=True)
    except InventoryError as e:
        masker = Masker()
        for word in _words(text):
            for part in {word, *re.split(r"[=\s]+", word)}:
                if part and not re.fullmatch(r"-[A-Za-z]{1,2}", part):
                    masker.add(part)
        raise InventoryError(masker.mask_lines(str(e).replace(str.__str__(text), HIDDEN))) from None


#: Words of vaulted ssh arguments that are not secret and that the masker would hide everywhere: options
#: (``-o``, ``--token``), ssh_config keywords, ssh's ``%h``/``%p`` tokens, yes/no/none and the programs a
#: ProxyCommand commonly runs.
_COMMON_WORD = re.compile(r"--?[A-Za-z][\w-]*|[%@:,]*(?:%[A-Za-z%][%@:,]*)+|yes|no|none|ask|accept-new|ssh|nc|sh",
                          re.I)
_KEYWORDS = frozenset(HONOURED) | NO_EFFECT | frozenset(REFUSED_CONFIG) | {"match", "exec", "host"}
#: Words no secret is made of, which the masker would hide in every line of the run (``default runtime auto``, ``ran
#: as root``, ``2>/dev/null``): ssh's values of behaviour, the common accounts, files every host has.
_COMMON_VALUES = frozenset({"yes", "no", "auto", "autoask", "ask", "none", "on", "off", "true", "false", "accept-new",
                            "root", "ubuntu", "debian", "admin", "ec2-user", "centos", "fedora", "core", "cloud-user",
                            "rocky", "almalinux", "opc", "localhost", "/dev/null", "/bin/sh", "/bin/bash",
                            "/usr/bin/ssh", "/usr/bin/nc"})
#: The ssh options whose values may be secret, as :func:`remember_words` reads them: where and through what the host
#: is reached (ProxyCommand's words, HostName, ProxyJump), as whom, and the paths of its keys and files.  Every other
#: option (ControlMaster, ControlPersist, StrictHostKeyChecking, Compression, ServerAlive*, LogLevel, ConnectTimeout,
#: ForwardAgent, PreferredAuthentications, Port, ...) says how ssh behaves: its value is never taught.
_SECRET_OPTIONS = frozenset({"proxycommand", "hostname", "proxyjump", "user", "identityfile", "certificatefile",
                             "userknownhostsfile"})
#: ssh's one-letter options with such a value, as the option they set (-F: the config file).
_SECRET_LETTERS = {"i": "identityfile", "F": "config", "J": "proxyjump", "l": "user"}


def remember_words(text: str, masker: Masker = MASK) -> None:
    """Teach ``masker`` the words of the vaulted ssh arguments ``text`` (it knows the whole text already) that may be
    secret, for what they start prints them (a ProxyCommand's own ``sh: exec: PROGRAM: not found``): the values of
    :data:`_SECRET_OPTIONS` (and ``-i``, ``-F``, ``-J``, ``-l``) only: each word of a ProxyCommand (and the value
    after a word's ``=``, and its ``user@host`` parts), a HostName, each ProxyJump host and user, a User, each path
    (``~`` also expanded).  Never the values of the options of behaviour, and never a word that is
    :data:`_COMMON_WORD`, an ssh keyword, one of :data:`_COMMON_VALUES` or a number of under 5 digits: the masker
    hides a word in every line of the run.  A word under :data:`~bringup.secrets.MIN_MASKED` characters is masked
    only as a whole value, as the masker does."""
    for option, value in _secret_values(str.__str__(text)):
        for part in _secret_parts(option, value):
            part = part.strip().strip("'\"")
            if (not part or _COMMON_WORD.fullmatch(part) or part.lower() in _KEYWORDS
                    or part.lower() in _COMMON_VALUES or (part.isdigit() and len(part) < 5)):
                continue
            masker.add(part)
            if part.startswith("~"):
                masker.add(home(part))


def _secret_values(text: str) -> list[tuple[str, str]]:
    """``(option, value)`` of each option of the ssh arguments ``text`` whose value may be secret, as
    :func:`_parse_ssh_args` reads the arguments (an option's value glued to its letter, ``-oKey=Value``)."""
    found: list[tuple[str, str]] = []
    for kind, letter, arg in _walk(_words(text)):
        if kind != "arg":
            continue
        if letter == "o":
            m = re.fullmatch(r"\s*([A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+)(.*?)\s*", arg, re.S)
            if m and m.group(1).lower() in _SECRET_OPTIONS:
                found.append((m.group(1).lower(), m.group(2)))
        elif letter in _SECRET_LETTERS:
            found.append((_SECRET_LETTERS[letter], arg))
    return found


def _walk(words: list[str]):
    """ssh's reading of its arguments, one item at a time: ``("word", word, "")`` for a word that is no option,
    ``("flag", letter, "")`` for a letter without a value, ``("arg", letter, value)`` for one with its value (glued
    to the letter, or the next word), ``("lacks", letter, "")`` for one whose value is missing at the end."""
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-" or word.startswith("--"):
            yield "word", word, ""
            continue
        letters = word[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter not in _TAKES_ARG:
                yield "flag", letter, ""
            elif letters:
                yield "arg", letter, letters
                letters = ""
            elif i < len(words):
                yield "arg", letter, words[i]
                i += 1
            else:
                yield "lacks", letter, ""


def _secret_parts(option: str, value: str) -> set[str]:
    """The words of ``option``'s ``value`` that may be secret (before the common ones are left out)."""
    if option == "proxycommand":
        parts = {value}
        for word in {*value.split(), *_words(value)}:
            parts.add(word)
            parts.update(word.split("=", 1)[1:])  # --token=VALUE
            parts.update(re.split(r"[@:]", word))  # user@host, host:port
        return parts
    if option == "proxyjump":
        parts = {value}
        for spec in value.split(","):
            m = re.fullmatch(r"\s*(?:ssh://)?(?:([^@\s]+)@)?(\[[^\]]+\]|[^:@\s/]+)(?::\d+)?/?\s*", spec)
            parts.update([spec, *(g.strip("[]") for g in m.groups() if g)] if m else [spec])
        return parts
    if option == "userknownhostsfile":
        return set(value.split())
    return {value}  # HostName, User, IdentityFile, CertificateFile, -F: the whole value


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _parse_ssh_args(text: str, where: str, secret: bool) -> tuple[list[tuple[str, str]], str | None]:
    keep = Vaulted if secret else str
    try:
        words = [keep(w) for w in shlex.split(text)]
    except ValueError as e:
        raise refuse(where, f"cannot split {text!r} as a shell would ({e}); check the quotes") from None
    lines: list[tuple[str, str]] = []
    config: str | None = None
    for kind, letter, arg in _walk(words):
        if kind == "word":
            raise refuse(where, f"{letter!r} is not an ssh option (a host or a command cannot be given here)")
        if kind == "flag":
            if letter in _NO_EFFECT_FLAGS:
                continue
            raise refuse(where, f"ssh option -{letter} is not supported by bringup (it connects through "
                                "paramiko, not the ssh program); remove it")
        if kind == "lacks":
            raise refuse(where, f"ssh option -{letter} lacks its value")
        arg = keep(arg)
        if "\n" in arg or "\r" in arg:
            raise refuse(where, f"the value of -{letter} spans lines; give it on one line")
        if letter == "o":
            key, value = _option(arg, where)
            value = keep(value)
            if key.lower() in HONOURED:
                lines.append((HONOURED[key.lower()], value))
            elif key.lower() not in NO_EFFECT:
                raise refuse(where, f"ssh option -o {key} is not supported by bringup (it honours "
                                     f"{', '.join(sorted(HONOURED.values()))}); remove it")
        elif letter == "F":
            config = arg
        elif letter in _LETTER_KEYS:
            lines.append((_LETTER_KEYS[letter], arg))
        else:
            raise refuse(where, f"ssh option -{letter} is not supported by bringup (it connects through "
                                 "paramiko, not the ssh program); remove it")
    return lines, config
