"""The host's run lock: two runs that write never interleave on one host, and a script of a run that is gone
never writes after the next run has begun.

Two flock(1) locks in a folder that only the user bringup runs as on the host may enter (root's:
:data:`LOCK_DIR`, mode 0700, made by bringup; another user's: ``/run/user/<uid>/bringup``, else
``~/.cache/bringup``), so no other local user can create, link or hold them:

- ``run.lock``, held by the run's *holder*: a process on the host whose stdin is the run's connection, so the
  lock goes when the run ends, or when its connection dies (the control machine killed, the network cut);
- ``scripts.lock``, held shared by every script of the run that holds the lock, and by every process such a
  script starts (they inherit the descriptor): a script that outlives its run (the control machine killed while
  the script slept before a write) still holds it.

A holder takes ``run.lock`` (waiting up to ``run_lock_timeout`` for a live run), then ``scripts.lock`` alone for a
moment: it waits there until nothing of an earlier run is left on the host (or names what is, with its pid),
then writes the run's *generation* (a random token) and lets it go.  Each script of the run takes
``scripts.lock`` shared and goes on only while the generation is its run's: a run whose lock another run took
(its holder killed on the host) stops at its next round trip, having run nothing of it -- it is *fenced*.

A process a script starts and leaves running holds ``scripts.lock`` too, as it should when it is the script's own
work; a daemon started by hand rather than through its init system (which closes inherited descriptors) would
keep the next run out as well: the line that refuses that run names its pid and command.

The holder answers one line (:func:`refusal` words it): ``locked``; ``held <owner>``; ``busy <pids>|<owner>``;
``noflock``; ``unusable <path>: <error>``; ``refused <path>: <why>``.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from .command import quote, sh
from .script import read_tag
from ..errors import Unreachable, said

__all__ = ["LOCK_DIR", "WAIT_S", "FENCED_RC", "ERR_KEPT", "LockLost", "RunLock", "Served", "hold_script", "then_output",
           "serve_request", "servable", "read_served", "fence", "refusal", "who", "READ_MARK", "keep_request",
           "kept_hash"]

#: Root's lock folder (a tmpfs on every systemd host: nothing of it survives a reboot).
LOCK_DIR = "/run/bringup"
#: Seconds a run waits for another run's lock (``run_lock_timeout``), and as long for an earlier run's scripts.
WAIT_S = 60
#: A fenced script's exit status; its stderr then starts with ``bringup-lock-lost <token>:``.
FENCED_RC = 75
#: The most of the owner line (who holds the lock) read back, in bytes: a file grown huge is never read whole.
OWNER_MAX = 300
#: The most of a served script's stderr sent back, in bytes (one more: the cut is seen).
ERR_KEPT = 1 << 20
#: Where a kept state read has its token (:func:`keep_request`): the holder puts the run's own in before it runs.
READ_MARK = "@@BRINGUP-READ@@"
#: Where a kept state read's snippet tag goes (:func:`bringup.ssh.script.read_tag` of its token).
TAG_MARK = "@@BRINGUP-TAG@@"
#: The longest script the holder serves, in bytes (its request's body): one argument of an exec stays well under
#: Linux's 128 KiB (MAX_ARG_STRLEN); a longer one goes in a round trip of its own.
SERVE_MAX = 96 * 1024
#: The most state reads kept for reading ahead in one lock folder (one per selection of roles and facts; the least
#: recently kept go first): runs that change their selection often do not fill /run with them.
KEPT_MAX = 16

# Where the lock folder is, for the user the script runs as (the holder's and every fence's own computation).
_PLACE = ('_u=$(id -u); if [ "$_u" = 0 ]; then d=/run/bringup; '
          'elif [ -d "/run/user/$_u" ] && [ -O "/run/user/$_u" ]; then d="/run/user/$_u/bringup"; '
          'else d="${HOME:-/nonexistent}/.cache/bringup"; fi')

# One line back, whatever the text: newlines and tabs as spaces, no control characters, at most 700 bytes.
_SAY = ("say() { printf '%s' \"$*\" | tr '\\n\\t' '  ' | tr -d '\\000-\\037\\177' | head -c 700; echo; }")
_WHAT = ('what() { if [ -L "$1" ]; then echo "a symbolic link"; elif [ -d "$1" ]; then echo "a folder"; '
         'elif [ -f "$1" ]; then echo "a regular file"; elif [ -e "$1" ]; then echo "a special file"; '
         'else echo missing; fi; }')
_OWNER = f'owner() {{ head -c {OWNER_MAX} -- "$d/owner" 2>/dev/null; }}'
# The processes that hold the lock file $1 (at most 3 of the first 12; for scripts.lock, not the holder's runners of
# the scripts it serves nor the timeout(1) around a script, but what they run): their pid, command line (80 bytes,
# no "|") and whether they are bringup's (a holder: its command line holds HOLDER_MARK; a run's script or what it started: its environment
# holds RUN_ENV) or another process's.
_HOLDERS = ("holders() { ls -l /proc/[0-9]*/fd 2>/dev/null | awk -v t=\"-> $d/$1\" "
            "'substr($0, 1, 6) == \"/proc/\" { split($0, a, \"/\"); p = a[3]; next } "
            "p != \"\" && length($0) >= length(t) && substr($0, length($0) - length(t) + 1) == t && !s[p]++ "
            "{ print p }' | head -n 12 | while read -r p; do "
            "c=$(tr '\\000|' ' /' < \"/proc/$p/cmdline\" 2>/dev/null | head -c 80 | sed 's/ *$//'); "
            "case $c in *bringup-run-lock-holder*) [ \"$1\" = run.lock ] || continue; "
            "c='bringup run lock holder'; k=bringup ;; "
            "'timeout -s TERM -k 10 '*) continue ;; "
            "*) k=other; tr '\\000' '\\n' < \"/proc/$p/environ\" 2>/dev/null | grep -q '^BRINGUP_LOCK_RUN=' && k=bringup ;; "
            "esac; printf 'pid %s (%s) %s, ' \"$p\" \"$c\" \"$k\"; "
            "n=$((n + 1)); [ \"$n\" -lt 3 ] || break; "
            "done; }")

_HOLD = """\
# bringup-run-lock-holder
export BRINGUP_LOCK_RUN={token}
IFS= read -r who
u0=$(umask)
umask 077
{say}
{what}
{owner}
{holders}
{place}
{base}
command -v flock >/dev/null 2>&1 || {{ say noflock; exit 0; }}
# (Plain tests, no subshell, where all is well; what a path is, and the shell's own words for a failure, less its
# "sh: 23: " prefix, only where it is not.)
if [ -L "$d" ] || {{ [ -e "$d" ] && [ ! -d "$d" ]; }}; then say "refused $d: $(what "$d"), not a folder"; exit 0
elif [ ! -e "$d" ]; then e=$(mkdir -p -m 0700 -- "$d" 2>&1) || {{ say "unusable $d: $e"; exit 0; }}
fi
[ -O "$d" ] || {{ say "refused $d: owned by uid $(stat -c %u -- "$d"), not by uid $(id -u) that bringup runs as"; exit 0; }}
[ "$(stat -c %a -- "$d")" = 700 ] || chmod 0700 -- "$d" 2>/dev/null || {{
  say "refused $d: mode $(stat -c %a -- "$d") lets other users in, and it cannot be made 0700"; exit 0; }}
for f in run.lock scripts.lock generation owner stderr; do
  if [ -L "$d/$f" ] || {{ [ -e "$d/$f" ] && [ ! -f "$d/$f" ]; }}; then
    say "refused $d/$f: $(what "$d/$f"), not a regular file"; exit 0
  fi
  {{ command : >>"$d/$f"; }} 2>/dev/null || {{
    e=$( {{ command : >>"$d/$f"; }} 2>&1 ); say "unusable $d/$f: ${{e#*: [0-9]*: }}"; exit 0; }}
done
exec 9>>"$d/run.lock"
# Each lock tried at once first (no clock read where nothing waits, the usual case), then waited for.
t0=
flock -n 9 || {{
t0=$(date +%s)
flock -w {wait} 9; rc=$?
case $rc in
  0) ;;
  1) exec 9>&-; say "held $(holders run.lock)|$(owner)"; exit 0 ;;
  *) say "unusable $d/run.lock: flock failed (exit $rc)"; exit 0 ;;
esac
}}
exec 8>>"$d/scripts.lock"
flock -x -n 8 || {{
left={wait}; [ -z "$t0" ] || left=$(({wait} - $(date +%s) + t0)); [ "$left" -ge 1 ] || left=1
flock -x -w "$left" 8; rc=$?
case $rc in
  0) ;;
  1) exec 8>&-; say "busy $(holders scripts.lock)|$(owner)"; exit 0 ;;
  *) say "unusable $d/scripts.lock: flock failed (exit $rc)"; exit 0 ;;
esac
}}
{{ printf '%s\\n' {token} > "$d/generation" && printf '%s\\n' "$who" > "$d/owner"; }} 2>/dev/null || {{
  e=$( {{ printf '%s\\n' {token} > "$d/generation" && printf '%s\\n' "$who" > "$d/owner"; }} 2>&1 )
  say "unusable $d: $e"; exit 0; }}
exec 8>&-
echo locked
{serve}{then}{ahead}{loop}exec cat >/dev/null
"""

# The holder serves the run's scripts (:func:`serve_request`, :func:`read_served`): each request is a line "<bytes>
# <seconds>" and that many bytes of script (at most SERVE_MAX: one argument), a brace group (cut short, it is a syntax
# error: nothing of it runs).  The script runs in the background of the holder, which reads on: when the connection
# goes, the lock goes at once, as a fenced round trip's would, and what the script still does keeps the next run
# out by scripts.lock, held shared by it (the holder takes it shared once) and named by pid.  It runs under the
# host's timeout, with the login's umask and without run.lock's descriptor.  Its stdout comes between a begin and
# an end line, then its stderr (at most ERR_KEPT bytes; the file is emptied at once: nothing of it stays on the
# host).  Anything else on stdin ends the serving, and the lock is held until the connection goes; the connection
# gone, the holder ends.
_SERVE = """\
s8= j= rt= k=
serve1() {{
  [ -n "$s8" ] || {{ {{ command exec 8<"$d/scripts.lock"; }} 2>/dev/null && flock -s -n 8 && s8=y; }} || s8=n
  printf '@@%s:begin\\n' {token}
  {{ if [ "$s8" = y ]; then
    umask "$u0"; timeout -s TERM -k 10 "$2" sh -c "$1" 2>"$d/stderr"; rc=$?
  else
    rc={rc}; printf 'bringup-lock-lost %s: %s\\n' {token} "$d/scripts.lock could not be held shared" >"$d/stderr"
  fi
  printf '\\n@@%s:end:%d\\n' {token} "$rc"
  [ -z "$3" ] || [ "$rc" != 0 ] || {{ rm -f -- "$d/ahead.tmp" "$d"/ahead-"${{3%%-*}}"-* &&
    printf '%s\\n' "$k" >"$d/ahead.tmp" && mv -f -- "$d/ahead.tmp" "$d/ahead-$3" &&
    (set -- "$d"/ahead-*-*; [ "$#" -le {kept_max} ] || ls -t -- "$@" | tail -n +{kept_next} | while IFS= read -r f; do
      rm -f -- "$f"; done); }} 2>/dev/null
  [ -s "$d/stderr" ] && head -c {err_kept} -- "$d/stderr"
  : >"$d/stderr"
  printf '\\n@@%s:err\\n' {token}; }} 9>&- &
}}
"""

# A request: "<bytes> <seconds>", or "<bytes> <seconds> <key>-<hash>" for a state read to keep (READ_MARK where its
# token goes) as this key's read ahead, replacing the one kept before: kept once it ended well within its time (a
# read that hung or was cut is never read ahead by the next run).
_LOOP = """\
while IFS= read -r q; do
  case $q in *[!0-9a-f\\ -]*|""|" "*|*" "|*"  "*) j=y; break ;; esac
  set -- $q
  case $#:$1$2 in 2:*[!0-9]*|3:*[!0-9]*) j=y; break ;; 2:*|3:*) ;; *) j=y; break ;; esac
  s=$(head -c "$1")
  if [ "$#" = 3 ]; then
    case $3 in -*|*-|*-*-*|*[!0-9a-f-]*) j=y; break ;; *-*) ;; *) j=y; break ;; esac
    [ -n "$rt" ] || {{ j=y; break; }}  # no read token: this holder reads nothing ahead, nor keeps
    k=$s s=$(printf '%s\\n' "$s" | sed "s/{mark}/$rt/g; s/{tag_mark}/$rg/g")
  fi
  serve1 "$s" "$2" "${{3-}}"
done
[ -z "$j" ] && exit 0
"""

# The state read kept by an earlier run with the same facts (its key), run at once after the facts: its answer
# follows a line naming its hash, or a line saying there is none.  At most SERVE_MAX bytes of it are read (a kept
# read is a request's body, never longer): a file grown past that is cut, and its brace group cut short is a syntax
# error, so nothing of it runs.
_AHEAD = """\
rt={read_token} rg={read_tag} af=
for f in "$d"/ahead-{key}-*; do [ -f "$f" ] && [ ! -L "$f" ] && af=$f; break; done
if [ -n "$af" ]; then
  printf '@@%s:ahead:%s\\n' {token} "${{af##*-}}"
  serve1 "$(head -c {cap} -- "$af" | sed "s/{mark}/$rt/g; s/{tag_mark}/$rg/g")" {seconds}
else
  printf '@@%s:noahead\\n' {token}
fi
"""

_FENCE = """\
{place}
{base}
lost() {{ printf 'bringup-lock-lost %s: %s\\n' {token} "$*" | head -c 700 >&2; exit {rc}; }}
{{ command exec 8<"$d/scripts.lock"; }} 2>/dev/null || lost "$d/scripts.lock is gone"
flock -s -w {wait} 8 || lost "$d/scripts.lock stayed locked for {wait} s"
[ "$(head -c 100 -- "$d/generation" 2>/dev/null)" = {token} ] || \
lost "another run took the lock: $(head -c {owner_max} -- "$d/owner" 2>/dev/null | tr -d '\\000-\\037\\177')"
export BRINGUP_LOCK_RUN={token}
"""


def _base(base: str | None) -> str:
    return sh("d=%s", base) if base else ":"


def hold_script(token: str, wait_s: float = WAIT_S, base: str | None = None, then: str | None = None,
                ahead: tuple[str, str, int] | None = None) -> str:
    """The holder: reads who it is for (one line), takes the lock and the generation ``token`` (or answers why
    not, one line), then waits on its stdin (the connection), holding the lock until the run lets it go.
    ``base``: the lock folder, instead of the user's own (tests).

    ``then``: a command the holder runs once it holds the lock, before it waits (the run's facts: the lock and
    the facts in one round trip), its stdin empty, its stderr dropped, without the lock's descriptor (a
    program it leaves running never holds the lock); its stdout follows the ``locked`` line and ends with
    the line ``@@<token>:end:<exit status>`` (:func:`then_output` reads it back).

    ``ahead`` (with ``then``): ``(key, read token, seconds)``: the state read an earlier run with the same facts
    kept under ``key`` (:func:`keep_request`), run right after ``then`` with the read token put in: the holder
    answers, after ``then``'s end line, ``@@<token>:ahead:<hash>`` followed by that read's answer as a served
    script's (:func:`read_served`), or ``@@<token>:noahead``."""
    after = "" if then is None else (
        f"( {then}\n) </dev/null 2>/dev/null 9>&-; printf '\\n@@%s:end:%d\\n' {quote(token)} \"$?\"\n")
    serve = _SERVE.format(token=quote(token), rc=FENCED_RC, err_kept=ERR_KEPT + 1, kept_max=KEPT_MAX,
                          kept_next=KEPT_MAX + 1)
    if ahead is not None and (not re.fullmatch(r"[0-9a-f]{1,64}", ahead[0])
                              or not re.fullmatch(r"[0-9a-f]{16,64}", ahead[1])):
        raise ValueError("a read ahead's key and token are hexadecimal")
    kept = "" if then is None or ahead is None else _AHEAD.format(
        token=quote(token), mark=READ_MARK, tag_mark=TAG_MARK, cap=SERVE_MAX, key=ahead[0], read_token=ahead[1],
        read_tag=read_tag(ahead[1]),
        seconds=max(1, int(ahead[2])))
    return _HOLD.format(say=_SAY, what=_WHAT, owner=_OWNER, holders=_HOLDERS, place=_PLACE, base=_base(base),
                        wait=_seconds(wait_s), token=quote(token), then=after, serve=serve, ahead=kept,
                        loop=_LOOP.format(mark=READ_MARK, tag_mark=TAG_MARK))


def then_output(token: str, lines: list[str]) -> tuple[int, str] | None:
    """The exit status and stdout of a holder's ``then`` command from the lines it printed after ``locked``
    (each with its newline), when its end line came last; None when it did not (the output was cut)."""
    if not lines:
        return None
    m = re.fullmatch(rf"@@{re.escape(token)}:end:(\d{{1,3}})\n?", lines[-1])
    if m is None:
        return None
    out = "".join(lines[:-1])
    return int(m.group(1)), out[:-1] if out.endswith("\n") else out


def serve_request(script: str, seconds: int) -> bytes:
    """What asks the holder to run ``script`` (POSIX sh) under the host's ``timeout`` of ``seconds``: a header line and
    the script as a brace group with an empty stdin; a request cut short is a syntax error there, never a part of
    the script run."""
    body = ("{\n" + script + "\n} </dev/null\n").encode("utf-8", "surrogateescape")
    return f"{len(body)} {max(1, int(seconds))}\n".encode() + body


def keep_request(script: str, read_token: str, key: str, seconds: int) -> tuple[bytes, str]:
    """A request that runs ``script`` (made with ``read_token``) and keeps it under ``key`` for the next run's
    read ahead, with :data:`READ_MARK` where its token is; and the hash that names it (:func:`kept_hash`)."""
    marked = _marked(script, read_token)
    digest = _hash(marked)
    body = ("{\n" + marked + "\n} </dev/null\n").encode("utf-8", "surrogateescape")
    return f"{len(body)} {max(1, int(seconds))} {key}-{digest}\n".encode() + body, digest


def _marked(script: str, read_token: str) -> str:
    """``script`` with :data:`READ_MARK` for its token and :data:`TAG_MARK` for its snippets' tag."""
    return script.replace(read_token, READ_MARK).replace(read_tag(read_token), TAG_MARK)


def kept_hash(script: str, read_token: str) -> str:
    """What names a kept read: the hash of the script with :data:`READ_MARK` for its token and :data:`TAG_MARK`
    for its snippets' tag."""
    return _hash(_marked(script, read_token))


def _hash(marked: str) -> str:
    import hashlib

    return hashlib.sha256(marked.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def servable(script: str) -> bool:
    """Whether the holder can take ``script``: its request's body within :data:`SERVE_MAX` bytes, and no NUL byte
    (an argument cannot hold one)."""
    return len(script.encode("utf-8", "surrogateescape")) + 32 <= SERVE_MAX and "\0" not in script


class Served(NamedTuple):
    """A served script's answer: exit status, stdout and stderr (bytes), and whether either was over its cap."""

    rc: int
    stdout: bytes
    stderr: bytes
    out_over: bool
    err_over: bool


def read_served(token: str, readline: Callable[[int], bytes], out_max: int) -> Served | None:
    """The holder's answer to one request, read line by line with ``readline(limit)``: what stray output an
    earlier script left comes before the begin line and is dropped; stdout ends at the end line, stderr at the
    err line.  None when the answer ended before its err line (the holder is gone); past ``out_max`` bytes of
    stdout the reading stops (``out_over``), as a round trip's does."""
    begin, err_end = f"@@{token}:begin\n".encode(), f"@@{token}:err\n".encode()
    end = re.compile(rb"@@" + re.escape(token.encode()) + rb":end:(\d{1,3})\n")
    while (line := readline(len(begin) + 1)) != begin:
        if not line:
            return None
    out: list[bytes] = []
    kept, rc = 0, None
    while rc is None:
        line = readline(out_max - kept + 1)
        if not line:
            return None
        m = end.fullmatch(line)
        if m is not None:
            rc = int(m.group(1))
            break
        kept += len(line)
        if kept > out_max:
            return Served(255, b"".join(out), b"", True, False)
        out.append(line)
    err: list[bytes] = []
    got = 0
    while (line := readline(ERR_KEPT + 2)) != err_end:
        if not line:
            return None
        got += len(line)
        if got <= ERR_KEPT + 2:
            err.append(line)
    stdout, stderr = _less_newline(b"".join(out)), _less_newline(b"".join(err))
    return Served(rc, stdout, stderr[:ERR_KEPT], False, len(stderr) > ERR_KEPT)


def _less_newline(b: bytes) -> bytes:
    return b[:-1] if b.endswith(b"\n") else b


def fence(token: str, command: str, wait_s: float = WAIT_S, base: str | None = None) -> str:
    """``command`` run only while the run of ``token`` holds the lock, with ``scripts.lock`` held shared by it and
    by everything it starts; else exit :data:`FENCED_RC`, ``bringup-lock-lost <token>: <why>`` on stderr."""
    return _FENCE.format(place=_PLACE, base=_base(base), token=quote(token), rc=FENCED_RC, wait=_seconds(wait_s),
                         owner_max=OWNER_MAX) + "exec " + command


def who() -> str:
    """This run, as the host's run lock names it to a second run."""
    import getpass
    import os
    import socket
    import time

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S %z')}"


def _seconds(wait_s: float) -> int:
    return max(1, int(-(-float(wait_s) // 1)))


class LockLost(Unreachable):
    """This run no longer holds the host's run lock: another run took it; nothing more of this run ran there."""


def refusal(answer: str, wait_s: float = WAIT_S) -> str | None:
    """The holder's ``answer`` line as the one line that fails the host; None when it holds the lock."""
    kind, _, rest = answer.strip().partition(" ")
    waited = f"waited {wait_s:g} s (run_lock_timeout)"
    if kind == "locked" and not rest:
        return None
    if kind == "held":
        procs, _, who = rest.partition("|") if "|" in rest else ("", "", rest)
        other, procs = _others(procs)
        if other:
            last = said(who, 100)
            return (f"the host's run lock is held by another process, not by a bringup run: {procs}"
                    f"{f' (the last bringup run to take it: {last})' if last else ''}; it is not a "
                    "stale lock (a flock(1) lock goes with the process that holds it); this run "
                    f"{waited} for it; end that process (kill {_pids(procs)}) "
                    "or let it close the lock, then run again")
        who = said(who, OWNER_MAX) or "another bringup run"
        return (f"another bringup run holds this host: {who}{f' (its holder: {procs})' if procs else ''}; "
                f"{waited} for it; run again once it has ended")
    if kind == "busy":
        procs, _, owner = rest.partition("|")
        other, procs = _others(procs)
        pids = _pids(procs)
        if other:
            return (f"the host's run lock (scripts.lock) is held by another process, not by a script of a bringup "
                    f"run: {procs}; it is not a stale lock (a flock(1) lock goes with the process that holds it); "
                    f"this run {waited} for it and did not start; end that process (kill {pids}) or let it close "
                    "the lock, then run again")
        return (f"a script of an earlier bringup run ({said(owner, OWNER_MAX) or 'who, unknown'}) still runs on "
                f"this host and may still write: {procs or 'its processes were not found'}; this run {waited} "
                "for it and did not start; it ends by itself within that run's command_timeout, or end it"
                f"{f' (kill {pids})' if pids else ''}, then run again")
    if kind == "noflock":
        return "flock(1) was not found on the host: install util-linux (the host's run lock needs it)"
    if kind == "unusable":
        return f"the host's run lock cannot be used: {said(rest, 400)}; make it writable (a tmpfs at /run) and run again"
    if kind == "refused":
        path = rest.partition(":")[0]
        return (f"the host's run lock is refused: {said(rest, 400)}; remove it (rm -r -- {quote(path)}) and run "
                "again: bringup makes it itself, a private folder of the user it runs as")
    return f"the host's run lock could not be taken: {said(answer, 300) or 'no answer'}"


def _pids(procs: str) -> str:
    return " ".join(re.findall(r"\bpid (\d+)", procs))


def _others(procs: str) -> tuple[bool, str]:
    """Whether a process of the holder's list (``pid N (cmd) bringup|other, ...``) is not bringup's; the list in
    words, without those marks."""
    procs = said(procs.strip().rstrip(","), 300)
    other = re.search(r"\) other(?:,|$)", procs) is not None
    return other, re.sub(r"\) (?:bringup|other)(?=,|$)", ")", procs)


@dataclass
class RunLock:
    """One run's hold of one host's lock: its generation token, and how its scripts are fenced."""

    wait_s: float = WAIT_S
    base: str | None = None
    token: str = field(default_factory=lambda: secrets.token_hex(8))

    def holder(self, then: str | None = None, ahead: tuple[str, str, int] | None = None) -> str:
        return hold_script(self.token, self.wait_s, self.base, then, ahead)

    def fenced(self, command: str) -> str:
        return fence(self.token, command, self.wait_s, self.base)

    def lost(self, rc: int, stderr: str) -> str | None:
        """Why a round trip was fenced (nothing of it ran), or None."""
        mark = f"bringup-lock-lost {self.token}: "
        if rc != FENCED_RC or mark not in stderr:
            return None
        return said(stderr.split(mark, 1)[1].splitlines()[0], 400)
