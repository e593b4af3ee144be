"""Write scripts leave nothing behind: temp files, half-made backups; backups pruned; long names ship.

The scripts the resources build are run here by /bin/sh (dash on Debian, as on the hosts) in a
temporary folder; faults come from a shim earlier in PATH.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bringup.resources.files import BACKUP_KEEP, NAME_MAX, File, write_file
from bringup.resources.jsonfile import JsonFile


def run(script: str, path_prefix: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env=env)


def shim(tmp: Path, name: str, body: str) -> Path:
    d = tmp / "shim"
    d.mkdir(exist_ok=True)
    (d / name).write_text("#!/bin/sh\n" + body)
    (d / name).chmod(0o755)
    return d


def apply_script(resource) -> str:
    """What the engine would run: the resource reads the folder here, plans, and its commands are joined."""
    plan = resource.plan(run(resource.read()).stdout)
    assert plan.changed, plan.reason
    return "\n".join(plan.commands)


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.mark.reliability(item=12, fault='a 250-character file name (write script on the local file system)',
                         checks=('whole old or new file', 'no leftovers'))
def test_a_file_name_of_250_characters_ships_and_is_backed_up(tmp_path):
    name = "m" * 250
    target = tmp_path / "repo" / name
    r = run(File(str(target), content="one\n", owner=None, group=None)._write())
    assert r.returncode == 0, r.stderr
    assert target.read_text() == "one\n"
    r = run(File(str(target), content="two\n", owner=None, group=None)._write())
    assert r.returncode == 0, r.stderr
    assert target.read_text() == "two\n"
    backups = [n for n in names(target.parent) if n != name]
    assert len(backups) == 1 and len(backups[0].encode()) <= NAME_MAX and backups[0].endswith(".bak")
    assert (target.parent / backups[0]).read_text() == "one\n"


@pytest.mark.reliability(item=12, fault='a write failing after its temp file (write script on the local file system)',
                         checks=('whole old or new file', 'no leftovers'))
def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    d = tmp_path / "etc"
    d.mkdir()
    (d / "app.conf").write_text("old\n")
    # chown to a user that does not exist: the step after the temp file is written fails.
    r = run(File(str(d / "app.conf"), content="new\n", owner="no-such-user-h4", group=None)._write())
    assert r.returncode != 0
    assert names(d) == ["app.conf"] and (d / "app.conf").read_text() == "old\n"


@pytest.mark.reliability(item=12, fault='a backup copy failing half-way (write script on the local file system)',
                         checks=('whole old or new file', 'no leftovers'))
def test_a_backup_copy_that_fails_leaves_nothing(tmp_path):
    d = tmp_path / "docker"
    d.mkdir()
    (d / "daemon.json").write_text('{"debug": false}\n')
    # A cp that writes part of the copy, then fails as on a full disk.
    bin_ = shim(tmp_path, "cp", 'for a; do dst=$a; done; printf "{\\"de" > "$dst"; echo "No space left" >&2; exit 1\n')
    r = run(apply_script(JsonFile(str(d / "daemon.json"), {"debug": True})), bin_)
    assert r.returncode != 0 and "No space left" in r.stdout + r.stderr
    assert names(d) == ["daemon.json"]
    assert json.loads((d / "daemon.json").read_text()) == {"debug": False}


@pytest.mark.reliability(item=12, fault="backups pruned to the newest five, others' files kept (local file system)",
                         checks=("others' files kept",))
def test_backups_are_pruned_to_the_newest_and_only_bringups_own(tmp_path):
    d = tmp_path / "docker"
    d.mkdir()
    (d / "daemon.json").write_text("{}\n")
    old = [f"daemon.json.2020010{i}T000000.bak" for i in range(1, 8)]
    foreign = ["daemon.json.bak", "daemon.json.mine.bak", "daemon.json.2020.bak", "daemon.json.20200101T000000.bak.orig"]
    for n in old + foreign:
        (d / n).write_text("x\n")
    r = run(apply_script(JsonFile(str(d / "daemon.json"), {"debug": True})))
    assert r.returncode == 0, r.stderr
    bringup_backups = sorted(n for n in names(d) if n not in foreign and n != "daemon.json")
    assert len(bringup_backups) == BACKUP_KEEP
    # The newest: the one just made (today's date) and the four youngest of the old ones.
    assert bringup_backups[:BACKUP_KEEP - 1] == old[-(BACKUP_KEEP - 1):]
    assert (d / bringup_backups[-1]).read_text() == "{}\n"
    assert all((d / n).exists() for n in foreign)


def test_two_backups_in_one_second_do_not_share_a_name(tmp_path):
    target = tmp_path / "f.conf"
    for text in ("a\n", "b\n", "c\n"):
        r = run(write_file(str(target), text.encode(), keep_backup=True))
        assert r.returncode == 0, r.stderr
    baks = sorted(p.read_text() for p in tmp_path.glob("f.conf.*.bak"))
    assert baks == ["a\n", "b\n"]


@pytest.mark.reliability(item=12, fault='a failed backup copy stops the command that follows the write (local file system)',
                         checks=('no leftovers', 'next run converges'))
def test_the_command_variant_backs_up_and_a_failed_copy_stops_the_command(tmp_path):
    d = tmp_path / "docker"
    d.mkdir()
    (d / "daemon.json").write_text("{}\n")
    marker = tmp_path / "ran"
    cmd = f"touch {marker}"
    bin_ = shim(tmp_path, "cp", "exit 1\n")
    r = run(apply_script(JsonFile(str(d / "daemon.json"), {"debug": True}, command=cmd)), bin_)
    assert r.returncode != 0 and not marker.exists() and names(d) == ["daemon.json"]
    r = run(apply_script(JsonFile(str(d / "daemon.json"), {"debug": True}, command=cmd)))
    assert r.returncode == 0 and marker.exists() and len(names(d)) == 2


@pytest.mark.reliability(item=10, fault='pending handlers recorded before the write, settled after (local file system)',
                         checks=('no leftovers',))
def test_pending_handlers_are_recorded_atomically_and_settled(tmp_path):
    from bringup.engine.pending import PendingHandlers

    f = tmp_path / "state" / "pending-handlers"
    first = PendingHandlers(str(f))
    first.load(run(first.read()).stdout)
    assert first.earlier("docker") == []
    assert run(first.owe("docker", ["restart docker"])).returncode == 0
    assert first.owe("docker", ["restart docker"]) == ""  # recorded already: no round trip of its own
    assert run(first.owe("irq_affinity", ["restart irqbalance"])).returncode == 0
    assert f.read_text() == "docker:restart docker\nirq_affinity:restart irqbalance\n"
    assert names(f.parent) == ["pending-handlers"]

    # The next run (the first was cut off before its handlers) sees both, and settles one role's.
    second = PendingHandlers(str(f))
    second.load(run(second.read()).stdout)
    assert second.earlier("docker") == ["restart docker"]
    assert run(second.settled("docker", ["restart docker"])).returncode == 0
    second.forget("docker", ["restart docker"])
    assert second.earlier("docker") == [] and f.read_text() == "irq_affinity:restart irqbalance\n"
    assert run(second.settled("irq_affinity", ["restart irqbalance"])).returncode == 0
    assert not f.exists()
    assert second.settled("docker", ["restart docker"]) == ""
