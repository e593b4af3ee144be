"""Secrets in the inventory: read from the environment or a private file, never shown.

Any variable may take a secret reference instead of its text::

    ansible_become_password: {bringup_secret: {env: DEPLOY_SUDO_PW}}
    registry_auths:
      nvcr.io: {username: $oauthtoken, password: {bringup_secret: {file: ~/.config/bringup/ngc.key}}}

A reference is a mapping of the one key ``bringup_secret`` whose value is a mapping of exactly one key, ``env``
(a variable of the control machine's environment) or ``file`` (a regular file of the user, mode 0600 or
stricter; one trailing newline is dropped).  The older spelling without the tag, ``{env: NAME}`` /
``{file: PATH}``, is still a reference where it cannot be ordinary data: in a variable that only takes a
secret text (:func:`secret_place`, by :func:`credential_name`: the Ansible passwords, a key named or ending
``password``, ``passwd``, ``passphrase``, ``token``, ``secret``, ``api_key``, ``access_key``, ``private_key``,
``credential(s)``, or ``_pass``, ``_pw``, ``_auth``); anywhere else (``labels: {env:
production}``) it is the mapping it looks like.  It is resolved when the
inventory is loaded, into a pydantic :class:`~pydantic.SecretStr`, so that
``repr``, ``str`` and JSON show ``**********``; a role that needs the text
asks for it with :func:`reveal`.

Every secret resolved, and the Ansible passwords given as text, are added to
:data:`MASK`.  What the run prints (``sys.stdout``/``sys.stderr`` once
:func:`mask_output` ran) and the JSON reports go through it: each secret's
text becomes ``********``, and so does the password of any URL
(``https://user:TOKEN@host/`` → ``https://user:********@host/``) and the value of any ``KEY=value`` whose KEY names a
credential (``DB_PASSWORD=hunter2x`` → ``DB_PASSWORD=********``; not an empty, yes/no or numeric value).
"""
from __future__ import annotations

import errno
import os
import json
import re
import stat
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import SecretStr

from .errors import InventoryError, shell_word
from .userfile import home, read_regular

__all__ = ["MASK", "Masker", "Vaulted", "mask_output", "TAG", "is_ref", "secret_place", "credential_name", "credential_value", "spelled", "resolve_refs", "reveal", "holds_secret", "SecretStr"]

#: What a secret's text becomes in output.
HIDDEN = "********"

#: Secrets shorter than this are not used as mask keys (they would hide every such digit or letter).
MIN_MASKED = 4

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The password part of a URL's userinfo: ``scheme://user:PASSWORD@``; or a userinfo that is a token alone
#: (``https://ghp_...@github.com/org/repo.git``, ``http://TOKEN@prometheus``): 16 characters or more, no ':' (a user
#: name such as ``git`` or ``root`` is shorter and stays).
#: A scheme starts where no scheme character stands before it (not at each ``\b``: ``a.a.a...`` was quadratic).
_URL_PASSWORD = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^/\s:@'\"]*:|[a-z][a-z0-9+.-]*://)"
                           r"((?<=:)[^/\s@'\"]+|(?<=//)[^/\s:@'\"]{16,})(@)")


#: What ends a variable's name that holds a credential (``db_password``, ``PGPASSWORD``, ``hf_token``,
#: ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``client_secret``): the one list :func:`credential_name` reads.
_CREDENTIAL_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "api_key", "api-key",
                       "access_key", "access-key", "accesskey", "private_key", "private-key", "credential",
                       "credentials")
#: Short words that name a credential only as a whole name or a name's last part (``ansible_ssh_pass``, ``db_pw``,
#: docker's ``auth``): never inside a word (``compass``, ``oauth``, ``passport``).
_CREDENTIAL_PARTS = ("pass", "pw", "auth")
#: Words that make a name a credential's wherever they stand as one of its ``_``/``-`` parts (``SECRET_KEY``,
#: ``STRIPE_SECRET_KEY``, ``SECRET_KEY_BASE``, ``password_hash``), unless its last part says it names where a
#: credential is, not the credential (``password_file``, ``secret_path``).
_CREDENTIAL_WORDS = frozenset({"secret", "password", "passwd", "passphrase"})
_NOT_THE_CREDENTIAL = frozenset({"file", "path", "dir", "name", "env", "var", "command", "cmd", "id"})


def credential_name(name: str) -> bool:
    """``name`` (a variable, a key, an environment variable, a ``--flag``; a dotted path's last part) names a
    credential, so that its value is one: the one rule for :func:`secret_place`, the masker's ``KEY=value`` net and
    the inventory sources' refusals (:func:`bringup.inventory.sources.yamlfile.secret_line`)."""
    if not isinstance(name, str):
        return False
    last = re.split(r"[.\[\]]", name.strip().strip("'\"").lower().lstrip("-"))
    last = next((p for p in reversed(last) if p), "")
    return (last.endswith(_CREDENTIAL_ENDINGS) or last.endswith(("auth_key", "auth-key", "authkey"))
            or any(last == p or last.endswith(("_" + p, "-" + p)) for p in _CREDENTIAL_PARTS)
            or (not _CREDENTIAL_WORDS.isdisjoint(parts := re.split(r"[_-]", last))
                and parts[-1] not in _NOT_THE_CREDENTIAL))


#: A variable given a value: ``key=``, ``key:`` or ``key value`` (a ~/.my.cnf or a .netrc read as INI, a ``--set``
#: without '=') where a variable starts (the line's start, after a space, a comma, ``;``, ``{`` or ``(``; the name
#: maybe quoted or a ``--flag``); a value follows.
_GIVEN = re.compile(r"(?:^|(?<=[\s,;{(]))[-\"']*([\w.-]+)[\"']?(?:[ \t]*[=:](?!//)[ \t]*|[ \t]+)(?=[^\s=:])",
                    re.MULTILINE)


def credential_value(text: str) -> bool:
    """``text`` gives a credential a value: a variable that :func:`credential_name` names, then ``=``, ``:`` or
    (opening a line) a space, and a value (``password hunter2``, ``db_password: x``, ``export PGPASSWORD=x``).  A
    host name that holds such a word (``auth01``, ``tokenizer-01``, ``passport``) or a credential's name alone (a
    group ``../secret:``) is none."""
    return isinstance(text, str) and any(credential_name(m.group(1)) for m in _GIVEN.finditer(text))


#: ``KEY=value``: where KEY names a credential (:func:`credential_name`: ``DB_PASSWORD=hunter2x`` of a .env,
#: ``--token=...`` of a command line, ``api_key=...``), what a script's error, a program's output or a file read by
#: mistake says is masked as a URL's password is, whoever's secret it is.  A value that is a reference
#: (``{env: ...}``), already masked, empty, a yes/no or a number (``use_token = true``, ``min_pass=3``) stays.  The
#: name starts where no name character stands before it, so each name is read once (linear in the text).
_ASSIGNMENT = re.compile(r"(?<![\w.-])([\w.-]+)([ \t]*=(?!=)[ \t]*)(?![{*])")
_ASSIGNED = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&|]+")
#: Values that are no secret under a credential's name: empty, a yes/no, a number of at most 3 digits
#: (``min_pass=3``, ``use_token = true``); ``DB_PASSWORD=12345678`` is masked.
_NO_SECRET_VALUE = re.compile(r"(?i)(?:true|false|yes|no|on|off|none|null|[+-]?\d{1,3}(?:\.\d{1,3})?)?")


def _mask_assignments(text: str) -> str:
    """Each ``NAME=value`` of ``text`` whose NAME names a credential, its value masked; the names are read one
    after another (only a name and its ``=`` are taken at a time), so that an assignment inside another's value
    (``--env=API_TOKEN=abc``, ``opts=password=x``) is read too, in one pass."""
    out: list[str] = []
    done = 0
    for m in _ASSIGNMENT.finditer(text):
        if m.start() < done or not credential_name(m.group(1)):
            continue
        value = _ASSIGNED.match(text, m.end())
        if value is None:
            continue
        bare = value.group(0)[1:-1] if value.group(0)[:1] in "'\"" else value.group(0)
        if _NO_SECRET_VALUE.fullmatch(bare.strip()):
            continue
        out += [text[done:m.end()], HIDDEN]
        done = value.end()
    return "".join(out) + text[done:] if out else text


class Vaulted(str):
    """Text known to be a secret (what a vault held): a ``str`` everywhere it is used, so that it reaches the host
    as it is, but ``********`` in ``repr`` and wherever bringup renders a value (:meth:`Masker.mask`,
    :meth:`Masker.mask_value`, :meth:`Masker.mask_obj`), whatever its length."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"'{HIDDEN}'"


def _token(secret: str) -> re.Pattern:
    """``secret`` standing alone as a value: not inside a longer word or number (``4`` in ``= 4``, not in 4096, -4
    or 4.5); a diff's ``+``/``-`` opening a line is no sign.  A dot before a secret that is no number stands for a
    key's path only after a word (``gpu_profiles.l4``), never after ``/``, ``~`` or a space (``~/.ssh``, a
    dotfile).  A dot after a word ends a sentence (``answer: yes.``); after a number only at the line's end
    (``is 7.``): ``step 1. then`` and ``1. item`` are a list's numbers, no value."""
    number = secret[:1].isdigit() or secret[:1] in "+-."
    before = r"(?<![\w.])" if number else r"(?<!\w)(?:(?<=\w\.)|(?<!\.))"
    after = r"(?![\w+-])" + (r"(?!\.(?!\s*$))" if number else r"(?!\.\w)")
    return re.compile(rf"{before}(?<![^\n][+-]){re.escape(secret)}{after}", re.MULTILINE)


class Masker:
    """Replaces known secrets, and URL passwords, in text and in JSON-like values.

    Two nets.  A value known to be a secret by its type (:class:`Vaulted`, :class:`SecretStr`) is
    ``********`` wherever it is rendered, of any length.  Its text, once it lost the type (a role made a line of
    it), is still found: a secret of :data:`MIN_MASKED` characters or more anywhere in any text; a shorter one
    only where a whole value is rendered (:meth:`mask_value`: a plan's "is, want" values, a report's strings) or
    as a value standing alone on a line of a diff or a finding (:meth:`mask_lines`), never in every line of the
    output (a "1" secret would hide every 1).
    """

    def __init__(self) -> None:
        self._texts: set[str] = set()
        #: Secrets shorter than MIN_MASKED: whole values and standing-alone values of diffs, only.
        self._short: dict[str, re.Pattern] = {}
        self._lock = threading.Lock()
        #: Counts the secrets added: text masked under an older count may hold one added since.
        self.generation = 0

    def add(self, secret: str | SecretStr | None, alone: bool = False) -> None:
        """Mask ``secret`` from now on (and its URL-encoded form, as it appears inside URLs).  ``alone``: only as a
        whole value or standing alone, whatever its length (a plain text known as a secret by its variable's name
        alone: ``ansible_become_pass: root`` must not hide every "root" of ``/root/data``)."""
        text = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
        if not isinstance(text, str) or not text.strip():
            return
        text = str.__str__(text)
        with self._lock:
            if len(text) < MIN_MASKED or alone:
                # A 1-character secret would mask every "1" of every line and report: as a whole value only; also as
                # repr() and JSON write it ('a\\nb' of a message's {value!r}: a 3-character secret with a newline).
                for form in (text, repr(text)[1:-1], json.dumps(text)[1:-1]):
                    self._short.setdefault(form, _token(form))
            else:
                # Its URL-encoded form (inside URLs), and as repr() and JSON quote it: a secret holding a newline,
                # a quote or a control character is written escaped by a message's {value!r} or a JSON report.
                self._texts.update({text, quote(text, safe=""), repr(text)[1:-1], json.dumps(text)[1:-1]})
            self.generation += 1

    def is_secret(self, value: Any) -> bool:
        """``value`` is a secret: by its type, or as a whole text equal to a known secret's."""
        if isinstance(value, (Vaulted, SecretStr)):
            return True
        return isinstance(value, str) and (value in self._short or value in self._texts)

    def mask(self, text: str) -> str:
        if isinstance(text, Vaulted):
            return HIDDEN
        # Longest first: a secret that contains another is replaced whole.
        for secret in sorted(self._texts, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, HIDDEN)
        text = _URL_PASSWORD.sub(rf"\g<1>{HIDDEN}\g<3>", text)
        return _mask_assignments(text) if "=" in text else text

    def mask_value(self, value: Any) -> Any:
        """A whole value as rendered (a plan's "is" or "want", an audit's expectation): ``********`` when it is a
        secret of any length, else its text masked."""
        if self.is_secret(value):
            return HIDDEN
        return self.mask(value) if isinstance(value, str) else value

    def mask_lines(self, text: str) -> str:
        """A diff or a finding line: :meth:`mask`, and a short secret standing alone as a value (``= 4``)."""
        if not isinstance(text, str):
            return text
        if self.is_secret(text):
            return HIDDEN
        text = self.mask(text)
        for pattern in list(self._short.values()):
            text = pattern.sub(HIDDEN, text)
        return text

    def holds(self, value: Any) -> bool:
        """``value`` (JSON-like) holds a secret the run knows: a typed one, a text equal to one, one of
        :data:`MIN_MASKED` characters or more anywhere in a text, or a shorter one standing alone as
        :meth:`mask_lines` finds it.  Never the guessing nets (a URL's password, ``KEY=value``): a file saying
        ``use_token = true`` holds no secret, and its hash and diff keep their use."""
        if isinstance(value, dict):
            return any(self.holds(k) or self.holds(v) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return any(self.holds(v) for v in value)
        if self.is_secret(value):
            return True
        if not isinstance(value, str):
            return False
        return (any(secret in value for secret in list(self._texts))
                or any(pattern.search(value) for pattern in list(self._short.values())))

    def mask_obj(self, value: Any, lines: bool = False, keep: frozenset[str] = frozenset()) -> Any:
        """``value`` with every string masked as a whole value (``lines``: as lines, :meth:`mask_lines`; dict keys
        as text; a ``diff`` as lines); a :class:`SecretStr` or :class:`Vaulted` becomes ``********``.  A text under
        a key in ``keep`` (at any depth) is left whole: a field its model holds to a pattern (a commit id, a status
        code) carries no secret, and a secret that happens to be part of it ('cafe' in a commit id) must not spoil
        it."""
        if isinstance(value, SecretStr) or (isinstance(value, str) and not lines):
            return self.mask_value(value)
        if isinstance(value, str):
            return self.mask_lines(value)
        if isinstance(value, dict):
            return {self.mask(k) if isinstance(k, str) else k:
                    v if k in keep and isinstance(v, str) else
                    self.mask_lines(v) if k == "diff" and isinstance(v, str) else self.mask_obj(v, lines, keep)
                    for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(self.mask_obj(v, lines, keep) for v in value)
        if isinstance(value, list):
            return [self.mask_obj(v, lines, keep) for v in value]
        return value


#: The run's masker: the inventory adds the secrets it resolves, output and reports go through it.
MASK = Masker()


class MaskedStream:
    """A text stream whose writes go through a :class:`Masker` (everything else: the stream's own).

    A terminal that hung up under it (the operator's SSH session gone: EIO on every write) is pointed at /dev/null
    (:func:`bringup.process.terminal_gone`) and the write done there: the run's last words (a stop in order, an
    accept's "GPU load stopped") raised an EIO traceback, exit 1, instead of ending with the signal's code."""

    def __init__(self, raw, masker: Masker):
        self._raw, self._masker = raw, masker

    def write(self, s: str) -> int:
        masked = self._masker.mask(s)
        try:
            self._raw.write(masked)
        except OSError as e:
            if not self._hung_up(e):
                raise
            self._raw.write(masked)
        return len(s)

    def flush(self) -> None:
        try:
            self._raw.flush()
        except OSError as e:
            if not self._hung_up(e):
                raise
            self._raw.flush()

    def _hung_up(self, e: OSError) -> bool:
        from .process import terminal_gone

        try:
            fd = self._raw.fileno()
        except (AttributeError, OSError, ValueError):
            return False
        return e.errno == errno.EIO and terminal_gone(fd)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def mask_output(masker: Masker = MASK) -> None:
    """Route ``sys.stdout`` and ``sys.stderr`` through ``masker`` (once; rich consoles and invoke's
    error line write there)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, MaskedStream):
            setattr(sys, name, MaskedStream(stream, masker))


#: The key that tags a mapping as a secret reference: ``{bringup_secret: {env: NAME}}``.
TAG = "bringup_secret"
_KINDS = ("env", "file")
#: A plain secret that is a common word's shape: letters alone (one shorter than MIN_MASKED is masked alone anyway).
_PLAIN_WORD = re.compile(r"[A-Za-z]+")


def secret_place(trail: str) -> bool:
    """The variable at ``trail`` (``registry_auths.nvcr.io.password``) only takes a secret text, so a one-key
    ``{env: ...}`` / ``{file: ...}`` there cannot be ordinary data."""
    return bool(trail) and credential_name(re.split(r"[.\[]", trail)[-1])


def _untagged(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _KINDS


def is_ref(value: Any, trail: str | None = None) -> bool:
    """``{bringup_secret: {env: NAME}}`` or ``{bringup_secret: {file: PATH}}`` anywhere; the untagged ``{env:
    NAME}`` / ``{file: PATH}`` only at a ``trail`` that :func:`secret_place` names (None: nowhere)."""
    if isinstance(value, dict) and len(value) == 1 and TAG in value:
        return True
    return trail is not None and _untagged(value) and secret_place(trail)


def spelled(value: Any) -> str:
    """A reference as the inventory wrote it, for an error line: ``{bringup_secret: {env: 'NAME'}}``.  What is not
    a name or a path (the tag holding text: perhaps the secret itself) is told by its kind only."""
    ref = value.get(TAG, value) if isinstance(value, dict) else value
    if _untagged(ref) and isinstance(next(iter(ref.values())), str) and len(next(iter(ref.values()))) <= 200:
        (kind, name), = ref.items()
        inner = f"{{{kind}: {name!r}}}"
    else:
        inner = (f"(a mapping of {', '.join(repr(str(k))[:40] for k in list(ref)[:3])})" if isinstance(ref, dict)
                 else f"(a {type(ref).__name__}, not shown)")
    return f"{{{TAG}: {inner}}}" if isinstance(value, dict) and TAG in value else inner


def _from_env(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise InventoryError(f"{where}: env must name an environment variable (letters, digits, _)")
    value = os.environ.get(name)
    if not value:
        raise InventoryError(f"{where}: environment variable {name} is not set on the control machine; "
                             f"export {name}=... before the run (its value is never printed)")
    return value


#: The largest secret file read (bytes): a secret is one line; a file past this is no secret file.
MAX_SECRET_FILE = 1 << 20


def _read_secret_file(path: Path, seen: os.stat_result) -> bytes:
    """At most :data:`MAX_SECRET_FILE` + 1 bytes of ``path``, opened without following a link or waiting on a
    pipe, and only if it is still the regular file ``seen`` (replaced since: OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
            raise OSError(0, "replaced while being read")
        return read_regular(fd, MAX_SECRET_FILE)


def _from_file(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InventoryError(f"{where}: file must be the path of a file on the control machine")
    if "\x00" in name:  # os.lstat raises ValueError for it: a traceback
        raise InventoryError(f"{where}: file is a path holding a NUL byte; write the secret file's path")
    path = Path(home(name))
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise InventoryError(f"{where}: secret file {path} does not exist on the control machine") from None
    except OSError as e:
        raise InventoryError(f"{where}: secret file {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InventoryError(f"{where}: secret file {path} is not a regular file (a link or a device); "
                             "point at the file itself")
    if st.st_uid != os.getuid():
        raise InventoryError(f"{where}: secret file {path} belongs to uid {st.st_uid}, not to you "
                             f"(uid {os.getuid()}); chown it to yourself")
    if st.st_mode & 0o077:
        raise InventoryError(f"{where}: secret file {path} is mode {stat.S_IMODE(st.st_mode):04o}, readable by "
                             f"others; chmod 600 {shell_word(path)}")
    too_large = (f"{where}: secret file {path} is larger than {MAX_SECRET_FILE >> 10} KiB, no secret (a password "
                 "or a token is one line); point at the file that holds the secret alone")
    if st.st_size > MAX_SECRET_FILE:
        raise InventoryError(too_large)
    try:
        data = _read_secret_file(path, st)
        if len(data) > MAX_SECRET_FILE:  # grown since the look
            raise InventoryError(too_large)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InventoryError(f"{where}: secret file {path} cannot be read as UTF-8 text "
                             f"({getattr(e, 'strerror', None) or type(e).__name__})") from None
    text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    if not text:
        raise InventoryError(f"{where}: secret file {path} is empty")
    if "\n" in text or "\r" in text:
        raise InventoryError(f"{where}: secret file {path} holds more than one line; keep the secret alone in it")
    return text


def resolve_refs(value: Any, where: str, masker: Masker = MASK, trail: str = "") -> Any:
    """``value`` with each secret reference (:func:`is_ref`) replaced by a :class:`SecretStr` (added to
    ``masker``); a one-key ``{env: ...}`` anywhere else is left as the ordinary mapping it is.

    Errors read ``<where>: <variable.path>: secret reference <the reference as written>: ...``.
    """
    if is_ref(value, trail):
        ref = value[TAG] if TAG in value else value
        at = f"{where}: {trail or 'value'}: secret reference {spelled(value)}"
        if not _untagged(ref):
            raise InventoryError(f"{at}: {TAG} takes one key, env (an environment variable) or file (a file of "
                                 f"mode 0600): write {{{TAG}: {{env: NAME}}}} or {{{TAG}: {{file: PATH}}}}")
        (kind, name), = ref.items()
        text = _from_env(name, at) if kind == "env" else _from_file(name, at)
        masker.add(text)
        return SecretStr(text)
    if secret_place(trail) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        # Plain text where only a secret goes (Ansible's ansible_ssh_pass / ansible_become_pass, a db_password, a
        # registry's password): a secret all the same (`hosts --host` printed it).  Nothing but its name says it is
        # one: a word (`root`, `vagrant`, `password`) is masked as a value standing alone, never inside other words
        # (/root/data); anything else (`CorrectHorse9`, `s3cr3t!`) wherever it appears, as a vaulted one is.
        text = str(value)
        masker.add(text, alone=bool(_PLAIN_WORD.fullmatch(text)))
    if isinstance(value, dict):
        return {k: resolve_refs(v, where, masker, f"{trail}.{k}" if trail else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v, where, masker, f"{trail}[{i}]") for i, v in enumerate(value)]
    return value


def reveal(value: Any) -> Any:
    """``value`` with every :class:`SecretStr` replaced by its text: for what goes to the host, only."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


def holds_secret(value: Any, masker: Masker = MASK) -> bool:
    """``value`` holds a resolved secret, a vaulted text, a secret the run knows (:meth:`Masker.holds`: a plain
    ``mirror_token: abc123XYZtok`` rendered into a URL), or a URL with a password in it."""
    if isinstance(value, (SecretStr, Vaulted)):
        return True
    if isinstance(value, str):
        return bool(_URL_PASSWORD.search(value)) or masker.holds(value)
    if isinstance(value, dict):
        return any(holds_secret(v, masker) for v in value.values())
    if isinstance(value, list):
        return any(holds_secret(v, masker) for v in value)
    return False
