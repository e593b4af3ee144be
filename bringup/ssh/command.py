"""The one quoting helper: every remote command is built here.

    >>> sh("sysctl -n -- %s", "net.core.somaxconn")
    'sysctl -n -- net.core.somaxconn'
    >>> sh("cat -- %s", "/tmp/a b")
    "cat -- '/tmp/a b'"

Arguments are always quoted with :func:`shlex.quote` (:func:`bringup.errors.shell_word`); the format string is
trusted code and is never built from input.
"""
from __future__ import annotations

from ..errors import shell_word

__all__ = ["sh", "quote", "join"]


def quote(value: object) -> str:
    """Quote one value for a POSIX shell (:func:`bringup.errors.shell_word`, also the hints' quoting)."""
    return shell_word(value)


def sh(fmt: str, *args: object) -> str:
    """Format ``fmt`` with each ``%s`` replaced by a quoted argument."""
    return fmt % tuple(quote(a) for a in args)


def join(argv: list[object] | tuple[object, ...]) -> str:
    """Quote and join an argument vector."""
    return " ".join(quote(a) for a in argv)
