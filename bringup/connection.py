"""Transports: one remote shell script per round trip, over SSH or locally.

Every call ships a whole script on stdin to ``sh -c 'eval "$(cat)"'``: the
script size is not bounded by the kernel's argument limit, and commands in the
script see an exhausted stdin, so none of them can swallow the rest of it.

Host keys are verified against ``ssh_known_hosts``; Fabric's default of adding
any key is replaced by paramiko's ``RejectPolicy``, or by :class:`AcceptNew`
(OpenSSH's ``StrictHostKeyChecking=accept-new``) when asked.
"""
from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection

from .command import quote
from .errors import Unreachable
from .inventory import Host

__all__ = ["Transport", "SSHTransport", "LocalTransport", "RunResult", "connect", "AcceptNew"]

#: The remote entry point: read the whole script from stdin, then run it.
_ENTRY = "sh -c 'eval \"$(cat)\"'"


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

    def _become(self, inner: str) -> tuple[str, str]:
        """``inner`` wrapped in sudo when ``ansible_become``, and a stdin prefix (the sudo password)."""
        c = self.host.connection
        if not c.ansible_become:
            return inner, ""
        user = quote(c.ansible_become_user)
        if c.ansible_become_password:
            return f"sudo -S -p '' -H -u {user} -- {inner}", c.ansible_become_password + "\n"
        return f"sudo -n -H -u {user} -- {inner}", ""

    def _entry(self) -> tuple[str, str]:
        """The command line and a stdin prefix for a script."""
        return self._become(_ENTRY)

    def run_script(self, script: str) -> RunResult:
        """Run ``script`` (POSIX sh) on the host in one round trip."""
        cmd, prefix = self._entry()
        with self._lock:
            self.round_trips += 1
        return self._run(cmd, prefix + script)

    def _run(self, cmd: str, stdin: str) -> RunResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def _stream_entry(self, command: str) -> tuple[str, str]:
        """The command line (and stdin prefix) running ``command`` with become applied."""
        return self._become("sh -c " + quote(command))

    def run_stream(self, command: str, local: list[str]) -> RunResult:
        """Run ``command`` on the host with the stdout of ``local`` (run here) as its stdin.

        One round trip; for bulk data (``docker save`` into ``docker load``).
        A failing local command fails the result, whatever the host said.
        """
        cmd, prefix = self._stream_entry(command)
        with self._lock:
            self.round_trips += 1
        try:
            proc = subprocess.Popen(local, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            return RunResult(127, "", f"{local[0]}: {e.strerror or e}")
        assert proc.stdout is not None and proc.stderr is not None
        res = self._run_stream(cmd, prefix.encode(), proc.stdout)
        err = proc.stderr.read().decode("utf-8", "replace")
        if proc.wait() != 0:
            return RunResult(proc.returncode or 1, res.stdout, f"{' '.join(local)} failed: {err.strip()[-300:]}")
        return res

    def _run_stream(self, cmd: str, prefix: bytes, data) -> RunResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def open(self) -> None:
        """Connect; raises :class:`Unreachable` with one line on failure."""

    def close(self) -> None:
        """Disconnect."""


class LocalTransport(Transport):
    """``ansible_connection: local``: run on the control machine itself."""

    def _run(self, cmd: str, stdin: str) -> RunResult:
        # Not invoke's Context.run: its in_stream is copied a byte per 10 ms.
        r = subprocess.run(["/bin/sh", "-c", cmd], input=stdin.encode(), capture_output=True)
        return RunResult(r.returncode, _text(r.stdout), _text(r.stderr))

    def _run_stream(self, cmd: str, prefix: bytes, data) -> RunResult:
        p = subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [threading.Thread(target=lambda: out.append(p.stdout.read()), daemon=True),
                   threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)]
        for th in readers:
            th.start()
        try:
            p.stdin.write(prefix)
            while chunk := data.read(1 << 20):
                p.stdin.write(chunk)
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
        return RunResult(rc, _text(b"".join(out)), _text(b"".join(err)))


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
        with open(self.known_hosts, "a") as f:
            f.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


class SSHTransport(Transport):
    """SSH through a Fabric ``Connection`` with verified host keys."""

    def __init__(self, host: Host, accept_new_host_keys: bool = False):
        super().__init__(host)
        c = host.connection
        self.known_hosts = Path(os.path.expanduser(c.ssh_known_hosts))
        connect_kwargs: dict = {}
        if c.ansible_ssh_private_key_file:
            connect_kwargs["key_filename"] = os.path.expanduser(c.ansible_ssh_private_key_file)
            # Only the named key: an agent or ~/.ssh keys would hide a wrong path.
            connect_kwargs["look_for_keys"] = False
            connect_kwargs["allow_agent"] = False
        if c.ansible_password:
            connect_kwargs["password"] = c.ansible_password
        self.conn = Connection(
            host.address,
            user=c.ansible_user or "root",
            port=c.ansible_port,
            connect_timeout=int(c.ssh_connect_timeout),
            connect_kwargs=connect_kwargs,
            config=Config(overrides={"load_ssh_configs": False}),
        )
        client = self.conn.client
        if self.known_hosts.exists():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(
            AcceptNew(self.known_hosts) if accept_new_host_keys else paramiko.RejectPolicy()
        )

    def open(self) -> None:
        c = self.host.connection
        where = f"{self.host.address}:{c.ansible_port}"
        try:
            self.conn.open()
        except paramiko.BadHostKeyException as e:
            raise Unreachable(
                f"host key for {where} CHANGED (got {e.key.get_name()} {e.key.get_fingerprint().hex()}); "
                f"if the host was rebuilt, remove its line from {self.known_hosts}"
            ) from None
        except paramiko.SSHException as e:
            msg = str(e)
            if "not found in known_hosts" in msg:
                raise Unreachable(
                    f"unknown host key for {where}: not in {self.known_hosts}; "
                    "verify it and add it, or pass --accept-new-host-keys"
                ) from None
            if isinstance(e, paramiko.AuthenticationException):
                raise Unreachable(f"authentication to {c.ansible_user or 'root'}@{where} failed: {msg}") from None
            raise Unreachable(f"ssh to {where} failed: {msg}") from None
        except (socket.timeout, TimeoutError):
            raise Unreachable(f"ssh to {where} timed out after {c.ssh_connect_timeout:g} s") from None
        except OSError as e:
            raise Unreachable(f"ssh to {where} failed: {e.strerror or e}") from None

    def _run(self, cmd: str, stdin: str) -> RunResult:
        # A raw session of Fabric's connection rather than Connection.run: Invoke
        # copies an in_stream one byte per 10 ms, too slow for a whole script.
        try:
            chan = self.conn.create_session()
            chan.exec_command(cmd)
            err: list[bytes] = []
            reader = threading.Thread(target=lambda: err.append(chan.makefile_stderr("rb").read()), daemon=True)
            reader.start()
            chan.sendall(stdin.encode())
            chan.shutdown_write()
            out = chan.makefile("rb").read()
            rc = chan.recv_exit_status()
            reader.join()
            chan.close()
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise Unreachable(f"connection to {self.host.address} lost: {e}") from None
        return RunResult(rc if rc >= 0 else 255, _text(out), _text(b"".join(err)))

    def _run_stream(self, cmd: str, prefix: bytes, data) -> RunResult:
        try:
            chan = self.conn.create_session()
            chan.exec_command(cmd)
            out: list[bytes] = []
            err: list[bytes] = []
            readers = [threading.Thread(target=lambda: out.append(chan.makefile("rb").read()), daemon=True),
                       threading.Thread(target=lambda: err.append(chan.makefile_stderr("rb").read()), daemon=True)]
            for th in readers:
                th.start()
            chan.sendall(prefix)
            while chunk := data.read(1 << 20):
                chan.sendall(chunk)
            chan.shutdown_write()
            rc = chan.recv_exit_status()
            for th in readers:
                th.join()
            chan.close()
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise Unreachable(f"connection to {self.host.address} lost: {e}") from None
        return RunResult(rc if rc >= 0 else 255, _text(b"".join(out)), _text(b"".join(err)))

    def close(self) -> None:
        self.conn.close()


def connect(host: Host, accept_new_host_keys: bool = False) -> Transport:
    """Open the transport that ``ansible_connection`` names."""
    if host.connection.ansible_connection == "local":
        t: Transport = LocalTransport(host)
    else:
        t = SSHTransport(host, accept_new_host_keys=accept_new_host_keys)
    t.open()
    return t


def wait_for_ssh(host: Host, timeout: float = 300, interval: float = 2.0) -> Transport:
    """Reconnect until the host answers (after a reboot); raises Unreachable."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            t = connect(host)
            if t.run_script("true").rc == 0:
                return t
        except Unreachable as e:
            last = str(e)
        time.sleep(interval)
    raise Unreachable(f"{host.name} did not come back within {timeout:g} s ({last})")
