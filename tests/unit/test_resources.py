"""Resources plan from what they read, and their commands converge for real.

The read and write snippets run in a real local shell on files under a temp
folder: the plan is checked, then applied, then read again.
"""
import os
import stat
import subprocess

import pytest

from bringup.errors import InputError
from bringup.resources import Command, Directory, File, Packages, Service, Sysctl


def sh(script):
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True)


def converge(res):
    """read → plan → apply → read → plan; returns (first plan, second plan)."""
    p1 = res.plan(sh(res.read()).stdout)
    for cmd in p1.commands:
        r = sh(cmd)
        assert r.returncode == 0, r.stdout + r.stderr
    p2 = res.plan(sh(res.read()).stdout)
    return p1, p2


def test_file_created_then_noop_with_reason(tmp_path):
    path = tmp_path / "sub" / "f.conf"
    f = File(str(path), content="a = 1\n", mode="0640", owner=None, group=None)
    p1, p2 = converge(f)
    assert p1.changed and p1.changes["content"][0] == "absent"
    assert path.read_text() == "a = 1\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert not p2.changed and "already has this content" in p2.reason


def test_file_replaced_atomically_with_backup_and_diff(tmp_path):
    path = tmp_path / "f.conf"
    path.write_text("a = 0\n")
    f = File(str(path), content="a = 1\n", owner=None, group=None)
    p1, p2 = converge(f)
    assert "-a = 0" in p1.diff and "+a = 1" in p1.diff
    backups = [p for p in os.listdir(tmp_path) if p.startswith("f.conf.") and p.endswith(".bak")]
    assert len(backups) == 1 and (tmp_path / backups[0]).read_text() == "a = 0\n"
    assert not [p for p in os.listdir(tmp_path) if ".bringup." in p]  # no temp file left
    assert not p2.changed


def test_a_files_content_travels_only_when_its_hash_is_not_the_wanted_one(tmp_path):
    # The diff needs the old content; an unchanged file (every file of a no-op) needs only its hash.
    path = tmp_path / "with space\\and.conf"  # sha256sum escapes such a name: read from stdin instead
    path.write_text("a = 1\n")
    same = sh(File(str(path), content="a = 1\n").read()).stdout
    assert "sha256=" + __import__("hashlib").sha256(b"a = 1\n").hexdigest() + "\n" in same
    assert "content=" not in same
    other = File(str(path), content="a = 2\n", owner=None, group=None)
    changed = sh(other.read()).stdout
    assert "content=YSA9IDEK" in changed and "-a = 1" in other.plan(changed).diff


def test_file_mode_only_change(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o600)
    p1, p2 = converge(File(str(path), content="x", mode="0644", owner=None, group=None))
    assert p1.changes == {"mode": ("600", "644")} and not p2.changed


def test_file_refuses_a_symlink(tmp_path):
    (tmp_path / "t").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "t")
    f = File(str(tmp_path / "l"), content="y")
    assert "not a regular file" in f.plan(sh(f.read()).stdout).error


@pytest.mark.parametrize("bad", ["relative/path", "/a/../b", "/a\nb"])
def test_file_path_validation(bad):
    with pytest.raises(InputError):
        File(bad, content="")


def test_directory(tmp_path):
    d = Directory(str(tmp_path / "a" / "b"), mode="0750", owner=None, group=None)
    p1, p2 = converge(d)
    assert p1.changes["state"] == ("absent", "directory") and not p2.changed
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o750


def test_sysctl_plans_from_proc_values():
    s = Sysctl("net.ipv4.tcp_rmem", "4096 131072 16777216")
    assert not s.plan("value=4096\t131072\t16777216\n").changed  # tabs as the kernel prints them
    p = s.plan("value=4096\t87380\t6291456\n")
    assert p.changes == {"net.ipv4.tcp_rmem": ("4096 87380 6291456", "4096 131072 16777216")}
    assert p.commands == ["printf '%s\\n' '4096 131072 16777216' > /proc/sys/net/ipv4/tcp_rmem"]
    miss = s.plan("absent\n")
    assert miss.skipped and "no such key" in miss.reason


def test_sysctl_reads_the_real_kernel():
    s = Sysctl("net.core.somaxconn", 4096)
    out = sh(s.read()).stdout
    assert out.startswith("value=") and out[6:].strip().isdigit()
    assert Sysctl("net.core.no_such_key", 1).plan(sh(Sysctl("net.core.no_such_key", 1).read()).stdout).skipped


@pytest.mark.parametrize("key,value", [("net..core", 1), ("Net.core.x", 1), ("net", 1), ("net.core.x; rm", 1),
                                       ("net.core.x", True), ("net.core.x", "1\n2"), ("net.core.x", "$(reboot)"),
                                       ("net.core.x", 1.5), ("net.core.x", "")])
def test_sysctl_refuses_malformed(key, value):
    with pytest.raises(InputError):
        Sysctl(key, value)


def test_packages_plan_one_install_for_all_missing():
    p = Packages({"curl": None, "docker.io": "24.*", "jq": "1.6-2.1"})
    out = "curl 7.88.1-10 ii \ndocker.io 20.10.24+dfsg1-1 ii \njq 1.6-2.1 rc \n"
    plan = p.plan(out)
    assert len(plan.commands) == 1
    assert plan.commands[0].endswith("install -- 'docker.io=24.*' jq=1.6-2.1\n)")
    assert plan.commands[0].count("install -- 'docker.io=24.*' jq=1.6-2.1") == 2  # again after an update
    assert plan.changes == {"docker.io": ("20.10.24+dfsg1-1", "24.*"), "jq": ("absent", "1.6-2.1")}
    ok = p.plan("curl 7.88.1-10 ii \ndocker.io 24.0.5-0 ii \njq 1.6-2.1 ii \n")
    assert not ok.changed and "docker.io 24.0.5-0" in ok.reason


def test_packages_dnf_and_absent():
    p = Packages(["tuned"], manager="dnf", present=False)
    assert p.plan("tuned 2.21.0-1.el9 ii\n").commands == ["dnf -y -q remove -- tuned"]
    assert not p.plan("").changed
    with pytest.raises(InputError):
        Packages(["bad name"])


def test_packages_read_real_dpkg():
    p = Packages(["dpkg"])
    assert not p.plan(sh(p.read()).stdout).changed


def test_service_plans():
    s = Service("irqbalance", running=True, enabled=True, daemon_reload=True)
    p = s.plan("load=loaded\nactive=inactive\nenabled=disabled\n")
    assert p.commands == ["systemctl daemon-reload", "systemctl enable -- irqbalance", "systemctl start -- irqbalance"]
    assert not s.plan("load=loaded\nactive=active\nenabled=enabled\n").changed
    masked = s.plan("load=masked\nactive=inactive\nenabled=masked\n")
    assert masked.commands[1] == "systemctl unmask -- irqbalance"
    later = s.plan("load=not-found\nactive=inactive\nenabled=\n")  # the role may install it first
    assert later.commands == ["systemctl daemon-reload", "systemctl enable -- irqbalance",
                              "systemctl start -- irqbalance"]
    assert later.changes["unit"] == ("not found yet", "loaded")
    assert "systemd is not running" in s.plan("systemd=no\n").error
    # What the read prints: `systemctl show -p LoadState -p ActiveState` (systemd 252's words), then is-enabled.
    shown = s.plan("LoadState=loaded\nActiveState=failed\nenabled=enabled\n")
    # A failed unit (systemd's start limit, say) refuses a plain start: its failure is cleared first.
    assert shown.commands == ["systemctl daemon-reload", "systemctl reset-failed -- irqbalance",
                              "systemctl start -- irqbalance"]
    assert not s.plan("LoadState=loaded\nActiveState=active\nenabled=enabled\n").changed


def test_command_guards(tmp_path):
    marker = tmp_path / "done"
    c = Command("make marker", f"touch {marker}", creates=str(marker))
    p1, p2 = converge(c)
    assert p1.changed and not p2.changed and p2.reason == f"{marker} exists"
    u = Command("x", "false", unless="true")
    assert u.plan(sh(u.read()).stdout).reason == "check passed: true"
    o = Command("x", "true", onlyif="false")
    assert "condition not met" in o.plan(sh(o.read()).stdout).reason
    assert "runs every time" in Command("x", "true").plan("").changes["run"][0]


def test_kernel_cmdline_reports_a_pending_reboot_until_booted_with_the_words():
    from bringup.resources.boot import KernelCmdline
    k = KernelCmdline(["skew_tick=1", "nohz_full=2-5"])
    pending = k.plan("BOOT_IMAGE=/vmlinuz ro quiet skew_tick=1\n")
    assert not pending.commands and pending.reboot == "kernel command line lacks nohz_full=2-5 (boot loader updated)"
    done = k.plan("ro quiet skew_tick=1 nohz_full=2-5\n")
    assert done.reboot is None and "booted with" in done.reason
    with pytest.raises(InputError):
        KernelCmdline(["two words"])


def _h(b: bytes) -> str:
    import hashlib
    return hashlib.sha256(b).hexdigest()


def _apply(res):
    p = res.plan(sh(res.read()).stdout)
    for cmd in p.commands:
        r = sh(cmd)
        assert r.returncode == 0, r.stdout + r.stderr
    return p


@pytest.mark.reliability(item=5, fault='model files bringup did not ship (tree resource on the local file system)',
                         checks=("others' files kept",))
def test_tree_with_a_manifest_touches_only_what_it_shipped_and_rolls_back(tmp_path):
    """Files bringup did not ship are never touched; a stale shipped file is held (not removed) until the
    new revision is ready, and a restore puts the last good tree back without touching the others."""
    from bringup.resources.revisions import Revisions
    from bringup.resources.tree import Tree, parse_manifest

    repo, stack = tmp_path / "models", tmp_path / "stack"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.plan").write_bytes(b"put there by hand")
    (repo / "notes.txt").write_text("mine")

    def tree(files, rev):
        return Tree(str(repo), files, keep={"m/config.pbtxt": _h(b"cfg")}, manifest=str(stack / "manifest"),
                    holding=str(stack / "held" / rev))

    def keeper(rev):
        return Revisions(str(repo), manifest=str(stack / "manifest"), holding=str(stack / "held" / rev))

    t1 = tree({"m/1/model.py": (b"v1", False), "m/1/old.bin": (b"old", False)}, "r1")
    p1, p2 = converge(t1)
    assert p1.changed and "m/1/model.plan" not in p1.changes and "notes.txt" not in p1.changes
    assert not p2.changed and "2 file(s) bringup did not ship" in p2.reason
    shipped = parse_manifest((stack / "manifest").read_text())
    assert shipped == {"m/1/model.py": _h(b"v1"), "m/1/old.bin": _h(b"old"), "m/config.pbtxt": _h(b"cfg")}
    (repo / "m" / "config.pbtxt").write_bytes(b"cfg")  # what the File resource writes
    assert sh(keeper("r1").snapshot(str(stack / "last-good"))).returncode == 0

    # The next revision: old.bin no longer wanted, model.py changed, a new model.
    t2 = tree({"m/1/model.py": (b"v2", False), "n/1/x": (b"x", False)}, "r2")
    p1, p2 = converge(t2)
    assert "held" in p1.changes["m/1/old.bin"][1] and not p2.changed
    assert not (repo / "m" / "1" / "old.bin").exists()
    assert (stack / "held" / "r2" / "m" / "1" / "old.bin").read_bytes() == b"old"  # not deleted yet
    assert (repo / "m" / "1" / "model.plan").read_bytes() == b"put there by hand"

    # The new revision failed: restore the last good one.
    r = sh(keeper("r2").restore(str(stack / "last-good" / "files"), (stack / "last-good" / "manifest").read_text(),
                                 (stack / "manifest").read_text()))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (repo / "m" / "1" / "model.py").read_bytes() == b"v1"
    assert (repo / "m" / "1" / "old.bin").read_bytes() == b"old"
    assert not (repo / "n").exists()  # shipped by the failed run only: gone, folder too
    assert (repo / "m" / "1" / "model.plan").read_bytes() == b"put there by hand"
    assert (repo / "notes.txt").read_text() == "mine"
    assert not (stack / "held" / "r2").exists()
    assert not t1.plan(sh(t1.read()).stdout).changed  # the last good state, manifest included

    # The new revision again, this time ready: only then is the held copy deleted.
    converge(t2)
    assert (stack / "held" / "r2" / "m" / "1" / "old.bin").exists()
    assert sh(keeper("r2").release()).returncode == 0
    assert not (stack / "held" / "r2").exists()
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()) == [
        "m/1/model.plan", "m/1/model.py", "m/config.pbtxt", "n/1/x", "notes.txt"]


def test_tree_keeps_a_shipped_file_changed_by_hand_and_sets_aside_one_it_replaces(tmp_path):
    from bringup.resources.tree import Tree

    repo, stack = tmp_path / "models", tmp_path / "stack"
    stack.mkdir()
    (repo / "m").mkdir(parents=True)
    (repo / "m" / "edited").write_bytes(b"edited by hand")
    (repo / "m" / "taken").write_bytes(b"someone's")
    (stack / "manifest").write_text(f"{_h(b'as shipped')}  m/edited\n")
    t = Tree(str(repo), {"m/taken": (b"ours", False)}, manifest=str(stack / "manifest"),
             holding=str(stack / "held" / "r"))
    p = _apply(t)
    assert "m/edited" not in p.changes and "1 file(s) changed since bringup shipped them" in p.changes["kept"]
    assert (repo / "m" / "edited").read_bytes() == b"edited by hand"
    assert (repo / "m" / "taken").read_bytes() == b"ours"
    assert (stack / "held" / "r" / "m" / "taken").read_bytes() == b"someone's"  # until the new revision is ready


@pytest.mark.reliability(item=5, fault="a first run into a folder of others' files (tree plan, no manifest)")
def test_tree_without_a_manifest_refuses_nothing_and_plans_no_removal_of_unknown_files(tmp_path):
    """A first run into a folder full of others' files (an /etc by mistake) removes none of them."""
    from bringup.resources.tree import Tree

    (tmp_path / "a").mkdir()
    for i in range(5):
        (tmp_path / "a" / f"f{i}").write_text(str(i))
    t = Tree(str(tmp_path), {"m/x": (b"x", False)}, manifest=str(tmp_path.parent / f"{tmp_path.name}.manifest"))
    p = t.plan(sh(t.read()).stdout)
    assert not [k for k, v in p.changes.items() if isinstance(v, tuple) and v[1] == "absent"]
    assert "5 file(s) bringup did not ship" in p.changes["kept"]
    # A manifest of another folder (the repository was moved) claims nothing here.
    from bringup.resources.tree import format_manifest
    (tmp_path.parent / f"{tmp_path.name}.manifest").write_text(format_manifest({"a/f0": _h(b"0")}, "/data/models"))
    p = t.plan(sh(t.read()).stdout)
    assert "a/f0" not in p.changes and "5 file(s) bringup did not ship" in p.changes["kept"]
    (tmp_path.parent / f"{tmp_path.name}.manifest").write_text(format_manifest({"a/f0": _h(b"0")}, str(tmp_path)))
    assert "held" not in str(t.plan(sh(t.read()).stdout).changes["a/f0"]) and \
        t.plan(sh(t.read()).stdout).changes["a/f0"][1] == "absent"  # its own, and no holding folder: removed


@pytest.mark.parametrize("make", ["tree", "revisions"])
@pytest.mark.parametrize("manifest,holding", [("/data/models/m.manifest", None),
                                              ("/opt/m.manifest", "/data/models/held")])
def test_a_manifest_or_holding_folder_inside_the_tree_is_one_line_for_the_mirror_and_the_keeper(
        make, manifest, holding):
    """Both the mirror and the revision keeper refuse a manifest or holding folder the tree would own."""
    from bringup.errors import InputError
    from bringup.resources.revisions import Revisions
    from bringup.resources.tree import Tree

    with pytest.raises(InputError) as e:
        if make == "tree":
            Tree("/data/models/", {}, manifest=manifest, holding=holding)
        else:
            Revisions("/data/models/", manifest=manifest, holding=holding)
    inside = manifest if holding is None else holding
    assert str(e.value) == (f"{inside} is inside /data/models: the tree's manifest and holding folder "
                            "must lie outside it")


@pytest.mark.parametrize("containers,kept,removed", [
    # compose v1, creating the new container failed: the old one still runs, renamed.
    ([("a1", "0123456789ab_triton", "running", "old", "triton")], "a1", []),
    # compose v1/v2, starting the new one failed: the old one stopped and renamed, the new one created.
    ([("a1", "0123456789ab_triton", "exited", "old", "triton"), ("b2", "triton", "created", "new", "triton")],
     None, ["a1", "b2"]),
    # compose v2, creating under a temporary name failed: the old one untouched.
    ([("a1", "triton", "running", "old", "triton"), ("b2", "a1a1a1a1a1a1_triton", "created", "new", "triton")],
     "a1", ["b2"]),
])
@pytest.mark.reliability(item=8, fault='compose restore after a failed revision (role plan, fake containers)')
def test_compose_restore_keeps_a_running_old_revision_and_removes_the_rest(tmp_path, containers, kept, removed):
    from bringup.resources.compose import ComposeUp

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "log"
    rows = containers + [("z9", "prometheus", "running", "", "monitoring"),  # another project: untouched
                         ("y8", "0123456789ff_triton", "exited", "", "")]  # not made by bringup: untouched
    (tmp_path / "ps").write_text("".join("\t".join(r) + "\n" for r in rows))
    (bin_ / "docker").write_text(f"#!/bin/sh\necho \"docker $*\" >> {log}\n"
                                 f"case \"$1\" in ps) cat {tmp_path / 'ps'};; compose) exit 1;; esac\n")
    (bin_ / "docker-compose").write_text(f"#!/bin/sh\necho \"docker-compose $*\" >> {log}\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    script = ComposeUp("/opt/triton/docker-compose.yml", project="triton", container="triton",
                       revision="").restore("old")
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert [c for c in calls if c.startswith("docker rm")] == [f"docker rm -f -- {i}" for i in removed]
    renames = [c for c in calls if c.startswith("docker rename")]
    name = {r[0]: r[1] for r in rows}
    assert renames == ([f"docker rename -- {kept} triton"] if kept and name[kept] != "triton" else [])
    assert calls[-1] == "docker-compose -f /opt/triton/docker-compose.yml -p triton up -d --remove-orphans"


@pytest.mark.reliability(item=7, fault='NaN / Infinity in a JSON file a role writes')
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_json_file_refuses_non_finite_numbers(bad):
    from bringup.resources.jsonfile import JsonFile

    with pytest.raises(InputError, match="NaN and Infinity are not JSON"):
        JsonFile("/etc/docker/daemon.json", {"default-shm-size": bad})


@pytest.mark.reliability(item=7, fault='NaN / Infinity in docker_daemon_config',
                         checks=('exit code', 'nothing touched'))
def test_non_finite_daemon_config_is_refused_before_connecting(tmp_path):
    import subprocess
    import sys

    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {"ansible_host": "127.0.0.1", "ansible_port": 9}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(repo), "provision", "--host", "h",
                        "--roles", "docker", "--set", "docker_daemon_config={mtu: .nan}"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr  # bad input, nothing contacted (127.0.0.1:9 would be exit 4)
    assert "docker_daemon_config: NaN and Infinity are not JSON" in r.stderr and "Traceback" not in r.stderr


def _stream(plan) -> subprocess.CompletedProcess:
    """Run a plan's upload as the engine does: the local argv's stdout into the remote script's stdin."""
    local = subprocess.Popen(plan.upload.local, stdout=subprocess.PIPE)
    remote = subprocess.run(["sh", "-c", plan.upload.remote], stdin=local.stdout, capture_output=True, text=True)
    local.stdout.close()
    local.wait()
    return remote


def test_model_files_are_streamed_not_embedded_and_hashed_once(tmp_path, monkeypatch):
    """Issue 9 defect 5: model files travel as a stream (tar over the connection), not base64 in a script;
    each local file is hashed once per run however often the folder is listed; a file that changes while
    it is sent is refused and the one in place stays whole."""
    import bringup.resources.tree as tree_mod
    from bringup.resources.tree import LocalFile, Tree, local_tree

    src, repo, stack = tmp_path / "models", tmp_path / "repo", tmp_path / "stack"
    (src / "m" / "1").mkdir(parents=True)
    big = os.urandom(3 << 20)
    (src / "m" / "1" / "model.plan").write_bytes(big)
    (src / "m" / "1" / "model.py").write_text("print(1)\n")
    os.chmod(src / "m" / "1" / "model.py", 0o755)
    calls = []
    real = tree_mod.file_sha256
    monkeypatch.setattr(tree_mod, "file_sha256", lambda p: calls.append(p) or real(p))
    files = local_tree(src)
    assert local_tree(src) == files and len(calls) == 2  # listed twice, hashed once
    assert all(isinstance(f, LocalFile) for f in files.values()) and files["m/1/model.plan"].sha256 == _h(big)

    t = Tree(str(repo), files, manifest=str(stack / "manifest"), holding=str(stack / "held" / "r1"))
    p = t.plan(sh(t.read()).stdout)
    assert p.upload is not None and p.upload.local[:2] == ["tar", "-C"] and "m/1/model.plan" in p.upload.local
    assert len(p.upload.remote) < 4000 and big[:64].hex() not in p.upload.remote  # no content in the script
    r = _stream(p)
    assert r.returncode == 0, r.stdout + r.stderr
    for cmd in p.commands:
        assert sh(cmd).returncode == 0
    assert (repo / "m" / "1" / "model.plan").read_bytes() == big
    assert os.stat(repo / "m" / "1" / "model.py").st_mode & 0o777 == 0o755
    assert [x.name for x in repo.iterdir()] == ["m"]  # the staging folder is gone
    assert not t.plan(sh(t.read()).stdout).changed

    # Changed on the control machine after it was planned (hashed): refused, the file in place untouched.
    (src / "m" / "1" / "model.plan").write_bytes(b"new" + big[3:])
    files2 = dict(files, **{"m/1/model.plan": LocalFile(src, "m/1/model.plan", _h(b"other"), False)})
    t2 = Tree(str(repo), files2, manifest=str(stack / "manifest"), holding=str(stack / "held" / "r2"))
    r = _stream(t2.plan(sh(t2.read()).stdout))
    assert r.returncode != 0 and "changed on the control machine while it was sent" in r.stdout + r.stderr
    assert (repo / "m" / "1" / "model.plan").read_bytes() == big and [x.name for x in repo.iterdir()] == ["m"]


def test_packages_retry_after_stale_lists_even_when_a_source_fails_to_update(tmp_path):
    """A stand-in apt-get (a test double): the first install cannot locate the package, the update fails for
    one broken source (exit 100), the second install succeeds: the install is retried all the same."""
    import os
    import subprocess

    log = tmp_path / "calls"
    fake = tmp_path / "apt-get"
    fake.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  *" update"*) echo "E: The repository 'https://broken.example ./ Release' is not signed."; exit 100;;
  *install*) if [ -e {tmp_path}/updated ]; then echo "Setting up hello"; exit 0; fi
             echo "E: Unable to locate package hello"; touch {tmp_path}/updated; exit 100;;
esac
""")
    fake.chmod(0o755)
    cmd = Packages({"hello": None}).plan("").commands[0]
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert [("update" in c.split(), "install" in c.split()) for c in calls] == [(False, True), (True, False),
                                                                               (False, True)]
    assert "apt-get update exited 100 (a source failed); installing anyway" in r.stdout


def test_reads_that_print_content_or_run_an_operators_guard_stay_out_of_the_lanes(tmp_path, monkeypatch):
    from bringup.engine import rolerun
    from bringup.resources.guard import Probe
    from bringup.resources.jsonfile import JsonFile
    from bringup.resources.privatejson import PrivateJsonFile

    for kind in (File, JsonFile, PrivateJsonFile, Command, Probe):
        assert kind.read_alongside is False, kind  # content, or commands bringup did not write
    for kind in (Directory, Packages, Service, Sysctl):
        assert kind.read_alongside is True, kind
    declared = [File(str(tmp_path / "f"), content="token: s3cr3t\n", owner=None, group=None), Service("irqbalance", running=True),
                Command("c", "true", unless="test -e /x"), Sysctl("net.core.somaxconn", "4096")]
    seen = {}

    def batch(snippets, **kw):
        seen.update(kw)
        return real(snippets, **kw)

    real = rolerun.batch
    monkeypatch.setattr(rolerun, "batch", batch)

    class T:
        def run_script(self, script, keep=None):
            return subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True)

    outs = rolerun.read(T(), declared)
    assert seen["lanes"] > 1 and seen["in_shell"] == {0, 2}
    assert outs[0] is not None and outs[3].strip()  # every section came back
