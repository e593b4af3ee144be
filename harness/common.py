"""What every part of the sandbox shares: labels, the error, logging, the state directory, ``_run``."""
from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from bringup.errors import BringupError

#: Label on every image and container the sandbox creates; leftovers are found by it.
LABEL = "bringup.sandbox"
#: Label carrying the host name a container was started as.
NAME_LABEL = "bringup.sandbox.name"
#: Label carrying the id of the process that started the container.
SESSION_LABEL = "bringup.sandbox.session"
#: This process's session id: its containers are not "leftovers" to itself.
SESSION = f"{os.getpid()}-{secrets.token_hex(4)}"

IMAGE_REPO = "bringup-sandbox"


class SandboxError(BringupError):
    """A sandbox operation failed; the message is one line saying why."""


def _log(msg: str) -> None:
    # stderr: tasks may print inventories or JSON on stdout.
    print(f"sandbox: {msg}", file=sys.stderr, flush=True)


def _last_line(text: str) -> str:
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


def _repo_root() -> Path:
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    # Not in a checkout: the tree this module lives in.
    return Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    """Return (creating it) ``$BRINGUP_SANDBOX_DIR`` or ``<repo root>/.sandbox``."""
    env = os.environ.get("BRINGUP_SANDBOX_DIR")
    path = Path(env) if env else _repo_root() / ".sandbox"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(argv: Sequence[str], *, check: bool = True, input: str | None = None,
         timeout: float | None = 120, what: str | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(list(argv), input=input, text=True, capture_output=True,
                            timeout=timeout)
    except FileNotFoundError:
        raise SandboxError(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{what or shlex.join(argv[:3])} timed out after {timeout}s") from None
    if check and cp.returncode != 0:
        raise SandboxError(f"{what or shlex.join(argv[:3])} failed (exit {cp.returncode}): "
                           f"{_last_line(cp.stderr or cp.stdout)}")
    return cp
