"""Pull runs that overlap, caches that cannot hold a run's outcome, and the operator's flags checked before the
fetch and echoed on one bounded line.

Real Git and real runs throughout, as in test_pull.py (its Fleet: a bare repository as the server, commits signed
by ssh-keygen keys made in the test's folder); the roles are demo roles writing under the test's folder.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from bringup.errors import BringupError, InputError, shown
from bringup.pull import record
from bringup.pull import run as pull_run
from bringup.pull.run import Converged, Settings, pull
from bringup.pull.source import Refused, Source

from .test_pull import REPO, Fleet, bringup, git, metrics, never, task_flags


@pytest.fixture()
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


def ok(workdir: Path, host: str, settings: Settings) -> Converged:
    return Converged(rc=0, changed=1)


def state_of(cache: Path) -> record.State:
    return record.State.model_validate_json((cache / "state.json").read_text())


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if "repo.git" not in p.parts)


# -- Two runs that overlap (F2) ---------------------------------------------------------------------------------

GATE = '''
from bringup.ssh.command import sh
from bringup.resources import Command

def resources(host):
    return [Command("gate", sh("touch %s; i=0; while [ ! -e %s ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); "
                               "done; touch %s", {started!r}, {go!r}, {done!r}), creates={done!r})]
'''


@pytest.mark.parametrize("back", ["an ancestor", "a side commit"])
def test_a_run_that_waited_for_the_lock_checks_forward_against_what_the_run_before_applied(tmp_path, monkeypatch,
                                                                                         back):
    """Run A converges C5 (its role waits on a file); main moves back (to C4, or a side commit off C4) while A
    runs; run B starts meanwhile and waits on the lock.  B must read what A applied once it holds the lock: the
    revision it then fetches is a rollback from C5, refused; A's C5 stays applied."""
    fleet = Fleet(tmp_path)
    c4 = fleet.commit("four", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == c4
    started, go = tmp_path / "gate.started", tmp_path / "gate.go"
    (fleet.work / "roles" / "gate.py").write_text(GATE.format(started=str(started), go=str(go),
                                                              done=str(tmp_path / "gate.done")))
    (fleet.work / "roles" / "__init__.py").write_text("ORDER = ['gate', 'demo']\n")
    c5 = fleet.commit("five", key=fleet.ops)
    a = subprocess.Popen([sys.executable, "-c", "import sys; from bringup.entry import main; main()", "pull",
                          *task_flags(fleet)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        deadline = time.monotonic() + 120
        while not started.exists():  # A holds the lock, fetched C5 and converges it
            assert a.poll() is None and time.monotonic() < deadline, a.stdout.read() if a.poll() is not None else ""
            time.sleep(0.05)
        if back == "an ancestor":
            git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{c4}:main")
            target = c4
        else:
            git(fleet.work, "checkout", "--quiet", "-b", "side", c4)
            target = fleet.commit("five-b", key=fleet.ops)  # pushed over main

        real = pull_run.run_lock

        @contextmanager
        def waiting(*args, **kw):
            go.touch()  # A's converge goes on once B is about to wait for the lock
            with real(*args, **kw):
                yield

        monkeypatch.setattr(pull_run, "run_lock", waiting)
        seen = []
        got = pull(fleet.settings(lock_wait_s=120), converge=lambda *a_: seen.append(a_) or Converged(rc=0))
        out, _ = a.communicate(timeout=120)
    finally:
        go.touch()
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 0 and out.strip().splitlines()[-1].startswith(f"applied: applied {c5[:12]}"), out
    assert (got.status, got.reason, got.revision) == ("refused", "rollback", target), got.message
    assert f"the applied {c5[:12]}" in got.message and not seen
    cache = tmp_path / "cache"
    assert fleet.current() == c5 and state_of(cache).applied == c5
    m = metrics(tmp_path / "bringup-pull.prom")
    assert m[("bringup_pull_applied_info", (("host", "me"), ("revision", c5)))] == 1
    assert not any(k[0] == "bringup_pull_applied_info" and dict(k[1])["revision"] != c5 for k in m)


# -- A cache that cannot hold the outcome (F7) -----------------------------------------------------------------

@pytest.mark.parametrize("name,what", [("state.json", "its pull state"), ("current", "the current link")])
def test_a_folder_where_the_cache_keeps_its_state_or_link_is_refused_before_the_fetch(fleet, name, what):
    one = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == one
    cache = fleet.tmp / "cache"
    path = cache / name
    path.unlink()
    path.mkdir()
    fleet.commit("two", key=fleet.ops)
    before = tree(cache)
    line = (f"{path} is a folder where the cache keeps {what}: nothing was fetched; remove it (rmdir {path}), "
            "or give another --cache")
    with pytest.raises(InputError) as e:
        pull(fleet.settings(), converge=never)
    assert str(e.value) == line
    assert git(cache / "repo.git", "rev-parse", "main") == one  # nothing fetched
    assert tree(cache) == before  # no temporary file or link left
    r = bringup("pull", *task_flags(fleet), cwd=fleet.tmp)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"error: {line}\n")
    assert tree(cache) == before


def test_a_failed_swap_leaves_no_temporary_link(fleet):
    from bringup.pull.source import Source

    one = fleet.commit("one", key=fleet.ops)
    cache = fleet.tmp / "cache"
    assert pull(fleet.settings(), converge=ok).revision == one
    (cache / "current").unlink()
    (cache / "current").mkdir()
    with pytest.raises(OSError):
        Source("", cache, fleet.allowed).swap(one)
    assert not [p for p in cache.iterdir() if p.name.startswith(".current.")]


# -- A cache named like an option (F10) ------------------------------------------------------------------------

def test_a_cache_named_like_an_option_is_a_path_to_every_git_command(fleet, monkeypatch):
    monkeypatch.chdir(fleet.tmp)
    one = fleet.commit("one", key=fleet.ops)
    got = pull(fleet.settings(cache=Path("-1")), converge=ok)
    assert (got.status, got.revision) == ("applied", one), got.message
    two = fleet.commit("two", key=fleet.ops)
    got = pull(fleet.settings(cache=Path("-1")), converge=ok)
    assert (got.status, got.revision) == ("applied", two), got.message
    assert sorted(p.name for p in (fleet.tmp / "-1" / "revisions").iterdir()) == [two]  # the old one removed
    three = fleet.commit("three", key=fleet.ops)
    flags = [f for f in task_flags(fleet)]
    flags[flags.index("--cache") + 1] = "-1"
    r = bringup("pull", *flags, cwd=fleet.tmp)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1].startswith(f"applied: applied {three[:12]}"), \
        r.stdout + r.stderr
    assert sorted(p.name for p in (fleet.tmp / "-1" / "revisions").iterdir()) == [three]


# -- The operator's flags (F11) --------------------------------------------------------------------------------

def test_a_vault_password_file_that_does_not_open_is_refused_before_the_fetch(fleet):
    one = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == one
    fleet.commit("two", key=fleet.ops)
    cache, nope = fleet.tmp / "cache", fleet.tmp / "nope"
    state = (cache / "state.json").read_text()
    line = (f"--vault-password-file {nope}: no such file; give a file holding the vault password, or a program "
            "printing it")
    with pytest.raises(BringupError) as e:
        pull(fleet.settings(vault_password_files=[str(nope)]), converge=never)
    assert str(e.value) == line
    assert git(cache / "repo.git", "rev-parse", "main") == one  # nothing fetched
    assert (cache / "state.json").read_text() == state  # no refusal blamed on the revision
    r = bringup("pull", *task_flags(fleet), "--vault-password-file", str(nope), cwd=fleet.tmp)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"error: {line}\n")
    assert (cache / "state.json").read_text() == state and state_of(cache).last_refusal is None


@pytest.mark.reliability(item=40, fault="pull --url fd::3 (a Git remote helper): the fetch waited its whole 300 s "
                                        "bound on a descriptor; any git-remote-NAME on the host ran from the role's url",
                         variants=3, checks=("no hang", "one clear line", "nothing executed"))
def test_a_url_naming_a_git_remote_helper_is_refused_by_the_flag_and_by_git(fleet, monkeypatch):
    import time

    from bringup.pull import source as src

    flags = task_flags(fleet)
    flags[flags.index("--url") + 1] = "fd::3"
    r = bringup("pull", *flags, cwd=fleet.tmp)
    assert (r.returncode, r.stdout) == (1, "") and r.stderr.startswith(
        "error: --url 'fd::3': names a Git remote helper (fd::), which pull never runs; "), r.stderr
    # Git itself is held to the plain transports, whoever hands it the URL (an IPv6 address's :: is no helper).
    monkeypatch.setattr(src, "FETCH_TIMEOUT_S", 20)
    started = time.monotonic()
    with pytest.raises(Refused) as e:
        Source("fd::3", fleet.tmp / "c", fleet.allowed).fetch()
    assert e.value.reason == "unreachable" and "transport 'fd' not allowed" in str(e.value), str(e.value)
    assert time.monotonic() - started < 15
    from bringup.pull.source import HELPER_URL

    assert not HELPER_URL.match("ssh://git@[::1]:22/ops/fleet.git") and not HELPER_URL.match("git@[::1]:fleet")


@pytest.mark.parametrize("flag", ["--name", "--allowed-signers", "--vault-password-file"])
def test_a_value_holding_a_newline_is_echoed_on_one_line(fleet, flag):
    fleet.commit("one", key=fleet.ops)
    value = str(fleet.tmp / "a\nb") if flag != "--name" else "me\nb"
    flags = task_flags(fleet)
    if flag in flags:
        del flags[flags.index(flag):flags.index(flag) + 2]
    r = bringup("pull", *flags, f"{flag}={value}", cwd=fleet.tmp)
    said = (r.stdout + r.stderr).strip()
    assert r.returncode in (1, 3) and len(said.splitlines()) == 1, said
    assert value.replace("\n", "\\n") in said and "Traceback" not in said
    if flag == "--name":
        assert said.startswith("refused: ") and said.endswith("(--name me\\nb)")
    if flag == "--allowed-signers":
        assert said == (f"refused: allowed signers file {fleet.tmp}/a\\nb is missing: nothing is trusted, nothing "
                        "applied; write the trusted keys there (one 'principal ssh-ed25519 AAAA...' line each)")


LONG = "x" * 100_000


@pytest.mark.parametrize("flag", ["--url", "--cache", "--allowed-signers", "--inventory", "--ssh-key",
                                  "--known-hosts", "--prometheus", "--vault-password-file"])
def test_a_value_of_100000_characters_is_cut_in_what_is_said(fleet, flag):
    fleet.commit("one", key=fleet.ops)
    value = {"--url": f"file://{LONG}", "--inventory": LONG, "--prometheus": f"/tmp/{LONG}.prom"}.get(
        flag, f"/tmp/{LONG}")
    flags = task_flags(fleet)
    if flag in flags:
        del flags[flags.index(flag):flags.index(flag) + 2]
    r = bringup("pull", *flags, flag, value, cwd=fleet.tmp)
    said = (r.stdout + r.stderr).strip()
    assert r.returncode != 0 and "Traceback" not in said and len(said.splitlines()) == 1, said[:1000]
    assert len(said) < 1000 and shown(value) in said, said[:1000]


@pytest.mark.parametrize("what", ["folder", "fifo"])
def test_allowed_signers_that_are_no_file_are_named_for_what_they_are(fleet, what):
    fleet.commit("one", key=fleet.ops)
    path = fleet.tmp / "signers"
    path.mkdir() if what == "folder" else os.mkfifo(path)
    started = time.monotonic()
    got = pull(fleet.settings(allowed_signers=path), converge=never)
    assert time.monotonic() - started < 30  # a FIFO is never opened
    said = "is a folder" if what == "folder" else "is no regular file (a pipe, a socket or a device)"
    assert (got.status, got.reason) == ("refused", "no-allowed-signers")
    assert got.message == (f"allowed signers file {path} {said}: nothing is trusted, nothing applied; write the "
                           "trusted keys there (one 'principal ssh-ed25519 AAAA...' line each)")


def test_shown_cuts_and_keeps_one_line():
    assert shown("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert shown("y" * 300) == "y" * 200 + "…" and shown("short") == "short"


@pytest.mark.reliability(item=40, fault="pull --inventory '~/hosts' (or the role's inventory): the converge expanded "
                                        "~ and loaded an unsigned inventory from the home folder, outside the checkout",
                         variants=2, checks=("one clear line", "nothing executed"))
def test_an_inventory_under_home_is_refused_and_the_converge_reads_the_checkouts_own(fleet):
    from bringup.pull.run import provision_argv

    fleet.commit("one", key=fleet.ops)
    flags = task_flags(fleet)
    if "--inventory" in flags:
        del flags[flags.index("--inventory"):flags.index("--inventory") + 2]
    r = bringup("pull", *flags, "--inventory", "~/hosts", cwd=fleet.tmp)
    assert (r.returncode, r.stdout) == (1, "") and r.stderr.startswith(
        "error: --inventory '~/hosts': a path inside the repository"), r.stderr
    # Whatever the settings hold, the converge is handed the checkout's own file (./), never a ~ to expand.
    argv = provision_argv("me", fleet.settings(), fleet.tmp)
    assert argv[argv.index("--inventory") + 1] == f"./{fleet.settings().inventory}", argv
