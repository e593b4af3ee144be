"""Waiting for a child process to be ready for a signal, instead of sleeping a fixed time before sending it.

A signal sent before the program's handler is in place kills it (exit -2 for SIGINT) however long the test
slept first on a loaded machine.  What is waited for here is what the kernel says of the process:

- :func:`wait_until_blocked`: its SIGINT/SIGTERM handler is in place (bringup's ``interruptible`` installs both
  at once; Python catches SIGINT from its start, so SIGTERM in ``SigCgt`` is the sign), and then every thread
  of it sleeps with no CPU time spent for a while: it is waiting on what the test holds back (a host that
  never answers), not still on its way there.
- :class:`Lines`: its output, read as it comes, to wait for a line it prints (``SIGINT: stopping``).
"""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (``SigCgt`` in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def _threads(pid: int) -> tuple[bool, int]:
    """``(every thread sleeping, CPU ticks of all threads)`` of process ``pid``."""
    asleep, ticks = True, 0
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
        asleep = asleep and fields[0] == "S"  # not R (running or waiting for a CPU), nor D (disk)
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return asleep, ticks


def wait_until_blocked(proc: subprocess.Popen, *, quiet: float = 0.3, timeout: float = 60) -> None:
    """Until ``proc`` handles SIGINT/SIGTERM and then has slept ``quiet`` seconds with no thread running."""
    deadline = time.monotonic() + timeout
    since: float | None = None
    last = -1
    while True:
        assert proc.poll() is None, f"the process ended (exit {proc.returncode}) before it was ready for a signal"
        assert time.monotonic() < deadline, f"the process was not ready for a signal within {timeout} s"
        if catches(proc.pid, signal.SIGTERM):
            asleep, ticks = _threads(proc.pid)
            now = time.monotonic()
            if not asleep:
                since = None
            elif since is None or ticks != last:
                since = now
            elif now - since >= quiet:
                return
            last = ticks
        time.sleep(0.02)


class Lines:
    """A process's output (``stdout=PIPE, text=True``), read line by line in a thread as it comes."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self._lines, self._more = proc, [], threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._more:
                self._lines.append(line)
                self._more.notify_all()
        with self._more:
            self._lines.append(None)  # the end
            self._more.notify_all()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Until a line holding ``text`` came (an assertion error naming what came if it did not)."""
        with self._more:
            ok = self._more.wait_for(lambda: any(text in ln for ln in self._lines if ln)
                                     or (self._lines and self._lines[-1] is None), timeout)
            seen = "".join(ln for ln in self._lines if ln)
        assert ok and text in seen, f"no line with {text!r} within {timeout} s: {seen!r}"

    def text(self, timeout: float = 120) -> str:
        """Everything it printed, once it ended."""
        self.proc.wait(timeout)
        self._reader.join(timeout)
        return "".join(ln for ln in self._lines if ln)
