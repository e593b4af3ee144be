"""daemon.json that a service restarts on: the service's check before the write, bringup's own keys removed again.

Issue 26, item 1: a one-letter typo (``log-levl``) merged into daemon.json kept Docker down for good.
The write scripts run here with /bin/sh (dash, as on the hosts) on a temporary folder; the check is
the real ``dockerd`` of this machine (Debian's docker.io, installed by scripts/setup.sh).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.resources.jsonfile import JsonFile
from roles.docker import dockerd_check


def run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True)


def step(res: JsonFile):
    """Read and plan as the engine does; returns the plan and, applied, the script's result."""
    plan = res.plan(run(res.read()).stdout)
    assert not plan.error, plan.error
    return plan, (run("\n".join(plan.commands)) if plan.commands else None)


@pytest.fixture
def etc(tmp_path) -> Path:
    d = tmp_path / "docker"
    d.mkdir()
    return d


def owned(etc: Path, keys: dict, **kw) -> JsonFile:
    return JsonFile(str(etc / "daemon.json"), keys, owned=True, record_dir=str(etc.parent / "rec"), **kw)


def doc(etc: Path) -> dict:
    return json.loads((etc / "daemon.json").read_text())


@pytest.mark.reliability(item=26, fault="a daemon.json key the inventory no longer asks for",
                         variants=3, checks=("whole old or new file", "next run converges"))
def test_keys_bringup_merged_are_removed_when_dropped_and_only_those(etc):
    (etc / "daemon.json").write_text('{"live-restore": true}\n')  # an operator's own key
    plan, r = step(owned(etc, {"log-levl": "info", "debug": True, "log-opts": {"max-size": "10m"}}))
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc(etc) == {"live-restore": True, "log-levl": "info", "debug": True, "log-opts": {"max-size": "10m"}}
    # The operator changes `debug` by hand: from then on it is theirs.
    d = doc(etc)
    d["debug"] = False
    (etc / "daemon.json").write_text(json.dumps(d))
    plan, r = step(owned(etc, {"log-level": "info"}))
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc(etc) == {"live-restore": True, "debug": False, "log-level": "info"}
    assert plan.changes["log-levl"] == ("info", "absent (bringup had set it)")
    assert plan.changes["log-opts.max-size"][1] == "absent (bringup had set it)"
    assert plan.notifies
    again, _ = step(owned(etc, {"log-level": "info"}))
    assert not again.changed, again.changes
    # Nothing wanted any more: bringup's key goes, its record too; the rest stays.
    plan, r = step(owned(etc, {}))
    assert r.returncode == 0 and doc(etc) == {"live-restore": True, "debug": False}
    assert not any((etc.parent / "rec").rglob("*.keys"))
    assert not step(owned(etc, {}))[0].changed


def test_a_file_that_already_holds_the_keys_gets_a_record_without_a_restart(etc):
    # What an older bringup left: the keys merged, no record. The record is bookkeeping: no handler runs.
    (etc / "daemon.json").write_text('{"debug": true}\n')
    res = owned(etc, {"debug": True}, notify=["restart docker"])
    plan, r = step(res)
    assert plan.changed and not plan.notifies
    assert r.returncode == 0 and doc(etc) == {"debug": True}
    assert not step(res)[0].changed


def test_an_unreadable_record_removes_nothing(etc):
    (etc / "daemon.json").write_text('{"debug": true}\n')
    rec = etc.parent / "rec" / str(etc / "daemon.json.keys").lstrip("/")
    rec.parent.mkdir(parents=True)
    rec.write_text('[["debu')
    plan, r = step(owned(etc, {}))
    assert r.returncode == 0 and doc(etc) == {"debug": True}


@pytest.mark.reliability(item=26, fault="a daemon.json value the service's own check refuses",
                         checks=("whole old or new file", "no leftovers"))
def test_a_refused_document_is_never_written(etc):
    (etc / "daemon.json").write_text('{"debug": true}\n')
    check = lambda d: "echo 'no such option: log-levl'; exit 1"  # noqa: E731
    plan, r = step(owned(etc, {"log-levl": "info"}, check=check))
    assert r.returncode == 1 and "no such option: log-levl" in r.stdout
    assert (etc / "daemon.json").read_text() == '{"debug": true}\n'
    assert sorted(p.name for p in etc.iterdir()) == ["daemon.json"]
    assert not (etc.parent / "rec").exists()  # the record follows the file, never ahead of it
    # The check is the plan's leading command: the restart a write owes is recorded after it.
    assert plan.checks == 1 and "no such option" in plan.commands[0]


needs_dockerd = pytest.mark.skipif(shutil.which("dockerd") is None or os.geteuid() != 0,
                                   reason="dockerd (scripts/setup.sh installs docker.io) as root")


@needs_dockerd
@pytest.mark.reliability(item=26, fault="a one-letter typo in docker_daemon_config (log-levl), real dockerd",
                         variants=2, checks=("whole old or new file", "no leftovers"))
def test_dockerd_refuses_a_typo_before_the_file_is_replaced(etc):
    (etc / "daemon.json").write_text('{"debug": true}\n')
    check = functools.partial(dockerd_check, folder=str(etc))
    _, r = step(owned(etc, {"log-levl": "info"}, check=check))
    assert r.returncode == 1
    assert "dockerd refuses the merged /etc/docker/daemon.json, left as it was" in r.stdout, r.stdout
    assert "log-levl" in r.stdout and ".bringup-check" not in r.stdout
    assert sorted(p.name for p in etc.iterdir()) == ["daemon.json"]
    assert doc(etc) == {"debug": True}
    # The right spelling passes the same check and is written.
    _, r = step(owned(etc, {"log-level": "info"}, check=check))
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc(etc) == {"debug": True, "log-level": "info"}
    assert not [p for p in etc.iterdir() if "bringup-check" in p.name]


@needs_dockerd
def test_dockerd_check_passes_what_dockerd_takes_even_with_a_pidfile_of_its_own(etc):
    # The check's copy sets its own pidfile; an operator's `pidfile` key must not make it conflict.
    r = run(dockerd_check({"pidfile": "/run/docker-other.pid", "log-level": "warn"}, folder=str(etc)))
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(dockerd_check({"log-level": "loud"}, folder=str(etc)))
    assert r.returncode == 1 and "loud" in r.stdout


@pytest.mark.reliability(item=40, fault="dockerd hanging on the check of a merged daemon.json (its own timeout inside "
                         "the round trip's: with and without --validate)", variants=2,
                         checks=("one clear line", "whole old or new file"))
@pytest.mark.parametrize("validate", [True, False], ids=["--validate", "an older dockerd"])
def test_a_dockerd_that_gives_no_verdict_is_said_so_and_the_file_left(etc, tmp_path, validate, monkeypatch):
    """The check's timeout(1) ended dockerd (124, nothing printed) and the line said "dockerd refuses the merged
    daemon.json, left as it was:" with no reason, as if the keys were wrong.  A stand-in dockerd that hangs."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    helps = "--validate" if validate else "--config-file"
    (bin_ / "dockerd").write_text(f'#!/bin/sh\n[ "$1" = --help ] && {{ echo "  {helps}"; exit 0; }}\n'
                                  f"exec sleep 30.{os.getpid()}\n")
    (bin_ / "dockerd").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    (etc / "daemon.json").write_text('{"debug": true}\n')
    _, r = step(owned(etc, {"log-level": "info"}, check=functools.partial(dockerd_check, folder=str(etc), within=1)))
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1] == ("dockerd gave no verdict on the merged /etc/docker/daemon.json "
                                                 "within 1 s (it hangs?), left as it was"), r.stdout
    assert doc(etc) == {"debug": True} and sorted(p.name for p in etc.iterdir()) == ["daemon.json"]
