"""Whether a private key file named for a login can be used, looked at before connecting and never opened.

paramiko reads a key file whole and blocking: a FIFO named as ``IdentityFile`` (ssh_config, ``-i``,
``-o IdentityFile=``) waited for a writer for ever, ``/dev/zero`` ran until memory ran out, a 1 GiB file was read
whole.  A private key is a few KiB: anything that is not a regular file of at most :data:`MAX_KEY_BYTES` is
refused with one line naming the path and where it was set.
"""
from __future__ import annotations

import os
import stat

from ..errors import InventoryError
from ..secrets import HIDDEN

__all__ = ["MAX_KEY_BYTES", "key_problem", "check_keys"]

#: The largest private key file taken (an RSA 16384-bit key in PEM is ~13 KiB).
MAX_KEY_BYTES = 1 << 20


#: :func:`key_problem`'s words for an empty file: an IdentityFile of an ssh config that is empty is passed over
#: (ssh says "invalid format" and tries the next key), never handed to paramiko (its read of /proc/kmsg waits).
_EMPTY = "empty (or a kernel file such as /proc/kmsg), no private key"


def key_problem(path: str, *, missing_ok: bool = False) -> str:
    """Why the private key file ``path`` cannot be used ('' when it can), from its ``stat`` alone: a pipe or a
    device is never opened.  ``missing_ok``: a missing file is passed over, as ``ssh`` passes over an
    IdentityFile of its config that does not exist."""
    if "\x00" in str(path):  # os.stat raises ValueError for it: a traceback
        return "a path holding a NUL byte"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if missing_ok:
            return ""
        return "no such file" + (" (a link to nothing)" if os.path.islink(path) else "")
    except OSError as e:
        return f"cannot be looked at ({e.strerror or e})"
    if stat.S_ISDIR(st.st_mode):
        return "not a file (a folder)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a pipe, a device or a socket), no private key"
    if st.st_size == 0:  # (paramiko's blocking read of /proc/kmsg, a kernel file of size 0, waited for ever)
        return _EMPTY
    if st.st_size > MAX_KEY_BYTES:
        return f"larger than {MAX_KEY_BYTES >> 20} MiB, no private key (one is a few KiB)"
    if not os.access(path, os.R_OK):
        return "not readable by this user"
    return ""


def check_keys(files: tuple[str, ...], given_by: dict[str, str], otherwise: str, where: str) -> tuple[str, ...]:
    """The IdentityFiles to offer: each a regular file of a key's size; a missing or empty one is passed over, as
    ssh passes over a key it cannot load; anything else (a folder, a pipe, a device, too large, unreadable) is one
    line naming it and what set it (a vaulted path is not shown)."""
    kept = []
    for path in files:
        why = key_problem(path, missing_ok=True)
        if why == _EMPTY:
            continue
        if not why:
            kept.append(path)
        else:
            by = given_by.get(path, otherwise)
            shown = HIDDEN if by.endswith("vaulted") else path
            raise InventoryError(f"{where}: IdentityFile {shown} (set by {by}): {why}; name the private key file "
                                 "itself")
    return tuple(kept)
