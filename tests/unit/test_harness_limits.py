"""harness.limits: what starting sandbox hosts takes of the machine (inotify, memory, disk), raised where the
harness may (root) or refused with one line naming the limit, the value needed and how to get it.

The machine's settings are files under a temporary folder here (the real /proc/sys is shared by everyone on
this machine); what is in use is set by each test, except in the test that counts this process's own inotify
instance with the real counter.
"""
from __future__ import annotations

import ctypes
import os
from types import SimpleNamespace

import pytest

from harness import limits

INSTANCES = "fs.inotify.max_user_instances"
WATCHES = "fs.inotify.max_user_watches"


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """Limits 128 instances and 8192 watches, 8 GiB of memory and 50 GiB of disk free, 40 instances and 1000
    watches in use, run as root: each test changes what it is about."""
    (tmp_path / "fs" / "inotify").mkdir(parents=True)
    m = SimpleNamespace(root=True, in_use=(40, 1000), free_disk=50_000, tmp=tmp_path)
    m.sysctl = lambda name: tmp_path.joinpath(*name.split("."))
    m.sysctl(INSTANCES).write_text("128\n")
    m.sysctl(WATCHES).write_text("8192\n")
    meminfo = tmp_path / "meminfo"
    m.memory = lambda mib: meminfo.write_text(f"MemTotal:       16000000 kB\nMemAvailable:   {mib * 1024} kB\n")
    m.memory(8192)
    monkeypatch.setattr(limits, "PROC_SYS", tmp_path)
    monkeypatch.setattr(limits, "MEMINFO", meminfo)
    monkeypatch.setattr(limits, "inotify_in_use", lambda: m.in_use)
    monkeypatch.setattr(limits, "_is_root", lambda: m.root)
    monkeypatch.setattr(limits, "docker_root", lambda: "/var/lib/docker")
    monkeypatch.setattr(limits, "free_mib", lambda path: m.free_disk)
    return m


def test_room_enough_changes_nothing_and_one_host_more_raises_the_limit(machine, capsys):
    limits.make_room(3)  # 40 in use + 3 * 8 + 64 spare = 128: fits
    assert machine.sysctl(INSTANCES).read_text() == "128\n" and machine.sysctl(WATCHES).read_text() == "8192\n"
    assert capsys.readouterr().err == ""
    limits.make_room(4)  # 136: raised to twice what it was
    assert machine.sysctl(INSTANCES).read_text() == "256\n"


def test_root_raises_a_low_inotify_limit_to_what_the_hosts_need_and_never_lowers_it(machine, capsys):
    machine.in_use = (300, 1000)  # the hosts already running hold most of them
    limits.make_room(10)  # 300 + 10 * 8 + 64 = 444: more than twice 128
    assert machine.sysctl(INSTANCES).read_text() == "444\n"
    assert capsys.readouterr().err == (f"sandbox: raised {INSTANCES} from 128 to 444: starting 10 sandbox hosts "
                                       "needs about 8 inotify instances each (300 in use)\n")
    machine.sysctl(INSTANCES).write_text("100000\n")
    limits.make_room(10)
    assert machine.sysctl(INSTANCES).read_text() == "100000\n"


def test_the_watches_limit_is_raised_too(machine):
    machine.in_use = (10, 8000)
    limits.make_room(1)  # 8000 + 64 + 4096 = 12160 > 8192: twice 8192
    assert machine.sysctl(WATCHES).read_text() == "16384\n"
    assert machine.sysctl(INSTANCES).read_text() == "128\n"


@pytest.mark.parametrize("name, in_use, hosts, line", [
    (INSTANCES, (100, 1000), 4, f"starting 4 sandbox hosts needs about 8 inotify instances each (100 in use): "
                                f"{INSTANCES} is 128, 196 needed: raise it with sudo sysctl -w {INSTANCES}=196"),
    (WATCHES, (10, 8100), 1, f"starting 1 sandbox host needs about 64 inotify watches each (8100 in use): "
                             f"{WATCHES} is 8192, 12260 needed: raise it with sudo sysctl -w {WATCHES}=12260"),
])
def test_without_root_one_line_names_the_limit_the_value_needed_and_the_command(machine, name, in_use, hosts,
                                                                                 line):
    machine.root, machine.in_use = False, in_use
    before = machine.sysctl(name).read_text()
    with pytest.raises(limits.LimitError) as e:
        limits.make_room(hosts)
    assert str(e.value) == line
    assert machine.sysctl(name).read_text() == before


def test_a_limit_root_cannot_write_is_one_line_with_the_reason(machine):
    machine.in_use = (100, 1000)
    machine.sysctl(INSTANCES).unlink()
    # A real setting that reads as a small number and that not even root may write (mode 0444).
    machine.sysctl(INSTANCES).symlink_to("/proc/sys/kernel/cap_last_cap")
    limit = int(machine.sysctl(INSTANCES).read_text())
    assert limit < 100 + 8 + 64
    with pytest.raises(limits.LimitError, match=rf"^starting 1 sandbox host .*: {INSTANCES} is {limit}, 172 needed "
                                                rf"\(writing .* failed: .*\): raise it with sudo sysctl -w "
                                                rf"{INSTANCES}=172$"):
        limits.make_room(1)


def test_memory_and_disk_that_are_short_stop_with_what_to_free(machine):
    machine.memory(300)
    limits.make_room(1)  # a full host: 256 MiB
    with pytest.raises(limits.LimitError) as e:
        limits.make_room(2)
    assert str(e.value) == (f"starting 2 sandbox hosts needs about 512 MiB of free memory, 300 MiB available "
                            f"(MemAvailable in {machine.tmp / 'meminfo'}): stop other jobs or containers, or start "
                            "fewer hosts")
    limits.make_room(4, light=True)  # light hosts boot only: 64 MiB each
    machine.free_disk = 900
    with pytest.raises(limits.LimitError, match=r"^starting 1 sandbox host needs about 1024 MiB free under Docker's "
                                                r"data root /var/lib/docker, 900 MiB free: free space on that file "
                                                r"system \(docker system prune -f"):
        limits.make_room(1)
    limits.make_room(2, light=True)


def test_inotify_in_use_counts_an_instance_and_its_watches(tmp_path):
    libc = ctypes.CDLL(None, use_errno=True)
    me = str(os.getpid())
    before = limits.inotify_in_use(pids=me)
    fd = libc.inotify_init1(0)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    try:
        for d in ("a", "b"):
            (tmp_path / d).mkdir()
            assert libc.inotify_add_watch(fd, str(tmp_path / d).encode(), 0x100) >= 0  # IN_CREATE
        assert limits.inotify_in_use(pids=me) == (before[0] + 1, before[1] + 2)
    finally:
        os.close(fd)
    assert limits.inotify_in_use(pids=me) == before
