"""Transports: one remote shell script per round trip, over SSH or locally.

Every call ships a whole script on stdin to ``sh -c 'eval "$(cat)"'``: the
script size is not bounded by the kernel's argument limit, and commands in the
script see an exhausted stdin, so none of them can swallow the rest of it.

Host keys are verified against ``ssh_known_hosts``; Fabric's default of adding
any key is replaced by paramiko's ``RejectPolicy``, or by :class:`AcceptNew`
(OpenSSH's ``StrictHostKeyChecking=accept-new``) when asked.

Where to connect is what ``ssh`` would do as Ansible runs it (:mod:`bringup.ssh.sshconfig`: the ssh config
file, ``ansible_ssh_*args``); jump hosts and proxy commands are :mod:`bringup.ssh.jumps`'.
"""
from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import BinaryIO

import paramiko
from fabric import Config, Connection

from .. import child
from ..errors import BringupError, Unreachable
from .roundtrip import BecomeError, Deadline, Sudo, text as _text
from ..inventory.addresses import address_problem
from ..inventory.hosts import Host
from .jumps import AcceptNew, Jumps, Way, log_in, unreachable
from .sshconfig import Route, Routes, route

# paramiko's transport thread logs a whole traceback when a port answers but is not SSH; the error it
# raises afterwards is worded below, once.  (A NullHandler keeps logging's last-resort stderr handler away.)
logging.getLogger("paramiko").addHandler(logging.NullHandler())

__all__ = ["LOCAL_OUT_CAP", "Transport", "SSHTransport", "LocalTransport", "RunResult", "connect", "AcceptNew", "BecomeError", "Jumps"]

from .transport import (ANSWER_MAX, ERR_MAX, LOCAL_OUT_CAP, OUT_MAX, REMOTE_GRACE_S, LocalTransport, RunResult,
                        Transport, _err_text, _pump)
from .runlock import ERR_KEPT, LockLost, Served, keep_request, kept_hash, read_served, servable, serve_request

class SSHTransport(Transport):
    """SSH through a Fabric ``Connection`` with verified host keys."""

    def __init__(self, host: Host, accept_new_host_keys: bool = False, jumps: Jumps | None = None,
                 routes: Routes | None = None):
        super().__init__(host)
        c = host.connection
        # The run's route of the host (worked out once: its Match exec commands ran once), or one of its own.
        self.route: Route = routes.of(host) if routes is not None else route(host)
        t = self.route.target
        # The address as ssh_config and the inventory name it (a host's name stands in for a missing ansible_host):
        # never a pattern written into known_hosts, nor a port or user Fabric would read out of it.
        why = address_problem(str(t.hostname))
        if why is not None:
            raise BringupError(f"{host.name}: the address to connect to is {why}; set ansible_host (or HostName in "
                               "the ssh config) to the host's name or IP address")
        self.known_hosts = Path(self.route.known_hosts[0])
        self.way = Way(known_hosts=self.route.known_hosts,
                       accept_new=accept_new_host_keys or self.route.strict == "accept-new",
                       connect_timeout=self.route.connect_timeout, keepalive=self.route.keepalive,
                       connect_timeout_by=self.route.connect_timeout_by)
        #: Jump host logins: the run's, shared with the other hosts behind them, or this transport's own.
        self._own_jumps = jumps is None
        self.jumps = jumps if jumps is not None else Jumps()
        self._held: list[tuple] = []
        self._serving = threading.Lock()  # one script at a time down the run lock holder's channel
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
            # The login's bounds are log_in's (jumps.py): the connect timeout, then authentication's own; int() of
            # 0.5 was 0, which Fabric took for no timeout at all (paramiko's banner_timeout, 15 s, then ended it).
            connect_timeout=None,
            connect_kwargs=connect_kwargs,
            # Read by bringup.ssh.sshconfig (with the inventory's variables first, as ssh does), not by Fabric.
            config=Config(overrides={"load_ssh_configs": False}),
        )
        self.way.prepare(self.conn.client)

    def open(self) -> None:
        t = self.route.target
        sock = None
        try:
            sock, self._held = self.jumps.reach(t, self.way, self.host.name)
            # Direct: a socket of our own, TCP_NODELAY set before the handshake (jumps.dial_tcp); a new one at
            # every open (a reconnect after a reboot).  The connect, banner and key exchange within the connect
            # timeout, authentication within its own bound (log_in).

            def login(bounds: dict) -> None:
                self.conn.connect_kwargs.update(bounds)
                self.conn.open()

            log_in(self.conn.client, login, self.way, sock, dial=(t.hostname, t.port))
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
                err = Unreachable(f"{err} (through jump host {t.jumps[-1].label})")
            raise err from None

    def _let_go(self) -> None:
        self.conn.close()
        # Fabric closes only a connection that logged in: a handshake that failed or timed out left paramiko's
        # transport running, its thread reading the socket or the ProxyCommand (a `cat /dev/zero` one spun a
        # CPU and held the GIL until bringup exited, running 15 s of a 10 s deadline), the command itself too.
        self.conn.client.close()
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
        chan = None
        lead = b""  # sudo's handshake, said before the command's own stderr
        with Deadline(self._timeout(), self.conn.close) as dl:
            try:
                chan = self.conn.create_session()
                chan.exec_command(cmd)
                if sudo:
                    lead = sudo.handshake(chan.recv_stderr, chan.sendall, self.host.name)
                out = child.Reader(chan.makefile("rb"), OUT_MAX, over=chan.close)
                err = child.Reader(chan.makefile_stderr("rb"), ERR_MAX)
                try:
                    _pump(data, chan.sendall)
                    chan.shutdown_write()
                except (paramiko.SSHException, OSError, EOFError):
                    if not (out.join(5) and out.passed):  # unless the channel closed for its flood: said below
                        raise
                rc = chan.recv_exit_status()
                stdout, stderr = out.result(), lead + err.result()
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise self._lost(e, dl) from None
            finally:
                if chan is not None:
                    chan.close()
        if out.passed:
            raise BringupError(
                f"{self.host.name} answered one command with more than {OUT_MAX >> 20} MiB on stdout: cut off "
                "there and not read (bringup's scripts print far less; check what the login user's shell and the "
                "host's sshd run)")
        if dl.fired:
            raise self._timed_out()
        if rc < 0:  # paramiko's "no exit status": the session ended before the command did
            transport = self.conn.transport
            if transport is None or not transport.is_active():
                raise Unreachable(f"connection to {self.host.address} lost during a command: the SSH session "
                                  "closed without its exit status (sshd or its session killed, the host "
                                  "rebooting or its network gone); what ran before it is in the results")
            stderr += b"\nthe command ended without an exit status (killed by a signal on the host?)"
        return RunResult(rc if rc >= 0 else 255, _text(stdout), _err_text(stderr, err.passed, ERR_MAX))

    def _lost(self, e: BaseException, dl: Deadline) -> Unreachable:
        """A round trip's connection error in words: past its deadline (which closed the connection), or lost."""
        if dl.fired:
            return self._timed_out()
        return Unreachable(f"connection to {self.host.address} lost: {str(e) or type(e).__name__}")

    _holder = None

    def _hold(self, cmd: str, sudo: "Sudo | None", who: str, within: float, then: str | None, ahead: bool = False
              ) -> tuple[str, list[str]]:
        lines: list[str] = []
        end = f"@@{then}:end:".encode()
        ended = in_step = False
        with Deadline(within, self.conn.close) as dl:
            try:
                chan = self.conn.create_session()
                chan.exec_command(cmd)
                if sudo:
                    sudo.handshake(chan.recv_stderr, chan.sendall, self.host.name)
                chan.sendall(who.encode() + b"\n")
                out = chan.makefile("rb")
                line = out.readline(ANSWER_MAX).decode("utf-8", "replace").strip()
                # What the holder ran once it held the lock: each of its outputs is bounded on the host (facts).
                kept = 0
                while then is not None and line == "locked":
                    got = out.readline(OUT_MAX - kept + 1)
                    if not got:
                        break
                    kept += len(got)
                    if kept > OUT_MAX:  # a host that floods, whatever it was sent: as any round trip's cap
                        chan.close()
                        raise BringupError(
                            f"{self.host.name} answered its facts with more than {OUT_MAX >> 20} MiB on stdout: "
                            "cut off there and not read (check what the login user's shell and the host's sshd run)")
                    lines.append(_text(got))
                    if got.startswith(end):
                        ended = True
                        break
                if ended and ahead:
                    # Whether the holder reads the state read an earlier run kept (its answer follows, taken by
                    # _ahead_answer or dropped by the next script served).
                    m = re.fullmatch(rb"@@" + re.escape(then.encode()) + rb":(?:ahead:([0-9a-f]{32})|noahead)\n",
                                     out.readline(ANSWER_MAX))
                    self._ahead = None if m is None or m.group(1) is None else m.group(1).decode()
                    in_step = m is not None  # else the channel holds the lock but serves nothing more
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise self._lost(e, dl) from None
        if dl.fired:
            raise self._timed_out()
        if line == "locked":
            self._holder = chan  # open until close(): the holder on the host waits on it, and serves scripts
            self._holder_out = out if in_step or not ahead else None
        else:
            chan.close()
        return line, lines

    _holder_out = None

    def _ahead_answer(self, script: str) -> RunResult | None:
        with self._serving:
            taken = self._take_ahead()
        if taken is None or taken[0] != kept_hash(script, self.read_token):
            return None
        return self._result(taken[1])

    def _take_ahead(self) -> "tuple[str, Served | None] | None":
        """The read ahead's hash and answer, read off the channel once (whoever needs the channel next reads it
        first, taken or not: the channel stays in step); None where none is pending.  Under ``_serving``."""
        pending, self._ahead = self._ahead, None
        return None if pending is None else (pending, self._answer(None))

    def _served(self, script: str, keep: str | None = None) -> RunResult | None:
        # The holder's channel, when free: no channel, login shell or fence of its own (the holder holds the lock).
        chan, out, lock = self._holder, self._holder_out, self._run_lock
        if chan is None or out is None or lock is None or not servable(script):
            return None
        if not self._serving.acquire(blocking=False):
            return None
        try:
            dropped = self._take_ahead()  # a read ahead nobody took: its answer comes first on the channel
            if dropped is not None:
                self._result(dropped[1])  # raises where the holder or the connection is gone
            seconds = int(self._timeout()) + REMOTE_GRACE_S
            request = serve_request(script, seconds) if keep is None or not self._keeps else \
                keep_request(script, self.read_token, keep, seconds)[0]
            got = self._answer(request)
        finally:
            self._serving.release()
        return self._result(got)

    def _answer(self, request: bytes | None) -> "Served | None":
        """Send ``request`` to the holder (None: nothing, an answer is on its way) and read its answer."""
        chan, out, lock = self._holder, self._holder_out, self._run_lock
        assert chan is not None and out is not None and lock is not None
        with Deadline(self._timeout(), self.conn.close) as dl:
            try:
                if request is not None:
                    chan.sendall(request)
                got = read_served(lock.token, out.readline, OUT_MAX)
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise self._lost(e, dl) from None
        if dl.fired:
            raise self._timed_out()
        return got

    def _result(self, got: "Served | None") -> RunResult:
        """A served script's answer as a round trip's result; raises where the holder or the connection is gone."""
        chan = self._holder
        if got is None:
            transport = self.conn.transport
            if transport is None or not transport.is_active():
                raise Unreachable(f"connection to {self.host.address} lost during a command: the SSH connection "
                                  "closed before the command's exit status (sshd or its session killed, the host "
                                  "rebooting or its network gone); what ran before it is in the results")
            raise LockLost(f"{self.host.name}: this run no longer holds the host's run lock (its holder on the host "
                           "ended); nothing more of it ran there: run again")
        if got.out_over:
            if chan is not None:
                chan.close()  # the rest of that answer is never read: the channel is out of step
            raise BringupError(
                f"{self.host.name} answered one command with more than {OUT_MAX >> 20} MiB on stdout: cut off "
                "there and not read (bringup's scripts print far less; check what the host runs)")
        return RunResult(got.rc, _text(got.stdout), _err_text(got.stderr, got.err_over, ERR_KEPT))

    def close(self) -> None:
        self._let_go()  # the holder's channel with the connection: the lock goes; then the jump hosts


def connect(host: Host, accept_new_host_keys: bool = False, jumps: Jumps | None = None,
            routes: Routes | None = None) -> Transport:
    """Open the transport that ``ansible_connection`` names; ``jumps``: the run's jump host logins, shared by
    the hosts behind each (none: this connection opens its own); ``routes``: the run's routes, each host's worked
    out once (none: this connection works its own out)."""
    if host.connection.ansible_connection == "local":
        t: Transport = LocalTransport(host)
    else:
        t = SSHTransport(host, accept_new_host_keys=accept_new_host_keys, jumps=jumps, routes=routes)
    t.open()
    return t
