"""The floor: a fresh Python process, paramiko, one connection per host, one command, exit.

    python3 bench/floor.py HOSTS.json COMMAND_FILE

HOSTS.json is a list of {"port", "key", "known_hosts"} on 127.0.0.1 (user root);
each host is handled in its own thread.  The command's output is read and dropped.  TCP_NODELAY is set
before the handshake, as bringup sets it.
"""
import json
import socket
import sys
import threading

import paramiko


class QuickAck(socket.socket):
    """As bringup dials (bringup.ssh.jumps.QuickAck): TCP_QUICKACK again after every read, so that an sshd's
    answer held back by Nagle's rule does not wait out the client's delayed ACK (40 ms at the first channel)."""

    def recv(self, *args):
        data = super().recv(*args)
        try:
            self.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        except OSError:
            pass
        return data


def one(h: dict, cmd: str, stdin: bytes, errors: list) -> None:
    c = paramiko.SSHClient()
    c.load_host_keys(h["known_hosts"])
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    # As bringup does (bringup.ssh.jumps.dial_tcp): TCP_NODELAY set before the handshake, whose small packets
    # otherwise each wait out a delayed ACK (~40 ms of the login), as every command would after it; and
    # TCP_QUICKACK after every read (QuickAck), as bringup's socket.
    s = QuickAck(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", h["port"]))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.connect("127.0.0.1", port=h["port"], username="root", key_filename=h["key"],
              look_for_keys=False, allow_agent=False, sock=s)
    i, o, _ = c.exec_command(cmd)
    i.write(stdin)
    i.channel.shutdown_write()
    o.read()
    if o.channel.recv_exit_status() != 0:
        errors.append(h["port"])
    c.close()


if __name__ == "__main__":  # bench/where.py imports QuickAck
    hosts = json.load(open(sys.argv[1]))
    cmd = open(sys.argv[2]).read()
    stdin = open(sys.argv[3], "rb").read() if len(sys.argv) > 3 else b""
    errors: list = []
    threads = [threading.Thread(target=one, args=(h, cmd, stdin, errors)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(1 if errors else 0)
