"""OpenPGP public keys as apt's ``signed-by`` takes them, read and checked on the control machine: the packets of a
key file (binary or ASCII-armored), what a file holds when it is no public key (a secret key, a signature, text:
named, its content never shown), the binary keyring ``gpg --dearmor`` would write, and the key file a repository
variable names, read with a size cap."""
from __future__ import annotations

import base64
import re

from ..errors import InputError
from ..userfile import read_capped

__all__ = ["KEY_MAX", "dearmor", "key_file", "openpgp_packets", "openpgp_problem"]

_ARMOR_BEGIN = re.compile(rb"-----BEGIN PGP ([A-Z ,/0-9]+)-----")
_BEGIN = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = b"-----END PGP PUBLIC KEY BLOCK-----"
#: OpenPGP packet tags named when a key file holds something else (RFC 9580, 5.).
_TAGS = {1: "an encrypted session key", 2: "a signature", 5: "a SECRET key", 7: "a SECRET subkey",
         8: "compressed data", 11: "literal data", 14: "a public subkey (no primary key)"}


def _crc24(data: bytes) -> int:
    """The armor checksum (RFC 9580, 6.1)."""
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def openpgp_packets(data: bytes):
    """The OpenPGP packets of ``data`` as (tag, body); ValueError where the stream is not one."""
    i = 0
    while i < len(data):
        first = data[i]
        if not first & 0x80:
            raise ValueError(f"byte {i} is not an OpenPGP packet header")
        if first & 0x40:  # new format: tag in 6 bits, 1, 2 or 5 length octets
            tag, i = first & 0x3F, i + 1
            if i >= len(data):
                raise ValueError("the data ends inside a packet header")
            o = data[i]
            if o < 192:
                length, i = o, i + 1
            elif o < 224:
                if i + 1 >= len(data):
                    raise ValueError("the data ends inside a packet header")
                length, i = ((o - 192) << 8) + data[i + 1] + 192, i + 2
            elif o == 255:
                if i + 4 >= len(data):
                    raise ValueError("the data ends inside a packet header")
                length, i = int.from_bytes(data[i + 1:i + 5], "big"), i + 5
            else:
                raise ValueError("a partial-length packet (data, not a key)")
        else:  # old format: tag in 4 bits, length type in 2
            tag, ltype, i = (first >> 2) & 0x0F, first & 0x03, i + 1
            if ltype == 3:
                length = len(data) - i
            else:
                n = 1 << ltype
                if i + n > len(data):
                    raise ValueError("the data ends inside a packet header")
                length, i = int.from_bytes(data[i:i + n], "big"), i + n
        if i + length > len(data):
            raise ValueError("a packet runs past the end of the data")
        yield tag, data[i:i + length]
        i += length


def _unarmor(data: bytes) -> bytes:
    """The binary body of an armored public key block; ValueError says what is wrong with the armor."""
    body = data.split(_BEGIN, 1)[1]
    if _END not in body:
        raise ValueError("without its END line (cut short?)")
    lines = [l.strip() for l in body.split(_END, 1)[0].strip(b"\r\n").splitlines()]
    if b"" in lines:  # armor headers ("Comment: ...") end at the first empty line
        lines = lines[lines.index(b"") + 1:]
    checksum = [l for l in lines if l.startswith(b"=")]
    try:
        binary = base64.b64decode(b"".join(l for l in lines if l and not l.startswith(b"=")), validate=True)
    except ValueError:
        raise ValueError("whose body is not valid base64") from None
    if checksum:
        try:
            want = int.from_bytes(base64.b64decode(checksum[0][1:], validate=True), "big")
        except ValueError:
            raise ValueError("with a malformed checksum line") from None
        if _crc24(binary) != want:
            raise ValueError("whose CRC24 checksum does not match (damaged)")
    return binary


def _describe_text(data: bytes) -> str:
    m = _ARMOR_BEGIN.search(data)
    if m:
        return f"an armored PGP {m.group(1).decode()}, not a PUBLIC KEY BLOCK"
    if data.lstrip().startswith(b"-----BEGIN"):
        return "a PEM block (" + data.lstrip().split(b"\n", 1)[0].strip(b"- ").decode("ascii", "replace")[:40] + ")"
    return "text (its content is not shown)"


def openpgp_problem(data: bytes) -> str | None:
    """What is wrong with ``data`` as an OpenPGP public key for apt (armored or binary); None: nothing.

    Armored: the ``PUBLIC KEY BLOCK`` header, a valid base64 body, the CRC24
    checksum when there is one.  Binary (or the armor's body): a well-formed
    packet stream whose first packet is a public key (tag 6), version 3-6.
    The file's content is never quoted: it may be anything, a secret too.
    """
    if not data.strip():
        return "empty"
    if _BEGIN in data:
        try:
            binary = _unarmor(data)
        except ValueError as e:
            return f"an armored public key block {e}"
        problem = openpgp_problem(binary) if binary else "an armored public key block with an empty body"
        return problem and f"an armored block holding {problem}"
    if not data[0] & 0x80:
        return _describe_text(data) if all(b in b"\t\r\n" or 32 <= b < 127 for b in data[:512]) \
            else "binary data that is not an OpenPGP packet stream"
    try:
        packets = list(openpgp_packets(data))
    except ValueError as e:
        return f"binary data that is not an OpenPGP packet stream ({e})"
    tag, body = packets[0]
    if tag != 6:
        return f"OpenPGP data starting with {_TAGS.get(tag, f'a packet of tag {tag}')}, not a public key"
    if not body or body[0] not in (3, 4, 5, 6):
        return f"a public-key packet of unknown version {body[0] if body else 'none'}"
    if any(t in (5, 7) for t, _ in packets):
        return "OpenPGP data holding a SECRET key; give the public key only"
    return None


def dearmor(data: bytes) -> bytes:
    """An ASCII-armored OpenPGP key → the binary keyring apt's ``signed-by`` reads (``gpg --dearmor``).

    Checked first with :func:`openpgp_problem`: anything that is not a public key is refused.
    """
    problem = openpgp_problem(data)
    if problem:
        raise InputError(f"the repository key is not an OpenPGP public key: it is {problem}")
    return _unarmor(data) if _BEGIN in data else data


#: The largest repository key file read (a repository's public key is kilobytes; Debian's whole keyring ~100 KiB).
KEY_MAX = 1 << 20


def key_file(path, var: str) -> bytes:
    """A repository variable's key file on the control machine, read with a size cap (one line where it is
    missing, unreadable, too large, or no regular file)."""
    return read_capped(path, KEY_MAX, InputError,
                       missing=f"{var}: key file {path} does not exist on the control machine",
                       unreadable=f"{var}: key file {path} cannot be read: ",
                       too_large=f"{var}: key file {path} is larger than {KEY_MAX >> 20} MiB: not a repository's key",
                       not_regular=f"{var}: key file {path} is not a regular file (a folder, a pipe or a device)")
