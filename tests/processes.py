"""This machine's processes, by what their command lines hold: what a test left running, or did not."""
from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["holding", "gone", "running", "pid_gone"]


def holding(*marks: str) -> list[str]:
    """``pid: command line`` of this machine's processes (not this one) whose command line holds any of ``marks``."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                line = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if any(m in line for m in marks):
                found.append(f"{p.name}: {line}")
    return found


def gone(*marks: str, within: float = 15.0) -> list[str]:
    """Wait up to ``within`` s for no process to hold ``marks``; what is still there."""
    deadline = time.monotonic() + within
    while (left := holding(*marks)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def running(pid: int) -> bool:
    """Whether ``pid`` still runs: there, and no zombie (one that ended and was not yet reaped runs nothing; where
    the tests' pytest is PID 1, as in a container, it inherits orphans and never reaps them)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def pid_gone(pid: int, within: float = 10.0) -> bool:
    """Wait up to ``within`` s for ``pid`` to stop running (:func:`running`); whether it did."""
    deadline = time.monotonic() + within
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


def hang_up(pid: int, master: int, within: float = 60.0) -> int | None:
    """Close a pty's master side (the terminal hanging up under ``pid``, which runs on its slave side) and wait
    up to ``within`` s for ``pid`` to end: its exit code (128 + N for signal N), or None while it still runs."""
    os.close(master)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(st)
        time.sleep(0.1)
    return None
