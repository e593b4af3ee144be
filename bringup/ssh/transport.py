"""The contract of a transport: one remote shell script per round trip (:class:`Transport`), what a round
trip returns (:class:`RunResult`), the caps on what is read back, and ``ansible_connection: local``
(:class:`LocalTransport`).  SSH is :mod:`bringup.ssh.connection`'s.

Every call ships a whole script on stdin to ``sh -c 'eval "$(cat)"'``: the
script size is not bounded by the kernel's argument limit, and commands in the
script see an exhausted stdin, so none of them can swallow the rest of it.
"""
from __future__ import annotations

import io
import os
import secrets
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator


from .. import child
from .command import quote
from ..errors import BringupError, Unreachable, said
from .roundtrip import BecomeError, Deadline, Sudo, text as _text
from ..inventory.hosts import Host
from .runlock import LockLost, RunLock, refusal, then_output

__all__ = ["Transport", "LocalTransport", "RunResult", "BecomeError", "Sudo", "OUT_MAX", "ERR_MAX",
           "LOCAL_OUT_CAP", "LOCAL_ERR_CAP"]

#: The remote entry point: read the whole script from stdin, then run it.
_ENTRY = "sh -c 'eval \"$(cat)\"'"
#: Seconds the host's own timeout of a script waits past command_timeout (the control side's deadline
#: fires first and reports the host; the host then ends what is left).
REMOTE_GRACE_S = 5
#: The most of the run lock holder's answer read (bytes): one line, bounded on the host already.
ANSWER_MAX = 4096
#: The most of one SSH round trip's stdout read (bytes).  bringup's scripts print far less (each fact's section
#: is cut at 16 MiB on the host itself), so only a host that does not run the script as sent reaches it (a
#: login shell or sshd that floods): the round trip then fails as one line, with memory bounded.
OUT_MAX = 256 << 20
#: Bytes of a local command's stdout read at most (its stderr: the first LOCAL_ERR_CAP kept): past them the
#: command is ended and its result says so in one line; a flood costs no more memory (issue 40 item 3).  The
#: round trip's own bound: at 64 MiB, one flooding nvidia-smi (five fact sections of 16 MiB each, each cut alone
#: on the host) lost every fact of a local host (pull mode's), where over SSH only its own sections were cut.
LOCAL_OUT_CAP = OUT_MAX
LOCAL_ERR_CAP = 1 << 20
#: The most of one SSH round trip's stderr kept (bytes); the rest is read and dropped, and the cut is said.
ERR_MAX = LOCAL_ERR_CAP
#: The longest holder command line that also carries a script (bytes): one argument of an exec stays well under
#: Linux's 128 KiB for one argument (MAX_ARG_STRLEN); a longer script goes in a round trip of its own.
HOLDER_MAX = 96 * 1024

@dataclass
class RunResult:
    """What one round trip returned."""

    rc: int
    stdout: str
    stderr: str


class Transport:
    """Runs scripts on one host and counts the round trips it made."""

    def __init__(self, host: Host):
        self.host = host
        self.round_trips = 0
        self._lock = threading.Lock()
        #: Seconds a round trip may take here when less than command_timeout (:meth:`limited`), else None.
        self._limit: float | None = None
        #: The host's run lock while this connection holds it (:meth:`hold_run_lock`): every script is fenced.
        self._run_lock: RunLock | None = None
        #: The token of this connection's state reads that may be kept for, and read ahead by, the next run
        #: (:meth:`run_script`'s ``keep``; :func:`bringup.ssh.runlock.keep_request`).
        self.read_token = secrets.token_hex(8)
        #: The hash of the state read the run lock's holder read ahead, its answer not yet taken (:meth:`_served`).
        self._ahead: str | None = None
        #: Whether the holder was started to read ahead (it has :attr:`read_token`): only then is a read kept.
        self._keeps = False

    def _become(self, inner: str) -> tuple[str, "Sudo | None"]:
        """``inner`` wrapped in sudo when ``ansible_become``, and the prompt handshake when a password is set.

        With a password, sudo reads it (``-S``) only after writing a prompt unique
        to this call; the wrapped command first writes a ready line of its own.
        The password is sent when, and only when, that prompt appears, so a
        sudo that does not ask (NOPASSWD, a cached timestamp) never passes it
        on to the command: the script's stdin carries the script alone.
        """
        c = self.host.connection
        if not c.ansible_become:
            return inner, None
        self.host.refuse_become()  # (every task refuses it first; a caller of its own, testinfra's backend, here)
        user = quote(c.ansible_become_user)
        if c.ansible_become_password:
            token = secrets.token_hex(8)
            sudo = Sudo(prompt=f"[bringup-sudo-{token}]", ready=f"bringup-ready-{token}",
                        password=c.ansible_become_password.get_secret_value(), user=c.ansible_become_user)
            wrapped = "sh -c " + quote(f"echo {sudo.ready} >&2; exec {inner}")
            return f"sudo -S -p {quote(sudo.prompt)} -H -u {user} -- {wrapped}", sudo
        return f"sudo -n -H -u {user} -- {inner}", None

    def _entry(self) -> tuple[str, "Sudo | None"]:
        """The command line and the sudo handshake (if any) for a script."""
        return self._become(self._bounded(_ENTRY))

    def _bounded(self, command: str) -> str:
        """``command`` under the host's own ``timeout``: whatever happens to the connection (cut off after
        command_timeout, a run interrupted), the script's whole process group (background lanes, a hung
        nvidia-smi) is ended on the host a little after command_timeout (TERM, then KILL 10 s later),
        so nothing a run started outlives it there and piles up run after run."""
        if self._run_lock is not None:
            # Inside the timeout: the fence's wait for the lock is bounded like the rest of the script.
            command = "sh -c " + quote(self._run_lock.fenced(command))
        return f"timeout -s TERM -k 10 {int(self._timeout()) + REMOTE_GRACE_S} {command}"

    def _timeout(self) -> float:
        full = float(self.host.connection.command_timeout)
        return full if self._limit is None else min(full, self._limit)

    @contextmanager
    def limited(self, seconds: float) -> Iterator[None]:
        """Round trips inside take at most ``seconds`` (never more than command_timeout), on the host (its
        ``timeout``) and here: a probe of a host that may be up only half way (after a reboot, an sshd that
        logs in but whose shell never starts) is given up on, not waited for through command_timeout."""
        before, self._limit = self._limit, max(1.0, float(seconds))
        try:
            yield
        finally:
            self._limit = before

    def run_script(self, script: str, keep: str | None = None) -> RunResult:
        """Run ``script`` (POSIX sh) on the host in one round trip.

        A round trip that takes longer than ``command_timeout`` raises
        :class:`Unreachable`: a host that stops answering never hangs the run.

        ``keep``: ``script`` is a state read made with :attr:`read_token`, which the next run with the same key
        (:func:`bringup.facts.gather.ahead_key`) may have read ahead while it gathered its facts: where the run
        lock's holder read this very script ahead, its answer is taken, no round trip made; else it is run and
        kept on the host under that key.
        """
        res = self._ahead_answer(script) if keep is not None else None
        if res is not None:
            return self._unfenced(res)
        with self._lock:
            self.round_trips += 1
        res = self._served(script, keep)
        if res is None:
            cmd, sudo = self._entry()
            res = self._run(cmd, sudo, script)
        return self._unfenced(res)

    def _served(self, script: str, keep: str | None = None) -> RunResult | None:
        """``script`` run by the host's run lock holder (:func:`~bringup.ssh.runlock.serve_request`), in the
        connection's channel it already holds (and kept there under ``keep``); None where it cannot (no lock
        held here, or the holder busy with another script): then the script goes in a round trip of its own."""
        return None

    def _ahead_answer(self, script: str) -> RunResult | None:
        """The answer of the state read the holder read ahead, where it is ``script`` itself; else None."""
        return None

    def run_command(self, command: str) -> RunResult:
        """Run one short ``command`` (POSIX sh) on the host in one round trip, as the exec request itself.

        :meth:`run_script` sends its script on stdin to a shell that reads it whole first (``cat``, then
        ``eval``): right for a script of any size, two processes more than a one-line command needs.  The
        same bounds hold: the host's ``timeout``, become, and ``command_timeout`` on this side.
        """
        cmd, sudo = self._stream_entry(command)
        with self._lock:
            self.round_trips += 1
        return self._unfenced(self._exchange(cmd, sudo, io.BytesIO(b"")))

    def _unfenced(self, res: RunResult) -> RunResult:
        """``res``, unless the host's run lock fenced the round trip: then :class:`LockLost` (nothing of it ran)."""
        why = self._run_lock.lost(res.rc, res.stderr) if self._run_lock is not None else None
        if why is not None:
            raise LockLost(f"{self.host.name}: this run no longer holds the host's run lock ({why}); nothing more "
                           "of it ran there: see what the other run did, then run again")
        return res

    def _run(self, cmd: str, sudo: "Sudo | None", stdin: str) -> RunResult:
        return self._exchange(cmd, sudo, io.BytesIO(stdin.encode()))

    def _stream_entry(self, command: str) -> tuple[str, "Sudo | None"]:
        """The command line (and sudo handshake) running ``command`` with become applied."""
        return self._become(self._bounded("sh -c " + quote(command)))

    def run_stream(self, command: str, local: list[str]) -> RunResult:
        """Run ``command`` on the host with the stdout of ``local`` (run here) as its stdin.

        One round trip; for bulk data (``docker save`` into ``docker load``).
        A failing local command fails the result, whatever the host said.
        """
        cmd, sudo = self._stream_entry(command)
        with self._lock:
            self.round_trips += 1
        try:
            proc = child.start(local, stdout=child.PIPE, stderr=child.PIPE)
        except OSError as e:
            return RunResult(127, "", f"{local[0]}: {e.strerror or e}")
        assert proc.proc.stdout is not None and proc.proc.stderr is not None
        errs = child.Reader(proc.proc.stderr, LOCAL_ERR_CAP)  # read meanwhile: a full stderr pipe blocks it
        try:
            res = self._unfenced(self._exchange(cmd, sudo, proc.proc.stdout))
        except BaseException:
            proc.kill()
            raise
        rc = proc.proc.wait()
        proc.end()  # what it left in its group (holding stderr open) goes with it
        err = errs.result().decode("utf-8", "replace")
        if rc != 0:
            return RunResult(rc or 1, res.stdout, f"{' '.join(local)} failed: {said(err, 300)}")
        return res

    def _exchange(self, cmd: str, sudo: "Sudo | None", data: BinaryIO) -> RunResult:  # pragma: no cover
        """Run ``cmd`` with ``data`` as its stdin (after sudo's handshake), within ``command_timeout``."""
        raise NotImplementedError

    def _timed_out(self) -> Unreachable:
        if self._limit is not None and self._limit < float(self.host.connection.command_timeout):
            return Unreachable(f"{self.host.name} stopped answering: no result within {self._limit:g} s")
        return Unreachable(f"{self.host.name} stopped answering: no result within "
                           f"{self.host.connection.command_timeout:g} s (command_timeout)")

    def open(self) -> None:
        """Connect; raises :class:`Unreachable` with one line on failure."""

    #: Whether the host can go silent under a run (:meth:`silent` probes it); not the control machine itself.
    probed = False

    def silent(self, within: float) -> bool:
        """Whether the host, connected, answered nothing within ``within`` seconds of a probe."""
        return False

    def close(self) -> None:
        """Disconnect."""

    def hold_run_lock(self, who: str, then: str | None = None, ahead: str | None = None) -> RunResult | None:
        """Take the host's run lock (:mod:`bringup.ssh.runlock`) for as long as this connection lives, naming this run
        ``who``; from then on every script of this connection runs fenced by it.  Raises :class:`BringupError`
        with one line when the lock is held (by a live run, or by a script of an earlier run still running) or
        cannot be used.

        The lock is flock(1) held by a process on the host whose stdin is this connection: it goes when the run
        closes the connection, or the connection dies (the control machine killed, the network cut), so a
        crashed run never leaves a host locked for good; what that run's scripts still do on the host keeps
        the next run waiting, and never writes after it has begun.

        ``then``: a script (as :meth:`run_script` takes) the holder runs once it holds the lock, in the same
        round trip (the run's facts): its result, counted as a round trip; None when it was not run that way
        (no lock here, or a script too long for the holder's command line): the caller runs it itself.
        ``ahead`` (with ``then``): the key of the run's state read (:func:`bringup.facts.gather.ahead_key`): the
        holder runs the read an earlier run kept under it right after ``then``, for :meth:`run_script`.
        """
        lock = RunLock(wait_s=self.host.connection.run_lock_timeout)
        inner = None if then is None else self._bounded("sh -c " + quote(then))
        read_ahead = None if ahead is None or inner is None else \
            (ahead, self.read_token, int(self._timeout()) + REMOTE_GRACE_S)
        cmd, sudo = self._become("sh -c " + quote(lock.holder(inner, read_ahead)))
        if inner is not None and len(cmd) > HOLDER_MAX:
            inner = read_ahead = None
            cmd, sudo = self._become("sh -c " + quote(lock.holder()))
        # The holder's wait (for a live run, then for an earlier run's scripts: wait_s in all) is its own; what
        # it runs then has command_timeout, as a round trip of its own would.
        within = lock.wait_s + self._timeout() * (2 if inner is not None else 1)
        if inner is not None:
            with self._lock:
                self.round_trips += 1
        line, rest = self._hold(cmd, sudo, who, within, lock.token if inner is not None else None,
                                read_ahead is not None)
        problem = refusal(line, lock.wait_s)
        if problem is not None:
            raise BringupError(f"{self.host.name}: {problem}")
        self._run_lock = lock
        self._keeps = read_ahead is not None
        if inner is None:
            return None
        got = then_output(lock.token, rest)
        if got is None:
            raise Unreachable(f"connection to {self.host.address} lost: the run lock's holder ended before what it "
                              "ran after taking the lock had answered")
        return RunResult(got[0], got[1], "")

    @property
    def holds_run_lock(self) -> bool:
        """Whether this connection holds the host's run lock (:meth:`hold_run_lock`)."""
        return self._run_lock is not None

    def _hold(self, cmd: str, sudo: "Sudo | None", who: str, within: float, then: str | None, ahead: bool = False
              ) -> tuple[str, list[str]]:  # pragma: no cover
        """Start ``cmd`` (the holder), send ``who`` as its first line, keep it running; its first line back
        (read within ``within`` seconds, at most :data:`ANSWER_MAX` bytes of it) and, given ``then`` (the
        lock's token) and the lock taken, the lines its ``then`` command printed, up to and with its end line
        (:func:`~bringup.ssh.runlock.then_output`); ``ahead``: then the line saying whether it reads a kept state
        read ahead (:attr:`_ahead`)."""
        raise NotImplementedError


def _err_text(got: bytes, passed: bool, cap: int) -> str:
    return _text(got) + (f"\n[stderr cut at {cap >> 20} MiB]" if passed else "")


def _pump(data: BinaryIO, write: Callable[[bytes], object]) -> None:
    while chunk := data.read(1 << 20):
        write(chunk)


class LocalTransport(Transport):
    """``ansible_connection: local``: run on the control machine itself."""

    #: :meth:`close` ends the command in flight (there is no connection to drop): a read's stop wants it
    #: (:class:`bringup.ssh.stop.Stop` ``at_once``), a write's second signal leaves it to finish, as over SSH.
    ends_its_command_on_close = True

    def hold_run_lock(self, who: str, then: str | None = None, ahead: str | None = None) -> None:
        """No lock: ``ansible_connection: local`` is the control machine itself, whose inventory may name it
        several times (tests stand hosts in for each other that way); its runs are the operator's own."""
        return None

    #: The command in flight (:meth:`close` ends it).
    _in_flight: "child.Child | None" = None

    def close(self) -> None:
        """Nothing to disconnect; a command in flight is ended, group and all: a run's stop closes its hosts'
        connections from another thread to wake their round trips (:class:`bringup.ssh.stop.Stop`), and a local
        command has no connection that closing would end (a hung ``nvidia-smi`` ran on to its own limit)."""
        c = self._in_flight
        if c is not None:
            self._ended = c
            c.end()

    def _bounded(self, command: str) -> str:
        # The deadline below ends the script's process group itself; timeout(1) would move the script
        # into a group of its own, out of that reach.
        return command

    def _exchange(self, cmd: str, sudo: "Sudo | None", data: BinaryIO) -> RunResult:
        # Not invoke's Context.run: its in_stream is copied a byte per 10 ms.  A session of its own
        # (bringup.child), ended group and all: SIGTERM first (a read script's trap stops its lanes and removes
        # its temporary folder; a SIGKILL cannot be trapped), then SIGKILL for whatever in the group did not
        # end within 2 s.
        # Tagged: what the command leaves holding its output after it exited (a background job; one that left the
        # group with setsid) is ended once what it printed is read (child.DRAIN_S), never waited for; one that
        # shed the tag too is no longer waited for either (its output so far is the answer).  What it leaves
        # without holding its output runs on, as it does on an SSH host (a site test's host.run('... &')).
        c = child.start(["/bin/sh", "-c", cmd], stdin=child.PIPE, stdout=child.PIPE, stderr=child.PIPE, tag=True)
        self._in_flight = c
        try:
            res = self._answer(c, sudo, data)
        finally:
            self._in_flight = None
        if getattr(self, "_ended", None) is c:
            raise Unreachable(f"{self.host.name}: the command was ended: the run was stopped")
        return res

    def _answer(self, c: "child.Child", sudo: "Sudo | None", data: BinaryIO) -> RunResult:
        p = c.proc
        assert p.stdin is not None and p.stdout is not None and p.stderr is not None
        first = b""
        with Deadline(self._timeout(), c.end) as dl:
            try:
                if sudo:
                    def send(b: bytes) -> None:
                        p.stdin.write(b)
                        p.stdin.flush()
                    first = sudo.handshake(lambda n: os.read(p.stderr.fileno(), n), send, self.host.name)
                out = child.Reader(p.stdout, LOCAL_OUT_CAP, over=c.end)
                err = child.Reader(p.stderr, LOCAL_ERR_CAP)
                try:
                    _pump(data, p.stdin.write)
                except BrokenPipeError:
                    pass
                finally:
                    try:
                        p.stdin.close()
                    except BrokenPipeError:
                        pass
                rc = p.wait()
                if not (out.join(child.DRAIN_S) and err.join(child.DRAIN_S)):
                    c.end()  # what it left in its group, and what carries its tag, holding its output
                    out.join(2.0)
                    err.join(2.0)
                said_out, said_err = out.so_far(), first + err.so_far()
            except BaseException:
                c.end()
                raise
        if dl.fired:
            raise self._timed_out()
        if out.passed:
            return RunResult(rc or 1, "", f"{self.host.name}: the command printed more than "
                                          f"{LOCAL_OUT_CAP >> 20} MiB; it was ended there and its output dropped")
        return RunResult(rc, _text(said_out), _text(said_err))
