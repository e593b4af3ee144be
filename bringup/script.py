"""Batch many shell snippets into one remote script, and split the output.

Each snippet runs in its own subshell between two marker lines carrying a
per-run random token, so one snippet's failure or output can never be taken
for another's, and a failing step is attributed to the resource it belongs to.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

__all__ = ["Section", "batch", "split"]


@dataclass
class Section:
    """The output of one snippet: its exit status and what it printed."""

    key: str
    rc: int | None  # None: the script stopped before this snippet ended
    output: str


def batch(snippets: list[tuple[str, str]], *, stop_on_error: bool = False,
          stderr: str = "null", token: str | None = None) -> tuple[str, str]:
    """Build one script of ``(key, snippet)`` pairs; returns ``(script, token)``.

    ``stderr``: ``"null"`` discards each snippet's stderr (reads, facts),
    ``"merge"`` folds it into its output (writes, so errors are attributed).
    ``stop_on_error``: the first failing snippet ends the script (a role's
    writes: later steps may depend on earlier ones).
    """
    token = token or secrets.token_hex(8)
    redir = "2>/dev/null" if stderr == "null" else "2>&1"
    lines = ["exec </dev/null"]
    for i, (key, snippet) in enumerate(snippets):
        lines.append(f"printf '\\n@@{token}:B:{i}\\n'")
        lines.append(f"( {snippet}\n) {redir}")
        lines.append(f"_rc=$?; printf '\\n@@{token}:E:{i}:%d\\n' \"$_rc\"")
        if stop_on_error:
            lines.append('[ "$_rc" -eq 0 ] || exit "$_rc"')
    lines.append("exit 0")
    return "\n".join(lines) + "\n", token


def split(stdout: str, token: str, keys: list[str]) -> list[Section]:
    """Split a batched script's stdout back into one :class:`Section` per key."""
    out = []
    pat = re.compile(rf"\n@@{token}:B:(\d+)\n(.*?)\n@@{token}:E:\1:(\d+)\n", re.S)
    found = {int(m.group(1)): (int(m.group(3)), m.group(2)) for m in pat.finditer(stdout)}
    # A section that began but never ended: the script died inside it.
    begun = re.compile(rf"\n@@{token}:B:(\d+)\n(.*)\Z", re.S)
    for i, key in enumerate(keys):
        if i in found:
            rc, text = found[i]
            out.append(Section(key, rc, text))
        else:
            m = None
            for m in begun.finditer(stdout):
                pass
            partial = m.group(2) if m and int(m.group(1)) == i else ""
            out.append(Section(key, None, partial))
    return out
