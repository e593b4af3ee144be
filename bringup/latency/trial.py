"""The trial record: what ``invoke tune`` loaded on a running Triton in place of a model's own configuration,
written on the host BEFORE the first trial is loaded, removed once the model's own configuration (or the
chosen one, recorded) serves again.

A tune killed outright (SIGKILL, the control machine lost) cannot load the model's own configuration back:
Triton's model control API swapped it in place, no file says so, and a load without an override keeps it.  The
record left on the host says so, and what the model's own configuration is (Triton's own JSON of it, as it
served when the tune began): the next ``tune`` loads that back before it measures anything, and the next
``provision`` (the triton role) loads the model's repository configuration again (touch + load: the files it
just rendered), then removes the record.

Written as the window record is (:func:`bringup.latency.follow.replace_remote`: a temporary file beside it, then
a rename: the record is whole or absent, never half written), at :data:`TRIAL` beside the window record
(``/etc/bringup/triton-window.json``), or beside the ``--record`` a tune was given.
"""
from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from ..ssh.command import sh
from ..errors import BringupError
from ..untrusted import Unreadable, loads

__all__ = ["TRIAL", "TRIAL_NAME", "TRIAL_MAX", "KIND", "trial_path", "trial_text", "parse_trial", "TrialMark",
           "read_trial", "restore_command", "guard"]

TRIAL_NAME = "triton-trial.json"
#: Where provision looks (beside :data:`bringup.latency.window_tuner.RECORD`).
TRIAL = f"/etc/bringup/{TRIAL_NAME}"
#: The most of a trial record read back, in bytes (a model's configuration is a few KiB).
TRIAL_MAX = 1 << 20
KIND = "bringup-tune-trial"
_MODEL = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


def trial_path(record: str) -> str:
    """The trial record beside the window record ``record`` (the default one: :data:`TRIAL`)."""
    return posixpath.join(posixpath.dirname(record) or "/", TRIAL_NAME)


def trial_text(model: str, own: dict, serving: str, who: str, when: str) -> str:
    return json.dumps({"kind": KIND, "version": 1, "model": model, "serving": serving, "who": who,
                       "started": when, "own_config": own}, indent=1, sort_keys=False) + "\n"


def parse_trial(text: str, where: str) -> dict[str, Any]:
    """The record's document; anything but a trial record bringup wrote is one BringupError line."""
    fix = f"remove {where} once the model serves what it should"
    if len(text.encode("utf-8", "surrogateescape")) > TRIAL_MAX:
        raise BringupError(f"{where}: larger than {TRIAL_MAX} bytes, not a trial record bringup wrote; {fix}")
    try:
        doc = loads(text, what="its text", unique=True)
    except Unreadable as e:
        # What kind of text it is (not JSON, where it stops being JSON), never the text: a file put there may hold
        # anything (a token, a key) and the line goes to a terminal and a CI log.
        why = str(e).removeprefix("its text: ")
        why = "empty" if not text.strip() else why[10:-1] if why.startswith("not JSON (") else why
        raise BringupError(f"{where}: not readable JSON ({why}): not a trial record bringup wrote, or cut; "
                           f"{fix}") from None
    if not (isinstance(doc, dict) and doc.get("kind") == KIND and isinstance(doc.get("model"), str)
            and _MODEL.fullmatch(doc["model"]) and isinstance(doc.get("own_config"), dict)):
        raise BringupError(f"{where}: not a trial record bringup wrote (kind {KIND}, a model and its own "
                           f"configuration); {fix}")
    return doc


class TrialMark:
    """The trial record of one tune on ``transport``'s host: :meth:`mark` before the first trial is loaded,
    :meth:`clear` once the model's own (or the recorded chosen) configuration serves."""

    def __init__(self, transport, path: str, model: str, own: dict, who: str, when: str) -> None:
        self.t, self.path, self.model, self.own, self.who, self.when = transport, path, model, own, who, when
        self.marked = False

    def mark(self, serving: str) -> None:
        """Write the record (whole, by a rename) before ``serving`` is loaded; a failure is one BringupError
        line and nothing is loaded."""
        from .follow import replace_remote
        from .window_tuner import TunerError

        if self.marked:
            return
        try:
            replace_remote(self.t, self.path, trial_text(self.model, self.own, serving, self.who, self.when))
        except TunerError as e:
            raise BringupError(f"{e}: the trial record that says what {self.model}'s own configuration is could "
                               "not be written, so no other configuration was loaded") from None
        self.marked = True

    def clear(self) -> None:
        """Remove the record (a failure leaves it: the next tune or provision loads the own configuration
        again, which is harmless)."""
        if not self.marked:
            return
        try:
            self.t.run_script(sh("[ -L %s ] || rm -f -- %s", self.path, self.path))
        except Exception:  # noqa: BLE001 - left for the next run, as above
            return
        self.marked = False


def read_trial(transport, path: str) -> dict[str, Any] | None:
    """The trial record on the host at ``path`` (None: there is none); one BringupError line for a link, a
    folder or a file that is not a trial record bringup wrote."""
    out = transport.run_script(sh('p=%s; if [ -L "$p" ]; then echo link; elif [ -d "$p" ]; then echo folder; '
                                  'elif [ -f "$p" ]; then echo file; head -c %s -- "$p"; elif [ -e "$p" ]; then '
                                  'echo other; else echo none; fi', path, TRIAL_MAX + 1)).stdout
    kind, _, text = out.partition("\n")
    kind = kind.strip()
    if kind == "none":
        return None
    if kind != "file":
        raise BringupError(f"{path} on {transport.host.name}: {kind or 'unreadable'}, not the trial record bringup "
                           f"writes; remove it")
    return parse_trial(text, f"{path} on {transport.host.name}")


def guard(path: str = TRIAL) -> str:
    """The shell condition: a trial record is there (a regular file, not a link)."""
    return sh("[ -f %s ] && [ ! -L %s ]", path, path)


def restore_command(models: list[str], repo: str, base: str, path: str = TRIAL) -> str:
    """The triton role's step (provision): for each of ``models`` the trial record names, its repository
    configuration loaded again (touched first: a load without an override keeps an override otherwise), then
    the record removed; fails (the record kept) when a load fails."""
    lines = ["set -e", "ok=1"]
    for m in models:
        name = json.dumps(m)
        lines.append(sh("if grep -qF -- %s %s; then touch -c -- %s; "
                        "curl -sf --max-time 120 -X POST %s >/dev/null || ok=0; fi",
                        f'"model": {name}', path, f"{repo.rstrip('/')}/{m}/config.pbtxt",
                        f"{base}/v2/repository/models/{m}/load"))
    lines.append(sh('[ "$ok" = 1 ] || { echo "loading the own configuration back failed; %s kept" >&2; exit 1; }',
                    path))
    lines.append(sh("rm -f -- %s", path))
    return "\n".join(lines)
