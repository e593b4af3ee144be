"""Errors that reach the operator as one line."""
from __future__ import annotations


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
