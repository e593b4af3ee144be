"""Transports: one remote shell script per round trip, over SSH or locally.

Every call ships a whole script on stdin to ``sh -c 'eval "$(cat)"'``: the
script size is not bounded by the kernel's argument limit, and commands in the
script see an exhausted stdin, so none of them can swallow the rest of it.

Host keys are verified against ``ssh_known_hosts``; Fabric's default of adding
any key is replaced by paramiko's ``RejectPolicy``, or by :class:`AcceptNew`
(OpenSSH's ``StrictHostKeyChecking=accept-new``) when asked.

Where to connect is what ``ssh`` would do as Ansible runs it (:mod:`bringup.sshconfig`: the ssh config
file, ``ansible_ssh_*args``); jump hosts and proxy commands are :mod:`bringup.jumps`'.
"""
from __future__ import annotations

import io
import logging
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Protocol

import paramiko
from fabric import Config, Connection

from .command import quote, sh
from .errors import BringupError, Unreachable, said
from .inventory import Host
from .jumps import AcceptNew, Jumps, Way, unreachable
from .runlock import LockLost, RunLock, refusal, then_output
from .sshconfig import Route, route

# paramiko's transport thread logs a whole traceback when a port answers but is not SSH; the error it
# raises afterwards is worded below, once.  (A NullHandler keeps logging's last-resort stderr handler away.)
logging.getLogger("paramiko").addHandler(logging.NullHandler())

__all__ = ["Transport", "SSHTransport", "LocalTransport", "RunResult", "connect", "AcceptNew", "BecomeError", "Jumps"]

#: The remote entry point: read the whole script from stdin, then run it.
_ENTRY = "sh -c 'eval \"$(cat)\"'"
#: Seconds the host's own timeout of a script waits past command_timeout (the control side's deadline
#: fires first and reports the host; the host then ends what is left).
REMOTE_GRACE_S = 5
#: The most of the run lock holder's answer read (bytes): one line, bounded on the host already.
ANSWER_MAX = 4096
#: The longest holder command line that also carries a script (bytes): one argument of an exec stays well under
#: Linux's 128 KiB for one argument (MAX_ARG_STRLEN); a longer script goes in a round trip of its own.
HOLDER_MAX = 96 * 1024

@dataclass
class RunResult:
    """What one round trip returned."""

    rc: int
    stdout: str
    stderr: str


def _text(data: bytes) -> str:
    # Undecodable bytes (a binary file's content) survive as surrogates.
    return data.decode("utf-8", "surrogateescape")


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

    def run_script(self, script: str) -> RunResult:
        """Run ``script`` (POSIX sh) on the host in one round trip.

        A round trip that takes longer than ``command_timeout`` raises
        :class:`Unreachable`: a host that stops answering never hangs the run.
        """
        cmd, sudo = self._entry()
        with self._lock:
            self.round_trips += 1
        return self._unfenced(self._run(cmd, sudo, script))

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
            proc = subprocess.Popen(local, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            return RunResult(127, "", f"{local[0]}: {e.strerror or e}")
        assert proc.stdout is not None and proc.stderr is not None
        try:
            res = self._unfenced(self._exchange(cmd, sudo, proc.stdout))
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        err = proc.stderr.read().decode("utf-8", "replace")
        if proc.wait() != 0:
            return RunResult(proc.returncode or 1, res.stdout, f"{' '.join(local)} failed: {said(err, 300)}")
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

    def hold_run_lock(self, who: str, then: str | None = None) -> RunResult | None:
        """Take the host's run lock (:mod:`bringup.runlock`) for as long as this connection lives, naming this run
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
        """
        lock = RunLock(wait_s=self.host.connection.run_lock_timeout)
        inner = None if then is None else self._bounded("sh -c " + quote(then))
        cmd, sudo = self._become("sh -c " + quote(lock.holder(inner)))
        if inner is not None and len(cmd) > HOLDER_MAX:
            inner = None
            cmd, sudo = self._become("sh -c " + quote(lock.holder()))
        # The holder's wait (for a live run, then for an earlier run's scripts: wait_s in all) is its own; what
        # it runs then has command_timeout, as a round trip of its own would.
        within = lock.wait_s + self._timeout() * (2 if inner is not None else 1)
        if inner is not None:
            with self._lock:
                self.round_trips += 1
        line, rest = self._hold(cmd, sudo, who, within, lock.token if inner is not None else None)
        problem = refusal(line, lock.wait_s)
        if problem is not None:
            raise BringupError(f"{self.host.name}: {problem}")
        self._run_lock = lock
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

    def _hold(self, cmd: str, sudo: "Sudo | None", who: str, within: float, then: str | None
              ) -> tuple[str, list[str]]:  # pragma: no cover
        """Start ``cmd`` (the holder), send ``who`` as its first line, keep it running; its first line back
        (read within ``within`` seconds, at most :data:`ANSWER_MAX` bytes of it) and, given ``then`` (the
        lock's token) and the lock taken, the lines its ``then`` command printed, up to and with its end line
        (:func:`~bringup.runlock.then_output`)."""
        raise NotImplementedError


class BecomeError(BringupError):
    """sudo refused: a wrong ``ansible_become_password``, or the user may not sudo."""


@dataclass
class Sudo:
    """One sudo call's handshake: its unique prompt, the command's ready line, the password."""

    prompt: str
    ready: str
    password: str = field(repr=False)
    user: str = "root"

    def handshake(self, recv: Callable[[int], bytes], send: Callable[[bytes], object], host: str) -> bytes:
        """Answer sudo's prompt (once) with the password; return stderr that followed the ready line.

        The ready line comes from the command sudo started: once it is seen,
        sudo reads nothing more, and stdin belongs to the command.
        """
        prompt, ready = self.prompt.encode(), self.ready.encode() + b"\n"
        buf, answered = b"", False
        while True:
            if ready in buf:
                return buf.split(ready, 1)[1]
            if prompt in buf:
                if answered:
                    words = said(_text(buf.replace(prompt, b" ")), 300)
                    raise BecomeError(f"{host}: sudo -u {self.user} refused ansible_become_password "
                                      f"(sudo says: {words or 'it asked again'}); fix the password or the sudoers entry")
                send(self.password.encode() + b"\n")
                answered = True
                buf = buf.replace(prompt, b" ", 1)
                continue
            chunk = recv(4096)
            if not chunk:
                raise BecomeError(f"{host}: sudo -u {self.user} failed before running anything "
                                  f"(sudo says: {said(_text(buf), 300) or 'nothing'})")
            buf += chunk


class _Deadline:
    """Calls ``abort`` once ``seconds`` have passed, unless left before; ``fired`` says whether it did."""

    def __init__(self, seconds: float, abort: Callable[[], None]):
        self.fired = False
        self._abort = abort
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        try:
            self._abort()
        except Exception:  # noqa: BLE001 - aborting a dead channel may fail; the flag is what counts
            pass

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def _pump(data: BinaryIO, write: Callable[[bytes], object]) -> None:
    while chunk := data.read(1 << 20):
        write(chunk)


class LocalTransport(Transport):
    """``ansible_connection: local``: run on the control machine itself."""

    def hold_run_lock(self, who: str, then: str | None = None) -> None:
        """No lock: ``ansible_connection: local`` is the control machine itself, whose inventory may name it
        several times (tests stand hosts in for each other that way); its runs are the operator's own."""
        return None

    def _bounded(self, command: str) -> str:
        # The deadline below ends the script's process group itself; timeout(1) would move the script
        # into a group of its own, out of that reach.
        return command

    def _exchange(self, cmd: str, sudo: "Sudo | None", data: BinaryIO) -> RunResult:
        # Not invoke's Context.run: its in_stream is copied a byte per 10 ms.
        p = subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        assert p.stdin is not None and p.stdout is not None and p.stderr is not None

        def kill() -> None:
            # SIGTERM first: a read script's trap stops its lanes and removes its temporary folder (a SIGKILL
            # cannot be trapped); then SIGKILL for whatever in the group did not end within 2 s.
            try:
                os.killpg(p.pid, signal.SIGTERM)
                # The whole group, not only its leader: the shell that runs the script ends after its trap.
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline:
                    p.poll()  # reap the leader, so that a finished group reads as gone
                    os.killpg(p.pid, 0)
                    time.sleep(0.02)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        out: list[bytes] = []
        err: list[bytes] = []
        with _Deadline(self._timeout(), kill) as dl:
            try:
                if sudo:
                    def send(b: bytes) -> None:
                        p.stdin.write(b)
                        p.stdin.flush()
                    err.append(sudo.handshake(lambda n: os.read(p.stderr.fileno(), n), send, self.host.name))
                readers = [threading.Thread(target=lambda: out.append(p.stdout.read()), daemon=True),
                           threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)]
                for th in readers:
                    th.start()
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
                for th in readers:
                    th.join()
            except BaseException:
                if p.poll() is None:
                    kill()
                p.wait()
                raise
        if dl.fired:
            raise self._timed_out()
        return RunResult(rc, _text(b"".join(out)), _text(b"".join(err)))


def _no_delay(sock: object) -> None:
    """TCP_NODELAY on the connection's socket, as OpenSSH sets it.

    A round trip writes the script, then EOF, as two small packets: with Nagle's algorithm the second waits for
    the host's ACK of the first, which Linux delays up to 40 ms, so every round trip cost 40-80 ms of
    waiting (an empty script: ~90 ms on 127.0.0.1, ~9 ms with this).  Not a plain socket (a proxy): left alone.
    """
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class SSHTransport(Transport):
    """SSH through a Fabric ``Connection`` with verified host keys."""

    def __init__(self, host: Host, accept_new_host_keys: bool = False, jumps: Jumps | None = None):
        super().__init__(host)
        c = host.connection
        self.route: Route = route(host)
        t = self.route.target
        self.known_hosts = Path(self.route.known_hosts[0])
        self.way = Way(known_hosts=self.route.known_hosts,
                       accept_new=accept_new_host_keys or self.route.strict == "accept-new",
                       connect_timeout=self.route.connect_timeout, keepalive=self.route.keepalive)
        #: Jump host logins: the run's, shared with the other hosts behind them, or this transport's own.
        self._own_jumps = jumps is None
        self.jumps = jumps if jumps is not None else Jumps()
        self._held: list[tuple] = []
        connect_kwargs: dict = {}
        if t.identity_files:
            connect_kwargs["key_filename"] = list(t.identity_files)
            # Only the named keys: an agent or ~/.ssh keys would hide a wrong path.
            connect_kwargs["look_for_keys"] = False
            connect_kwargs["allow_agent"] = False
        if c.ansible_password:
            connect_kwargs["password"] = c.ansible_password.get_secret_value()
        self.conn = Connection(
            t.hostname,
            user=t.user,
            port=t.port,
            connect_timeout=int(self.route.connect_timeout),
            connect_kwargs=connect_kwargs,
            # Read by bringup.sshconfig (with the inventory's variables first, as ssh does), not by Fabric.
            config=Config(overrides={"load_ssh_configs": False}),
        )
        self.way.prepare(self.conn.client)

    def open(self) -> None:
        t = self.route.target
        sock = None
        try:
            sock, self._held = self.jumps.reach(t, self.way, self.host.name)
            if sock is not None:
                self.conn.connect_kwargs["sock"] = sock
            self.conn.open()
            _no_delay(self.conn.transport.sock)
            if self.way.keepalive:
                # OpenSSH's ServerAliveInterval: idle sessions survive firewalls and NAT.
                self.conn.transport.set_keepalive(int(self.way.keepalive))
        except Unreachable:
            self._let_go()
            raise
        except Exception as e:  # noqa: BLE001 - every failure to log in is one line (jumps.unreachable)
            # Worded before closing: closing ends a ProxyCommand, whose own words are read here.
            err = unreachable(e, ep=t, way=self.way, host=self.host.name, sock=sock)
            self._let_go()
            if sock is not None and self.route.target.jumps:
                err = Unreachable(f"{err} (through jump host {t.jumps[-1].name})")
            raise err from None

    def _let_go(self) -> None:
        self.conn.close()
        held, self._held = self._held, []  # once, whoever closes first (the run, its watchdog)
        self.jumps.release(held)
        if self._own_jumps:
            self.jumps.close()

    probed = True

    def silent(self, within: float) -> bool:
        """OpenSSH's ServerAliveInterval probe: a global request that wants a reply, which every sshd sends (if
        only to refuse it).  paramiko waits for that reply without a bound, hence a thread of its own; a host
        that never answers leaves it waiting until the connection is closed.  A connection already gone is
        not silent: its round trips say so themselves."""
        transport = self.conn.transport
        if transport is None or not transport.is_active():
            return False
        answered = threading.Event()

        def ask() -> None:
            try:
                transport.global_request("keepalive@openssh.com", wait=True)
            except Exception:  # noqa: BLE001 - closed meanwhile: an answer of a kind
                pass
            answered.set()

        threading.Thread(target=ask, daemon=True).start()
        return not answered.wait(within) and transport.is_active()

    def _exchange(self, cmd: str, sudo: "Sudo | None", data: BinaryIO) -> RunResult:
        # A raw session of Fabric's connection rather than Connection.run: Invoke
        # copies an in_stream one byte per 10 ms, too slow for a whole script.
        # A host that stops answering is cut off after command_timeout: the
        # whole connection is closed, which wakes every blocked read and write.
        out: list[bytes] = []
        err: list[bytes] = []
        with _Deadline(self._timeout(), self.conn.close) as dl:
            chan = None
            try:
                chan = self.conn.create_session()
                chan.exec_command(cmd)
                if sudo:
                    err.append(sudo.handshake(chan.recv_stderr, chan.sendall, self.host.name))
                readers = [threading.Thread(target=lambda: out.append(chan.makefile("rb").read()), daemon=True),
                           threading.Thread(target=lambda: err.append(chan.makefile_stderr("rb").read()),
                                            daemon=True)]
                for th in readers:
                    th.start()
                _pump(data, chan.sendall)
                chan.shutdown_write()
                rc = chan.recv_exit_status()
                for th in readers:
                    th.join()
            except (paramiko.SSHException, OSError, EOFError) as e:
                if dl.fired:
                    raise self._timed_out() from None
                raise Unreachable(f"connection to {self.host.address} lost: {str(e) or type(e).__name__}") from None
            finally:
                if chan is not None:
                    chan.close()
        if dl.fired:
            raise self._timed_out()
        if rc < 0:  # paramiko's "no exit status": the session ended before the command did
            transport = self.conn.transport
            if transport is None or not transport.is_active():
                raise Unreachable(f"connection to {self.host.address} lost during a command: the SSH session "
                                  "closed without its exit status (sshd or its session killed, the host "
                                  "rebooting or its network gone); what ran before it is in the results")
            err.append(b"\nthe command ended without an exit status (killed by a signal on the host?)")
        return RunResult(rc if rc >= 0 else 255, _text(b"".join(out)), _text(b"".join(err)))

    _holder = None

    def _hold(self, cmd: str, sudo: "Sudo | None", who: str, within: float, then: str | None
              ) -> tuple[str, list[str]]:
        lines: list[str] = []
        end = f"@@{then}:end:".encode()
        with _Deadline(within, self.conn.close) as dl:
            try:
                chan = self.conn.create_session()
                chan.exec_command(cmd)
                if sudo:
                    sudo.handshake(chan.recv_stderr, chan.sendall, self.host.name)
                chan.sendall(who.encode() + b"\n")
                out = chan.makefile("rb")
                line = out.readline(ANSWER_MAX).decode("utf-8", "replace").strip()
                # What the holder ran once it held the lock: each of its outputs is bounded on the host (facts).
                while then is not None and line == "locked":
                    got = out.readline()
                    if not got:
                        break
                    lines.append(_text(got))
                    if got.startswith(end):
                        break
            except (paramiko.SSHException, OSError, EOFError) as e:
                if dl.fired:
                    raise self._timed_out() from None
                raise Unreachable(f"connection to {self.host.address} lost: {str(e) or type(e).__name__}") from None
        if dl.fired:
            raise self._timed_out()
        if line == "locked":
            self._holder = chan  # open until close(): the holder on the host waits on it
        else:
            chan.close()
        return line, lines

    def close(self) -> None:
        self._let_go()  # the holder's channel with the connection: the lock goes; then the jump hosts


def connect(host: Host, accept_new_host_keys: bool = False, jumps: Jumps | None = None) -> Transport:
    """Open the transport that ``ansible_connection`` names; ``jumps``: the run's jump host logins, shared by
    the hosts behind each (none: this connection opens its own)."""
    if host.connection.ansible_connection == "local":
        t: Transport = LocalTransport(host)
    else:
        t = SSHTransport(host, accept_new_host_keys=accept_new_host_keys, jumps=jumps)
    t.open()
    return t


class Watch(Protocol):
    """What a wait asks of the run that waits (:class:`bringup.stop.Stop` is one): whether it may go on, and to
    know each connection in flight, which it may probe or close."""

    def check(self, where: str) -> None: ...

    def track(self, t: Transport | None) -> None: ...

    def untrack(self, t: Transport | None) -> None: ...


def wait_for_ssh(host: Host, timeout: float = 300, interval: float = 2.0, stop: Watch | None = None,
                 probe: str = "true", not_yet: str = "the probe failed") -> Transport:
    """Reconnect until the host runs ``probe`` with exit 0 (after a reboot: a new boot); raises Unreachable after
    ``timeout`` s, naming what the last try met (``not_yet``: the probe ran and said no).

    Each try is bounded: the login by ``ssh_connect_timeout``, the probe's round trip by what is left of
    ``timeout`` (at most ``ssh_connect_timeout``, at least 1 s): a host that logs in but never runs the probe
    is tried again, not waited for through command_timeout.  With ``stop`` (the run's), a signal ends the wait
    (:class:`~bringup.stop.Interrupted` before each try) and the connection of a try in flight is the run's
    to probe and close like any other."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unreachable(f"{host.name} did not come back within {timeout:g} s ({last or 'no answer'})")
        if stop is not None:
            stop.check("while waiting for the host to come back from its reboot")
        t: Transport | None = None
        try:
            t = connect(host)
            if stop is not None:
                stop.track(t)
            with t.limited(min(left, float(host.connection.ssh_connect_timeout))):
                if t.run_script(probe).rc == 0:
                    return t
            last = not_yet
        except Unreachable as e:
            last = str(e)
        if t is not None:
            if stop is not None:
                stop.untrack(t)
            t.close()
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
