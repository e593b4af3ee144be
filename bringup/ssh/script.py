"""Batch many shell snippets into one remote script, and split the output.

Each snippet runs in its own subshell between two marker lines carrying a
per-run random token, so one snippet's failure or output can never be taken
for another's, and a failing step is attributed to the resource it belongs to.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass

from .command import sh

__all__ = ["READ_LANES", "SECTION_MAX", "TIMED_OUT", "KILLED", "READ_TAG_ENV", "Section", "batch", "split", "end_left",
           "read_tag"]


@dataclass
class Section:
    """The output of one snippet: its exit status and what it printed."""

    key: str
    rc: int | None  # None: the script stopped before this snippet ended, or its output was cut (``cut``)
    output: str
    #: The snippet printed more than its bound (``batch(section_max=...)``): ``output`` is its first bytes only,
    #: never a whole answer.
    cut: bool = False


#: Lanes a read script runs its snippets in (``batch(..., lanes=READ_LANES)``): reads and facts only look,
#: so they may run side by side; most wait on something (systemd's bus, dockerd, a slow program such as
#: compose v1), and the round trip costs the slowest lane, not the sum.
READ_LANES = 6

#: The most one read snippet may print (bytes); facts and reads print kilobytes.  Each snippet of a read script
#: is bounded on its own: one that streams without end (a hung ``nvidia-smi`` printing a megabyte a second) is
#: cut there and fails alone, named, while the others are read; a lane's file on the host holds at most its
#: snippets' bounds.
SECTION_MAX = 16 * 1024 * 1024


def _bounded(key: str, body: str, token: str, limit: int) -> str:
    """Run ``body`` (a command) between its section's markers, its stdout cut after ``limit`` + 1 bytes.

    ``head -c`` ends the snippet by SIGPIPE at its bound (an endless output stops there, not at the host's
    disk); one byte over the bound says, to :func:`split`, that the output was cut.  The snippet's own status
    travels through fd 3 (the pipe's status is ``head``'s); the snippet sees neither fd 3 nor 4, so that a
    program it leaves running cannot hold the section open.
    """
    return (f"{{ printf '\\n@@{token}:B:%d\\n' {key}; "
            f"_r=$( {{ {{ {body} 3>&- 4>&-; echo \"$?\" >&3; }} | head -c {limit + 1} >&4; }} 3>&1 ); "
            f"printf '\\n@@{token}:E:%d:%d\\n' {key} \"${{_r:-141}}\"; }} 4>&1")


#: A snippet's status when it ran past ``batch(time_limit_s=...)`` (timeout(1) ended it by SIGUSR1: 128 + 10);
#: :data:`KILLED` where it outlived the signal too (SIGKILL, 5 s later).
TIMED_OUT = 138
KILLED = 137


def _timer(limit_s: int) -> str:
    """The script's first line under a time limit: ``$_t`` runs a command under timeout(1) where the host's
    timeout takes ``--preserve-status`` (coreutils 8.21 on); elsewhere, unbounded as before."""
    t = f"timeout --preserve-status -s USR1 -k 5 {int(limit_s)}"
    return f'_t=; if timeout --preserve-status -s USR1 -k 5 5 true 2>/dev/null; then _t="{t}"; fi'


#: What a timed snippet left running in its process group (timeout(1)'s, named by its pid ``%s``) once the snippet
#: itself ended: a child that keeps the snippet's stdout open (``nvidia-smi`` leaving a helper behind) held the
#: section's ``head`` until the time limit, which then discarded the snippet's whole, valid output.  A read
#: leaves nothing running; where the host has no usable timeout(1) there is no group of the snippet's own, and
#: the kill finds none.
END_LEFT = 'kill -KILL -"%s" 2>/dev/null'  # dash's kill takes no --

#: The environment variable that tags each timed snippet's processes on the host (a value per snippet and script):
#: what left the snippet's process group (``setsid``, a daemon's double fork) still carries it, and the read
#: script's signal traps end what carries it.  A snippet's end does not look for it (a scan of every process's
#: environment: ~65 ms of the host's CPU per snippet where 2,000 processes run, 28 snippets a facts round trip):
#: what let go of the output runs on, as a daemon a command started may; what holds it is bounded by
#: command_timeout on an SSH host, and ended once the command exited on a local one (LocalTransport).
READ_TAG_ENV = "BRINGUP_READ"

#: What still carries a tag (``%s``: ``VAR=value``, quoted): killed, three rounds (one that forked meanwhile).
#: Where grep has no ``-z`` (not GNU), nothing is found: the group kill alone.
_END_TAGGED = ('for _n in 1 2 3; do _l=$(grep -lzxF -e %s /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); '
               '[ -n "$_l" ] || break; kill -KILL $_l 2>/dev/null; done')


def read_tag(token: str) -> str:
    """The tag (:data:`READ_TAG_ENV`) of the timed snippets of a script whose markers are ``token``: made from it one
    way, so that a snippet reading its own environment learns nothing of the markers, and a state read kept for the
    next run (:func:`bringup.ssh.runlock.keep_request`) is the same script with the next run's token and tag put in
    (a tag of its own, random, made every kept read another script: none was ever read ahead)."""
    return hashlib.sha256(f"bringup-read-tag:{token}".encode()).hexdigest()[:16]


def end_left(pid: str, tag: str | None = None, var: str = READ_TAG_ENV) -> str:
    """The shell line that ends what a timed command (timeout(1)'s pid ``pid``, a shell word) left running once
    it ended: its process group (:data:`END_LEFT`), then, given its ``tag`` (hex, in ``var``), every process that
    still carries it, the group left or not (accept's load: one command, whose GPU load must not run on)."""
    if tag is None:
        return END_LEFT % pid
    if not re.fullmatch(r"[0-9a-f.]{1,80}", tag):
        raise ValueError("a tag is hex")
    return f"{END_LEFT % pid}; {_END_TAGGED % sh('%s', f'{var}={tag}')}"


def _plain(key: str, body: str, token: str) -> str:
    """Run ``body`` between its section's markers, its status after it: no pipe, no cap (a ``small`` read)."""
    return f"printf '\\n@@{token}:B:%d\\n' {key}; {body}; printf '\\n@@{token}:E:%d:%d\\n' {key} \"$?\""


def batch(snippets: list[tuple[str, str]], *, stop_on_error: bool = False,
          stderr: str = "null", token: str | None = None, lanes: int = 1,
          in_shell: Collection[int] = (), section_max: int | None = None,
          time_limit_s: int | None = None, small: Collection[int] = ()) -> tuple[str, str]:
    """Build one script of ``(key, snippet)`` pairs; returns ``(script, token)``.

    ``stderr``: ``"null"`` discards each snippet's stderr (reads, facts),
    ``"merge"`` folds it into its output (writes, so errors are attributed).
    ``stop_on_error``: the first failing snippet ends the script (a role's
    writes: later steps may depend on earlier ones).

    ``lanes`` > 1 (snippets that only read, never with ``stop_on_error``): the
    snippets run in that many background lanes, dealt round-robin, each lane
    writing its sections to its own file in a ``mktemp -d`` folder (0700); the
    files are printed once every lane is done, so sections never interleave.
    The snippets at the indexes ``in_shell`` never run in a lane: the
    script's own shell runs them in order while the lanes work, their output
    going straight to the connection, never to a file on the host (what a
    read prints of a file's content, an operator's guard that may not be safe
    beside others).  The folder is removed on exit; on SIGHUP, SIGINT or
    SIGTERM the script also stops its lanes and ends by that signal.  Where
    no folder can be made or a lane could not write its file (a full or
    read-only ``/tmp``), the lanes' snippets run one after another instead;
    the output has the same sections either way.

    ``section_max`` (reads): the most bytes one snippet may print (:data:`SECTION_MAX` where lanes run,
    whatever is given): a snippet that prints more is cut there, by SIGPIPE, and its :class:`Section` says so
    (``cut``, pass the same bound to :func:`split`); the snippets after it, in its lane or not, still run.

    ``time_limit_s`` (reads): each snippet not run in the script's own shell runs under timeout(1), in a
    process group of its own that timeout ends whole; one still running after that many seconds (a hung
    ``nvidia-smi``) ends with status :data:`TIMED_OUT` (or :data:`KILLED`), alone, and the others go on.
    Where the script itself is stopped (a signal, the connection gone) it stops the running ones too.

    ``small``: the indexes of snippets that bound their own output (a kernel parameter's value through
    ``head -c``: ``Resource.read_small``, ``Fact.read_small``) and cannot hang.  They run in their subshell
    alone, without the section bound's pipe, ``head`` and status capture (three processes fewer each) and
    without timeout(1).  A script of small snippets only runs them in order in its own shell: no lanes (no
    folder on the host), and no timeout(1) probe.
    """
    if lanes > 1 and stop_on_error:
        raise ValueError("lanes run snippets side by side: stop_on_error needs them in order")
    token = token or secrets.token_hex(8)
    rtag = read_tag(token)  # the timed snippets' tags (READ_TAG_ENV): not the markers' token
    redir = "2>/dev/null" if stderr == "null" else "2>&1"
    shell = sorted(set(in_shell))
    small = set(small)
    alongside = [i for i in range(len(snippets)) if i not in shell]
    # Small snippets alone (a few kernel parameters' facts): no lanes, no folder on the host, no timeout(1) probe.
    lanes = min(lanes, len(alongside)) if any(i not in small for i in alongside) else 1
    if lanes > 1 and section_max is None:
        section_max = SECTION_MAX  # a lane writes to a file on the host: never without a bound
    # The snippets that run under timeout(1) ($_t): in lanes, those neither small nor in the shell; in order,
    # the bounded ones that are not small.
    under_time = [i for i in range(len(snippets)) if i not in small
                  and (i not in shell if lanes > 1 else section_max is not None)]
    timed = [] if time_limit_s is None or not under_time else [_timer(time_limit_s)]
    if lanes <= 1:
        lines = ["exec </dev/null", *timed]
        for i, (key, snippet) in enumerate(snippets):
            if section_max is not None and i not in small:
                body = f"( {snippet}\n) {redir}" if not timed else (
                    f"{{ {READ_TAG_ENV}={rtag}.{i} $_t sh -c {sh('%s', snippet)} {redir} & _c=$!; wait \"$_c\"; "
                    f"_s=$?; {end_left('$_c')}; (exit \"$_s\"); }}")
                lines.append(_bounded(str(i), body, token, section_max))
                continue
            lines.append(f"printf '\\n@@{token}:B:{i}\\n'")
            lines.append(f"( {snippet}\n) {redir}")
            lines.append(f"_rc=$?; printf '\\n@@{token}:E:{i}:%d\\n' \"$_rc\"")
            if stop_on_error:
                lines.append('[ "$_rc" -eq 0 ] || exit "$_rc"')
        lines.append("exit 0")
        return "\n".join(lines) + "\n", token
    fn = f"_b{token}"

    def each(idx: list[int]) -> str:
        return f"for _i in {' '.join(map(str, idx))}; do {fn} \"$_i\"; done" if idx else ":"

    lines = ["exec </dev/null", *timed]
    for i, (_, snippet) in enumerate(snippets):
        if timed and i not in shell and i not in small:
            # Under timeout(1), in a group of its own: its pid in the folder while it runs, for the traps below.
            lines.append(f'{fn}_{i}() {{ {READ_TAG_ENV}={rtag}.{i} $_t sh -c {sh("%s", snippet)} {redir} & _c=$!; '
                         f'[ -z "$_d" ] || echo "$_c" >"$_d/t{i}"; wait "$_c"; _s=$?; {end_left("$_c")}; '
                         f'[ -z "$_d" ] || rm -f "$_d/t{i}"; return "$_s"; }}')
            continue
        # One function per snippet, its body a subshell: an `exit` in a snippet ends only that snippet.
        lines.append(f"{fn}_{i}() ( {snippet}\n) {redir}")
    bounded = _bounded('"$1"', f"{fn}_$1", token, section_max)
    plain = _plain('"$1"', f"{fn}_$1", token)
    cases = "|".join(str(i) for i in sorted(small) if i < len(snippets))
    lines += [
        f"{fn}() {{ case $1 in {cases}) {plain};; *) {bounded};; esac; }}"
        if cases else f"{fn}() " + bounded,
        # The traps come before the folder exists: a signal between the two leaves nothing behind.
        '_d=; _pids=; trap \'rm -rf "$_d"\' EXIT',
        # PIPE ignored first: with the connection gone, a word the shell prints about its killed lanes would
        # end the cleanup itself by SIGPIPE before the folder is removed.
        # The timed snippets first (timeout(1) hands the signal on to the group it runs), then the lanes.
        # Then what left their groups carrying their tags (setsid).
        f"{fn}_bye() {{ trap '' PIPE; kill $(cat \"$_d\"/t* 2>/dev/null) $_pids 2>/dev/null; "
        f"kill -KILL $(grep -lz -e '^{READ_TAG_ENV}={rtag}[.]' /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3) "
        f"2>/dev/null; rm -rf \"$_d\"; "
        f"trap - EXIT \"$1\"; kill -s \"$1\" $$; }}",
        # PIPE too: with the connection gone, the shell's own word about a lane the signal killed
        # ("Terminated") meets a closed stderr before the TERM trap has run.
        f"trap '{fn}_bye HUP' HUP; trap '{fn}_bye INT' INT; trap '{fn}_bye TERM' TERM; "
        f"trap '{fn}_bye PIPE' PIPE",
        'if _d=$(mktemp -d "${TMPDIR:-/tmp}/bringup-read.XXXXXX" 2>/dev/null); then',
    ]
    for k in range(lanes):
        # Each snippet bounded (``_bounded``): one that streams without end (a fact gone wrong) is cut at
        # section_max bytes, by SIGPIPE, instead of filling the host's /tmp, and the lane goes on.
        lines.append(f"  {{ {each(alongside[k::lanes])}; }} >\"$_d/{k}\" &")
        lines.append(f'  _p{k}=$!; _pids="$_pids $!"')
    lines.append(f"  {each(shell)}")
    lines.append("  _ok=1")
    lines += [f'  wait "$_p{k}" || _ok=' for k in range(lanes)]
    files = " ".join(f'"$_d/{k}"' for k in range(lanes))
    lines.append(f'  if [ -n "$_ok" ]; then cat {files}; else {each(alongside)}; fi')
    lines.append(f"else {each(list(range(len(snippets))))}; fi")
    lines.append("exit 0")
    return "\n".join(lines) + "\n", token


def _markers(token: str) -> re.Pattern[str]:
    """This script's begin and end markers (and nothing between them): matched one after another, so that a
    split is linear in the output whatever a host prints (a pattern spanning a section's body rescanned the
    rest of the output from every begin left without its end).  Index and exit code have at most 9 digits: a
    longer one is no marker of bringup's, and a section it would end reads as never ended."""
    return re.compile(r"\n@@" + re.escape(token) + r":(?:B:(\d{1,9})|E:(\d{1,9}):(\d{1,9}))\n")


def split(stdout: str, token: str, keys: list[str], section_max: int | None = None) -> list[Section]:
    """Split a batched script's stdout back into one :class:`Section` per key.

    ``section_max``: the bound the script was built with (``batch(section_max=...)``); a section longer than
    it was cut there: ``cut``, ``rc`` None, never taken for a whole answer."""
    out = []
    found: dict[int, tuple[int, str]] = {}
    open_at: dict[int, int] = {}  # a section's index -> where its body begins (the first begin not yet ended)
    for m in _markers(token).finditer(stdout):
        if m.group(1) is not None:
            open_at.setdefault(int(m.group(1)), m.end())
        elif (i := int(m.group(2))) in open_at:
            found[i] = (int(m.group(3)), stdout[open_at.pop(i):m.start()])
    for i, key in enumerate(keys):
        if i in found:
            rc, text = found[i]
            if section_max is not None and len(text) > section_max // 4 and \
                    len(text.encode("utf-8", "surrogateescape")) > section_max:
                out.append(Section(key, None, text, cut=True))
                continue
            out.append(Section(key, rc, text))
            continue
        # A section that began but never ended: the script died inside it; what it printed so far runs
        # to the next marker of this script, or to the end.
        begin = f"\n@@{token}:B:{i}\n"
        at = stdout.rfind(begin)
        partial = ""
        if at >= 0:
            partial = stdout[at + len(begin):]
            nxt = partial.find(f"\n@@{token}:")
            partial = partial if nxt < 0 else partial[:nxt]
        out.append(Section(key, None, partial))
    return out
