"""SSH trust: the run's client key pair, and each host's key pinned in a known_hosts file."""
from __future__ import annotations

import os
from pathlib import Path

from .common import SandboxError


def _key_pair(workdir: Path) -> Path:
    """Return workdir's ed25519 private key file, generating the pair once."""
    key = workdir / "id_ed25519"
    pub = workdir / "id_ed25519.pub"
    if key.exists() and pub.exists():
        return key
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    line = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH)
    # 0600 from creation: ssh refuses keys that others could read.
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    pub.write_bytes(line + b" bringup-sandbox\n")
    return key


def _pin_host_key(known_hosts: Path, port: int, name: str, fields: list[str]) -> None:
    """Write ``known_hosts`` with the one key of 127.0.0.1:``port`` (``fields``: the .pub file's words)."""
    if len(fields) < 2 or fields[0] != "ssh-ed25519":
        raise SandboxError(f"{name}: unexpected host key file: {' '.join(fields)[:60]!r}")
    known_hosts.write_text(f"[127.0.0.1]:{port} {fields[0]} {fields[1]}\n")
