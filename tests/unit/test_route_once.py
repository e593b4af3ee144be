"""A host's route (its ssh config looked up, ``Match exec`` included) is worked out once per run, under one deadline.

Before: the route was worked out three times (the input's check, the connection opened ahead, the connection
itself) and paramiko decided each ``Match`` twice per look-up, so a ``Match exec`` ran 6 times per host: its
side effects repeated, and its bound (ssh_connect_timeout) was in effect 6 times that (``Match exec "sleep 9"``:
a 2-host plan took 90 s).  Counted here by a Match exec command that appends a line to a file; nothing connects
(127.0.0.1:9 refuses).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bringup.errors import InventoryError
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.ssh.sshconfig import Routes, check_routes, route

REPO = Path(__file__).resolve().parents[2]
BRINGUP = "import sys; sys.argv[0] = 'bringup'; from bringup.entry import main; main()"


def host(name="gpu-01", **v) -> Host:
    conn = ConnectionVars.model_validate(v)
    return Host(name, ["all"], v, conn)


def _counting(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    count = tmp_path / "count"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f'Match exec "echo run >> {count}"\n  User deploy\n{extra}')
    return cfg, count


def _runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_one_lookup_runs_each_match_exec_once(tmp_path):
    cfg, count = _counting(tmp_path)
    r = route(host(ansible_host="127.0.0.1", ssh_config=str(cfg)), default_config=str(tmp_path / "none"))
    assert r.target.user == "deploy"
    assert _runs(count) == 1  # paramiko decides the Match in its first pass and in its final one: run once


def test_a_runs_routes_are_worked_out_once_per_host(tmp_path):
    cfg, count = _counting(tmp_path)
    hosts = [host(n, ansible_host="127.0.0.1", ssh_config=str(cfg)) for n in ("h1", "h2")]
    routes = Routes(default_config=str(tmp_path / "none"))
    assert check_routes(hosts, routes) is routes
    # Every later use of the run (the connection ahead, the run's own, a reconnect), from several threads at once.
    got: list = []
    threads = [threading.Thread(target=lambda h=h: got.append(routes.of(h))) for h in hosts * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _runs(count) == 2
    assert {r.target.user for r in got} == {"deploy"} and len(got) == 6
    # A refusal is kept, and said again, without running anything again.
    bad = tmp_path / "bad"
    bad.write_text(f'Match exec "echo run >> {count}; exit 0"\n  Port 99999\n')
    h3 = host("h3", ansible_host="127.0.0.1", ssh_config=str(bad))
    for _ in range(2):
        with pytest.raises(InventoryError, match="port must be a whole number"):
            routes.of(h3)
    assert _runs(count) == 3


@pytest.mark.reliability(item=40, fault="ssh_config Match exec commands of one host that each finish within "
                                        "ssh_connect_timeout, together past it", variants=1,
                         checks=("no hang", "one clear line"))
def test_the_match_exec_commands_of_a_route_share_one_deadline(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.write_text('Match exec "sleep 1.5; true"\n  Port 2200\nMatch exec "sleep 1.6; true"\n  User deploy\n')
    t0 = time.monotonic()
    with pytest.raises(InventoryError) as e:
        route(host(ansible_host="10.0.0.5", ssh_config=str(cfg), ssh_connect_timeout=2),
              default_config=str(tmp_path / "none"))
    said = str(e.value)
    assert "\n" not in said and f"a Match exec command of ssh config {cfg} ran past 2 s (ssh_connect_timeout, " \
        "for all of the host's Match exec commands together) and was ended" in said, said
    assert time.monotonic() - t0 < 4


@pytest.mark.reliability(item=40, fault="an ssh_config Match exec run 6 times per host by one run (its side "
                                        "effects repeated, its bound 6 x ssh_connect_timeout)", variants=2,
                         checks=("no hang",))
@pytest.mark.parametrize("args, hosts", [(["plan", "--hosts", "h1,h2"], 2), (["facts", "--host", "h1"], 1)],
                         ids=["plan-2-hosts", "facts"])
def test_through_the_cli_each_hosts_match_exec_runs_once(tmp_path, args, hosts):
    cfg, count = _counting(tmp_path)
    (tmp_path / "inv.yml").write_text(f"all:\n  vars:\n    ansible_host: 127.0.0.1\n    ansible_port: 9\n"
                                      f"    ssh_config: {cfg}\n  hosts:\n    h1:\n    h2:\n")
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", BRINGUP, *args, "-i", "inv.yml"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "unreachable" in out, out
    assert _runs(count) == hosts, out
