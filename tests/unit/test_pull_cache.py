"""Pull's cache as hostile files (issue 40 item 2): the folders a run writes, rotates and prunes in (``repo.git``,
``revisions``, ``reports``) are never followed through a symbolic link, and a pull removes only the entries it made.

Real Git, as in test_pull.py (its Fleet: a bare repository as the server, commits signed by Git itself).
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bringup.errors import InputError
from bringup.pull.run import pull

from .test_pull import Fleet, bringup, never, ok, task_flags


@pytest.fixture()
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


def victim(tmp_path: Path) -> Path:
    """A folder of someone else's, with a file, a folder and 25 JSON reports of theirs."""
    v = tmp_path / "elsewhere"
    (v / "sub").mkdir(parents=True)
    (v / "precious.txt").write_text("keep")
    for i in range(25):
        (v / f"r{i:02}.json").write_text("{}")
    return v


@pytest.mark.reliability(item=40, fault="pull --cache naming a folder that holds other things and no pull cache (--cache "
                                        "/, /var/lib, a project's folder): repo.git, revisions, state.json, current, "
                                        "pycache and reports made among them, and reports/ rotated there", variants=3,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("held, refused", [
    (["notes.txt", "reports"], True),  # a project's folder: its reports/ would be rotated by the run
    (["lost+found"], False),           # a disk of its own, made with mkfs: a new cache
    (["state.json", "notes.txt"], False),  # a cache whose repository went (and a file of the operator's): used
], ids=["other-things", "mount", "a-cache"])
def test_a_cache_folder_holding_other_things_and_no_cache_is_refused(fleet, tmp_path, held, refused):
    fleet.commit("one", key=fleet.ops)
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in held:
        if name in ("reports", "lost+found"):
            (cache / name).mkdir()
        else:
            (cache / name).write_text("{}" if name == "state.json" else "mine\n")
    if refused:
        with pytest.raises(InputError) as e:
            pull(fleet.settings(), converge=ok)
        line = str(e.value)
        assert line.startswith(f"--cache {cache} holds other things (notes.txt) and no pull cache") \
            and "nothing was fetched" in line and "\n" not in line, line
        assert sorted(os.listdir(cache)) == sorted(held)  # nothing made among them
    else:
        assert pull(fleet.settings(), converge=ok).status == "applied"
        assert (cache / "notes.txt").exists() if "notes.txt" in held else True


@pytest.mark.reliability(item=40, fault="pull: the cache's repo.git, revisions, reports or pycache a symbolic link to "
                                        "a folder elsewhere", variants=4,
                         checks=("one clear line", "exit code", "nothing touched", "others' files kept"))
@pytest.mark.parametrize("name", ["repo.git", "revisions", "reports", "pycache"])
def test_a_cache_folder_that_is_a_link_is_refused_naming_it(fleet, tmp_path, name):
    # Before: revisions -> elsewhere had its folders removed by the prune (rmtree of every entry but the applied
    # commit), reports -> elsewhere lost all but 20 of its *.json to the rotation, repo.git -> elsewhere was
    # git init'ed and fetched into; pycache -> elsewhere had the converge's bytecode written there, and bytecode
    # planted there (matching a role's size and time) run in place of the signed source.
    fleet.commit("one", key=fleet.ops)
    v = victim(tmp_path)
    before = sorted(os.listdir(v))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / name).symlink_to(v)
    with pytest.raises(InputError) as e:
        pull(fleet.settings(), converge=ok)
    line = str(e.value)
    assert line.startswith(f"{cache / name} is a symbolic link (to '{v}')") and "\n" not in line, line
    assert "nothing was fetched" in line
    assert sorted(os.listdir(v)) == before and (v / "sub").is_dir()
    assert sorted(os.listdir(cache)) == [name]  # no state, no current, no other folder made
    r = bringup("pull", *task_flags(fleet), cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "symbolic link" in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and sorted(os.listdir(v)) == before


@pytest.mark.reliability(item=40, fault="pull: --cache itself a symbolic link to a folder on another disk",
                         variants=1, checks=("report written", "exit code"))
def test_a_cache_given_as_a_link_to_another_disk_is_used(fleet, tmp_path):
    # docs/pull.md says so: only the cache's own repo.git, revisions and reports are refused as links; the cache
    # folder itself may be a link (or a mount) to another disk, and runs go on through it.
    first = fleet.commit("one", key=fleet.ops)
    disk = tmp_path / "disk" / "bringup"
    disk.mkdir(parents=True)
    cache = tmp_path / "cache"
    cache.symlink_to(disk)
    got = pull(fleet.settings(), converge=ok)
    assert (got.status, got.revision) == ("applied", first), got.message
    second = fleet.commit("two", key=fleet.ops)
    got = pull(fleet.settings(), converge=ok)
    assert (got.status, got.revision) == ("applied", second), got.message
    assert cache.is_symlink() and os.readlink(disk / "current") == f"revisions/{second}"
    assert sorted(os.listdir(disk / "revisions")) == [second] and (disk / "repo.git").is_dir()
    assert json.loads((disk / "state.json").read_text())["applied"] == second


@pytest.mark.reliability(item=40, fault="pull: revisions/ holding entries bringup did not make (a folder, a file, a "
                                        "link named as a commit)", variants=3,
                         checks=("others' files kept", "next run converges"))
def test_the_prune_removes_only_its_own_checkouts_and_never_through_a_link(fleet, tmp_path):
    first = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == first
    revisions = tmp_path / "cache" / "revisions"
    (revisions / "notes").mkdir()
    (revisions / "notes" / "mine.txt").write_text("mine")
    (revisions / "README").write_text("mine")
    v = victim(tmp_path)
    before = sorted(os.listdir(v))
    second = fleet.commit("two", key=fleet.ops)
    (revisions / second).symlink_to(v)  # planted under the name the next checkout takes
    got = pull(fleet.settings(), converge=ok)
    assert (got.status, got.revision) == ("applied", second), got.message
    assert (revisions / "notes" / "mine.txt").read_text() == "mine" and (revisions / "README").is_file()
    assert sorted(os.listdir(v)) == before and (v / "sub").is_dir()
    assert (revisions / second).is_dir() and not (revisions / second).is_symlink()
    assert (revisions / second / "note").read_text() == "two"
    assert not (revisions / first).exists()  # its own older checkout pruned as before


STATES = {"a key twice": '{"applied": "%s", "applied": "%s"}' % ("a" * 40, "b" * 40),
          "a time of true": '{"last": {"at": true, "status": "applied"}}',
          "a count as text": '{"last": {"at": 1, "status": "applied", "changed": "3"}}',
          "a host with an escape": '{"host": "\\u001b[31mred\\n"}',
          "100,000 digits": '{"last": {"at": 1, "status": "applied", "changed": %s}}' % ("9" * 100_000),
          "nested 100,000 deep": "[" * 100_000 + "]" * 100_000}


@pytest.mark.reliability(item=40, fault="pull: state.json with a key twice, wrong types (true, \"3\"), a host "
                                        "holding an escape sequence, 100,000 digits, deep nesting", variants=6,
                         checks=("one clear line", "rejected value not persisted"))
@pytest.mark.parametrize("text", STATES.values(), ids=STATES.keys())
def test_a_state_no_run_writes_is_started_afresh_in_one_line(tmp_path, text):
    # Before: the key twice kept the last 'applied', true was read as the time 1.0 and "3" as 3 changes, the escape
    # sequence was kept as the host's label; each taken without a word.
    from bringup.pull.record import load_state

    path = tmp_path / "state.json"
    path.write_text(text)
    state, problem = load_state(path)
    assert problem and problem.startswith(f"{path}: not a pull state bringup wrote (") and "\n" not in problem
    assert "started afresh" in problem and len(problem) < 400 and "\x1b" not in problem, problem
    assert state.last is None and state.host == "" and state.applied is None


FULL_CHILD = r'''
import json, os, sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from bringup.pull.run import Converged, Settings, pull
from bringup.pull.source import parse_rule

tmp, cache, prom = Path({tmp!r}), Path({cache!r}), Path({prom!r})

def fills_the_disk(workdir, host, settings):
    # A role's own writes fill the disk the cache is on; the converge itself succeeds.
    try:
        if {inodes!r}:  # every inode taken by empty files: no link, no file can be made there
            (cache / "fill").mkdir()
            for i in range(100000):
                open(cache / "fill" / str(i), "w").close()
        with open(cache / "filler", "wb") as f:
            while True:
                f.write(b"x" * 65536)
                f.flush()
    except OSError:
        pass
    return Converged(rc=0, changed=1)

settings = Settings(url="file://" + str(tmp / "server.git"), rule=parse_rule("main", None), cache=cache,
                    allowed_signers=tmp / "allowed_signers", name="me", prometheus=prom, lock=str(tmp / "lock"),
                    lock_wait_s=1)
got = pull(settings, converge=fills_the_disk, say=lambda _t: None)
print(json.dumps(dict(status=got.status, reason=got.reason, exit_code=got.exit_code, message=got.message,
                      current=os.readlink(cache / "current") if os.path.islink(cache / "current") else None,
                      left=sorted(n for n in os.listdir(cache) if n.startswith("."))
                           + sorted(n for n in os.listdir(prom.parent) if n.startswith(".")))))
'''


@pytest.mark.reliability(item=40, fault="pull: the disk (its blocks, or its inodes) fills during the converge, "
                                        "so that state.json (and the textfile, on the same disk or not) or the "
                                        "current link cannot be written", variants=3,
                         checks=("exit code", "report written", "no leftovers", "one clear line"))
@pytest.mark.parametrize("textfile", ["elsewhere", "same disk", "no inode left"])
def test_a_disk_full_when_the_outcome_is_written_is_a_failure_never_an_oserror(fleet, tmp_path, textfile):
    # Before: the converge applied, then save_state's ENOSPC escaped pull() as an OSError (bringup pull: exit 1,
    # 'error: ...', as if bad input), and the textfile kept saying the previous run's 'applied'.
    import json
    import shutil
    import subprocess
    import sys

    if not shutil.which("unshare"):
        pytest.fail("unshare is not installed (apt-get install util-linux)")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"no mount namespace here ({probe.stderr.strip()})")
    first = fleet.commit("one", key=fleet.ops)
    inodes = textfile == "no inode left"
    if inodes:  # applied once before: the run that fills the disk applies a second revision
        assert pull(fleet.settings(prometheus=None), converge=ok).revision == first
        fleet.commit("two", key=fleet.ops)
    cache = tmp_path / "cache"
    if inodes:  # the cache as it stands, copied onto the small disk
        shutil.copytree(cache, tmp_path / "cache.before", symlinks=True)
        shutil.rmtree(cache)
    cache.mkdir()
    prom = (cache / "m" if textfile == "same disk" else tmp_path / "m") / "bringup-pull.prom"
    child = FULL_CHILD.format(repo=str(Path(__file__).resolve().parents[2]), tmp=str(tmp_path), cache=str(cache),
                              prom=str(prom), inodes=inodes)
    fill = f'cp -a "{tmp_path / "cache.before"}/." "$0"/ && ' if inodes else ""
    p = subprocess.run(["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=8m,nr_inodes=4000 tmpfs "$0" && {fill}'
                        'mkdir -p "$1" && exec "$2" -c "$3"', str(cache), str(prom.parent), sys.executable, child],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert (got["status"], got["reason"], got["exit_code"]) == ("failed", "disk-full", 2), got
    assert f"{cache / 'state.json'}" in got["message"] and ": No space left on device" in got["message"], got
    assert "\n" not in got["message"]
    if inodes:  # the current link could not be made: the last good revision stays, and says so
        assert got["message"].startswith(f"{cache / ('.current.')}") and f"nor recorded in {cache}" in got["message"]
        assert got["current"] == f"revisions/{first}", got
    else:
        assert got["message"].startswith("applied ") and "changed=1" in got["message"]  # what the converge did
        assert "the run's outcome could not be recorded" in got["message"]
    assert got["left"] == [], got["left"]  # no temporary state or textfile left behind
    if textfile == "elsewhere":
        text = prom.read_text()
        assert 'bringup_pull_last_run_info{host="me",reason="disk-full",status="failed"} 1.0' in text, text


@pytest.mark.reliability(item=40, fault="pull: a signed revision holding reports/ (a dangling link, a report of "
                                        "its own under a provision report's name)", variants=2,
                         checks=("report written", "exit code", "next run converges"))
def test_a_revisions_own_reports_folder_is_never_taken_for_the_converges_report(fleet):
    # Before: the glob of reports/*-provision*.json stat()ed a dangling link the revision held: a FileNotFoundError
    # traceback after the converge had applied (no state written, the current link not moved).
    import json

    reports = fleet.work / "reports"
    reports.mkdir()
    (reports / "20261207T000000-provision.json").symlink_to("nothing-here")
    fake = {"hosts": [{"host": "me", "recap": {"changed": 0, "failed": 7}}]}
    (reports / "99991231T235959-provision.json").write_text(json.dumps(fake))
    good = fleet.commit("hello", key=fleet.ops)
    got = pull(fleet.settings())
    assert (got.status, got.revision, got.changed, got.failed) == ("applied", good, 1, 0), got.message
    assert fleet.current() == good and fleet.out.read_text() == "hello\n"
    kept = Path(got.report)
    assert kept.parent == fleet.tmp / "cache" / "reports" and kept.name != "99991231T235959-provision.json"
    assert json.loads(kept.read_text())["hosts"][0]["recap"]["changed"] == 1


@pytest.mark.reliability(item=40, fault="pull: a file or a FIFO under the name of the next revision's checkout",
                         variants=2, checks=("next run converges", "no hang"))
@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_file_or_fifo_under_a_checkouts_name_does_not_stop_every_run(fleet, tmp_path, kind):
    # Before: git worktree add refused it ("already exists") at this run and every later one (status error).
    first = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == first
    second = fleet.commit("two", key=fleet.ops)
    planted = tmp_path / "cache" / "revisions" / second
    if kind == "file":
        planted.write_text("x")
    else:
        os.mkfifo(planted)
    got = pull(fleet.settings(), converge=ok)
    assert (got.status, got.revision) == ("applied", second), got.message
    assert planted.is_dir() and (planted / "note").read_text() == "two"


@pytest.mark.reliability(item=40, fault="pull: an --allow-rollback left in the timer, the branch moved on and then "
                                        "force-pushed back to that revision again", variants=1,
                         checks=("nothing touched", "one clear line", "exit code"))
def test_an_allowance_left_given_moves_the_host_back_once_only(fleet):
    # Before: the role's allow_rollback (or a flag kept in a script) let the host be moved back to that revision
    # again and again, from any later one: whoever could push replayed the old signed revision at will.
    from .test_pull import git

    a = fleet.commit("one", key=fleet.ops)
    fleet.commit("two", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{a}:main")
    allowed = fleet.settings(allow_rollback=a[:12])
    assert (pull(allowed, converge=ok).revision, fleet.current()) == (a, a)
    assert pull(allowed, converge=ok).status == "applied"  # the timer's next runs, at that revision
    git(fleet.work, "reset", "--quiet", "--hard", a)
    c = fleet.commit("three", key=fleet.ops)
    assert pull(allowed, converge=ok).revision == c  # forward, the flag still given
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{a}:main")
    state = fleet.tmp / "cache" / "state.json"  # damaged meanwhile: started afresh, the spent allowance kept
    state.write_text(state.read_text().replace('"changed": 1', '"changed": -1'))
    assert '"changed": -1' in state.read_text()
    got = pull(allowed, converge=never)
    assert (got.status, got.reason, got.revision, got.exit_code) == ("refused", "rollback", a, 3), got.message
    assert f"--allow-rollback {a[:12]} was used once already" in got.message and "\n" not in got.message
    assert fleet.current() == c
    # Withdrawn for one run (still refused: older), then given again: it counts once more.
    assert pull(fleet.settings(), converge=never).reason == "rollback"
    assert (pull(allowed, converge=ok).revision, fleet.current()) == (a, a)


@pytest.mark.reliability(item=40, fault="pull: files of someone else's (*.json) in the cache's reports folder",
                         variants=1, checks=("others' files kept",))
def test_the_reports_rotation_removes_only_converge_reports(fleet, tmp_path):
    # Before: every *.json in <cache>/reports beyond the newest 20 was removed, whoever had put it there.
    from bringup.pull.run import KEEP_REPORTS

    kept = tmp_path / "cache" / "reports"
    kept.mkdir(parents=True)
    (kept / "notes.json").write_text("{}")
    (kept / "inventory-backup.json").write_text("{}")
    old = [f"20200101T0000{i:02}-provision.json" for i in range(KEEP_REPORTS + 5)]
    for name in old:
        (kept / name).write_text("{}")
    good = fleet.commit("hello", key=fleet.ops)
    got = pull(fleet.settings())
    assert (got.status, got.revision) == ("applied", good), got.message
    names = sorted(p.name for p in kept.iterdir())
    assert "notes.json" in names and "inventory-backup.json" in names
    assert Path(got.report).name in names and len([n for n in names if n.endswith("-provision.json")]) == KEEP_REPORTS
    assert old[0] not in names and old[-1] in names


@pytest.mark.reliability(item=40, fault="pull: a vault value in bringup_pull.roles (the whole value, or a list "
                                        "entry that is no known role)", variants=2,
                         checks=("secret never shown", "one clear line", "exit code"))
@pytest.mark.parametrize("where", ["whole value", "list entry"])
def test_a_vault_value_in_the_pull_roles_never_reaches_the_state_or_the_terminal(fleet, tmp_path, where):
    # Before: 'bringup_pull.roles: <the decrypted value, cut at 80> is not a list of role names' and 'unknown role
    # <the decrypted value>' were written into state.json as they were (the terminal's line alone was masked, and
    # a value cut at 80 characters not even there).
    from .test_vault import ansible_vault

    (tmp_path / "pw").write_text("host-side-password\n")
    plain = "s3cr3tvalue" + "x" * 90 if where == "whole value" else "s3cr3tvalue"
    secret = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", plain)
    block = secret.replace("\n", "\n          ")
    roles = f"roles: {block}" if where == "whole value" else f"roles:\n          - {block}"
    (fleet.work / "hosts").write_text("all:\n  hosts:\n    me:\n      ansible_connection: local\n      greeting: hi\n"
                                      f"      bringup_pull:\n        {roles}\n")
    (fleet.work / "roles").rename(fleet.work / "not-roles")  # the shipped roles: the list is needed and checked
    fleet.commit("vaulted", key=fleet.ops, hosts={})
    got = pull(fleet.settings(vault_password_files=[str(tmp_path / "pw")]), converge=never)
    assert (got.status, got.reason) == ("refused", "invalid"), got.message
    assert "bringup_pull.roles" in got.message
    assert "s3cr3t" not in (tmp_path / "cache" / "state.json").read_text()
    r = bringup("pull", *task_flags(fleet), "--vault-password-file", str(tmp_path / "pw"), cwd=tmp_path)
    assert r.returncode == 3 and "bringup_pull.roles" in r.stdout and "s3cr3t" not in r.stdout + r.stderr, r.stdout
    assert "s3cr3t" not in (tmp_path / "cache" / "state.json").read_text()


@pytest.mark.reliability(item=40, fault="pull: the current link replaced by a FIFO, a file or a link elsewhere",
                         variants=3, checks=("one clear line", "no hang", "next run converges"))
@pytest.mark.parametrize("kind", ["fifo", "file", "link elsewhere"])
def test_a_current_that_is_no_link_of_bringups_is_named_as_such_and_replaced(fleet, kind):
    # Before: the warning said 'current is missing' of a FIFO or a file standing there.
    first = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == first
    current = fleet.tmp / "cache" / "current"
    current.unlink()
    {"fifo": os.mkfifo, "file": lambda p: p.write_text("x"), "link elsewhere": lambda p: p.symlink_to("/etc")}[kind](
        current)
    second = fleet.commit("two", key=fleet.ops)
    said: list[str] = []
    got = pull(fleet.settings(), converge=ok, say=said.append)
    assert (got.status, got.revision) == ("applied", second), got.message
    assert said[0].startswith(f"warning: {current} is no link to a revision's checkout") and first[:12] in said[0]
    assert os.readlink(current) == f"revisions/{second}"


@pytest.mark.reliability(item=40, fault="pull: a vaulted value that is part of a commit id ('cafe', '1234', 'aaaa') "
                                        "masked in state.json's applied, spent_rollback and revisions", variants=3,
                         checks=("report written", "secret never shown"))
@pytest.mark.parametrize("secret", ["cafe", "1234", "aaaa"])
def test_a_secret_inside_a_commit_id_leaves_the_saved_state_whole(tmp_path, secret):
    # Before: save_state masked every text, commit ids too: 'applied': '********...' was no commit id, load_state
    # refused the file at the next run and applied and spent_rollback were lost (a spent rollback counted again).
    from bringup.pull.record import Attempt, State, load_state, save_state
    from bringup.secrets import HIDDEN, MASK

    MASK.add(secret)
    applied = ("0" * 10 + secret + "f" * 40)[:40]
    back = (secret + "1" * 40)[:40]
    assert secret in applied and secret in back
    now = time.time()
    state = State(host="gpu01", url="https://git.example/fleet.git", rule="branch:main", applied=applied,
                  spent_rollback=back, last_success=now,
                  last=Attempt(at=now, status="applied", revision=applied, message=f"converged with {secret} set"),
                  last_refusal=Attempt(at=now, status="refused", revision=back, reason="rollback",
                                       message=f"password {secret} refused"))
    path = tmp_path / "state.json"
    save_state(state, path)
    got, problem = load_state(path)
    assert problem is None, problem
    assert (got.applied, got.spent_rollback, got.last.revision, got.last_refusal.revision) == \
           (applied, back, applied, back)
    assert (got.last.status, got.last_refusal.status, got.last_refusal.reason) == ("applied", "refused", "rollback")
    # The free texts are still masked.
    assert got.last.message == f"converged with {HIDDEN} set" and got.last_refusal.message == f"password {HIDDEN} refused"
    assert f" {secret} " not in path.read_text()


@pytest.mark.reliability(item=40, fault="pull: files planted in the kept checkout of the applied revision "
                                        "(untracked, hidden by the revision's own .gitignore, a .git naming another "
                                        "repository) converged from at the next run", variants=4,
                         checks=("nothing touched", "others' files kept", "one clear line", "report written"))
@pytest.mark.parametrize("plant", ["untracked", "ignored", "git-file", "converge-outputs"])
def test_a_reused_checkout_holding_files_the_revision_does_not_is_refused_and_kept(fleet, tmp_path, plant):
    # Before: the reuse check was `git status --porcelain --untracked-files=no` in the folder (through its own .git
    # file): a group_vars/all.yml, a roles/x.py or a file the revision's .gitignore hides, written into
    # revisions/<commit>, was loaded by the next converge as if signed.
    (fleet.work / ".gitignore").write_text("local/\n")
    first = fleet.commit("one", key=fleet.ops)
    seen = []

    def converge(workdir, host, settings):
        seen.append(sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if ".git" not in p.parts))
        return ok(workdir, host, settings)

    assert pull(fleet.settings(), converge=converge).status == "applied"
    checkout = tmp_path / "cache" / "revisions" / first
    other = tmp_path / "other.git"
    planted = {"untracked": ("group_vars/all.yml", "group_vars/all.yml"), "ignored": ("local/x.yml", "local/"),
               "git-file": (".git", ".git (no worktree of this cache's repository)"),
               "converge-outputs": ("reports/last.retry", None)}[plant]
    target = checkout / planted[0]
    target.parent.mkdir(exist_ok=True)
    if plant == "git-file":  # a repository of someone else's, whose index could say anything
        subprocess.run(["git", "init", "--quiet", "--bare", str(other)], check=True)
        target.unlink()
        target.write_text(f"gitdir: {other}\n")
    else:
        target.write_text("planted: 1\n")
    (checkout / "reports" / "20261207T142849-provision.json").parent.mkdir(exist_ok=True)
    (checkout / "reports" / "20261207T142849-provision.json").write_text("{}")  # bringup's own: never counted
    got = pull(fleet.settings(), converge=converge if plant == "converge-outputs" else never)
    if planted[1] is None:
        assert got.status == "applied", got.message  # what the converge itself writes there is not foreign
        return
    assert (got.status, got.reason, got.revision) == ("refused", "tampered", first), got.message
    assert got.message.startswith(f"{checkout} (the kept checkout of the signed revision {first[:12]}) holds what "
                                  f"the revision does not: {planted[1]}; nothing applied"), got.message
    assert target.read_text().startswith("planted: 1" if plant != "git-file" else "gitdir: ")  # never removed
    assert fleet.current() == first and len(seen) == 1
    # A newer revision prunes the old checkout, but never with what it holds of someone else's.
    second = fleet.commit("two", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == second
    assert target.exists()


@pytest.mark.reliability(item=40, fault="pull: a FIFO or socket planted in a reused checkout (git status lists none), "
                                        "or a link under one of bringup's own report names in its reports/, "
                                        "passed the tamper check", variants=3,
                         checks=("nothing touched", "one clear line", "others' files kept"))
@pytest.mark.parametrize("plant", ["fifo", "socket", "report-link"])
def test_a_reused_checkout_holding_what_git_status_does_not_list_is_refused_as_tampered(fleet, tmp_path, plant):
    # Before: a FIFO at group_vars/all.yml had the signed revision refused as an inventory that does not load (its
    # fault, not the checkout's), one anywhere else was converged past; reports/last.retry -> ../hosts passed as the
    # converge's own retry file, read through by the next converge's write_retry.
    import socket

    first = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    checkout = tmp_path / "cache" / "revisions" / first
    entry = {"fifo": "group_vars/all.yml", "socket": "roles/s", "report-link": "reports/last.retry"}[plant]
    target = checkout / entry
    target.parent.mkdir(exist_ok=True)
    if plant == "fifo":
        os.mkfifo(target)
    elif plant == "socket":
        here = os.getcwd()
        os.chdir(target.parent)  # (a socket's path is at most 107 bytes: bound by its name)
        try:
            held = socket.socket(socket.AF_UNIX)
            held.bind(target.name)
            held.close()
        finally:
            os.chdir(here)
    else:
        target.symlink_to("../hosts")
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", "tampered", first), got.message
    what = {"fifo": "a FIFO", "socket": "a socket", "report-link": "a symbolic link"}[plant]
    assert f"holds what the revision does not: {entry} ({what}: no checkout or converge makes one); nothing applied" \
        in got.message and "\n" not in got.message, got.message
    assert os.path.lexists(target) and fleet.current() == first  # never removed


@pytest.mark.reliability(item=40, fault="pull: the cache moved to another folder (its checkouts' worktree records "
                                        "left behind): a kept checkout told apart from a tampered one", variants=2,
                         checks=("next run converges", "others' files kept"))
@pytest.mark.parametrize("planted", [None, "group_vars/all.yml"])
def test_a_checkout_whose_worktree_record_is_gone_is_held_to_the_signed_tree(fleet, tmp_path, planted):
    first = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    os.rename(tmp_path / "cache", tmp_path / "moved")
    checkout = tmp_path / "moved" / "revisions" / first
    if planted:
        (checkout / "group_vars").mkdir()
        (checkout / planted).write_text("planted: 1\n")
    got = pull(fleet.settings(cache=tmp_path / "moved"), converge=ok if not planted else never)
    if not planted:  # only the signed tree there: checked out afresh, applied
        assert (got.status, got.revision) == ("applied", first), got.message
        assert (checkout / "note").read_text() == "one"
        return
    assert (got.status, got.reason) == ("refused", "tampered") and f"does not: {planted};" in got.message
    assert (checkout / planted).read_text() == "planted: 1\n"


@pytest.mark.reliability(item=40, fault="pull: a tracked file of the kept checkout edited under the worktree index's "
                                        "own flags (git update-index --assume-unchanged, --skip-worktree) or with its "
                                        "size and times put back: converged from as the signed tree", variants=3,
                         checks=("nothing touched", "next run converges"))
@pytest.mark.parametrize("hide", ["--assume-unchanged", "--skip-worktree", "touch -r"])
def test_a_reused_checkout_is_held_to_the_signed_tree_by_content_not_by_the_index(fleet, tmp_path, hide):
    # Before: the reuse check was `git status` through the worktree's own index, whose stat cache and flags anyone
    # with a shell in the checkout sets: a file edited after `git update-index --assume-unchanged` read as signed.
    first = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    checkout = tmp_path / "cache" / "revisions" / first
    note = checkout / "note"
    before = os.stat(note)
    if hide != "touch -r":
        subprocess.run(["git", "-C", str(checkout), "update-index", hide, "note"], check=True)
    note.write_text("ONE")  # the same size
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    seen = []

    def converge(workdir, host, settings):
        seen.append((workdir / "note").read_text())
        return ok(workdir, host, settings)

    got = pull(fleet.settings(), converge=converge)
    assert (got.status, got.revision, seen) == ("applied", first, ["one"]), (got.message, seen)


@pytest.mark.parametrize("entry, foreign", [
    ("reports/20261207T101010-provision.json", False),
    ("reports/20261207T101010-provision-2.retry", False),
    ("reports/last.retry", False),  # (a regular file: not_checked_out holds them to that)
    ("reports/.20261207T101010-provision.json.k3_x9abc.tmp", False),  # a converge killed mid-write leaves it
    ("reports/.last.retry.ab12cd34.tmp", False),
    ("reports/.20261207T101010-provision.json", True),  # bringup never names a report so
    ("reports/notes.tmp", True),
    ("roles/__pycache__/demo.cpython-311.pyc", True),  # bytecode is code: a planted one is never taken
    ("group_vars/all.yml", True),
])
def test_only_the_converges_own_report_files_are_not_foreign_in_a_reused_checkout(entry, foreign):
    from bringup.pull.source import _status_entries

    assert _status_entries(f"?? {entry}\0") == (False, entry if foreign else None)
