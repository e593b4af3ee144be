"""Batching many snippets into one script, and the quoting helper."""
import os
import signal
import subprocess
import time

import pytest

from bringup.ssh.command import join, sh
from bringup.ssh.script import SECTION_MAX, batch, split


def run(script):
    return subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True)


def test_quoting_helper_quotes_every_argument():
    assert sh("cat -- %s", "/tmp/a b; rm -rf /") == "cat -- '/tmp/a b; rm -rf /'"
    assert join(["printf", "%s", "$HOME"]) == "printf %s '$HOME'"


def test_sections_keep_exact_output_and_status():
    script, token = batch([("a", "printf 'x\\n\\n'"), ("b", "printf y; exit 3"), ("c", "cat")])
    r = run(script)
    secs = split(r.stdout, token, ["a", "b", "c"])
    assert [(s.rc, s.output) for s in secs] == [(0, "x\n\n"), (3, "y"), (0, "")]  # cat sees no stdin


def test_stop_on_error_attributes_the_failing_step():
    script, token = batch([("a", "true"), ("b", "echo boom >&2; exit 7"), ("c", "touch /nonexistent/c")],
                          stop_on_error=True, stderr="merge")
    r = run(script)
    a, b, c = split(r.stdout, token, ["a", "b", "c"])
    assert r.returncode == 7 and a.rc == 0 and b.rc == 7 and b.output == "boom\n" and c.rc is None


def test_marker_lookalikes_in_output_do_not_confuse_the_split():
    script, token = batch([("a", "echo '@@deadbeef:E:0:1'"), ("b", "echo ok")])
    secs = split(run(script).stdout, token, ["a", "b"])
    assert secs[0].output == "@@deadbeef:E:0:1\n" and secs[1].output == "ok\n"


# -- lanes: read snippets side by side ------------------------------------------------------------------------

SNIPPETS = [("a", "printf 'x\\n\\n'"), ("b", "printf y; exit 3"), ("c", "cat"), ("d", "echo err >&2; echo out"),
            ("e", "f() { exit 9; }; f; echo never")]


def test_lanes_give_the_same_sections_as_one_after_another(tmp_path):
    keys = [k for k, _ in SNIPPETS]
    one, t1 = batch(SNIPPETS)
    want = [(s.rc, s.output) for s in split(run(one).stdout, t1, keys)]
    assert want == [(0, "x\n\n"), (3, "y"), (0, ""), (0, "out\n"), (9, "")]
    for lanes in (2, 3, 5, 8):
        script, token = batch(SNIPPETS, lanes=lanes)
        r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
        assert [(s.rc, s.output) for s in split(r.stdout, token, keys)] == want, lanes
        assert r.returncode == 0 and list(tmp_path.iterdir()) == []  # its folder is gone


def test_lanes_really_run_side_by_side(tmp_path):
    # "a" waits (up to 10 s) for the file "b" makes: one after another, "a" would give up first.
    def wait_for(name, tries):
        return (f"i=0; while [ ! -e {tmp_path}/{name} ] && [ $i -lt {tries} ]; do sleep 0.1; i=$((i+1)); done; "
                f"[ -e {tmp_path}/{name} ] && echo saw-{name}")

    script, token = batch([("a", wait_for("b", 100)), ("b", f"touch {tmp_path}/b")], lanes=2)
    a, b = split(run(script).stdout, token, ["a", "b"])
    assert (a.rc, a.output, b.rc) == (0, "saw-b\n", 0)
    one, t1 = batch([("a", wait_for("c", 5)), ("c", f"touch {tmp_path}/c")])
    a, c = split(run(one).stdout, t1, ["a", "c"])
    assert (a.rc, a.output) == (1, "")  # the control: in order, "a" could not see what "c" makes after it


def test_lanes_fall_back_to_one_after_another_without_a_temporary_folder():
    script, token = batch(SNIPPETS, lanes=3)
    r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "TMPDIR": "/nonexistent/bringup-test"})
    assert [(s.rc, s.output) for s in split(r.stdout, token, [k for k, _ in SNIPPETS])][:2] == [(0, "x\n\n"), (3, "y")]


def test_a_signal_removes_the_folder_stops_the_lanes_and_ends_the_script_by_that_signal(tmp_path):
    work = tmp_path / "tmp"
    work.mkdir()
    # Lane 0 runs "a" then "c"; the signal comes while "a" sleeps, so "c" must never start.
    script, _ = batch([("a", "sleep 1"), ("b", "sleep 1"), ("c", f"touch {tmp_path}/c-ran")], lanes=2)
    p = subprocess.Popen(["sh", "-c", 'eval "$(cat)"'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env={"PATH": "/usr/bin:/bin", "TMPDIR": str(work)})
    p.stdin.write(script)
    p.stdin.close()
    for _ in range(100):
        if list(work.iterdir()):
            break
        time.sleep(0.05)
    assert [d.name[:len("bringup-read.")] for d in work.iterdir()] == ["bringup-read."]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == -signal.SIGTERM  # as the runner sees a killed script, not an exit status
    time.sleep(1.5)
    assert list(work.iterdir()) == [] and not (tmp_path / "c-ran").exists()


def test_in_shell_snippets_run_in_order_and_never_reach_a_file(tmp_path):
    # The lane snippet looks for the in-shell snippets' output in every file under TMPDIR while they run.
    secret = "content-of-a-private-file-7c1e"
    look = f"sleep 0.5; grep -rl {secret} {tmp_path} || echo nowhere"
    snippets = [("look", look), ("s1", f"echo {secret}; sleep 0.2; echo one"), ("x", "echo x"),
                ("s2", f"echo {secret}-2")]
    script, token = batch(snippets, lanes=2, in_shell={1, 3})
    r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    look_, s1, x, s2 = split(r.stdout, token, [k for k, _ in snippets])
    assert (look_.output, s1.output, x.output, s2.output) == ("nowhere\n", f"{secret}\none\n", "x\n", f"{secret}-2\n")
    assert r.stdout.index(f"{token}:B:1") < r.stdout.index(f"{token}:B:3")
    assert list(tmp_path.iterdir()) == []


def test_a_section_cut_short_keeps_what_it_printed():
    t = "0123456789abcdef"
    out = f"\n@@{t}:B:0\nfirst\n@@{t}:E:0:0\n\n@@{t}:B:1\npartial-b"
    a, b, c = split(out, t, ["a", "b", "c"])
    assert (a.rc, a.output) == (0, "first") and (b.rc, b.output) == (None, "partial-b") and (c.rc, c.output) == (None, "")


def test_lanes_refuse_stop_on_error():
    with pytest.raises(ValueError):
        batch(SNIPPETS, lanes=2, stop_on_error=True)


@pytest.mark.reliability(item=26, fault="a read that streams without end (a fact gone wrong) in a lane",
                         checks=("no leftovers", "no hang"))
@pytest.mark.reliability(item=34, fault="a fact streaming without end beside the others (a hung nvidia-smi)",
                         checks=("no leftovers", "no hang"))
@pytest.mark.parametrize("lanes", [1, 2, 6])
def test_a_snippet_that_streams_without_end_is_cut_alone(tmp_path, lanes):
    # "b" shares the flood's lane (lanes=2) or comes after it in the one shell (lanes=1): it is read all the same.
    bound = 64 * 1024
    snippets = [("flood", "yes"), ("a", "echo a"), ("b", "echo b; exit 3"), ("c", "printf '%s' x"),
                ("d", "yes | head -c 65536")]  # exactly at the bound: whole
    script, token = batch(snippets, lanes=lanes, section_max=bound)
    r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}, timeout=60)
    flood, a, b, c, d = split(r.stdout, token, [k for k, _ in snippets], section_max=bound)
    assert flood.cut and flood.rc is None and len(flood.output) == bound + 1  # cut, never read as whole
    assert [(s.rc, s.output, s.cut) for s in (a, b, c)] == [(0, "a\n", False), (3, "b\n", False), (0, "x", False)]
    assert (d.rc, len(d.output), d.cut) == (0, bound, False)
    assert r.returncode == 0 and list(tmp_path.iterdir()) == []


def test_lanes_bound_each_snippet_by_default():
    script, _ = batch(SNIPPETS, lanes=2)
    assert f"head -c {SECTION_MAX + 1}" in script
    assert "head -c" not in batch(SNIPPETS)[0]  # writes (one shell, stop_on_error) are not cut


@pytest.mark.reliability(item=26, fault="a read script ended by the host's timeout after the connection went away",
                         checks=("no leftovers",))
def test_a_script_whose_connection_is_gone_still_removes_its_folder(tmp_path):
    # The reader goes away (the connection cut off), then timeout(1) ends the script's group, as on a host.
    # Every lane hung (a fact script on a host whose nvidia-smi hangs): the shell's words about the lanes
    # the signal killed meet the closed pipe.
    # A sleep of its own length: a sandbox host's or another test's sleep is in this machine's process table too.
    secs = str(70000 + os.getpid() % 9999)
    script, _ = batch([(f"hung{i}", f"sleep {secs}") for i in range(6)] + [("a", "echo a")], lanes=6)
    (tmp_path / "s.sh").write_text(script)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    subprocess.run(f"timeout -s TERM -k 10 2 sh -c 'eval \"$(cat)\"' < {tmp_path}/s.sh 2>&1 | (sleep 0.5; exit 0)",
                   shell=True, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)}, timeout=60)
    def left() -> bool:
        return bool(list(tmp.iterdir())) or subprocess.run(["pgrep", "-f", f"^sleep {secs}$"],
                                                           capture_output=True).returncode == 0

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and left():
        time.sleep(0.2)
    assert list(tmp.iterdir()) == []
    assert subprocess.run(["pgrep", "-f", f"^sleep {secs}$"], capture_output=True).returncode == 1


# -- time limits: a snippet that hangs (a hung nvidia-smi printing nothing) ends alone --------------------------

def _sleeping(secs: str) -> bool:
    return subprocess.run(["pgrep", "-f", f"^sleep {secs}$"], capture_output=True).returncode == 0


@pytest.mark.reliability(item=34, fault="a read snippet that hangs printing nothing (a hung nvidia-smi)", variants=2,
                         checks=("no leftovers", "no hang"))
@pytest.mark.parametrize("lanes", [1, 3])
def test_a_snippet_past_its_time_limit_ends_alone_and_the_others_are_read(tmp_path, lanes):
    from bringup.ssh.script import TIMED_OUT

    secs = str(71000 + os.getpid() % 9999)
    # The hung snippet's child (sleep) is ended with it: timeout(1) ends the snippet's whole group.
    snippets = [("hung", f"echo before; sleep {secs}; echo never"), ("a", "echo a"), ("b", "echo b; exit 3")]
    script, token = batch(snippets, lanes=lanes, section_max=SECTION_MAX, time_limit_s=1)
    r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}, timeout=60)
    hung, a, b = split(r.stdout, token, [k for k, _ in snippets], section_max=SECTION_MAX)
    assert (hung.rc, hung.output) == (TIMED_OUT, "before\n")
    assert [(s.rc, s.output) for s in (a, b)] == [(0, "a\n"), (3, "b\n")]
    assert r.returncode == 0 and list(tmp_path.iterdir()) == [] and not _sleeping(secs)


@pytest.mark.reliability(item=34, fault="a read script under time limits stopped by the host's timeout, the "
                         "connection gone", checks=("no leftovers",))
def test_a_stopped_script_stops_its_timed_snippets_too(tmp_path):
    # Each timed snippet runs in a process group of its own: the script's traps end them, not only its lanes.
    secs = str(72000 + os.getpid() % 9999)
    script, _ = batch([(f"hung{i}", f"sleep {secs}") for i in range(4)] + [("a", "echo a")], lanes=4,
                      section_max=SECTION_MAX, time_limit_s=600)
    (tmp_path / "s.sh").write_text(script)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    subprocess.run(f"timeout -s TERM -k 10 2 sh -c 'eval \"$(cat)\"' < {tmp_path}/s.sh 2>&1 | (sleep 0.5; exit 0)",
                   shell=True, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)}, timeout=60)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (list(tmp.iterdir()) or _sleeping(secs)):
        time.sleep(0.2)
    assert list(tmp.iterdir()) == [] and not _sleeping(secs)


@pytest.mark.reliability(item=40, fault="host output of 20,000 begin markers without their end (section split)",
                         checks=("no hang", "one clear line"))
def test_the_split_is_linear_on_begin_markers_left_without_their_end():
    """A pattern spanning a section's body rescanned the rest of the output from every unended begin: 8,000
    of them (0.9 MB) took 22 s, 20,000 would take minutes.  Markers are now matched one after another."""
    token = "tok1"
    flood = "".join(f"\n@@{token}:B:0\n" + "x" * 100 for _ in range(20_000))
    out = f"\n@@{token}:B:1\nreal\n@@{token}:E:1:0\n" + flood
    started = time.monotonic()
    sections = split(out, token, ["a", "b"])
    assert time.monotonic() - started < 10
    assert sections[1].rc == 0 and sections[1].output == "real"
    assert sections[0].rc is None  # begun, never ended: named as cut short, never read as whole


def test_a_marker_with_an_absurd_number_is_no_marker_and_no_traceback():
    token = "tok2"
    out = f"\n@@{token}:B:0\nhello\n@@{token}:E:0:{'9' * 5000}\n\n@@{token}:B:{'1' * 5000}\nx\n"
    a, = split(out, token, ["a"])
    assert a.rc is None and a.output.startswith("hello")


@pytest.mark.parametrize("lanes", [1, 3])
def test_small_snippets_give_the_same_sections_without_the_bounds_pipe(tmp_path, lanes):
    # ``small`` (Resource.read_small): no pipe to head around the snippet; the same output and status.
    where = 'if [ -p /dev/stdout ]; then echo piped; else echo direct; fi'
    snippets = [*SNIPPETS, ("w", where)]
    keys = [k for k, _ in snippets]
    want = [(0, "x\n\n"), (3, "y"), (0, ""), (0, "out\n"), (9, "")]
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    every = range(len(snippets))
    for small in ((), every, [i for i in every if i != 1]):
        script, token = batch(snippets, lanes=lanes, section_max=4096, small=small, in_shell={3} if lanes > 1 else ())
        r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True, env=env)
        got = [(s.rc, s.output) for s in split(r.stdout, token, keys, section_max=4096)]
        assert got[:-1] == want, small
        if lanes > 1 and small is not every:  # a lane writes to its file: only the bound's pipe makes stdout a pipe
            assert got[-1] == (0, "direct\n" if small else "piped\n"), small
        if small is every:
            # Small snippets alone run in order in the script's own shell (its stdout: a pipe here): no lane, no
            # folder on the host, no timeout(1) probe even with a time limit.
            assert got[-1] == (0, "piped\n")
            timed, _ = batch(snippets, lanes=lanes, section_max=4096, small=small, time_limit_s=5)
            assert "mktemp" not in script + timed and "timeout" not in timed
        assert r.returncode == 0 and list(tmp_path.iterdir()) == []


def test_a_kernel_parameters_read_prints_what_cat_printed():
    # Sysctl.read is small (head -c, no bound's pipe): its output is the whole value, as cat's was; the
    # shell's own read would see "4" of "4096 ..." (a /proc/sys file answers its first read() only).
    from bringup.resources.sysctl import Sysctl

    for key in ("net.ipv4.tcp_rmem", "vm.swappiness", "kernel.pid_max", "net.core.no_such_key_here"):
        r = Sysctl(key, "4096 131072 6291456" if key == "net.ipv4.tcp_rmem" else 1)
        assert r.read_small
        got = subprocess.run(["sh", "-c", r.read()], capture_output=True, text=True).stdout
        proc = r.proc
        if not os.path.isfile(proc):
            assert got == "absent\n"
            continue
        with open(proc) as f:
            value = f.read()
        assert got == ("value=" if os.access(proc, os.W_OK) else "readonly=") + value, key


def _local():
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import LocalTransport

    return LocalTransport(Host("ctl", ["all"], {}, ConnectionVars(ansible_connection="local")))


KEYS = ("net.ipv4.tcp_rmem", "vm.swappiness", "net.core.no_such_key_here", "kernel.pid_max", "vm.swappiness")


def test_kernel_parameters_read_together_read_what_each_reads_alone():
    # Resource.read_together: one snippet (a status word per key, one head -v) for a host's Sysctl resources;
    # each gets what its own read prints, absent, duplicated and with other resources between them too.
    from bringup.engine.pending import PendingHandlers
    from bringup.engine.rolerun import _reads, read
    from bringup.resources.sysctl import Sysctl

    rs = [Sysctl(k, "4096 131072 6291456" if k.endswith("rmem") else 1) for k in KEYS]
    alone = [subprocess.run(["sh", "-c", r.read()], capture_output=True, text=True).stdout for r in rs]
    owed = PendingHandlers("/nonexistent/pending")
    mixed = [rs[0], owed, *rs[1:]]
    assert [idx for idx, _, _ in _reads(mixed)] == [[0, 2, 3, 4, 5], [1]]  # one snippet for the five
    got = read(_local(), mixed)
    assert [got[0], *got[2:]] == alone and got[1] == ""
    assert "value=" in alone[0] and alone[2] == "absent\n"


def test_a_damaged_answer_of_parameters_read_together_is_unreadable_never_a_value():
    from bringup.resources.sysctl import Sysctl

    rs = [Sysctl(k, 1) for k in ("vm.swappiness", "kernel.pid_max")]
    _, split_ = Sysctl.read_together(rs)
    assert split_("value\nvalue\n==> /proc/sys/vm/swappiness <==\n10\n\n==> /proc/sys/kernel/pid_max <==\n7\n") == \
        ["value=10\n", "value=7\n"]
    for damaged in ("", "value\n", "value\nnonsense\n", "\xff\xfe", "value"):
        with pytest.raises(ValueError):
            split_(damaged)
    # A file named but cut before its header: nothing read for it, as a failed cat printed nothing.
    assert split_("value\nreadonly\n==> /proc/sys/vm/swappiness <==\n10\n") == ["value=10\n", "readonly="]


def test_verdicts_read_nothing_together_and_plan_as_before():
    # Skip/Fail/Unused read nothing: one empty section per class (read_together), no section bound's pipe for
    # a lone one (read_small); their plans are the verdicts they were made with.
    from bringup.engine.rolerun import _reads, plan_of, read
    from bringup.resources.guard import Fail, Skip, Unused
    from bringup.resources.sysctl import Sysctl

    rs = [Skip("a", "why a"), Sysctl("vm.swappiness", 1), Skip("b", "why b"), Fail("c", "bad"), Unused("d", "none")]
    assert [idx for idx, _, _ in _reads(rs)] == [[0, 2], [1], [3], [4]]
    got = read(_local(), rs)
    assert got[0] == got[2] == got[3] == got[4] == "" and got[1].startswith(("value=", "readonly="))
    plans = [plan_of(r, o) for r, o in zip(rs, got)]
    assert [(p.skipped, p.reason, p.error) for p in (plans[0], plans[2], plans[4])] == \
        [(True, "why a", None), (True, "why b", None), (True, "none", None)]
    assert plans[3].error == "bad"
    assert plan_of(rs[0], None).error  # a section cut short: unreadable, as before


def test_a_sysctl_roles_read_runs_no_bounds_pipe_and_its_reads_bound_themselves(tmp_path):
    # The sysctl role's read (its keys together, its file, the handlers owed) bounds each read by itself: no
    # section bound's pipe, head and status capture around any (four processes each, where the host's shell
    # tests alone answer for an absent file); what each prints is what it printed under the bound.
    from bringup.engine.pending import PendingHandlers
    from bringup.engine.rolerun import read
    from bringup.resources.files import DIFF_LIMIT, File
    from bringup.resources.sysctl import Sysctl
    from bringup.ssh.script import SECTION_MAX

    class Capture:
        def __init__(self):
            self.inner = _local()

        def run_script(self, script, *a, **kw):
            self.script = script
            return self.inner.run_script(script, *a, **kw)

    conf = tmp_path / "90-test.conf"
    conf.write_text("vm.swappiness = 1\n")
    owed_file = tmp_path / "pending"
    rs = [Sysctl(k, 1) for k in ("vm.swappiness", "kernel.pid_max")]
    big = File(str(tmp_path / "big"), content="wanted\n")
    (tmp_path / "big").write_bytes(b"x" * (DIFF_LIMIT - 1) + b"\n")
    t = Capture()
    for present in (False, True):
        if present:
            owed_file.write_text("sysctl:reload\n")
        got = read(t, [*rs, File(str(conf), content="vm.swappiness = 1\n"), big, PendingHandlers(str(owed_file))])
        assert "head -c %d >&4" % (SECTION_MAX + 1) not in t.script, t.script
        assert got[0].startswith(("value=", "readonly=")) and "sha256=" in got[2] and "content=" not in got[2]
        assert got[4] == ("sysctl:reload\n" if present else "")
    # A file changed: its content comes for the diff, whole up to DIFF_LIMIT, through head -c.
    assert "content=" in got[3] and len(got[3].split("content=", 1)[1].strip()) == -(-DIFF_LIMIT // 3) * 4
    # The handlers' file over the section bound reads as cut (unreadable), as under the bound's pipe.
    with open(owed_file, "wb") as f:
        f.truncate(SECTION_MAX + 10)
    assert read(t, [*rs, PendingHandlers(str(owed_file))])[2] is None
