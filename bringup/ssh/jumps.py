"""The way to a host through jump hosts (ProxyJump) or a proxy command (ProxyCommand), and host keys.

A jump host is logged in to like any host: its key checked against the same known_hosts files, strictly
unless the run accepts new keys (:class:`AcceptNew`; a CHANGED key is refused either way), within the same
connect timeout.  Through it, a ``direct-tcpip`` channel (what ``ssh -J`` asks for) carries the next hop's
or the target's SSH connection.  :class:`Jumps` keeps one connection per jump host for the hosts of a run
behind it: shared only between identical ways in (the same user, address, port, keys, known_hosts, policy
and hops before it), opened once, closed when the last host behind it is done.

A failure on the way names the jump host, not the target (which was not tried).

Over 500 lines because every login (a host's and each jump host's) is one :func:`log_in` under one :class:`Way`
(its deadlines, its banner cap, its watchdog) and one wording of what failed (:func:`unreachable`); split, the
login half would need the jump half's Way and words, and the jump half the login.
"""
from __future__ import annotations

import errno
import os
import select
import shlex
import socket
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import paramiko

from ..child import PIPE, Child, start
from .command import sh
from ..errors import BringupError, Unreachable, said
from ..outfile import NOT_REGULAR, append_text
from ..userfile import home
from .knownhosts import known_hosts_problem, known_hosts_shown
from .sshconfig import Endpoint
from ..secrets import HIDDEN, Vaulted

__all__ = ["AcceptNew", "Jumps", "Way", "unreachable", "proxy_command", "dial_tcp", "QuickAck", "LoginTimedOut",
           "log_in"]


class AcceptNew(paramiko.MissingHostKeyPolicy):
    """Record an unknown host key in the known-hosts file (OpenSSH's accept-new).

    A key that differs from a recorded one is still refused: paramiko raises
    ``BadHostKeyException`` before any policy is consulted.
    """

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        # Checked a regular file (or none) when the login began; a FIFO or a device put there since is refused at
        # the open, never waited on or written into (a link is followed: a dotfile manager links known_hosts).
        def refused(why: str) -> BringupError:
            return BringupError(f"{self.known_hosts}: {why + ' any more' if why == NOT_REGULAR else why}; the new "
                                f"host key for {hostname} was not recorded: name a known_hosts file (ssh_known_hosts) "
                                "bringup may append to")

        append_text(self.known_hosts, line, follow=True, mode=0o666, refused=refused)
        client.get_host_keys().add(hostname, key.get_name(), key)


@dataclass(frozen=True)
class Way:
    """What every login of one route shares: known_hosts files (the first written by accept-new), whether
    new keys are accepted, and the timeouts."""

    known_hosts: tuple[str, ...]
    accept_new: bool
    #: OpenSSH's ConnectTimeout: the TCP connect (or the ProxyCommand's start), the banner and the key exchange.
    connect_timeout: float
    keepalive: int = 0
    #: Where ``connect_timeout`` came from, as messages name it: ``ssh_connect_timeout`` or ``ConnectTimeout``.
    connect_timeout_by: str = "ssh_connect_timeout"

    @property
    def auth_timeout(self) -> float:
        """Authentication's own bound, from the key exchange's end: :data:`AUTH_TIMEOUT`, or the connect timeout
        when that is longer."""
        return max(AUTH_TIMEOUT, float(self.connect_timeout))

    def prepare(self, client: paramiko.SSHClient) -> None:
        """Load the known hosts into ``client`` and set its policy for a key not in them; a file that is not a
        known_hosts file (a folder, a FIFO, /dev/zero, another file such as /etc/shadow) is one line, never read
        whole, never written to."""
        first, *more = [Path(home(p)) for p in self.known_hosts]
        for given, p in zip(self.known_hosts, (first, *more)):
            why = known_hosts_problem(p)
            if why is not None:
                raise BringupError(f"{known_hosts_shown(given, p)}: {why}; name a known_hosts file (ssh_known_hosts, "
                                   "UserKnownHostsFile), or a path where bringup may make one")
        if first.exists():
            client.load_host_keys(str(first))
        for p in more:
            if p.is_file():
                client.load_system_host_keys(str(p))  # checked, never written
        client.set_missing_host_key_policy(AcceptNew(first) if self.accept_new else paramiko.RejectPolicy())


#: Seconds an ssh login's authentication may take after the key exchange (paramiko's own default auth_timeout):
#: ssh's ConnectTimeout does not cover authentication (a bastion's ProxyCommand and an sshd's PAM may together take
#: longer than it, and ``ssh`` logs in), yet an sshd that stalls it must not hold the run.
AUTH_TIMEOUT = 30.0

#: How often the login's watchdog looks whether the key exchange has finished (paramiko's own waits poll as often).
_WATCH_S = 0.1

#: Linux's option (None elsewhere: a plain socket is dialed).
QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class QuickAck(socket.socket):
    """A TCP socket that acknowledges what it received at once (Linux's TCP_QUICKACK, set again after every
    read: the kernel clears it as it sees fit).

    An sshd sets no TCP_NODELAY on a session without a terminal.  After the login it sends a notice (OpenSSH's
    hostkeys-00) that wants no answer, and its answer to the first channel open then waits, by Nagle's rule,
    until the client has acknowledged that notice, which Linux delays by 40 ms.  Measured from this machine
    to a sandbox host's own address (no proxy between them): the first channel open took 49 ms, 6.4 ms with
    this (bench/NOTES.md).  One system call per read.
    """

    def recv(self, *args):  # type: ignore[override]
        data = super().recv(*args)
        try:
            self.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        except OSError:  # closed under us: the next read says so
            pass
        return data


def dial_tcp(hostname: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to ``hostname``:``port`` with TCP_NODELAY set before the SSH handshake, each address
    tried in turn as paramiko's own connect tries them (the same errors: a refused or unreachable address is
    passed over, NoValidConnectionsError when none answered; anything else is raised at once); on Linux a
    :class:`QuickAck` socket.

    paramiko's connect sets no socket option, so the option could only be set after the handshake: the
    handshake's small packets then each waited out a delayed ACK (~40 ms of a ~60 ms login on 127.0.0.1).
    """
    errors: dict = {}
    # An ASCII name (every name the inventory takes: its addresses are checked) goes to the resolver as bytes, as
    # the IDNA codec would encode it: Python encodes a str through that codec, whose first use imports it and
    # stringprep (~5 ms of every run's CPU, in the thread that is logging in).
    name: str | bytes = hostname.encode("ascii") if hostname.isascii() else hostname
    infos = socket.getaddrinfo(name, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
    kind = socket.socket if QUICKACK is None else QuickAck
    for family, _, _, _, addr in [i for i in infos if i[1] == socket.SOCK_STREAM] or infos:
        sock = kind(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(timeout)
            sock.connect(addr)
            return sock
        except OSError as e:
            sock.close()
            if e.errno not in (errno.ECONNREFUSED, errno.EHOSTUNREACH):
                raise
            errors[addr] = e
    raise paramiko.ssh_exception.NoValidConnectionsError(errors)


#: Bytes a host (or its ProxyCommand) may send before its SSH version line (RFC 4253 lets a server send lines of
#: text first; OpenSSH reads at most 1024 lines of them).  Past them the login ends at once as "not SSH": paramiko
#: reads a banner 128 bytes at a time into one growing buffer, so a flood with no line end (`cat /dev/zero`) spun
#: a CPU, the GIL held, and grew memory until the connect deadline.
BANNER_MAX = 256 * 1024


class NoBanner(OSError):
    """:data:`BANNER_MAX` bytes came without an SSH version line."""


class _BannerCap:
    """``sock`` (a socket, a ProxyCommand, a jump host's channel) as paramiko's transport reads it, cut off past
    :data:`BANNER_MAX` bytes without a line starting ``SSH-``; once that line came, its own ``recv`` again."""

    def __init__(self, sock: Any):
        self._sock = sock
        self._got = 0
        self._line = b""  # the first bytes (4 at most) of the line under way

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_sock" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self._sock, name)

    def __copy__(self) -> "_BannerCap":  # invoke's config copies what it is given: one socket, one reader of it
        return self

    def __deepcopy__(self, memo: dict) -> "_BannerCap":
        return self

    def recv(self, size: int) -> bytes:
        data = self._sock.recv(size)
        self._got += len(data)
        *whole, rest = data.split(b"\n")
        for seg in whole:
            if (self._line + seg[:4])[:4] == b"SSH-":
                self.recv = self._sock.recv  # type: ignore[method-assign]
                return data
            self._line = b""
        self._line = (self._line + rest[:4])[:4]
        if self._got > BANNER_MAX:
            if isinstance(self._sock, paramiko.ProxyCommand):
                raise paramiko.ProxyCommandFailure(" ".join(self._sock.cmd), f"it printed {BANNER_MAX >> 10} KiB "
                                                   "without an SSH version line")
            raise NoBanner(f"{BANNER_MAX >> 10} KiB came without an SSH version line")
        return data


class LoginTimedOut(Exception):
    """:func:`log_in`'s watchdog cut the login off; ``authenticating``: the key exchange had finished (the host's
    key was known) and authentication ran out of :attr:`Way.auth_timeout`; else the connect, banner or key exchange
    ran out of :attr:`Way.connect_timeout`."""

    def __init__(self, authenticating: bool, proxy_ended: bool = False):
        super().__init__("login timed out")
        self.authenticating = authenticating
        #: A ProxyCommand had ended before the deadline (what it left running held its pipe): its failure is said.
        self.proxy_ended = proxy_ended


def log_in(client: paramiko.SSHClient, connect: Callable[[dict], Any], way: Way, sock: Any,
           dial: "tuple[str, int] | None" = None) -> Any:
    """One login of ``client`` (``connect(kwargs)`` calls its ``SSHClient.connect``, given paramiko's timeouts in
    ``kwargs`` with the socket), over ``sock`` or a TCP connection dialed to ``dial`` (host, port), bounded as ssh
    bounds it, whatever the other end does: the TCP connect (or the ProxyCommand's start), the banner and the key
    exchange within ``way.connect_timeout`` of now (one deadline: paramiko's own ``timeout`` counts the key exchange
    alone, from its own start), then authentication within ``way.auth_timeout`` of the key exchange's end (ssh's
    ConnectTimeout does not cover it: a bastion's ProxyCommand and a slow PAM may together take longer).  A
    watchdog closes the socket (a ProxyCommand: the command) and the client at the bound of the phase under way,
    which wakes paramiko's waits, and :class:`LoginTimedOut` says which phase ran out.  Returns ``connect``'s result.

    A socket dialed here is closed on a failure; ``sock`` and the client are closed by the caller unless the
    watchdog closed them (having worded the failure: a ProxyCommand's stderr is read before its end)."""
    end = time.monotonic() + float(way.connect_timeout)

    def left() -> float:
        return max(0.001, end - time.monotonic())

    dialed = sock is None and dial is not None
    if dialed:
        sock = dial_tcp(dial[0], dial[1], left())
    capped = _BannerCap(sock) if sock is not None else None
    before = client.get_transport()  # a reconnect's old transport (its key exchange long done) is not this login's

    def keyed() -> bool:
        t = client.get_transport()
        return t is not None and t is not before and t.session_id is not None

    finished = threading.Event()  # the login returned or raised: the watchdog stops looking
    guard = threading.Lock()  # the watchdog cuts a login that has not finished, or none: never a live one
    state = {"done": False, "cut": False, "authenticating": False, "ended": False}

    def watch() -> None:
        keyed_at = None
        while True:
            now = time.monotonic()
            if keyed_at is None and keyed():
                keyed_at = now  # noticed within _WATCH_S of it: authentication's bound starts here
            limit = end if keyed_at is None else keyed_at + way.auth_timeout
            if now >= limit:
                break
            if finished.wait(min(_WATCH_S, limit - now) if keyed_at is None else limit - now):
                return
        with guard:
            if state["done"]:
                return
            state.update(cut=True, authenticating=keyed_at is not None,
                         ended=isinstance(sock, paramiko.ProxyCommand) and sock.process.poll() is not None)
            for close in (getattr(sock, "close", None), client.close):
                try:
                    if close is not None:
                        close()
                except Exception:  # noqa: BLE001 - closing what already failed: the flag is what counts
                    pass

    watchdog = threading.Thread(target=watch, name="login-watchdog", daemon=True)
    watchdog.start()
    try:
        # paramiko's own bounds a little past the watchdog's: it decides, in one wording.
        got = connect({"sock": capped, "timeout": left() + 1, "banner_timeout": left() + 1,
                       "auth_timeout": way.auth_timeout + 1})
    except Exception:
        with guard:
            state["done"] = True
        if dialed:
            # This login's transport first (its thread stops reading), then the socket: a socket closed under a
            # running transport thread is paramiko's "Socket exception: Bad file descriptor" ERROR on the log.
            t = client.get_transport()
            if t is not None and t is not before:
                t.close()
            sock.close()
        if state["cut"]:
            raise LoginTimedOut(state["authenticating"], state["ended"]) from None
        raise
    finally:
        finished.set()
    with guard:
        state["done"] = True
    if state["cut"]:  # the watchdog closed the client just as the login finished: late, and closed
        raise LoginTimedOut(state["authenticating"], state["ended"])
    return got


def unreachable(e: BaseException, *, ep: Endpoint, way: Way, host: str, sock: Any = None) -> Unreachable:
    """One line for a login that failed, in connection.py's words (the target's wording since issue 1); the
    address, port and user a vault held are ``********`` in it, in bringup's words and in paramiko's."""
    said = str(_unreachable(e, ep=ep, way=way, host=host, sock=sock))
    for value in sorted({str(getattr(ep, k)) for k in ep.hidden | _vaulted(ep) if str(getattr(ep, k))},
                        key=len, reverse=True):
        said = re.sub(rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\w)", HIDDEN, said)
    return Unreachable(said)


def _vaulted(ep: Endpoint) -> set[str]:
    return {k for k in ("hostname", "port", "user") if isinstance(getattr(ep, k), Vaulted)}


def _unreachable(e: BaseException, *, ep: Endpoint, way: Way, host: str, sock: Any = None) -> Unreachable:
    where = ep.where
    known = way.known_hosts[0]
    known = "the known_hosts file (vaulted)" if isinstance(known, Vaulted) else known
    timeout, by = way.connect_timeout, way.connect_timeout_by
    if isinstance(e, LoginTimedOut) and not e.proxy_ended:
        if e.authenticating:
            bound = (f"{by}, which bounds authentication too when over {AUTH_TIMEOUT:g} s"
                     if way.auth_timeout > AUTH_TIMEOUT else "bringup's bound on ssh authentication")
            return Unreachable(f"authentication to {ep.user}@{where} did not finish within {way.auth_timeout:g} s of "
                               f"the key exchange ({bound}): the host answered SSH and showed its key, then stalled "
                               "the login (sshd, PAM or its user lookups frozen or overloaded); check the host")
        return _no_handshake(where, timeout, by, sock)
    if isinstance(e, paramiko.BadHostKeyException):
        return Unreachable(f"host key for {where} CHANGED (got {e.key.get_name()} {e.key.get_fingerprint().hex()}); "
                           f"if the host was rebuilt, remove its line from {known}")
    if isinstance(e, paramiko.ProxyCommandFailure) or (isinstance(sock, paramiko.ProxyCommand)
                                                       and sock.process.poll() is not None):
        return Unreachable(f"ProxyCommand for {where} failed: {_proxy_said(sock, e)}; check the command, and that "
                           "what it connects through answers")
    if isinstance(e, paramiko.SSHException):
        msg = str(e)
        if "not found in known_hosts" in msg:
            return Unreachable(f"unknown host key for {where}: not in {known}; "
                               "verify it and add it, or pass --accept-new-host-keys")
        if "protocol banner" in msg:
            detail = msg.partition("banner")[2].strip()  # paramiko glues the cause on: "banner[Errno 104] ..."
            return Unreachable(f"host {host}: port {ep.port} of {ep.hostname} answers "
                               f"but is not SSH (no SSH banner{': ' + detail if detail else ''}); check "
                               "ansible_port and that sshd runs")
        if msg == "No existing session":
            # paramiko's words when the handshake did not finish before the timeout: the TCP connection was
            # accepted (by the kernel) but sshd never completed the exchange.
            return _no_handshake(where, timeout, by, sock)
        if isinstance(e, paramiko.AuthenticationException):
            return Unreachable(f"authentication to {ep.user}@{where} failed: {msg}")
        return Unreachable(f"ssh to {where} failed: {msg}")
    if isinstance(e, (socket.timeout, TimeoutError)):
        return Unreachable(f"ssh to {where} timed out after {timeout:g} s ({by})")
    if isinstance(e, OSError):
        return Unreachable(f"ssh to {where} failed: {e.strerror or e}")
    return Unreachable(f"ssh to {where} failed: {e}")


def _no_handshake(where: str, timeout: float, by: str, sock: Any) -> Unreachable:
    """The connect timeout (``by``: where its value came from) ran out before the key exchange finished, worded by
    the way in: a TCP connection, a ProxyCommand still running, or a jump host's channel."""
    if isinstance(sock, paramiko.ProxyCommand):
        return Unreachable(f"ssh to {where}: no SSH handshake came through its ProxyCommand within {timeout:g} s "
                           f"({by}): the command, what it connects through, or sshd slow or stalled; check the "
                           f"ProxyCommand and the host, or raise {by}")
    if isinstance(sock, paramiko.Channel):
        return Unreachable(f"ssh to {where}: the jump host connected to it but no SSH handshake finished within "
                           f"{timeout:g} s ({by}): sshd frozen or overloaded; check the host, or raise {by}")
    return Unreachable(f"ssh to {where}: the port accepted the connection but no SSH handshake finished within "
                       f"{timeout:g} s ({by}): sshd frozen or overloaded, or traffic dropped after connect; check "
                       f"the host, or raise {by}")


#: Bytes of a failed proxy command's stderr read at most.
PROXY_SAID_CAP = 64 * 1024


def _proxy_said(sock: Any, e: BaseException) -> str:
    """What the proxy command wrote on stderr (it ended), or paramiko's words."""
    words = ""
    started = getattr(sock, "child", None)
    if isinstance(started, Child) and started.proc.stderr is not None:
        try:
            started.kill()  # and what it left running in the background (tagged): their end closes the pipe
            words = said(_read_for(started.proc.stderr, PROXY_SAID_CAP, PROXY_SAID_S).decode("utf-8", "replace"),
                         300)
        except (OSError, ValueError):
            pass
    return words or (getattr(e, "error", None) or str(e) or type(e).__name__)


#: Seconds a failed proxy command's stderr is read at most (a process that escaped its end may hold it open).
PROXY_SAID_S = 2.0


def _read_for(f: Any, cap: int, seconds: float) -> bytes:
    """What the pipe ``f`` holds until its end, at most ``cap`` bytes and ``seconds``: never waits on a writer
    that keeps it open."""
    fd, kept = f.fileno(), bytearray()
    deadline = time.monotonic() + seconds
    while len(kept) < cap:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, min(65536, cap - len(kept)))
        if not chunk:
            break
        kept += chunk
    return bytes(kept)


class ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, with an end: a command that exits is EOF at once (paramiko's own recv reads
    the empty pipe again until the timeout, spinning a CPU), and closing ends and reaps the command (paramiko's
    close signals its pid, gone or not, and never waits for it).  Its stderr stays readable after the end:
    :func:`unreachable` quotes it."""

    def __init__(self, command_line: str):  # paramiko's, started through bringup.child
        self.cmd = shlex.split(command_line)
        # In bringup's session (ssh may ask on the terminal), tagged: what it leaves running in the background
        # (``sleep 100 &``, holding the pipes open) is ended with it.
        self.child = start(self.cmd, stdin=PIPE, stdout=PIPE, stderr=PIPE, bufsize=0, own_group=False, tag=True)
        self.process = self.child.proc
        self.timeout = None

    def recv(self, size: int) -> bytes:
        r, _, _ = select.select([self.process.stdout], [], [], self.timeout)
        if not r:
            raise socket.timeout()
        try:
            return os.read(self.process.stdout.fileno(), size)  # b"" at the command's end: EOF for paramiko
        except OSError as e:
            raise paramiko.ProxyCommandFailure(" ".join(self.cmd), e.strerror) from None

    def close(self) -> None:
        self.child.end(2.0)
        for f in (self.process.stdin, self.process.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


def proxy_command(command: str) -> ProxyCommand:
    """The ProxyCommand as the connection's socket, run as ssh runs it: ``exec`` in a shell (pipes, ``~`` and
    ``$VARS`` work; paramiko alone would split the words itself and run the first)."""
    return ProxyCommand(sh("sh -c %s", "exec " + command))


def _key(ep: Endpoint, way: Way, before: tuple) -> tuple:
    return (ep.hostname, ep.port, ep.user, ep.identity_files, ep.proxy_command, before, way.known_hosts,
            way.accept_new)


class _Hop:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # one login at a time; the others wait and share it
        self.client: paramiko.SSHClient | None = None
        self.users = 0
        #: Logins this one goes through that its own ssh config named (a jump host's ProxyJump): closed with it.
        self.upstream: list[tuple] = []


class Jumps:
    """Logins to jump hosts, shared by the hosts behind each (see the module).  Pass one per run; a transport
    given none makes its own, used by it alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hops: dict[tuple, _Hop] = {}

    def reach(self, ep: Endpoint, way: Way, host: str) -> tuple[Any, list[tuple]]:
        """A socket to ``ep`` (through its jump hosts or proxy command; None: connect directly), and the keys of
        the jump host logins it holds (give them back with :meth:`release`)."""
        if ep.proxy_command:
            return proxy_command(ep.proxy_command), []
        if not ep.jumps:
            return None, []
        held: list[tuple] = []
        try:
            transport, before, prev = None, (), None
            for hop in ep.jumps:
                key = _key(hop, way, before)
                transport = self._login(hop, way, host, key, transport, prev)
                held.append(key)
                before, prev = key, hop
            assert transport is not None
            return _channel(transport, ep, prev, way), held
        except BaseException:
            self.release(held)
            raise

    def _login(self, hop: Endpoint, way: Way, host: str, key: tuple, through: paramiko.Transport | None,
               prev: Endpoint | None) -> paramiko.Transport:
        with self._lock:
            h = self._hops.setdefault(key, _Hop())
            h.users += 1
        try:
            with h.lock:
                if h.client is None or h.client.get_transport() is None or not h.client.get_transport().is_active():
                    if h.client is not None:
                        h.client.close()
                        self.release(h.upstream)
                    h.client, h.upstream = None, []
                    h.client, h.upstream = self._open(hop, way, host, through, prev)
                t = h.client.get_transport()
                assert t is not None
                return t
        except BaseException:
            self._drop(key)
            raise

    def _open(self, hop: Endpoint, way: Way, host: str, through: paramiko.Transport | None, prev: Endpoint | None
              ) -> tuple[paramiko.SSHClient, list[tuple]]:
        sock: Any = None
        own: list[tuple] = []
        if through is not None:
            sock = _channel(through, hop, prev, way)
        else:
            sock, own = self.reach(hop, way, host)  # the hop's own ProxyCommand or ProxyJump (from ssh config)
        client = paramiko.SSHClient()
        way.prepare(client)
        kwargs: dict[str, Any] = {"username": hop.user}
        if hop.identity_files:
            kwargs.update(key_filename=list(hop.identity_files), look_for_keys=False, allow_agent=False)
        try:
            log_in(client, lambda bounds: client.connect(hop.hostname, port=hop.port, **kwargs, **bounds), way,
                   sock, dial=(hop.hostname, hop.port))
        except Exception as e:  # noqa: BLE001 - worded here, naming the jump host; before closing (a
            # ProxyCommand's words are read from it)
            why = unreachable(e, ep=hop, way=way, host=hop.label, sock=sock)
            client.close()
            if sock is not None:
                sock.close()
            self.release(own)
            raise Unreachable(f"jump host {hop.label} (on the way to {host}, which was not tried): {why}") from None
        if way.keepalive:
            client.get_transport().set_keepalive(way.keepalive)
        return client, own

    def release(self, keys: list[tuple]) -> None:
        """Give back logins taken by :meth:`reach`; the last host behind a jump host closes it."""
        for key in reversed(keys):
            self._drop(key)

    def _drop(self, key: tuple) -> None:
        with self._lock:
            h = self._hops.get(key)
            if h is None:
                return
            h.users -= 1
            last = h.users <= 0
            if last:
                del self._hops[key]
        if last:
            if h.client is not None:
                h.client.close()
            self.release(h.upstream)

    def close(self) -> None:
        """Close every jump host login (the run is over)."""
        with self._lock:
            hops, self._hops = list(self._hops.values()), {}
        for h in reversed(hops):  # outermost last: those behind a jump host close before it
            if h.client is not None:
                h.client.close()


def _channel(through: paramiko.Transport, ep: Endpoint, hop: Endpoint | None, way: Way) -> paramiko.Channel:
    """A direct-tcpip channel from the jump host of ``through`` to ``ep`` (what ``ssh -J`` asks for)."""
    try:
        return through.open_channel("direct-tcpip", (ep.hostname, ep.port), ("127.0.0.1", 0),
                                    timeout=way.connect_timeout)
    except paramiko.ChannelException as e:
        via = hop.label if hop is not None else "the jump host"
        raise Unreachable(f"ssh to {ep.where} through jump host {via} failed: the jump host could not connect "
                          f"to it ({e.text or 'refused'}); check the address from there") from None
    except (paramiko.SSHException, OSError, EOFError) as e:
        raise Unreachable(f"ssh to {ep.where}: the connection through the jump host was lost "
                          f"({str(e) or type(e).__name__})") from None
