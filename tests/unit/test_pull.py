"""Pull mode (issue 33): Git's own signature verification decides, a refused revision leaves the last good one
applied, and every outcome lands in the state and the textfile.

Real Git throughout: keys made by ssh-keygen in the test's folder, a bare repository standing in for the server
(a file:// URL: no network), commits signed (or not) by Git itself.  The converge is bringup provision itself
over the local connection, in a project whose one role writes a file under the test's folder.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bringup.errors import InputError
from bringup.pull import record
from bringup.pull.run import EXIT, Converged, Settings, pull
from bringup.pull.source import Refused, Source, parse_rule

REPO = Path(__file__).resolve().parents[2]

ROLE = '''
from bringup.resources import File

def resources(host):
    return [File({out!r}, content=host.vars["greeting"] + "\\n", owner=None, group=None)]
'''


SLOW = '''
from bringup.ssh.command import sh
from bringup.resources import Command

def resources(host):
    return [Command("slow step", sh("touch %s; sleep 2; touch %s", {started!r}, {started!r} + ".done"),
                    creates={started!r} + ".done")]
'''


def git(cwd: Path, *args: str, key: Path | None = None) -> str:
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"] if key else []
    p = subprocess.run(["git", "-c", "user.name=ops", "-c", "user.email=ops@example.org", *sign, *args], cwd=cwd,
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def keygen(path: Path, comment: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path


class Fleet:
    """A server (bare repository), an operator's clone that commits and pushes, and this host's pull settings."""

    def __init__(self, tmp: Path, order: tuple[str, ...] = ("demo",)):
        self.tmp = tmp
        self.ops = keygen(tmp / "ops", "ops")
        self.stranger = keygen(tmp / "stranger", "stranger")
        self.allowed = tmp / "allowed_signers"
        self.allowed.write_text(f"ops@example.org {(tmp / 'ops.pub').read_text()}")
        self.server = tmp / "server.git"
        git(tmp, "init", "--quiet", "--bare", str(self.server))
        self.work = tmp / "work"
        git(tmp, "init", "--quiet", "-b", "main", str(self.work))
        self.out = tmp / "applied" / "greeting.conf"
        (self.work / "roles").mkdir()
        (self.work / "roles" / "__init__.py").write_text(f"ORDER = {list(order)!r}\n")
        (self.work / "roles" / "demo.py").write_text(ROLE.format(out=str(self.out)))
        if "slow" in order:
            (self.work / "roles" / "slow.py").write_text(SLOW.format(started=str(tmp / "slow.started")))
        (self.work / "templates" / "demo").mkdir(parents=True)
        (self.work / "templates" / "demo" / ".keep").write_text("")
        self.out.parent.mkdir()

    def commit(self, greeting: str, key: Path | None = None, hosts: dict | None = None, tag: str | None = None,
               push: str = "main") -> str:
        hosts = hosts if hosts is not None else {"all": {"hosts": {"me": {"ansible_connection": "local",
                                                                          "greeting": greeting}}}}
        inv = self.work / "hosts"
        if hosts:
            inv.write_text(yaml.safe_dump(hosts))
        elif hosts is not None and inv.exists() and greeting != "vaulted":
            git(self.work, "rm", "--quiet", "hosts")
        (self.work / "note").write_text(greeting)
        git(self.work, "add", "-A")
        git(self.work, "commit", "--quiet", *(["-S"] if key else []), "-m", greeting, key=key)
        commit = git(self.work, "rev-parse", "HEAD")
        if tag:
            git(self.work, "tag", tag)
        git(self.work, "push", "--quiet", "--force", "--tags", f"file://{self.server}", f"HEAD:{push}")
        return commit

    def settings(self, **kw) -> Settings:
        base = dict(url=f"file://{self.server}", rule=parse_rule("main", None), cache=self.tmp / "cache",
                    allowed_signers=self.allowed, name="me", prometheus=self.tmp / "bringup-pull.prom",
                    lock=str(self.tmp / "lock"), lock_wait_s=1)
        base.update(kw)
        return Settings(**base)

    def current(self) -> str | None:
        return Source("", self.tmp / "cache", self.allowed).applied()


@pytest.fixture()
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path)


def never(*_a):
    raise AssertionError("a refused revision reached the converge")


def ok(workdir: Path, host: str, settings: Settings) -> Converged:
    """A converge that only records what it was given (the real one is run by the first test)."""
    ok.seen.append((workdir, host))
    return Converged(rc=0, changed=1)


ok.seen = []


def metrics(path: Path) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(path.read_text()) for s in fam.samples}


def test_a_signed_revision_converges_this_host_through_the_local_connection(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    said = []
    got = pull(fleet.settings(), say=said.append)
    assert got.status == "applied" and got.revision == good, got.message
    assert fleet.out.read_text() == "hello\n"  # the revision's own role ran here, through provision
    assert fleet.current() == good
    assert os.readlink(fleet.tmp / "cache" / "current") == f"revisions/{good}"
    assert "signed by ops@example.org" in said[-1]
    state = record.State.model_validate_json((fleet.tmp / "cache" / "state.json").read_text())
    assert state.applied == good and state.last.changed == 1 and state.last_success
    assert Path(state.last.report).is_file()  # provision's own JSON report, kept beside the state
    m = metrics(fleet.tmp / "bringup-pull.prom")
    assert m[("bringup_pull_applied_info", (("host", "me"), ("revision", good)))] == 1
    assert m[("bringup_pull_status", (("host", "me"), ("status", "applied")))] == 1
    assert m[("bringup_pull_changed", (("host", "me"),))] == 1
    # The next tick re-converges the same revision: nothing to change.
    again = pull(fleet.settings())
    assert again.status == "applied" and again.changed == 0


@pytest.mark.reliability(item=40, fault="pull: the converge's own bytecode in a reused checkout (no tamper)",
                         variants=2, checks=("nothing touched",))
@pytest.mark.parametrize("linked", [False, True], ids=["cache", "cache-under-a-link"])
def test_the_converges_bytecode_goes_to_the_cache_so_the_same_revision_converges_again(fleet, monkeypatch, linked):
    """A host's timer writes bytecode (no PYTHONDONTWRITEBYTECODE there): the converge imports the repository's
    roles, whose .pyc files and roles manifest went into the checkout's roles/__pycache__, so the next tick saw the
    checkout holding what the revision does not and refused it as tampered (and prune kept every old checkout).
    They go under the cache's pycache/ now, in this process (pull_roles) and in the converge's, and go with their
    checkout, also where the cache is reached through a link (Python writes under the resolved path then)."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cache = fleet.tmp / "cache"
    if linked:
        (fleet.tmp / "real").mkdir()
        (fleet.tmp / "via").symlink_to(fleet.tmp / "real")
        cache = fleet.tmp / "via" / "cache"
    settings = fleet.settings(cache=cache)
    # bringup_pull.roles named: pull_roles imports the repository's roles in this process too
    good = fleet.commit("hello", key=fleet.ops, hosts={"all": {"hosts": {"me": {
        "ansible_connection": "local", "greeting": "hello", "bringup_pull": {"roles": ["demo"]}}}}})
    first = pull(settings, say=lambda _l: None)
    assert first.status == "applied", first.message
    again = pull(settings, say=lambda _l: None)
    assert (again.status, again.changed) == ("applied", 0), again.message
    checkout = cache / "revisions" / good
    assert not list(checkout.rglob("__pycache__")), "bytecode written into the checkout"
    bytecode = cache / "pycache"

    def written(path: Path) -> list[Path]:  # under the path as spelled or resolved
        return [f for rel in {str(path).lstrip("/"), os.path.realpath(path).lstrip("/")}
                for f in (bytecode / rel).rglob("*.pyc")]

    assert not written(checkout), "the converge's bytecode was kept in the shared folder (it is made fresh, removed)"
    assert not list(bytecode.iterdir()), "a converge's fresh bytecode folder was left"
    # The programs the roles run do not inherit the prefix (-X, not PYTHONPYCACHEPREFIX in their environment).
    from bringup.pull.run import provision_argv

    argv = provision_argv("me", settings, bytecode / "converge-x")
    assert argv[1:3] == ["-X", f"pycache_prefix={bytecode / 'converge-x'}"], argv
    # The next revision's checkout replaces this one: nothing grows per revision.
    nxt = fleet.commit("again", key=fleet.ops, hosts={"all": {"hosts": {"me": {
        "ansible_connection": "local", "greeting": "again", "bringup_pull": {"roles": ["demo"]}}}}})
    assert pull(settings, say=lambda _l: None).status == "applied"
    assert not checkout.exists() and not written(checkout) and not written(checkout.with_name(nxt))
    assert not list(bytecode.iterdir())


@pytest.mark.reliability(item=40, fault="pull: a link one level down the cache's pycache/ (pycache/<top> -> elsewhere) "
                                        "took the converge's bytecode there, and a .pyc planted in a real folder of it "
                                        "(matching a role's size and time) ran instead of the signed source",
                         variants=2, checks=("nothing touched", "others' files kept"))
@pytest.mark.parametrize("how", ["link", "planted"])
def test_the_converges_bytecode_folder_is_fresh_so_nothing_planted_in_the_cache_runs(fleet, monkeypatch, how):
    import importlib._bootstrap_external as bx
    import shutil

    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    settings = fleet.settings()
    good = fleet.commit("hello", key=fleet.ops)
    assert pull(settings, say=lambda _l: None).status == "applied"
    checkout = fleet.tmp / "cache" / "revisions" / good
    bytecode = fleet.tmp / "cache" / "pycache"
    elsewhere = fleet.tmp / "elsewhere"
    elsewhere.mkdir()
    ran = fleet.tmp / "planted.ran"
    if how == "link":
        top = os.path.realpath(checkout).lstrip("/").split("/")[0]
        shutil.rmtree(bytecode / top, ignore_errors=True)
        (bytecode / top).symlink_to(elsewhere)
    else:  # bytecode for the role's source: its size and time, another code
        src = Path(os.path.realpath(checkout / "roles" / "demo.py"))
        st = src.stat()
        code = compile(f"open({str(ran)!r}, 'w').close()\n", str(src), "exec")
        pyc = Path(str(bytecode) + os.path.dirname(str(src))) / f"demo.{sys.implementation.cache_tag}.pyc"
        pyc.parent.mkdir(parents=True, exist_ok=True)
        pyc.write_bytes(bx._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))
    got = pull(settings, say=lambda _l: None)
    assert (got.status, got.changed) == ("applied", 0), got.message
    assert not ran.exists(), "a planted .pyc ran instead of the signed role"
    assert not list(elsewhere.rglob("*")), "the converge's bytecode went through the link"
    if how == "link":
        assert (bytecode / top).is_symlink(), "a link bringup did not make was removed"
    else:
        assert pyc.exists(), "a file bringup did not make was removed"



@pytest.mark.reliability(item=33, fault="pull: an unsigned revision pushed on top of a good one", variants=1,
                         checks=("nothing touched", "report written"))
def test_an_unsigned_revision_is_refused_and_the_last_good_one_stays(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    bad = fleet.commit("evil")
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", "unsigned", bad)
    assert f"revision {bad[:12]} is not signed" in got.message and good[:12] in got.message
    assert fleet.current() == good
    assert not (fleet.tmp / "cache" / "revisions" / bad).exists()  # never checked out
    m = metrics(fleet.tmp / "bringup-pull.prom")
    assert m[("bringup_pull_applied_info", (("host", "me"), ("revision", good)))] == 1
    assert m[("bringup_pull_status", (("host", "me"), ("status", "refused")))] == 1
    assert m[("bringup_pull_last_refusal_info", (("host", "me"), ("reason", "unsigned"), ("revision", bad)))] == 1
    assert EXIT[got.status] == 3


@pytest.mark.reliability(item=33, fault="pull: a revision signed by a key not in the host's allowed signers",
                         variants=1, checks=("nothing touched", "report written"))
def test_a_revision_signed_by_an_unknown_key_is_refused(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=ok)
    bad = fleet.commit("evil", key=fleet.stranger)
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("refused", "unknown-key")
    assert "not in" in got.message and "SHA256:" in got.message  # names the key that signed it
    assert fleet.current() == good
    state = record.State.model_validate_json((fleet.tmp / "cache" / "state.json").read_text())
    assert state.last_refusal.revision == bad and state.applied == good


@pytest.mark.reliability(item=40, fault="pull: a revision signed by a key whose allowed signers entry expired "
                                        "(valid-before) or is not valid yet (valid-after), refused as unknown-key",
                         variants=2, checks=("nothing touched", "one clear line", "report written"))
@pytest.mark.parametrize("dates, words", [
    ('valid-before="20200101"', "expired: the commit's time 2"),
    ('valid-after="20990101"', "is not valid yet: the commit's time 2"),
], ids=["expired", "not-yet-valid"])
def test_a_revision_signed_by_a_key_out_of_its_dates_is_refused_as_expired(fleet, dates, words):
    """The key is in the list: "not in the list" (unknown-key) sent the SRE looking for a key that is there."""
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=ok)
    bad = fleet.commit("later", key=fleet.ops)
    fleet.allowed.write_text(f"# the ops key\nops@example.org {dates} {(fleet.tmp / 'ops.pub').read_text()}")
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", "expired", bad), got.message
    assert f"revision {bad[:12]} is signed by a key whose entry in {fleet.allowed} (line 2) {words}" in got.message
    assert "SHA256:" in got.message and "renew the entry's dates" in got.message and "\n" not in got.message
    assert fleet.current() == good
    m = metrics(fleet.tmp / "bringup-pull.prom")
    assert m[("bringup_pull_last_refusal_info", (("host", "me"), ("reason", "expired"), ("revision", bad)))] == 1


@pytest.mark.reliability(item=40, fault="pull: a revision signed by a key whose allowed signers line ssh-keygen "
                                        "skips (a date it cannot read, an unknown option, a cut key) or whose "
                                        "namespaces leave out git, refused as a key not in the list or a bad "
                                        "signature without the line's fault", variants=4,
                         checks=("nothing touched", "one clear line"))
@pytest.mark.parametrize("entry, reason, words", [
    ('valid-before="20270101T0000" {key}', "unknown-key", 'bad options: invalid "valid-before" time'),
    ("valid_before=20270101 {key}", "unknown-key", "bad options: unknown key option"),
    ("{cut}", "unknown-key", "invalid key"),
    ('namespaces="file" {key}', "bad-signature", 'key is not permitted for use in signature namespace "git"'),
], ids=["date-unread", "unknown-option", "cut-key", "namespaces"])
def test_an_allowed_signers_line_ssh_keygen_skips_is_named_with_its_fault(fleet, entry, reason, words):
    """The key is in the file, on a line ssh-keygen does not take: the operator is sent to that line."""
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=ok)
    bad = fleet.commit("later", key=fleet.ops)
    key = (fleet.tmp / "ops.pub").read_text().strip()
    fleet.allowed.write_text("# the ops key\nops@example.org " + entry.format(key=key, cut=key[:40]) + "\n")
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason, got.revision) == ("refused", reason, bad), got.message
    assert (f"ssh-keygen skipped line 2 of {fleet.allowed} ({words}): if the signer's key is on that line, fix it"
            in got.message), got.message
    assert "\n" not in got.message and key.split()[1] not in got.message
    assert fleet.current() == good


@pytest.mark.reliability(item=33, fault="pull: a revision signed with OpenPGP (a key the host's gpg keyring trusts)",
                         variants=1, checks=("nothing touched", "report written"))
def test_an_openpgp_signed_revision_is_refused_even_when_the_keyring_trusts_it(fleet, monkeypatch):
    """Git would verify it with gpg against the keyring of whoever runs the pull, not the allowed signers file:
    a real OpenPGP key made here, in a keyring the run sees (GNUPGHOME), signs the revision."""
    home = fleet.tmp / "gnupg"
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home), GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    try:
        subprocess.run(["gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", "ops@example.org",
                        "ed25519", "sign", "never"], env=env, check=True, capture_output=True)
        good = fleet.commit("hello", key=fleet.ops)
        pull(fleet.settings(), converge=ok)
        (fleet.work / "note").write_text("pgp")
        subprocess.run(["git", "-c", "user.name=ops", "-c", "user.email=ops@example.org", "-c", "gpg.format=openpgp",
                        "-c", "user.signingkey=ops@example.org", "commit", "--quiet", "-a", "-S", "-m", "pgp"],
                       cwd=fleet.work, env=env, check=True, capture_output=True)
        bad = git(fleet.work, "rev-parse", "HEAD")
        git(fleet.work, "push", "--quiet", f"file://{fleet.server}", "HEAD:main")
        monkeypatch.setenv("GNUPGHOME", str(home))
        verdict = subprocess.run(["git", "-C", str(fleet.work), "log", "-1", "--format=%G?"], env=env,
                                 capture_output=True, text=True).stdout.strip()
        assert verdict == "G"  # gpg itself calls it good: only bringup's own rule refuses it
        got = pull(fleet.settings(), converge=never)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)
    assert (got.status, got.reason, got.revision) == ("refused", "not-ssh-signature", bad)
    assert f"revision {bad[:12]} is signed with OpenPGP: pull mode trusts SSH signatures only" in got.message
    assert fleet.current() == good


def test_file_references_read_secrets_placed_on_the_host(fleet):
    """``{file: PATH}`` in the repository's inventory: the value is read on the host at converge time (the
    control machine of a pull run is the host itself); the repository, the state and the report never hold it."""
    secret = fleet.tmp / "etc" / "token.secret"
    secret.parent.mkdir()
    secret.write_text("s3cret-token\n")
    secret.chmod(0o600)  # a secret file readable by others is refused, as on a control machine
    placed = fleet.tmp / "applied" / "token"
    (fleet.work / "roles" / "__init__.py").write_text("ORDER = ['demo', 'token']\n")
    (fleet.work / "roles" / "token.py").write_text(
        "from bringup.resources import File\n\n"
        "def resources(host):\n"
        f"    return [File({str(placed)!r}, content=host.vars['token'].get_secret_value() + '\\n', mode='0600',\n"
        "                 owner=None, group=None)]\n")
    commit = fleet.commit("hello", key=fleet.ops, hosts={"all": {"hosts": {"me": {
        "ansible_connection": "local", "greeting": "hello", "token": {"file": str(secret)}}}}})
    got = pull(fleet.settings())
    assert got.status == "applied" and got.revision == commit, got.message
    assert placed.read_text() == "s3cret-token\n"
    assert "s3cret" not in (fleet.tmp / "cache" / "state.json").read_text()
    assert "s3cret" not in Path(got.report).read_text()
    assert "s3cret" not in git(fleet.work, "show", "HEAD")
    secret.unlink()  # the file gone from the host: refused before anything applies, the revision stays
    again = pull(fleet.settings(), converge=never)
    assert (again.status, again.reason) == ("refused", "invalid") and fleet.current() == commit, again.message
    assert "token.secret" in again.message


@pytest.mark.reliability(item=33, fault="pull: the Git server unreachable", variants=1,
                         checks=("nothing touched", "report written", "next run converges"))
def test_an_unreachable_server_keeps_the_revision_and_the_next_run_catches_up(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=ok)
    got = pull(fleet.settings(url=f"file://{fleet.tmp}/gone.git"), converge=never)
    assert (got.status, got.reason) == ("error", "unreachable") and "fetch from" in got.message
    assert fleet.current() == good and EXIT["error"] == 4
    # The reason is in the metrics too, not only in state.json and the journal.
    m = metrics(fleet.tmp / "bringup-pull.prom")
    assert m[("bringup_pull_last_run_info", (("host", "me"), ("reason", "unreachable"), ("status", "error")))] == 1
    newer = fleet.commit("hello again", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == newer and fleet.current() == newer


def test_an_ssh_server_that_does_not_answer_is_unreachable_without_a_prompt(fleet):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (fleet.tmp / "known_hosts").write_text("")
    got = pull(fleet.settings(url=f"ssh://git@127.0.0.1:{port}/fleet.git", known_hosts=fleet.tmp / "known_hosts",
                              ssh_key=fleet.ops), converge=never)
    assert (got.status, got.reason) == ("error", "unreachable") and "refused" in got.message.lower()


@pytest.mark.reliability(item=33, fault="pull: a signed repository that is not bringup's (no inventory)",
                         variants=1, checks=("nothing touched", "report written"))
def test_a_repository_without_an_inventory_is_not_applied(fleet):
    fleet.commit("no inventory", key=fleet.ops, hosts={})
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("refused", "not-bringup") and "not a bringup repository" in got.message
    assert fleet.current() is None and not fleet.out.exists()


@pytest.mark.reliability(item=33, fault="pull: a signed revision whose inventory does not load, or lacks the host",
                         variants=2, checks=("nothing touched", "report written"))
def test_a_bad_inventory_or_a_missing_host_is_refused_before_anything_applies(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=ok)
    fleet.commit("broken", key=fleet.ops, hosts={"all": {"hosts": {"me": {"ansible_port": "many"}}}})
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("refused", "invalid") and "ansible_port" in got.message
    fleet.commit("moved", key=fleet.ops, hosts={"all": {"hosts": {"other": {"ansible_connection": "local"}}}})
    got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("refused", "host-absent") and "'me'" in got.message
    got = pull(fleet.settings(name=None), converge=never)
    assert got.reason == "host-absent" and "this host (" in got.message and "--name" in got.message
    assert fleet.current() == good


@pytest.mark.reliability(item=33, fault="pull: a signed revision whose converge fails (a role fails)", variants=1,
                         checks=("report written", "next run converges"))
def test_a_failed_converge_keeps_the_last_good_revision_and_is_retried(fleet):
    good = fleet.commit("hello", key=fleet.ops)
    pull(fleet.settings(), converge=ok)
    newer = fleet.commit("hello 2", key=fleet.ops)
    got = pull(fleet.settings(), converge=lambda *a: Converged(rc=2, failed=1, message="error: a role failed"))
    assert (got.status, got.revision, got.failed) == ("failed", newer, 1) and "next run tries again" in got.message
    assert fleet.current() == good and (fleet.tmp / "cache" / "revisions" / newer).is_dir()
    assert pull(fleet.settings(), converge=ok).status == "applied" and fleet.current() == newer
    assert not (fleet.tmp / "cache" / "revisions" / good).exists()  # the older checkout pruned


@pytest.mark.reliability(item=33, fault="pull: a force-pushed branch", variants=1, checks=("next run converges",))
def test_a_tag_pattern_picks_the_highest_version_and_a_force_push_is_followed(fleet):
    fleet.commit("one", key=fleet.ops, tag="release-1.9")
    ten = fleet.commit("two", key=fleet.ops, tag="release-1.10")
    fleet.commit("unreleased", key=fleet.ops)
    got = pull(fleet.settings(rule=parse_rule(None, "release-*")), converge=ok)
    assert got.revision == ten
    git(fleet.work, "reset", "--quiet", "--hard", "HEAD~2")
    rewritten = fleet.commit("rewritten", key=fleet.ops)  # force-pushed over main
    # The fetch follows it; applying it is a rollback (issue 40 item 5), so the operator allows it by name.
    got = pull(fleet.settings(), converge=ok)
    assert (got.status, got.reason, got.revision) == ("refused", "rollback", rewritten) and fleet.current() == ten
    got = pull(fleet.settings(allow_rollback=rewritten[:10]), converge=ok)
    assert (got.status, got.revision) == ("applied", rewritten) and fleet.current() == rewritten


@pytest.mark.reliability(item=33, fault="pull while another run holds the host's run lock", variants=1,
                         checks=("nothing touched", "report written"))
def test_the_run_lock_keeps_two_runs_apart(fleet):
    fleet.commit("hello", key=fleet.ops)
    folder = fleet.tmp / "lock"
    folder.mkdir(mode=0o700)
    (folder / "owner").write_text("bringup provision from ops-laptop\n")
    with open(folder / "run.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        got = pull(fleet.settings(), converge=never)
    assert (got.status, got.reason) == ("error", "busy") and "ops-laptop" in got.message


def test_a_damaged_state_file_is_named_and_started_afresh(fleet):
    fleet.commit("hello", key=fleet.ops)
    (fleet.tmp / "cache").mkdir()
    (fleet.tmp / "cache" / "state.json").write_text('{"host": "me", "last": {"at": ')  # cut mid-write
    said = []
    assert pull(fleet.settings(), converge=ok, say=said.append).status == "applied"
    assert "not a pull state bringup wrote" in said[0]



@pytest.mark.reliability(item=33, fault="pull: state.json a FIFO, a link to /dev/zero, or over its cap", variants=3,
                         checks=("one clear line", "no hang"))
@pytest.mark.parametrize("kind", ["fifo", "zero", "large"])
def test_a_state_file_that_is_no_file_is_named_never_read(fleet, kind):
    fleet.commit("hello", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    path = fleet.tmp / "cache" / "state.json"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text('{"host": "me", "url": "' + "x" * (record.STATE_MAX + 1) + '"}')
    said, started = [], time.monotonic()
    assert pull(fleet.settings(), converge=ok, say=said.append).status == "applied"
    assert time.monotonic() - started < 30
    assert said[0].startswith(f"warning: {path}: ") and "started afresh" in said[0] and "\n" not in said[0], said
    assert path.is_file() and not path.is_symlink()  # written afresh, whole, in its place


BAD_STATE = {"future at": ("last", "at", 4102444800.0), "NaN at": ("last", "at", "NaN"),
             "Infinity success": (None, "last_success", "Infinity"), "1e308 success": (None, "last_success", "1e308"),
             "negative changed": ("last", "changed", -5),
             "applied no commit": (None, "applied", '"--upload-pack=evil"'),
             "reason no code": ("last", "reason", '"a\\nb c"')}


@pytest.mark.reliability(item=33, fault="pull: state.json with a future, NaN, Infinity or 1e308 time, a negative "
                                        "count, an applied that is no commit id", variants=7,
                         checks=("one clear line", "rejected value not persisted"))
@pytest.mark.parametrize("where,key,value", BAD_STATE.values(), ids=BAD_STATE.keys())
def test_a_state_of_values_no_run_gives_is_refused_not_exported(fleet, where, key, value):
    fleet.commit("hello", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).status == "applied"
    path = fleet.tmp / "cache" / "state.json"
    doc = json.loads(path.read_text())
    (doc[where] if where else doc)[key] = "@@"
    path.write_text(json.dumps(doc).replace('"@@"', str(value)))
    said = []
    assert pull(fleet.settings(), converge=ok, say=said.append).status == "applied"
    assert said[0].startswith(f"warning: {path}: not a pull state bringup wrote (") and key in said[0], said
    prom = (fleet.tmp / "bringup-pull.prom").read_text()
    assert "upload-pack" not in prom and "4102444800" not in prom and "NaN" not in prom and "Inf" not in prom
    assert "e+308" not in prom and "-5" not in prom, prom
    record.State.model_validate_json(path.read_text())  # written afresh, valid


@pytest.mark.reliability(item=40, fault="pull: a state refused as damaged, the current link removed, the branch "
                                        "force-pushed back", variants=1, checks=("nothing touched", "one clear line"))
def test_a_damaged_state_keeps_its_applied_revision_for_the_forward_check(fleet):
    old = fleet.commit("one", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == old
    new = fleet.commit("two", key=fleet.ops)
    assert pull(fleet.settings(), converge=ok).revision == new
    path = fleet.tmp / "cache" / "state.json"
    path.write_text(path.read_text().replace('"changed": 1', '"changed": -1'))
    (fleet.tmp / "cache" / "current").unlink()
    git(fleet.work, "push", "--quiet", "--force", f"file://{fleet.server}", f"{old}:main")
    said = []
    got = pull(fleet.settings(), converge=never, say=said.append)
    assert (got.status, got.reason) == ("refused", "rollback") and f"applied {new[:12]}" in got.message, got.message
    assert "started afresh" in said[0] and new[:12] in said[0], said

def test_the_metrics_file_of_another_exporter_is_never_replaced(fleet, tmp_path):
    other = tmp_path / "node.prom"
    other.write_text("# TYPE node_thing gauge\nnode_thing 1\n")
    with pytest.raises(FileExistsError):
        record.write_metrics(record.State(host="me"), other)
    assert other.read_text().startswith("# TYPE node_thing")


@pytest.mark.parametrize("branch,tag", [("a b", None), ("main", "v*"), ("re*", None), ("..", None)])
def test_a_bad_revision_rule_is_one_line(branch, tag):
    with pytest.raises(InputError) as e:
        parse_rule(branch, tag)
    assert "\n" not in str(e.value)


def bringup(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()", *args],
                          cwd=cwd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))


def task_flags(fleet: Fleet) -> list[str]:
    return ["--url", f"file://{fleet.server}", "--allowed-signers", str(fleet.allowed), "--name", "me",
            "--cache", str(fleet.tmp / "cache"), "--lock", str(fleet.tmp / "lock")]


def test_the_task_says_one_line_and_its_exit_code(fleet):
    fleet.commit("evil")
    common = task_flags(fleet)
    r = bringup("pull", *common, cwd=fleet.tmp)
    assert r.returncode == 3 and r.stdout.strip().startswith("refused: revision"), r.stdout + r.stderr
    r = bringup("pull", "--url", "", cwd=fleet.tmp)
    assert r.returncode == 1 and r.stderr.startswith("error: --url") and "Traceback" not in r.stderr
    r = bringup("pull", *common, "--prometheus", str(fleet.tmp / "x.txt"), cwd=fleet.tmp)
    assert r.returncode == 1 and "*.prom" in r.stderr
    # A key or known_hosts path the system will not look at (too long) is one line, not pathlib's traceback.
    for flag in ("--ssh-key", "--known-hosts"):
        r = bringup("pull", *common, flag, str(fleet.tmp / ("k" * 300)), cwd=fleet.tmp)
        assert r.returncode == 1 and r.stderr.startswith(f"error: {flag} ") and "File name too long" in r.stderr \
            and "Traceback" not in r.stderr, r.stderr


@pytest.mark.reliability(item=33, fault="pull: SIGTERM in the middle of the converge (the timer's TimeoutStartSec)",
                         variants=1, checks=("exit code", "no hang", "report written", "next run converges"))
def test_sigterm_mid_converge_moves_nothing_and_the_next_run_converges(tmp_path):
    fleet = Fleet(tmp_path, order=("slow", "demo"))
    good = fleet.commit("hello", key=fleet.ops)
    p = subprocess.Popen([sys.executable, "-c", "import sys; from bringup.entry import main; main()", "pull",
                          *task_flags(fleet)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    started = tmp_path / "slow.started"
    deadline = time.monotonic() + 120
    while not started.exists():
        assert p.poll() is None and time.monotonic() < deadline, p.stdout.read() if p.poll() is not None else ""
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 143, out
    assert "stopped by SIGTERM" in out.splitlines()[-1]
    assert fleet.current() is None and not fleet.out.exists()  # the role after the slow one never started
    state = record.State.model_validate_json((tmp_path / "cache" / "state.json").read_text())
    assert state.last.reason == "interrupted" and state.last.exit_code == 143 and state.applied is None
    r = bringup("pull", *task_flags(fleet), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert fleet.current() == good and fleet.out.read_text() == "hello\n"


def test_vault_values_are_opened_with_a_password_file_placed_on_the_host(fleet, tmp_path):
    from .test_vault import ansible_vault

    (tmp_path / "pw").write_text("host-side-password\n")
    secret = ansible_vault(tmp_path, "encrypt_string", "--vault-password-file", "pw", "s3cr3t-greeting")
    hosts = "all:\n  hosts:\n    me:\n      ansible_connection: local\n      greeting: " + secret
    (fleet.work / "hosts").write_text(hosts)
    commit = fleet.commit("vaulted", key=fleet.ops, hosts={})  # the inventory written above, kept as it is
    got = pull(fleet.settings(), converge=never)  # no password on the host: the inventory does not load
    assert (got.status, got.reason) == ("refused", "invalid") and "s3cr3t" not in got.message
    got = pull(fleet.settings(vault_password_files=[str(tmp_path / "pw")]))
    assert got.status == "applied" and got.revision == commit, got.message
    assert fleet.out.read_text() == "s3cr3t-greeting\n"
    assert "s3cr3t" not in (tmp_path / "cache" / "state.json").read_text()
