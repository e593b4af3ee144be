"""Ansible Vault: values (``!vault |``) and whole files that ``ansible-vault`` encrypted, decrypted as Ansible does.

The format (``ansible/parsing/vault/__init__.py``): a header line ``$ANSIBLE_VAULT;1.1;AES256`` (or
``$ANSIBLE_VAULT;1.2;AES256;<vault id>``), then hex lines; joined and unhexlified they are three lines,
``hex(salt)``, ``hex(HMAC)``, ``hex(ciphertext)``.  The keys come from PBKDF2-HMAC-SHA256 of the password
with the salt, 10000 iterations, 80 bytes: the AES-256 key, the HMAC-SHA256 key and the CTR counter.  The
HMAC of the ciphertext is checked before anything is decrypted; the plaintext is PKCS7-padded.  Every
primitive is the ``cryptography`` library's; nothing here is cipher code.

The passwords come from ``--vault-password-file FILE``, ``--vault-id [label@]FILE`` (each repeatable) and
``ANSIBLE_VAULT_PASSWORD_FILE`` (:func:`vault_from_options`).  A password file that is executable is run
(no arguments, at most :data:`SCRIPT_SECONDS`, its output capped at :data:`MAX_PASSWORD_BYTES`, its
whole process group ended after) and its output is the password, as Ansible does; otherwise
its text is; surrounding whitespace is dropped either way.  A vault whose id matches a password's label is
tried with that password first, then with the others (Ansible's default, ``vault_id_match = False``).

Everything decrypted is a secret: its text is added to the run's masker (:data:`bringup.secrets.MASK`),
so that output and reports show ``********``; no error line holds a password or a decrypted text.
"""
from __future__ import annotations

import binascii
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from ..child import capture, how_ended
from ..errors import InventoryError, shell_word, shown
from ..secrets import MASK, Masker, Vaulted
from ..userfile import home, kind, read_capped

__all__ = ["HEADER", "SCRIPT_SECONDS", "VaultError", "VaultSecret", "Vault", "Vaulted", "is_vaulted",
           "holds_vaulted", "vault_from_options", "read_password"]

HEADER = "$ANSIBLE_VAULT;"
#: Longest an executable password file may run.
SCRIPT_SECONDS = 30
#: A password file bigger than this is not a password file.
MAX_PASSWORD_BYTES = 64 * 1024
#: The most password tries (key derivations, ~6 ms each) one load makes: 2,000 !vault values took 13 s, with six
#: passwords each over a minute.  An inventory's values opened with the right password take one try each.
MAX_DERIVATIONS = 1000
#: Ansible's label for a password given without one (``--vault-password-file``).
DEFAULT_ID = "default"


class VaultError(InventoryError):
    """A vault that cannot be opened (no password, wrong password, damaged): one line, no secret in it."""


def is_vaulted(text: str) -> bool:
    """``text`` is an ansible-vault envelope (a whole file, or a ``!vault`` value)."""
    return text.lstrip().startswith(HEADER)


def holds_vaulted(value) -> bool:
    """``value`` is, or holds, text a vault held."""
    if isinstance(value, Vaulted):
        return True
    if isinstance(value, dict):
        return any(holds_vaulted(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_vaulted(v) for v in value)
    return False


@dataclass(frozen=True)
class VaultSecret:
    """One password and where it came from (``--vault-id prod@FILE``): ``repr`` never shows the password."""

    label: str
    origin: str
    password: bytes = field(repr=False)


def read_password(path: str, label: str = DEFAULT_ID, flag: str = "--vault-password-file",
                  timeout: float = SCRIPT_SECONDS) -> VaultSecret:
    """The password in ``path``: its text, or the output of running it when it is executable."""
    p = Path(home(path))
    origin = f"{flag} {shown(path)}" if label == DEFAULT_ID else f"{flag} {shown(label)}@{shown(path)}"
    what = kind(p, VaultError, origin)
    if what != "file":
        raise VaultError(f"{origin}: {'no such file' if what == 'missing' else 'not a regular file'}; give a file "
                         "holding the vault password, or a program printing it")
    if os.access(p, os.X_OK):
        data = _run_password_program(p, origin, path, timeout)
    else:
        data = read_capped(p, MAX_PASSWORD_BYTES, VaultError, missing=f"{origin}: no such password file",
                           unreadable=f"{origin}: cannot read the password file: ",
                           too_large=f"{origin}: more than {MAX_PASSWORD_BYTES // 1024} KiB; is it the password file?")
    password = data.strip()
    if not password:
        raise VaultError(f"{origin}: the password is empty")
    return VaultSecret(label, origin, password)


def _run_password_program(p: Path, origin: str, path: str, timeout: float) -> bytes:
    """The output of the password program ``p`` (:func:`bringup.child.capture`: its own process group, at most
    :data:`MAX_PASSWORD_BYTES` read, ended group and all past ``timeout``, a flood or its exit)."""
    try:
        # By its path, never by name: a relative "pw" would be looked up on PATH and run another program.
        got = capture([str(p.absolute())], timeout=timeout, cap=MAX_PASSWORD_BYTES, err_cap=0,
                      what=f"the password program of {origin}")
    except OSError as e:
        raise VaultError(f"{origin}: the password program cannot run ({e.strerror}); fix its #! line, or "
                         f"chmod -x {shell_word(path)} if it is a plain password file") from None
    if got.why == "timeout":
        raise VaultError(f"{origin}: the password program gave no password within {timeout:g} s (killed); "
                         "make it print the password without waiting for input")
    if got.why == "too large":
        raise VaultError(f"{origin}: the password program printed more than {MAX_PASSWORD_BYTES // 1024} KiB "
                         "(killed); it must print the password alone")
    if got.why is not None or got.rc != 0:
        # Its output is not shown: it may hold the password.
        how = how_ended(got.rc) if got.why is None else f"was ended ({got.why})"
        raise VaultError(f"{origin}: the password program {how}; run it by hand to see why")
    return got.out


@dataclass
class Vault:
    """The passwords of a run, and what opens an envelope with them."""

    secrets: list[VaultSecret] = field(default_factory=list)
    masker: Masker = field(default=MASK, repr=False)
    #: Key derivations done (each PBKDF2's 10,000 rounds, ~6 ms), and each envelope opened: the same text is
    #: opened once.
    derived: int = field(default=0, repr=False)
    opened: dict = field(default_factory=dict, repr=False)
    #: The password that opened the last envelope: tried next, after the one its label names.
    last: VaultSecret | None = field(default=None, repr=False)

    def decrypt(self, envelope: str, where: str) -> str:
        """The text that ``envelope`` holds; ``where`` (``file`` or ``file:line``) opens any error line."""
        if envelope in self.opened:
            return Vaulted(self.opened[envelope])
        label, lines = _header(envelope, where)
        named = f" (vault id {label!r})" if label else ""
        if not self.secrets:
            raise VaultError(f"{where}: encrypted with ansible-vault{named} and no vault password given; pass "
                             "--vault-password-file FILE or --vault-id [label@]FILE (or set "
                             "ANSIBLE_VAULT_PASSWORD_FILE)")
        salt, mac, ciphertext = _body(lines, where)
        # The matching label first, then the password that opened the last one.
        tried = sorted(self.secrets, key=lambda s: (s.label != label, s is not self.last))
        for secret in tried:
            self.derived += 1
            if self.derived > MAX_DERIVATIONS:
                raise VaultError(f"{where}: more ansible-vault work than bringup does for an inventory ("
                                 f"{MAX_DERIVATIONS:,} password tries, each 10,000 PBKDF2 rounds, over its "
                                 "!vault values); encrypt the file whole (ansible-vault encrypt) rather than each "
                                 "value, or label the values and passwords with --vault-id")
            plain = _open(secret.password, salt, mac, ciphertext)
            if plain is not None:
                try:
                    text = plain.decode("utf-8")
                except UnicodeDecodeError:
                    raise VaultError(f"{where}: the ansible-vault text{named}, decrypted, is not UTF-8") from None
                self.masker.add(text)
                self.last = secret
                if len(self.opened) < MAX_DERIVATIONS:
                    self.opened[envelope] = text
                return Vaulted(text)
        given = ", ".join(s.origin for s in tried)
        raise VaultError(f"{where}: wrong vault password: none given opens this ansible-vault text{named} "
                         f"(tried {given}; or the text was altered); check the password file or the --vault-id label")

    def open_tree(self, value, where: str):
        """``value`` with each ``{"__ansible_vault": ENVELOPE}`` (how ``ansible-inventory --list`` writes a
        ``!vault`` value) decrypted."""
        if isinstance(value, dict):
            if len(value) == 1 and isinstance(value.get("__ansible_vault"), str):
                return self.decrypt(value["__ansible_vault"], where)
            return {k: self.open_tree(v, where) for k, v in value.items()}
        if isinstance(value, list):
            return [self.open_tree(v, where) for v in value]
        return value

    def hide(self, value):
        """``value`` (a whole file's decrypted variables) with every text :class:`Vaulted` and masked from now
        on, every number's text masked too; the mappings themselves are kept (where their keys are is known by their identity)."""
        if isinstance(value, str):
            self.masker.add(value)
            return Vaulted(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # A number stays a number (a role computes with it); its text is masked as a secret's is.
            self.masker.add(str(value))
            return value
        if isinstance(value, dict):
            for k, v in value.items():
                value[k] = self.hide(v)
        elif isinstance(value, list):
            value[:] = [self.hide(v) for v in value]
        return value


def _header(envelope: str, where: str) -> tuple[str, list[str]]:
    """The vault id of ``envelope`` (empty in format 1.1) and its hex lines."""
    lines = envelope.strip().splitlines()
    header = [p.strip() for p in lines[0].split(";")] if lines else []
    if not header or header[0] != HEADER.rstrip(";"):
        # Not quoted: what follows `!vault` by mistake may be the secret itself.
        raise VaultError(f"{where}: not an ansible-vault text (it starts $ANSIBLE_VAULT;1.1;AES256); paste what "
                         "ansible-vault encrypt_string printed")
    if len(header) < 3 or header[1] not in ("1.1", "1.2"):
        raise VaultError(f"{where}: an ansible-vault format bringup does not know ({';'.join(header[:2])}); "
                         "formats 1.1 and 1.2 are read: re-encrypt it with ansible-vault rekey")
    if header[2] != "AES256":
        raise VaultError(f"{where}: ansible-vault cipher {header[2]!r} is not AES256; re-encrypt it with "
                         "ansible-vault rekey")
    return (header[3] if len(header) >= 4 else ""), lines[1:]


def _body(lines: list[str], where: str) -> tuple[bytes, bytes, bytes]:
    """The salt, the HMAC and the ciphertext of the hex lines."""
    try:
        inner = binascii.unhexlify("".join(line.strip() for line in lines))
        salt, mac, ciphertext = inner.split(b"\n", 2)
        return binascii.unhexlify(salt), binascii.unhexlify(mac), binascii.unhexlify(ciphertext)
    except (binascii.Error, ValueError):
        raise VaultError(f"{where}: the ansible-vault text is damaged (not the hex lines ansible-vault writes); "
                         "encrypt it again") from None


def _open(password: bytes, salt: bytes, mac: bytes, ciphertext: bytes) -> bytes | None:
    """The plaintext, or None when the HMAC says the password is not this vault's."""
    key = PBKDF2HMAC(algorithm=hashes.SHA256(), length=80, salt=salt, iterations=10000).derive(password)
    check = HMAC(key[32:64], hashes.SHA256())
    check.update(ciphertext)
    try:
        check.verify(mac)
    except InvalidSignature:
        return None
    decryptor = Cipher(algorithms.AES(key[:32]), modes.CTR(key[64:80])).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(decryptor.update(ciphertext) + decryptor.finalize()) + unpadder.finalize()
    except ValueError:
        return None


def vault_from_options(password_files=None, vault_ids=None, environ=None,
                       timeout: float = SCRIPT_SECONDS) -> Vault:
    """The passwords that ``--vault-password-file`` and ``--vault-id`` (text or lists) and
    ``ANSIBLE_VAULT_PASSWORD_FILE`` name; read now, so a missing file is one line before anything else."""
    environ = os.environ if environ is None else environ
    files = [password_files] if isinstance(password_files, str) else list(password_files or [])
    ids = [vault_ids] if isinstance(vault_ids, str) else list(vault_ids or [])
    secrets = [read_password(f, timeout=timeout) for f in files]
    for spec in ids:
        label, sep, path = str(spec).rpartition("@")
        label = label if sep else DEFAULT_ID
        if not path or path == "prompt" or (sep and not label):
            raise VaultError(f"--vault-id {spec!r}: give [label@]FILE, a password file or a program printing the "
                             "password (bringup never prompts)")
        secrets.append(read_password(path, label, "--vault-id", timeout))
    env_file = environ.get("ANSIBLE_VAULT_PASSWORD_FILE")
    if env_file:
        secrets.append(read_password(env_file, DEFAULT_ID, "ANSIBLE_VAULT_PASSWORD_FILE", timeout))
    return Vault(secrets)
