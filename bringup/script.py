"""Batch many shell snippets into one remote script, and split the output.

Each snippet runs in its own subshell between two marker lines carrying a
per-run random token, so one snippet's failure or output can never be taken
for another's, and a failing step is attributed to the resource it belongs to.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

__all__ = ["READ_LANES", "Section", "batch", "split"]


@dataclass
class Section:
    """The output of one snippet: its exit status and what it printed."""

    key: str
    rc: int | None  # None: the script stopped before this snippet ended
    output: str


#: Lanes a read script runs its snippets in (``batch(..., lanes=READ_LANES)``): reads and facts only look,
#: so they may run side by side; most wait on something (systemd's bus, dockerd, a slow program such as
#: compose v1), and the round trip costs the slowest lane, not the sum.
READ_LANES = 6


def batch(snippets: list[tuple[str, str]], *, stop_on_error: bool = False,
          stderr: str = "null", token: str | None = None, lanes: int = 1) -> tuple[str, str]:
    """Build one script of ``(key, snippet)`` pairs; returns ``(script, token)``.

    ``stderr``: ``"null"`` discards each snippet's stderr (reads, facts),
    ``"merge"`` folds it into its output (writes, so errors are attributed).
    ``stop_on_error``: the first failing snippet ends the script (a role's
    writes: later steps may depend on earlier ones).
    ``lanes`` > 1 (snippets that only read, never with ``stop_on_error``): the
    snippets run in that many background lanes, dealt round-robin, each lane
    writing its sections to its own file in a ``mktemp -d`` folder that the
    script removes on exit, signals included; the files are printed once
    every lane is done, so sections never interleave.  Where no folder can be
    made or a lane could not write its file (a full or read-only ``/tmp``),
    the snippets run one after another as with one lane; the output has the
    same sections either way.
    """
    if lanes > 1 and stop_on_error:
        raise ValueError("lanes run snippets side by side: stop_on_error needs them in order")
    token = token or secrets.token_hex(8)
    redir = "2>/dev/null" if stderr == "null" else "2>&1"
    lanes = min(lanes, len(snippets))
    if lanes <= 1:
        lines = ["exec </dev/null"]
        for i, (key, snippet) in enumerate(snippets):
            lines.append(f"printf '\\n@@{token}:B:{i}\\n'")
            lines.append(f"( {snippet}\n) {redir}")
            lines.append(f"_rc=$?; printf '\\n@@{token}:E:{i}:%d\\n' \"$_rc\"")
            if stop_on_error:
                lines.append('[ "$_rc" -eq 0 ] || exit "$_rc"')
        lines.append("exit 0")
        return "\n".join(lines) + "\n", token
    fn = f"_b{token}"
    lines = ["exec </dev/null"]
    for i, (_, snippet) in enumerate(snippets):
        # One function per snippet, its body a subshell: an `exit` in a snippet ends only that snippet.
        lines.append(f"{fn}_{i}() ( {snippet}\n) {redir}")
    lines.append(f"{fn}() {{ printf '\\n@@{token}:B:%d\\n' \"$1\"; {fn}_$1; "
                 f"printf '\\n@@{token}:E:%d:%d\\n' \"$1\" \"$?\"; }}")
    deal = [list(range(k, len(snippets), lanes)) for k in range(lanes)]
    lines.append(f"{fn}_all() {{ for _i in {' '.join(map(str, range(len(snippets))))}; do {fn} \"$_i\"; done; }}")
    lines.append(f'if _d=$(mktemp -d "${{TMPDIR:-/tmp}}/bringup-read.XXXXXX" 2>/dev/null); then')
    lines.append("  trap 'rm -rf \"$_d\"' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM")
    for k, idx in enumerate(deal):
        lines.append(f"  {{ for _i in {' '.join(map(str, idx))}; do {fn} \"$_i\"; done; }} >\"$_d/{k}\" &")
        lines.append(f"  _p{k}=$!")
    lines.append("  _ok=1")
    for k in range(lanes):
        lines.append(f'  wait "$_p{k}" || _ok=')
    files = " ".join(f'"$_d/{k}"' for k in range(lanes))
    lines.append(f'  if [ -n "$_ok" ]; then cat {files}; else {fn}_all; fi')
    lines.append(f"else {fn}_all; fi")
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
