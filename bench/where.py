"""Where a bringup run's time goes: its remote part, replayed (bench/compare.py runs this).

    python3 bench/where.py HOST.json SCRIPTS.json RUNS

HOST.json: {"port", "key", "known_hosts"} of one host on 127.0.0.1 (user root); SCRIPTS.json: the commands
a bringup run ran, each with what it sent on its stdin (captured on the host), in order.  Prints JSON: the
median of RUNS fresh connections' handshake (TCP, key exchange, auth) and of each command's round trip over it
(a new channel, the command, its stdin sent, its output read to the end), in seconds.
"""
import json
import socket
import statistics
import sys
import time

import paramiko

from floor import QuickAck  # bench/floor.py: dialed as the floor (and bringup) dial

host = json.load(open(sys.argv[1]))
scripts = json.load(open(sys.argv[2]))
runs = int(sys.argv[3])
connect: list = []
trips: list = [[] for _ in scripts]
for _ in range(runs):
    t0 = time.perf_counter()
    c = paramiko.SSHClient()
    c.load_host_keys(host["known_hosts"])
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    s = QuickAck(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", host["port"]))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # before the handshake, as bringup does
    c.connect("127.0.0.1", port=host["port"], username="root", key_filename=host["key"],
              look_for_keys=False, allow_agent=False, sock=s)
    connect.append(time.perf_counter() - t0)
    for i, (cmd, s) in enumerate(scripts):
        t1 = time.perf_counter()
        i_, o, _ = c.exec_command(cmd)
        i_.write(s.encode())
        i_.channel.shutdown_write()
        o.read()
        o.channel.recv_exit_status()
        trips[i].append(time.perf_counter() - t1)
    c.close()
print(json.dumps({"connect": statistics.median(connect), "trips": [statistics.median(t) for t in trips]}))
