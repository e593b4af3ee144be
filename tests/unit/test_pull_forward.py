"""Pull moves forward only (issue 40 item 5), links out of a checkout (item 2), and which roles a pull converges
(issue 41 item 8).

Real Git throughout, as in test_pull.py (its Fleet: ssh-keygen keys, a bare repository as the server, commits
signed by Git itself); a full disk is a real tmpfs of a few MiB, mounted in a mount namespace of the test's own
(``unshare``), so nothing outside the test sees it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.pull import record
from bringup.pull.run import EXIT, Converged, Settings, provision_argv, pull
from bringup.pull.source import Source, parse_rule

from .test_pull import REPO, Fleet, bringup, git, metrics, never, task_flags


@pytest.fixture()
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


def seen(store: list):
    def converge(workdir: Path, host: str, settings: Settings) -> Converged:
        store.append(settings)
        return Converged(rc=0, changed=1)
    return converge


def state_of(fleet: Fleet) -> record.State:
    return record.State.model_validate_json((fleet.tmp / "cache" / "state.json").read_text())


def checkouts(fleet: Fleet) -> list[str]:
    return sorted(p.name for p in (fleet.tmp / "cache" / "revisions").iterdir())


# -- 1. Forward only -------------------------------------------------------------------------------------------

@pytest.mark.reliability(item=40, fault="pull: a branch force-pushed back to an older commit (an ancestor)",
                         variants=1, checks=("nothing touched", "report written", "exit code"))
def test_a_branch_moved_back_to_an_ancestor_is_refused_until_that_revision_is_allowed(fleet):
    old = fleet.commit("one", key=fleet.ops)
    new = fleet.commit("two", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).revision == new
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{old}:main")
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", "rollback", old), got.message
    assert f"revision {old[:12]} (main) moves back: it is older than the applied {new[:12]}" in got.message
    assert f"--allow-rollback {old[:12]}" in got.message and EXIT[got.status] == 3
    assert fleet.current() == new and checkouts(fleet) == [new]


@pytest.mark.reliability(item=40, fault="pull --allow-rollback naming another revision (a mistyped id, the applied "
                                        "one's): refused with the same words as without it, the flag passed over "
                                        "unsaid", variants=1, checks=("nothing touched", "one clear line"))
def test_an_allow_rollback_naming_another_revision_is_said_to_name_another(fleet):
    old = fleet.commit("one", key=fleet.ops)
    new = fleet.commit("two", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).revision == new
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{old}:main")
    got = pull(fleet.settings(allow_rollback=new[:8]), converge=never)
    assert (got.status, got.reason) == ("refused", "rollback"), got.message
    assert f"; --allow-rollback {new[:8]} does not name it; allow that very revision: --allow-rollback {old[:12]} (" \
        in got.message, got.message
    assert fleet.current() == new


@pytest.mark.reliability(item=40, fault="pull: the current link removed, then the branch force-pushed back (the "
                                        "state still names the newer revision)", variants=2,
                         checks=("nothing touched", "one clear line", "exit code"))
@pytest.mark.parametrize("link", ["removed", "moved back"])
def test_rollback_is_refused_from_the_state_when_the_current_link_is_gone(fleet, link):
    old = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).revision == old
    new = fleet.commit("two", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).revision == new
    current = fleet.tmp / "cache" / "current"
    current.unlink()
    if link == "moved back":
        current.symlink_to(Path("revisions") / old)
        (fleet.tmp / "cache" / "revisions" / old).mkdir(exist_ok=True)
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{old}:main")
    said = []
    got = pull(fleet.settings(), converge=never, say=said.append)
    assert (got.status, got.reason, got.revision) == ("refused", "rollback", old), got.message
    assert f"older than the applied {new[:12]}" in got.message
    assert any(w.startswith(f"warning: {current}") and new[:12] in w for w in said), said
    assert state_of(fleet).applied == new  # kept: the next run refuses it again
    assert pull(fleet.settings(), converge=never).reason == "rollback"
    s = state_of(fleet)
    assert s.last_refusal.reason == "rollback" and s.last_refusal.revision == old and s.applied == new
    m = metrics(fleet.tmp / "bringup-pull.prom")
    assert m[("bringup_pull_last_refusal_info", (("host", "me"), ("reason", "rollback"), ("revision", old)))] == 1
    assert m[("bringup_pull_applied_info", (("host", "me"), ("revision", new)))] == 1
    # Allowed for another revision: still refused.  For this one (a unique start of its id): applied.
    assert pull(fleet.settings(allow_rollback=new[:8]), converge=never).reason == "rollback"
    got = pull(fleet.settings(allow_rollback=old[:7].upper().lower()), converge=seen([]))
    assert (got.status, got.revision) == ("applied", old) and fleet.current() == old
    # From there the timer's runs (no flag) go on at that revision, and forward again when main moves on.
    assert pull(fleet.settings(), converge=seen([])).status == "applied"
    git(fleet.work, "reset", "--quiet", "--hard", old)
    newest = fleet.commit("three", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).revision == newest


@pytest.mark.reliability(item=40, fault="pull: a tag rule whose highest tag now names an older commit, or a "
                                        "rewritten history", variants=2, checks=("nothing touched", "report written"))
def test_a_tag_pointing_back_or_a_rewritten_history_is_refused(fleet):
    first = fleet.commit("one", key=fleet.ops, tag="release-1.0")
    second = fleet.commit("two", key=fleet.ops, tag="release-1.1")
    rule = parse_rule(None, "release-*")
    assert pull(fleet.settings(rule=rule), converge=seen([])).revision == second
    git(fleet.work, "tag", "release-2.0", first)  # the highest tag, on the older commit
    git(fleet.work, "push", "--quiet", "--tags", f"file://{fleet.server}")
    got = pull(fleet.settings(rule=rule), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", "rollback", first), got.message
    assert "(release-2.0) moves back" in got.message and fleet.current() == second
    # A history rewritten (same content, a new commit that does not descend from the applied one).
    git(fleet.work, "reset", "--quiet", "--hard", first)
    other = fleet.commit("two, rewritten", key=fleet.ops)
    got = pull(fleet.settings(), converge=never)
    assert (got.reason, got.revision) == ("rollback", other) and "does not descend from the applied" in got.message


def test_a_short_id_that_is_also_a_branch_name_is_read_as_a_commit_id(fleet):
    """``--allow-rollback`` names an object, never a ref: a branch called like the start of the applied id
    (pointing at the older commit) does not allow it."""
    old = fleet.commit("one", key=fleet.ops)
    new = fleet.commit("two", key=fleet.ops)
    pull(fleet.settings(), converge=seen([]))
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{old}:main", f"{old}:refs/heads/{new[:8]}")
    got = pull(fleet.settings(allow_rollback=new[:8]), converge=never)
    assert got.reason == "rollback" and fleet.current() == new
    source = Source("", fleet.tmp / "cache", fleet.allowed)
    assert source.names(old[:8], old) and not source.names(new[:8], old)


@pytest.mark.reliability(item=40, fault="pull --allow-rollback with a value that is not a commit id", variants=3,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("value", ["HEAD~1", "xyz", "abc"])
def test_a_bad_allow_rollback_value_is_one_line(fleet, value):
    fleet.commit("one", key=fleet.ops)
    r = bringup("pull", *task_flags(fleet), "--allow-rollback", value, cwd=fleet.tmp)
    assert r.returncode == 1 and r.stderr.startswith("error: --allow-rollback"), r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (fleet.tmp / "cache").exists()  # nothing fetched


def test_the_task_applies_an_allowed_rollback(fleet):
    old = fleet.commit("one", key=fleet.ops)
    fleet.commit("two", key=fleet.ops)
    assert bringup("pull", *task_flags(fleet), cwd=fleet.tmp).returncode == 0
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{old}:main")
    r = bringup("pull", *task_flags(fleet), cwd=fleet.tmp)
    assert r.returncode == 3 and r.stdout.strip().splitlines()[-1].startswith(f"refused: revision {old[:12]}")
    r = bringup("pull", *task_flags(fleet), "--allow-rollback", old, cwd=fleet.tmp)
    assert r.returncode == 0 and fleet.current() == old, r.stdout + r.stderr


# -- 2. A key taken out of the allowed signers ----------------------------------------------------------------

@pytest.mark.reliability(item=40, fault="pull: a signing key removed from the allowed signers after its revision "
                                        "was applied", variants=2, checks=("nothing touched", "report written"))
def test_a_key_removed_from_the_allowed_signers_stays_revoked_even_for_the_applied_revision(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).status == "applied"
    fleet.allowed.write_text(f"other@example.org {(fleet.tmp / 'stranger.pub').read_text()}")
    got = pull(fleet.settings(), converge=never)  # the applied revision itself, re-converged at the next tick
    assert (got.status, got.reason, got.revision) == ("refused", "unknown-key", good), got.message
    newer = fleet.commit("hello 2", key=fleet.ops)
    got = pull(fleet.settings(), converge=never)
    assert (got.reason, got.revision) == ("unknown-key", newer)
    assert state_of(fleet).last_refusal.reason == "unknown-key"
    assert fleet.current() == good and checkouts(fleet) == [good]


# -- 3. A full disk ----------------------------------------------------------------------------------------------

DISK_FULL_CHILD = r'''
import json, os, subprocess, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from bringup.pull.run import Converged, Settings, pull
from bringup.pull.source import parse_rule

cache, mountpoint, server, allowed, tmp = (Path({cache!r}), Path({mountpoint!r}), {server!r}, Path({allowed!r}),
                                           Path({tmp!r}))
settings = Settings(url="file://" + server, rule=parse_rule("main", None), cache=cache,
                    allowed_signers=allowed, name="me", prometheus=tmp / "bringup-pull.prom",
                    lock=str(tmp / "lock"), lock_wait_s=5)
ok = lambda *a: Converged(rc=0, changed=1)
out = {{}}
def leftovers():
    return sorted([str(p.relative_to(cache)) for p in cache.rglob("tmp_*")]
                  + [str(p.relative_to(cache)) for p in cache.glob(".*")]
                  + [str(p.relative_to(cache)) for p in (cache / "revisions").glob(".*")])
def step(name):
    a = pull(settings, converge=ok, say=lambda _l: None)
    out[name] = {{"status": a.status, "reason": a.reason, "message": a.message, "revision": a.revision,
                 "leftovers": leftovers(),
                 "state": json.loads((cache / "state.json").read_text()),
                 "prom": (tmp / "bringup-pull.prom").read_text(),
                 "revisions": sorted(p.name for p in (cache / "revisions").iterdir()),
                 "worktrees": sorted(p.name for p in (cache / "repo.git" / "worktrees").glob("*"))}}
step("first")
input()  # the test pushes the big revision
step("full")
subprocess.run(["mount", "-o", "remount,size=64m", str(mountpoint)], check=True)
step("room")
print(json.dumps(out))
'''


@pytest.mark.reliability(item=40, fault="pull: the disk fills during the fetch (a 3 MiB tmpfs under the cache), "
                                        "or during the checkout (a 2 MiB tmpfs under the revisions)",
                         variants=2, checks=("no leftovers", "report written", "next run converges", "exit code"))
@pytest.mark.parametrize("where,size,words", [("cache", "3m", "fetch from"), ("revisions", "2m", "checkout of")])
def test_a_full_disk_is_a_failure_and_leaves_no_temporary_pack_or_checkout(fleet, where, size, words):
    if not shutil.which("unshare"):
        pytest.fail("unshare is not installed (apt-get install util-linux)")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"no mount namespace here ({probe.stderr.strip()})")
    cache = fleet.tmp / "cache"
    mountpoint = cache if where == "cache" else cache / "revisions"
    mountpoint.mkdir(parents=True)
    small = fleet.commit("hello", key=fleet.ops)
    child = DISK_FULL_CHILD.format(repo=str(REPO), cache=str(cache), mountpoint=str(mountpoint),
                                   server=str(fleet.server), allowed=str(fleet.allowed), tmp=str(fleet.tmp))
    p = subprocess.Popen(["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$0" && '
                          'exec "$1" -c "$2"', str(mountpoint), sys.executable, child],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # 4 MiB that do not compress, over 200 files: the fetch writes a pack (tmp_pack_*), the checkout 4 MiB.
        blobs = fleet.work / "blobs"
        blobs.mkdir()
        for i in range(200):
            (blobs / f"b{i}").write_bytes(os.urandom(20 << 10))
        big = fleet.commit("big", key=fleet.ops)
        out, err = p.communicate("\n", timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err[-3000:]
    run = json.loads(out.strip().splitlines()[-1])
    assert run["first"]["status"] == "applied" and run["first"]["revision"] == small
    full = run["full"]
    assert (full["status"], full["reason"]) == ("failed", "disk-full"), full["message"]
    assert full["message"].startswith(words) and "the disk is full" in full["message"]
    assert f"still at {small[:12]}" in full["message"]
    assert full["leftovers"] == [], full["leftovers"]  # no tmp_pack_*, tmp_obj_*, half checkout
    assert full["state"]["last"]["status"] == "failed" and full["state"]["applied"] == small
    assert full["state"]["last"]["exit_code"] == EXIT["failed"]
    assert 'bringup_pull_status{host="me",status="failed"} 1.0' in full["prom"]
    assert 'bringup_pull_last_run_info{host="me",reason="disk-full",status="failed"} 1.0' in full["prom"]
    assert full["revisions"] == [small] and len(full["worktrees"]) == 1  # no half worktree registered
    room = run["room"]
    assert (room["status"], room["revision"]) == ("applied", big), room["message"]
    assert room["revisions"] == [big] and room["leftovers"] == []


def test_temporary_files_of_a_cut_fetch_are_removed_before_the_next(fleet):
    """What a fetch killed mid-way (SIGKILL: no cleanup of its own) leaves, removed by the next run."""
    fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=seen([]))
    objects = fleet.tmp / "cache" / "repo.git" / "objects"
    planted = [objects / "pack" / "tmp_pack_Ab12Cd", objects / "pack" / "tmp_idx_Ab12Cd", objects / "ab" / "tmp_obj_x"]
    for f in planted:
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(b"PACK" + os.urandom(64))
    fleet.commit("hello 2", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).status == "applied"
    assert not any(f.exists() for f in planted)


# -- 4. A tag naming a tree ---------------------------------------------------------------------------------------

@pytest.mark.reliability(item=40, fault="pull: the highest tag names a tree or a blob, not a commit", variants=2,
                         checks=("nothing touched", "report written", "one clear line"))
@pytest.mark.parametrize("kind,obj", [("tree", "HEAD^{tree}"), ("blob", "HEAD:note")])
def test_a_tag_naming_a_tree_or_a_blob_is_refused_with_its_real_reason(fleet, kind, obj):
    good = fleet.commit("one", key=fleet.ops, tag="v1")
    rule = parse_rule(None, "v*")
    assert pull(fleet.settings(rule=rule), converge=seen([])).revision == good
    git(fleet.work, "tag", "v2", obj)
    git(fleet.work, "push", "--quiet", "--tags", f"file://{fleet.server}")
    got = pull(fleet.settings(rule=rule), converge=never)
    assert (got.status, got.reason) == ("refused", "not-a-commit"), got.message
    assert f"tag v2 of file://{fleet.server} names a {kind}, not a commit" in got.message
    assert fleet.current() == good and state_of(fleet).last_refusal.reason == "not-a-commit"


# -- 5. Links out of the checkout ------------------------------------------------------------------------------

@pytest.mark.reliability(item=40, fault="pull: a signed revision holding a symbolic link out of its checkout "
                                        "(absolute, ../, through another link)", variants=4,
                         checks=("nothing touched", "report written"))
@pytest.mark.parametrize("where,target", [
    ("group_vars/all.yml", "/etc/shadow"),
    ("host_vars/me.yml", "../../../../../etc/hostname"),
    ("roles/extra.py", "../.."),
    ("templates/demo/x.j2", "SUB_B/../../.."),  # SUB_B (sub/b) -> ../x: only the real walk sees it leave
])
def test_a_link_out_of_the_checkout_is_refused_before_anything_reads_it(fleet, where, target):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=seen([]))
    link = fleet.work / where
    link.parent.mkdir(parents=True, exist_ok=True)
    if "SUB_B" in target:
        (fleet.work / "sub").mkdir()
        os.symlink("../x", fleet.work / "sub" / "b")
        target = os.path.relpath(fleet.work / "sub" / "b", link.parent) + "/../../.."
    os.symlink(target, link)
    bad = fleet.commit("linked", key=fleet.ops)
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", "link-out", bad), got.message
    assert f"symbolic link out of its checkout: {where} -> {target}" in got.message
    assert fleet.current() == good and checkouts(fleet) == [good]  # the refused checkout removed


def _walks_of(monkeypatch, folder_name: str) -> list[str]:
    """The walks of a checkout named ``folder_name`` (a commit) the pull's checks make, recorded."""
    from bringup.pull import source

    walks: list[str] = []
    real = source.walk

    def counting(top, *a, **kw):
        if os.path.basename(os.fspath(top)) == folder_name:
            walks.append(os.fspath(top))
        return real(top, *a, **kw)

    monkeypatch.setattr(source, "walk", counting)
    return walks


def test_a_kept_checkout_is_walked_once_per_run_for_both_its_checks(fleet, monkeypatch):
    # Before: Source.differs walked it for entries no checkout makes (not_checked_out), then run.py walked it again
    # for links out (links_out): two walks of every file of a reused checkout at every run.
    good = fleet.commit("hello", key=fleet.ops)
    walks = _walks_of(monkeypatch, good)
    assert pull(fleet.settings(), converge=seen([])).status == "applied"
    assert len(walks) == 1  # a fresh checkout: its link check
    walks.clear()
    assert pull(fleet.settings(), converge=seen([])).status in ("applied", "unchanged")
    assert len(walks) == 1, walks  # reused: one walk for the tamper check and the link check together


def test_a_kept_checkout_holding_a_link_out_is_still_refused_from_the_one_walk(fleet, monkeypatch):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=seen([]))
    os.symlink("/etc/passwd", fleet.work / "evil")
    bad = fleet.commit("linked", key=fleet.ops)
    kept = Source._drop
    monkeypatch.setattr(Source, "_drop", lambda self, path: None)  # the refused checkout left in place (a crash)
    assert pull(fleet.settings(), converge=never).reason == "link-out"
    monkeypatch.setattr(Source, "_drop", kept)
    walks = _walks_of(monkeypatch, bad)
    checked: list[int] = []
    real_links = Source.links_out_of

    def links(self, checkout):
        found = real_links(self, checkout)
        checked.append(len(walks))  # the walks made by the time both checks are answered (the prune walks later)
        return found

    monkeypatch.setattr(Source, "links_out_of", links)
    got = pull(fleet.settings(), converge=never)  # the kept checkout is exactly the signed tree: reused
    assert (got.status, got.reason) == ("refused", "link-out") and "evil -> /etc/passwd" in got.message, got.message
    assert checked == [1] and fleet.current() == good


@pytest.mark.reliability(item=40, fault="pull: a signed revision 1,200 folders deep (os.walk's RecursionError "
                                        "in the link check, pathlib's rglob in the roles manifest, os.walk in a "
                                        "models folder's listing)", variants=3,
                         checks=("one clear line", "nothing touched"))
def test_a_revision_a_thousand_folders_deep_is_read_without_recursion(fleet, tmp_path):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=seen([]))
    deep = fleet.work / "roles" / "/".join(["d"] * 1200)
    subprocess.run(["mkdir", "-p", str(deep)], check=True)  # pathlib's mkdir(parents=True) recurses too
    (deep / "x.py").write_text("x = 1\n")
    os.symlink("/etc/passwd", deep / "evil")
    bad = fleet.commit("deep", key=fleet.ops)
    got = pull(fleet.settings(), converge=never)  # was: RecursionError out of links_out, a traceback
    assert (got.status, got.reason, got.revision) == ("refused", "link-out", bad), got.message
    assert "roles/d/d/d/" in got.message and "-> /etc/passwd" in got.message and "\n" not in got.message
    assert fleet.current() == good
    # The other two readers of a whole tree: the roles manifest's list of role sources, a models folder's files.
    from bringup.engine.roles_manifest import _role_sources
    from bringup.resources.tree import local_tree

    (deep / "evil").unlink()
    assert str(deep / "x.py") in _role_sources(fleet.work / "roles")
    assert "d/" * 1200 + "x.py" in local_tree(fleet.work / "roles")
    subprocess.run(["rm", "-rf", str(fleet.work / "roles" / "d")], check=True)  # shutil.rmtree recurses too


def test_links_inside_the_checkout_are_kept(fleet):
    (fleet.work / "group_vars").mkdir()
    (fleet.work / "group_vars" / "common.yml").write_text("greeting: hi\n")
    os.symlink("common.yml", fleet.work / "group_vars" / "all.yml")
    os.symlink("../templates", fleet.work / "roles" / "t")
    good = fleet.commit("hello", key=fleet.ops)
    assert pull(fleet.settings(), converge=seen([])).revision == good


# -- 6. Which roles (issue 41 item 8) ----------------------------------------------------------------------------

def inventory(roles=None, pull_set=True) -> dict:
    me = {"ansible_connection": "local", "greeting": "hi"}
    if pull_set:
        me["bringup_pull"] = {"url": "file:///srv/fleet.git", "allowed_signers": ["ops@example.org ssh-ed25519 AAAA"],
                              **({"roles": roles} if roles is not None else {})}
    return {"all": {"hosts": {"me": me}}}


@pytest.mark.reliability(item=41, fault="pull: a repository without roles/ and no bringup_pull.roles", variants=1,
                         checks=("nothing touched", "report written"))
def test_without_roles_in_the_repository_only_the_roles_bringup_pull_names_converge(fleet):
    shutil.rmtree(fleet.work / "roles")
    fleet.commit("no roles", key=fleet.ops, hosts=inventory())
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("refused", "no-roles") and "bringup_pull.roles" in got.message
    assert fleet.current() is None
    given = []
    wanted = fleet.commit("two roles", key=fleet.ops, hosts=inventory(["sysctl", "cpu_tuning"]))
    got = pull(fleet.settings(), converge=seen(given))
    assert (got.status, got.revision) == ("applied", wanted) and given[-1].roles == ["sysctl", "cpu_tuning"]
    argv = provision_argv("me", given[-1], fleet.tmp)
    assert argv[argv.index("--roles") + 1] == "sysctl,cpu_tuning"


@pytest.mark.parametrize("roles,words", [(["sysctl", "nope"], "unknown role nope"), ("sysctl", "not a list"),
                                         ([], "not a list"), (["../x"], "not a list")])
def test_bad_pull_roles_are_refused_in_one_line(fleet, roles, words):
    shutil.rmtree(fleet.work / "roles")
    fleet.commit("bad roles", key=fleet.ops, hosts=inventory(roles))
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("refused", "invalid") and words in got.message, got.message
    assert "\n" not in got.message


def test_the_repository_own_roles_run_all_or_those_named(fleet):
    given = []
    fleet.commit("own", key=fleet.ops, hosts=inventory())
    pull(fleet.settings(), converge=seen(given))
    assert given[-1].roles is None and "--roles" not in provision_argv("me", given[-1], fleet.tmp)
    fleet.commit("own, named", key=fleet.ops, hosts=inventory(["demo"]))
    pull(fleet.settings(), converge=seen(given))
    assert given[-1].roles == ["demo"]
    fleet.commit("own, unknown", key=fleet.ops, hosts=inventory(["sysctl"]))  # not one of the repository's
    got = pull(fleet.settings(), converge=never)
    assert got.reason == "invalid" and "the repository has demo" in got.message


def test_a_real_converge_runs_only_the_named_roles(fleet):
    """Through provision itself: the repository's roles demo and other, bringup_pull.roles [demo]."""
    other = fleet.tmp / "applied" / "other.conf"
    (fleet.work / "roles" / "__init__.py").write_text("ORDER = ['demo', 'other']\n")
    (fleet.work / "roles" / "other.py").write_text(
        "from bringup.resources import File\n\ndef resources(host):\n"
        f"    return [File({str(other)!r}, content='x\\n', owner=None, group=None)]\n")
    hosts = inventory(["demo"])
    hosts["all"]["hosts"]["me"]["greeting"] = "only demo"
    good = fleet.commit("named", key=fleet.ops, hosts=hosts)
    got = pull(fleet.settings())
    assert (got.status, got.revision) == ("applied", good), got.message
    assert fleet.out.read_text() == "only demo\n" and not other.exists()


# -- 7. The node exporter's textfile folder (issue 41 item 8) ---------------------------------------------------

def exporter(argv0: str, *flags: str) -> subprocess.Popen:
    """A real process whose command line is a node exporter's (python, named argv0, sleeping)."""
    return subprocess.Popen([argv0, "-c", "import time; time.sleep(60)", *flags], executable=sys.executable)


@pytest.mark.parametrize("argv0,flags", [
    ("/usr/bin/prometheus-node-exporter", ("--collector.textfile.directory", "{d}")),
    ("node_exporter", ("--collector.textfile.directory={d}",)),
    ("node_exporter", ("--path.rootfs=/host", "--collector.textfile.directory=/host{d}")),  # in a container
])
def test_auto_finds_the_folder_a_running_node_exporter_reads(tmp_path, argv0, flags):
    d = tmp_path / "textfiles"
    d.mkdir()
    p = exporter(argv0, *(f.format(d=d) for f in flags))
    try:
        for _ in range(100):  # its command line is there once exec is done
            if (Path("/proc") / str(p.pid) / "cmdline").read_bytes().startswith(argv0.encode()):
                break
            time.sleep(0.05)
        folder, how = record.textfile_folder(folders=(str(tmp_path / "debian"), str(tmp_path / "other")))
    finally:
        p.kill()
        p.wait()
    assert folder == d and f"(pid {p.pid}) reads" in how


def test_auto_prefers_debians_folder_then_makes_the_old_default(tmp_path):
    debian, other = tmp_path / "var-lib-prometheus-node-exporter", tmp_path / "textfile_collector"
    folders = (str(debian), str(other))
    assert record.textfile_folder(proc=tmp_path / "no-proc", folders=folders)[0] == other  # none: the last
    other.mkdir()
    debian.mkdir()  # Debian's prometheus-node-exporter package installed
    assert record.textfile_folder(proc=tmp_path / "no-proc", folders=folders) == (debian, f"{debian} exists")


def _fake_proc(tmp_path: Path, folder: Path, uid: int) -> Path:
    """A /proc holding one node exporter (pid 4242) running as ``uid`` and naming ``folder``."""
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cmdline").write_bytes(b"node_exporter\0--collector.textfile.directory=" + bytes(folder) + b"\0")
    (proc / "4242" / "status").write_text(f"Name:\tnode_exporter\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    return proc


@pytest.mark.parametrize("exporter_uid,folder_uid,mode,why", [
    (1234, 0, 0o755, "it runs as user 1234, neither root nor the folder's owner (0)"),
    (1234, 1234, 0o755, None),                     # the exporter's own folder: taken
    (0, 1234, 0o755, "the folder is owned by user 1234, neither root nor the exporter's user"),
    (0, 0, 0o777, "the folder is writable by others"),
    (0, 0, 0o1777, "the folder is writable by others"),  # /tmp: anyone plants a link there
    (0, 0, 0o755, None),
])
def test_auto_trusts_only_an_exporter_of_root_or_the_folders_owner(tmp_path, exporter_uid, folder_uid, mode, why):
    """F1: ``--prometheus auto`` takes a node exporter's folder only when the exporter runs as root or as the
    folder's owner, and the folder is owned by root or that user and not writable by others; else one line
    says why, and the usual folders are used."""
    if os.geteuid() != 0:
        pytest.skip("chown to other users needs root")
    d = tmp_path / "textfiles"
    d.mkdir()
    os.chown(d, folder_uid, 0)
    d.chmod(mode)
    debian = tmp_path / "debian"
    debian.mkdir()
    skipped: list[str] = []
    folder, how = record.textfile_folder(proc=_fake_proc(tmp_path, d, exporter_uid), folders=(str(debian),),
                                         skipped=skipped)
    if why is None:
        assert (folder, how, skipped) == (d, f"node_exporter (pid 4242) reads {d}", [])
    else:
        assert (folder, how) == (debian, f"{debian} exists")
        assert skipped == [f"node_exporter (pid 4242) reads {d}, not taken: {why}"]


def test_auto_refuses_an_exporter_that_runs_as_several_users(tmp_path):
    """A setuid program started as node_exporter (real user 1234, effective root) is not root's exporter."""
    d = tmp_path / "textfiles"
    d.mkdir()
    proc = _fake_proc(tmp_path, d, 0)
    (proc / "4242" / "status").write_text("Uid:\t1234\t0\t0\t0\n")
    skipped: list[str] = []
    folder, _ = record.textfile_folder(proc=proc, folders=(str(tmp_path / "other"),), skipped=skipped)
    assert folder == tmp_path / "other"
    assert skipped == [f"node_exporter (pid 4242) reads {d}, not taken: it runs as several users (0, 1234)"]


@pytest.mark.reliability(item=40, fault="pull: the converge killed by a signal (SIGKILL, the OOM killer)",
                         variants=2, checks=("one clear line",))
@pytest.mark.parametrize("how", ["killed", "exit 5"])
def test_a_converge_ended_by_a_signal_is_said_so_not_exit_minus_nine(tmp_path, monkeypatch, how):
    # Before: 'bringup provision ended with exit -9', an exit status no program has.
    from bringup.pull import run

    body = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)" if how == "killed" else "raise SystemExit(5)"
    monkeypatch.setattr(run, "provision_argv", lambda host, settings, pycache: [sys.executable, "-c", body])
    (tmp_path / "reports").mkdir()
    settings = Settings(url="file:///nowhere", rule=parse_rule("main", None), cache=tmp_path / "cache",
                        allowed_signers=tmp_path / "allowed")
    done = run.provision_here(tmp_path, "me", settings)
    want = "bringup provision was killed by SIGKILL" if how == "killed" else "bringup provision exited 5"
    assert (done.rc, done.message) == (-9 if how == "killed" else 5, want)
