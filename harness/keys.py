"""SSH trust: the run's client key pair, and each host's key pinned in a known_hosts file."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from .common import SandboxError


_KEY_LOCK = threading.Lock()


def _key_pair(workdir: Path) -> Path:
    """Return workdir's ed25519 private key file, generating the pair once.

    Hosts are set up in parallel (threads, and pytest processes sharing the folder): the pair is made under a
    lock (a thread lock and an flock on the folder's lock file) and written whole (a temporary file each,
    renamed, the public key last), so no caller sees a private key beside another pair's public key."""
    key = workdir / "id_ed25519"
    pub = workdir / "id_ed25519.pub"
    if key.exists() and pub.exists():
        return key
    import fcntl

    with _KEY_LOCK, open(workdir / ".id_ed25519.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
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
        tmp = workdir / f".id_ed25519.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        os.replace(tmp, key)
        tmp_pub = workdir / f".id_ed25519.pub.{os.getpid()}.tmp"
        tmp_pub.write_bytes(line + b" bringup-sandbox\n")
        os.replace(tmp_pub, pub)
    return key


def _pin_host_key(known_hosts: Path, port: int, name: str, fields: list[str]) -> None:
    """Write ``known_hosts`` with the one key of 127.0.0.1:``port`` (``fields``: the .pub file's words)."""
    if len(fields) < 2 or fields[0] != "ssh-ed25519":
        raise SandboxError(f"{name}: unexpected host key file: {' '.join(fields)[:60]!r}")
    known_hosts.write_text(f"[127.0.0.1]:{port} {fields[0]} {fields[1]}\n")
