"""``invoke tune-window --follow``: the host's window controller, run from the control machine.

The controller is :mod:`.window_tuner`'s, the same code the host's
``bringup-window-tuner`` service runs; here it talks to the host's Triton HTTP
and metrics ports, and records the window in force on the host through the
inventory's connection (temporary file + rename, as on the host).
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..ssh.command import sh
from ..errors import BringupError, InputError, said
from ..outfile import append_text
from .window_tuner import (LOCAL_READ_MAX, NOT_READ, RECORD, RECORD_PROBE, Controller, TritonHTTP, TunerError,
                           config_text, line, manifest_text, model_name_problem, not_rewritten, record_path_problem,
                           record_state_problem, record_text, run, tunable)

__all__ = ["remote_record", "check_remote_record", "read_remote", "follow"]


def replace_remote(transport, path: str, text: str) -> None:
    """Write ``path`` on the host by a temporary file beside it and a rename (never in place), never onto a
    folder (``mv`` would move the file into it) or through a symbolic link."""
    res = transport.run_script(sh(
        "set -e; umask 022; p=%s\n"
        "if [ -L \"$p\" ] || { [ -e \"$p\" ] && [ ! -f \"$p\" ]; }; then echo \"$p: not a regular file\" >&2; exit 3; fi\n"
        "mkdir -p -- \"$(dirname -- \"$p\")\"; t=$(mktemp -- %s)\n"
        "printf '%%s' %s > \"$t\" && chmod 0644 -- \"$t\" && mv -fT -- \"$t\" \"$p\" || { rm -f -- \"$t\"; exit 1; }",
        path, path + ".XXXXXX", text))
    if res.rc == 3:
        raise TunerError(f"not writing {path} on the host: it is not a regular file")
    if res.rc != 0:
        raise TunerError(f"writing {path} on the host failed: {said(res.stderr or res.stdout, 300)}")


#: The most of a file of the host's read back here (a record, a config.pbtxt, the role's manifest: kilobytes):
#: the host's own tuner's bound.
READ_MAX = LOCAL_READ_MAX


def read_remote_kind(transport, path: str) -> tuple[str, str]:
    """``(kind, text)`` of ``path`` on the host: ``file`` and its text when it is a regular file, not a link, of at
    most :data:`READ_MAX` bytes; else ``missing``, ``link``, ``other`` or ``large`` (:data:`NOT_READ`) and ''.
    ``cat`` read whatever lay there: a FIFO named config.pbtxt held the run until command_timeout (30 min), a link
    to /dev/zero streamed until the transport's cap."""
    out = transport.run_script(sh('p=%s; if [ -L "$p" ]; then echo link; elif [ ! -e "$p" ]; then echo missing; '
                                  'elif [ ! -f "$p" ]; then echo other; else echo file; head -c %s -- "$p"; fi',
                                  path, READ_MAX + 1)).stdout
    kind, _, text = out.partition("\n")
    if kind not in ("file", "missing", "link", "other"):
        return "other", ""
    if kind == "file" and len(text) > READ_MAX:
        return "large", ""
    return kind, text


def read_remote(transport, path: str) -> str:
    """``path``'s text on the host when it is a regular file, not a link, of at most :data:`READ_MAX` bytes; else
    '' (:func:`read_remote_kind` says why).  '' is what a missing file reads as: nothing is rewritten from it
    (config_text and manifest_text find no line of bringup's)."""
    return read_remote_kind(transport, path)[1]


def check_remote_record(transport, path: str) -> None:
    """Refuse a record path that is not bringup's own file on the host (:func:`record_path_problem`, then what
    is there: nothing, or a regular file holding a record bringup wrote), before anything is changed."""
    why = record_path_problem(path)
    if why is None:
        out = transport.run_script(sh(RECORD_PROBE, path)).stdout
        kind, _, text = out.partition("\n")
        why = record_state_problem(kind.strip() or "other", text)
    if why:
        raise InputError(f"--record {path}: {why}")


def remote_record(transport, path: str = RECORD, repository: str | None = None, manifest: str | None = None,
                  warn: Callable[[str], None] | None = None):
    """A ``record(model, window_us, why, when, serving=None)`` writing ``path`` on the host, and the window
    (with ``serving``: the configuration ``invoke tune`` chose) into ``<repository>/<model>/config.pbtxt``
    when that is a config the triton role rendered (its sha256 into the role's ``manifest`` too, so the
    config stays one bringup shipped).  A path that is not bringup's record is refused at every write.  A
    config.pbtxt or manifest that is a symbolic link, not a regular file or too large is neither read nor
    rewritten, and ``warn`` (default: standard error) is given one line naming it: the record holds the window,
    the config.pbtxt does not, so a restart of Triton serves the link's configuration."""
    def note(file: str, kind: str) -> None:
        (warn or (lambda t: print(t, file=sys.stderr)))(f"on the host: {not_rewritten(file, kind, path)}")

    def write(model: str, window_us: int, why: str, when: str, serving: dict | None = None) -> None:
        bad = repository and model_name_problem(model)  # before anything is written: never a path out of it
        if bad:
            raise TunerError(f"not recording: {bad}")
        try:
            check_remote_record(transport, path)
        except InputError as e:
            raise TunerError(str(e)) from None
        old = read_remote(transport, path)
        replace_remote(transport, path, record_text(old, model, window_us, why, when, serving))
        if repository:
            cfg = f"{repository.rstrip('/')}/{model}/config.pbtxt"
            kind, text = read_remote_kind(transport, cfg)
            if kind in NOT_READ:
                note(cfg, kind)
            new = config_text(text, window_us, serving)
            if new is not None:
                replace_remote(transport, cfg, new)
                kind, text = read_remote_kind(transport, manifest) if manifest else ("missing", "")
                if kind in NOT_READ:
                    note(manifest, kind)
                listed = manifest and manifest_text(text, f"./{model}/config.pbtxt",
                                                    hashlib.sha256(new.encode()).hexdigest())
                if listed:
                    replace_remote(transport, manifest, listed)

    return write


def follow(api: TritonHTTP, models: list[str], target_ms: float, interval_s: float, *, record, log_path: Path,
           steps: int | None, seconds: float | None, say, sleep=time.sleep) -> int:
    """Run the controller on ``models`` (empty: every ready model with dynamic batching); returns intervals run.

    ``sleep`` waits between intervals: the caller's raises to stop it there (a signal), so that a step is
    never cut between its reload and its record; a step that cannot reach Triton is said and skipped.
    """
    models = tunable(api, models)
    if not models:
        raise BringupError("Triton serves no model with dynamic batching: nothing to tune")
    log_path.parent.mkdir(parents=True, exist_ok=True)

    def emit(entry: dict) -> None:
        say(line(entry))
        append_text(log_path, json.dumps(entry, sort_keys=True) + "\n")

    controllers = [Controller(api, m, target_ms, record=record, emit=emit) for m in models]
    for c in controllers:
        say(f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} {c.model}: window {c.prime()} µs, "
            f"target p95 {target_ms:g} ms, every {interval_s:g} s")
    return run(controllers, interval_s, steps=steps, seconds=seconds, sleep=sleep,
               on_error=lambda model, e: say(f"{model}: interval skipped, window kept: {e}"))
