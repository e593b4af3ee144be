"""Errors that reach the operator as one line, and the words they quote (bounded)."""
from __future__ import annotations

import shlex
import unicodedata
from typing import Any


class BringupError(Exception):
    """Bad input or an unusable environment: printed as one line, exit 1.

    The message says what is wrong, where, and how to fix it.
    """


class InventoryError(BringupError):
    """The inventory file or a variable in it is wrong."""


class InputError(BringupError):
    """A role variable or command-line value is wrong."""


class Unreachable(Exception):
    """The host could not be connected to (network, auth, host key)."""


def first_line(text: Any) -> str:
    """The first line of ``text``, stripped ("" for blank text)."""
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


#: A value is quoted whole in an error line up to this many characters; past it, a prefix and its length.
QUOTE_MAX = 64


def shell_word(value: Any) -> str:
    """``value`` as one word a POSIX shell reads back whole: the one quoting of bringup, for the commands it runs
    (:func:`bringup.ssh.command.quote`) and for those its lines tell the operator to type (``chmod 600 PATH``: a
    file named ``pw;touch x`` pasted from a hint must run nothing)."""
    return shlex.quote(str(value))


def quoted(v: Any, limit: int = QUOTE_MAX) -> str:
    """``v``'s first line quoted for an error line, bounded: ``'1,2,3,...'... (108,894 characters)`` for a
    109 kB --instances, which was repeated whole."""
    text = str(v)
    first = first_line(text)
    if len(first) <= limit and first == text.strip():
        return repr(first)
    return f"{first[:limit]!r}... ({len(text):,} characters)"


#: Characters of a value (a flag's path or URL) a message shows at most; past it, cut with "…".
SHOWN_MAX = 200


def shown(value: Any, limit: int = SHOWN_MAX) -> str:
    """``value`` (a flag's path, URL or name) as a message shows it: on one line (its control characters, line
    breaks included, written out: :func:`printable`), and cut after ``limit`` characters with "…" (a 100,000
    character ``--url`` was echoed whole in every line that named it)."""
    text = printable(str(value)).replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "…"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab, the Unicode line and paragraph separators (a
    line break to every reader that splits lines as Python does), the Unicode format characters (category Cf:
    U+202E's right-to-left override, U+200E/F, U+2066-9, zero-width ones, that reorder or hide what is shown),
    and every byte that was not UTF-8 (kept as a surrogate escape), written out as ``\\xNN`` / ``\\uNNNN``:
    shown, never acting on a terminal, always encodable."""
    if not isinstance(text, str) or (text.isprintable() and text.isascii()):
        return text
    out = []
    for ch in text:
        n = ord(ch)
        if 0xDC80 <= n <= 0xDCFF:
            out.append(f"\\x{n - 0xDC00:02x}")
        elif ((n < 0x20 and ch not in "\n\t") or 0x7F <= n < 0xA0 or 0xD800 <= n <= 0xDFFF or n in (0x2028, 0x2029)
              or n > 0xA0 and unicodedata.category(ch) == "Cf"):
            out.append(f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
        else:
            out.append(ch)
    return "".join(out)


#: Lines that carry a program's own verdict (apt's ``E:``, ``error:``, ``fatal:``): kept before any other line.
_VERDICT = ("e: ", "error", "fatal", "failed", "cannot", "could not")


def said(output: str, limit: int = 500) -> str:
    """What a failed command said, within ``limit`` characters, cut only between lines.

    The program's verdict lines (apt's ``E: Could not get lock ...``) come first, then the last other
    lines that fit; a single line longer than the limit keeps its end, marked with ``…``.  Progress
    chatter (apt's ``Waiting for cache lock`` repeated) never pushes the verdict out.
    """
    # dict keys: once each, in order, in linear time (a docker pull or trtexec prints tens of thousands).
    lines = list(dict.fromkeys(" ".join(l.split()) for l in output.replace("\r", "\n").splitlines()))
    lines = [l for l in lines if l]
    verdict = [l for l in lines if l.lower().startswith(_VERDICT)]
    is_verdict = set(verdict)
    rest = [l for l in lines if l not in is_verdict]
    chosen: set[str] = set()
    used = 0
    for l in verdict + rest[::-1]:
        if used + len(l) + 3 > limit:
            if not chosen:
                return "…" + l[-(limit - 1):]
            if l in is_verdict:
                continue
            break
        chosen.add(l)
        used += len(l) + 3
    return " | ".join([l for l in verdict if l in chosen] + [l for l in rest if l in chosen])
