"""The host's run lock (bringup.ssh.runlock): its holder and fence scripts, run here by sh on a lock folder of the
test's own (``base``) instead of the user's; the same scripts a run sends to its hosts."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bringup.ssh.runlock import (ERR_KEPT, FENCED_RC, KEPT_MAX, OWNER_MAX, READ_MARK, SERVE_MAX, TAG_MARK, RunLock, fence, hold_script, keep_request,
                                 kept_hash, read_served, refusal, serve_request, then_output)


def holder(base: Path, who: str, wait_s: float, token: str = "t0") -> subprocess.Popen:
    p = subprocess.Popen(["sh", "-c", hold_script(token, wait_s, str(base))], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, bufsize=0)
    p.stdin.write(who.encode() + b"\n")
    p.stdin.flush()
    return p


def answer(p: subprocess.Popen, within: float = 60) -> str:
    ready, _, _ = select.select([p.stdout], [], [], within)
    assert ready, "the holder answered nothing"
    # Unbuffered (bufsize=0): a line read never leaves the next one in a buffer that select cannot see.
    return p.stdout.readline(100_000).decode()


def let_go(p: subprocess.Popen) -> None:
    p.stdin.close()
    assert p.wait(10) == 0


def script(base: Path, token: str, command: str, wait_s: float = 5) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", fence(token, command, wait_s, str(base))], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.reliability(item=26, fault="two provisions at once on one host (the host's run lock)",
                         variants=2, checks=("exit code",))
def test_the_run_lock_is_held_while_its_connection_lives_and_names_its_holder(tmp_path):
    base = tmp_path / "bringup"
    first = holder(base, "ops@ctl pid 1, since 10:00", 1, "t1")
    assert answer(first) == "locked\n"
    assert (base.stat().st_mode & 0o777, (base / "run.lock").stat().st_mode & 0o777) == (0o700, 0o600)
    second = holder(base, "ops@ctl pid 2", 1, "t2")
    line = answer(second)  # after waiting 1 s
    # The process that holds it, by pid (the first holder, on its connection), and who it is for.
    assert line == f"held pid {first.pid} (bringup run lock holder) bringup, |ops@ctl pid 1, since 10:00\n"
    assert second.wait(10) == 0
    assert refusal(line, 1) == ("another bringup run holds this host: ops@ctl pid 1, since 10:00 (its holder: pid "
                                f"{first.pid} (bringup run lock holder)); waited 1 s (run_lock_timeout) for it; run again once "
                                "it has ended")
    # The first run's connection goes (closed, or lost with the control machine): so does its lock.
    let_go(first)
    third = holder(base, "ops@ctl pid 3", 5, "t3")
    assert answer(third) == "locked\n"
    assert (base / "owner").read_text() == "ops@ctl pid 3\n"
    let_go(third)


def test_a_run_that_waits_for_the_lock_takes_it_once_the_run_before_lets_go(tmp_path):
    # The lock is tried at once first; where another run holds it, the holder waits (its clock read only then).
    base = tmp_path / "bringup"
    first = holder(base, "ops@ctl pid 21", 1, "f1")
    assert answer(first) == "locked\n"
    second = holder(base, "ops@ctl pid 22", 20, "f2")
    ready, _, _ = select.select([second.stdout], [], [], 1)
    assert not ready  # waiting: the first still holds it
    let_go(first)
    assert answer(second, 15) == "locked\n"
    assert (base / "owner").read_text() == "ops@ctl pid 22\n" and (base / "generation").read_text() == "f2\n"
    let_go(second)


@pytest.mark.reliability(item=34, fault="the control machine SIGKILLed while a script of its run waits to write "
                         "(the orphan on the host), then the next run", variants=2,
                         checks=("next run converges", "one clear line"))
def test_a_gone_runs_script_keeps_the_next_run_out_until_it_ends_and_is_fenced_after(tmp_path):
    base, out = tmp_path / "bringup", tmp_path / "file"
    a = holder(base, "ops@ctl pid 11, since 10:00", 5, "aaaa")
    assert answer(a) == "locked\n"
    # A's script starts a write that lands 3 s later, then its run dies (the control machine SIGKILLed: the
    # holder's connection goes, the script's child lives on), detached from everything a run would wait on.
    started = script(base, "aaaa", "sh -c 'sleep 3; echo a > \"$1\"' sh " + str(out) + " >/dev/null 2>&1 </dev/null &")
    assert started.returncode == 0, started.stderr
    os.killpg(a.pid, signal.SIGKILL)
    a.wait(10)

    # The next run, waiting 1 s: refused, naming the orphan's pid and the run it came from.
    b = holder(base, "ops@ctl pid 12", 1, "bbbb")
    line = answer(b)
    b.wait(10)
    assert line.startswith("busy pid ") and "sleep 3" in line and line.endswith("|ops@ctl pid 11, since 10:00\n")
    why = refusal(line, 1)
    assert why.startswith("a script of an earlier bringup run (ops@ctl pid 11, since 10:00) still runs on this "
                          "host and may still write: pid ") and "(kill " in why and "waited 1 s" in why, why
    assert not out.exists()

    # Waiting long enough: it begins only once the orphan has written and ended; nothing lands after.
    b = holder(base, "ops@ctl pid 12", 20, "bbbb")
    assert answer(b) == "locked\n"
    assert out.read_text() == "a\n"
    wrote = script(base, "bbbb", "echo b > " + str(out))
    assert wrote.returncode == 0 and out.read_text() == "b\n"
    # A script of the gone run sent now (its control side still alive, its holder killed) runs nothing.
    late = script(base, "aaaa", "echo a > " + str(out))
    assert late.returncode == FENCED_RC and out.read_text() == "b\n"
    assert RunLock(token="aaaa").lost(late.returncode, late.stderr) == "another run took the lock: ops@ctl pid 12"
    assert RunLock(token="bbbb").lost(late.returncode, late.stderr) is None  # another run's words, not this one's
    let_go(b)


def test_the_scripts_of_the_run_that_holds_the_lock_run_side_by_side_and_keep_the_fd(tmp_path):
    base = tmp_path / "bringup"
    a = holder(base, "ops", 5, "aaaa")
    assert answer(a) == "locked\n"
    # Shared: a script that holds scripts.lock does not keep the run's next script out.
    bg = subprocess.Popen(["sh", "-c", fence("aaaa", "sleep 3", 5, str(base))])
    t0 = time.monotonic()
    r = script(base, "aaaa", "sh -c 'ls -l /proc/self/fd/; echo ran'")
    assert r.returncode == 0 and r.stdout.endswith("ran\n") and time.monotonic() - t0 < 2.5, r
    assert str(base / "scripts.lock") in r.stdout  # what the script runs holds it too
    bg.wait(10)
    let_go(a)


@pytest.mark.reliability(item=34, fault="the lock folder or a lock file replaced by a link, a folder, a fifo, a file, "
                         "or owned by another user", variants=6, checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("make, path, words", [
    (lambda b, t: os.symlink(t, b), "", "a symbolic link, not a folder"),
    (lambda b, t: b.write_text("x"), "", "a regular file, not a folder"),
    (lambda b, t: (b.mkdir(mode=0o700), os.symlink(t, b / "run.lock")), "/run.lock", "a symbolic link, not a regular file"),
    (lambda b, t: (b.mkdir(mode=0o700), (b / "run.lock").mkdir()), "/run.lock", "a folder, not a regular file"),
    (lambda b, t: (b.mkdir(mode=0o700), os.mkfifo(b / "scripts.lock")), "/scripts.lock", "a special file, not a regular file"),
    (lambda b, t: (b.mkdir(mode=0o700), os.getuid() == 0 and os.chown(b, 65534, 65534)), "", "owned by uid "),
])
def test_a_lock_path_that_is_not_what_bringup_made_is_refused_with_its_reason(tmp_path, make, path, words):
    base, target = tmp_path / "bringup", tmp_path / "target"
    target.write_text("kept\n")
    make(base, target)
    if words == "owned by uid ":  # another user's folder: one made here and given away, or (not root) /run's
        base, words = (base, "owned by uid 65534") if os.getuid() == 0 else (Path("/run"), "owned by uid 0")
        words += f", not by uid {os.getuid()} that bringup runs as"
    p = holder(base, "ops", 1)
    line = answer(p, 20)
    assert p.wait(10) == 0
    assert line.startswith(f"refused {base}{path}: {words}"), line
    why = refusal(line)
    assert why.startswith(f"the host's run lock is refused: {base}{path}: {words}") and "remove it" in why, why
    assert "flock" not in why
    assert target.read_text() == "kept\n"  # a link is never followed


def test_a_lock_folder_of_loose_mode_is_made_private(tmp_path):
    base = tmp_path / "bringup"
    base.mkdir(mode=0o755)
    base.chmod(0o777)
    p = holder(base, "ops", 1)
    assert answer(p) == "locked\n"
    assert base.stat().st_mode & 0o777 == 0o700
    let_go(p)


@pytest.mark.reliability(item=34, fault="the run lock's folder cannot be made (a read-only /run, a file on the way) "
                         "or flock(1) is missing: each its own reason", variants=2, checks=("one clear line",))
def test_an_unusable_lock_folder_and_a_missing_flock_are_told_apart(tmp_path):
    (tmp_path / "file").write_text("")
    p = holder(tmp_path / "file" / "bringup", "ops", 1)
    line = answer(p)
    assert line.startswith(f"unusable {tmp_path}/file/bringup: mkdir: ") and "Not a directory" in line, line
    why = refusal(line)
    assert why.startswith("the host's run lock cannot be used: ") and "Not a directory" in why, why
    assert "flock" not in why

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("sh", "id", "head", "tr"):
        src = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        os.symlink(src, bin_ / tool)
    p = subprocess.Popen(["sh", "-c", hold_script("t0", 1, str(tmp_path / "b"))], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env={"PATH": str(bin_)})
    out, _ = p.communicate(b"ops\n", timeout=30)
    assert out == b"noflock\n"
    assert refusal(out.decode()) == "flock(1) was not found on the host: install util-linux (the host's run lock needs it)"
    assert not (tmp_path / "b").exists()


@pytest.mark.reliability(item=34, fault="a 20 MB owner file beside the run lock", checks=("one clear line", "no hang"))
def test_a_huge_owner_file_is_read_to_a_few_hundred_bytes(tmp_path):
    base = tmp_path / "bringup"
    a = holder(base, "ops", 1)
    assert answer(a) == "locked\n"
    with open(base / "owner", "wb") as f:
        f.write(b"\x1b[31m" + b"x" * (20 << 20) + b"\n")
    t0 = time.monotonic()
    b = holder(base, "ops 2", 1)
    line = answer(b)
    assert b.wait(10) == 0
    assert time.monotonic() - t0 < 10
    assert len(line) <= 701 and line.startswith("held ") and "\x1b" not in line, len(line)
    assert len(refusal(line, 1)) < 500
    let_go(a)


def test_answers_that_are_none_of_the_holders_own_are_named_as_such():
    assert refusal("locked\n") is None
    assert refusal("") == "the host's run lock could not be taken: no answer"
    assert refusal("sh: 1: Syntax error") == "the host's run lock could not be taken: sh: 1: Syntax error"
    assert refusal("held ") .startswith("another bringup run holds this host: another bringup run; ")
    assert refusal("busy |") .startswith("a script of an earlier bringup run (who, unknown) still runs on this host "
                                         "and may still write: its processes were not found; ")


@pytest.mark.parametrize("value", ["0", "-1", "abc", "3601"])
def test_a_bad_run_lock_timeout_is_one_line_naming_it(tmp_path, value):
    from bringup.errors import InventoryError
    from bringup.inventory.hosts import load_inventory

    (tmp_path / "hosts").write_text(f"all:\n  hosts:\n    h:\n      run_lock_timeout: {value}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(tmp_path / "hosts")
    assert "run_lock_timeout must be a number of seconds > 0, at most 3600" in str(e.value)
    assert load_inventory(tmp_path / "hosts", {"run_lock_timeout": 5}).hosts["h"].connection.run_lock_timeout == 5


@pytest.mark.reliability(item=40, fault="the host's run lock (run.lock, scripts.lock) held by a process that is not "
                                        "bringup's", checks=("one clear line", "exit code"))
@pytest.mark.parametrize("name, kind", [("run.lock", "held"), ("scripts.lock", "busy")])
def test_a_lock_another_process_holds_is_named_as_that_processs_not_a_runs_or_a_stale_one(tmp_path, name, kind):
    base = tmp_path / "bringup"
    a = holder(base, "ops@ctl pid 1, since 10:00", 1, "t1")
    assert answer(a) == "locked\n"
    let_go(a)   # the owner file still names that run: what the old line named as the one holding the lock
    other = subprocess.Popen(["flock", "-s" if kind == "busy" else "-x", str(base / name), "sleep", "60"],
                             start_new_session=True)
    try:
        time.sleep(0.5)
        b = holder(base, "ops@ctl pid 2", 1, "t2")
        line = answer(b)
        assert b.wait(10) == 0
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert line.startswith(f"{kind} pid {other.pid} (flock ") and " other, " in line, line
    why = refusal(line, 1)
    assert why.startswith(f"the host's run lock {'(scripts.lock) ' if kind == 'busy' else ''}is held by another "
                          f"process, not by {'a script of ' if kind == 'busy' else ''}a bringup run: pid "
                          f"{other.pid} (flock "), why
    assert "it is not a stale lock" in why and f"kill {other.pid}" in why, why
    assert ("(the last bringup run to take it: ops@ctl pid 1, since 10:00)" in why) == (kind == "held"), why
    # Gone with its process: the next run takes it.
    c = holder(base, "ops@ctl pid 3", 5, "t3")
    assert answer(c) == "locked\n"
    let_go(c)


def _then_holder(base: Path, who: str, wait_s: float, token: str, then: str) -> subprocess.Popen:
    p = subprocess.Popen(["sh", "-c", hold_script(token, wait_s, str(base), then)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, bufsize=0)
    p.stdin.write(who.encode() + b"\n")
    p.stdin.flush()
    return p


def _lines_to_end(p: subprocess.Popen, token: str) -> list[str]:
    lines = []
    while True:
        line = answer(p)
        assert line, "the holder ended before its end line"
        lines.append(line)
        if line.startswith(f"@@{token}:end:"):
            return lines


def test_the_holder_runs_its_then_command_only_once_it_holds_the_lock_and_keeps_holding_it(tmp_path):
    """One round trip for the lock and the facts: what the holder runs after ``locked`` is read back whole, with
    its exit status; it sees an empty stdin (the connection stays the lock's), the lock is still held after it,
    and a program it leaves running does not hold the lock (its descriptor is closed for it)."""
    base = tmp_path / "bringup"
    then = ("printf 'a\\nb'; cat; [ -e " + str(base / "run.lock") + " ] && echo; echo err >&2; "
            "(sleep 30 >/dev/null 2>&1 &) ; exit 3")
    first = _then_holder(base, "ops@ctl pid 1", 1, "t1", then)
    assert answer(first) == "locked\n"
    lines = _lines_to_end(first, "t1")
    assert then_output("t1", lines) == (3, "a\nb\n")
    assert then_output("t2", lines) is None and then_output("t1", lines[:-1]) is None
    # Still held: a second run is refused, naming the first (its holder, not the sleep left behind).
    second = holder(base, "ops@ctl pid 2", 1, "t2")
    line = answer(second)
    assert line.startswith("held pid ") and "(sleep" not in line and line.endswith("|ops@ctl pid 1\n")
    let_go(first)
    os.killpg(first.pid, signal.SIGKILL)  # the sleep left behind
    third = holder(base, "ops@ctl pid 3", 5, "t3")
    assert answer(third) == "locked\n"
    let_go(third)


def test_a_holder_refused_the_lock_runs_nothing_of_its_then_command(tmp_path):
    base, mark = tmp_path / "bringup", tmp_path / "ran"
    first = holder(base, "ops@ctl pid 1", 1, "t1")
    assert answer(first) == "locked\n"
    second = _then_holder(base, "ops@ctl pid 2", 1, "t2", f"touch {mark}")
    assert answer(second).startswith("held ")
    assert second.wait(10) == 0 and second.stdout.read() == b"" and not mark.exists()
    let_go(first)


def _serve(p: subprocess.Popen, token: str, script: str, seconds: int = 30, cut: int | None = None):
    req = serve_request(script, seconds)
    p.stdin.write(req if cut is None else req[:cut])
    p.stdin.flush()
    if cut is not None:
        return None
    return read_served(token, p.stdout.readline, 1 << 20)


@pytest.mark.reliability(item=26, fault="scripts served by the run lock's holder (one channel for the run)",
                         variants=1, checks=("exit code", "nothing executed"))
def test_the_holder_serves_the_runs_scripts_as_a_fenced_round_trip_would_run_them(tmp_path):
    """Once it holds the lock, the holder runs each script sent down its connection: exit status, stdout and
    stderr apart, with the login's umask (not the holder's 077), an empty stdin, scripts.lock held shared
    (what a script leaves running keeps the next run out) and run.lock's descriptor closed; stray output a
    script left behind is not taken for the next one's, and stderr does not stay on the host."""
    base, mark = tmp_path / "bringup", tmp_path / "made"
    old = os.umask(0o022)
    try:
        a = holder(base, "ops@ctl pid 1", 5, "s1")
    finally:
        os.umask(old)
    assert answer(a) == "locked\n"
    got = _serve(a, "s1", f"printf 'out\\n'; echo err >&2; cat; touch {mark}; ls -l /proc/$$/fd/; exit 4")
    assert got is not None and got.rc == 4 and got.stderr == b"err\n" and not got.out_over and not got.err_over
    assert got.stdout.startswith(b"out\n") and str(base / "scripts.lock").encode() in got.stdout
    assert str(base / "run.lock").encode() not in got.stdout
    assert mark.stat().st_mode & 0o777 == 0o644  # the login's umask (022), not the holder's
    assert (base / "stderr").stat().st_size == 0
    # Output without a last newline, an empty one, and one that is all newlines, come back as they were.
    assert _serve(a, "s1", "printf abc").stdout == b"abc"
    assert _serve(a, "s1", "true") == (0, b"", b"", False, False)
    assert _serve(a, "s1", "printf '\\n\\n'").stdout == b"\n\n"
    # A script that leaves a writer behind: what it prints later is not read as the next script's output.
    _serve(a, "s1", "(sleep 0.3; echo stray) &")
    time.sleep(0.6)
    assert _serve(a, "s1", "echo mine").stdout == b"mine\n"
    # stderr past its cap: cut and said, the rest dropped on the host.
    big = _serve(a, "s1", f"head -c {ERR_KEPT + 5000} /dev/zero | tr '\\0' x >&2")
    assert big.err_over and len(big.stderr) == ERR_KEPT
    # A served script that sleeps keeps scripts.lock: with the holder killed, the next run is kept out.
    a.stdin.write(serve_request(f"sleep 3; touch {mark}2", 30))
    a.stdin.flush()
    time.sleep(0.5)
    os.killpg(a.pid, signal.SIGKILL)  # the holder's group; the served sleep runs on in timeout's own group
    a.wait(10)
    b = holder(base, "ops@ctl pid 2", 1, "s2")
    line = answer(b)
    assert line.startswith("busy pid ") and line.endswith("|ops@ctl pid 1\n"), line
    b.wait(10)
    time.sleep(3)
    c = holder(base, "ops@ctl pid 3", 10, "s3")
    assert answer(c) == "locked\n" and (tmp_path / "made2").exists()
    let_go(c)


def test_a_served_request_cut_short_runs_nothing_and_the_holder_keeps_the_lock(tmp_path):
    """A request cut in the middle (the connection lost as it was sent) is a brace group without its end: the
    shell refuses it whole, so no part of a script ever runs; the lock is held until the connection goes."""
    base, mark = tmp_path / "bringup", tmp_path / "ran"
    a = holder(base, "ops@ctl pid 1", 5, "c1")
    assert answer(a) == "locked\n"
    script = f"touch {mark}\n" + "echo filler\n" * 50
    _serve(a, "c1", script, cut=len(serve_request(script, 30)) - 20)
    a.stdin.close()
    assert a.wait(10) == 0
    assert not mark.exists()
    b = holder(base, "ops@ctl pid 2", 5, "c2")
    assert answer(b) == "locked\n"
    let_go(b)


def test_an_answer_cut_before_its_last_line_is_none_and_a_flood_stops_the_reading():
    lines = iter([b"noise\n", b"@@t:begin\n", b"a\n", b"\n", b"@@t:end:0\n", b"e\n"])
    assert read_served("t", lambda n: next(lines, b""), 100) is None
    lines = iter([b"@@t:begin\n", b"x" * 60 + b"\n", b"y" * 60 + b"\n", b"@@t:end:0\n"])
    got = read_served("t", lambda n: next(lines, b"")[:n], 100)
    assert got is not None and got.out_over and got.rc == 255
    lines = iter([b"@@t:begin\n", b"a\n", b"\n", b"@@t:end:3\n", b"e\n", b"@@t:err\n"])
    assert read_served("t", lambda n: next(lines, b""), 100) == (3, b"a\n", b"e", False, False)


def _ahead_holder(base: Path, token: str, key: str, read_token: str) -> subprocess.Popen:
    p = subprocess.Popen(["sh", "-c", hold_script(token, 5, str(base), "echo facts", (key, read_token, 30))],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, bufsize=0)
    p.stdin.write(b"ops@ctl pid 1\n")
    p.stdin.flush()
    assert answer(p) == "locked\n"
    assert then_output(token, _lines_to_end(p, token)) == (0, "facts\n")
    return p


def _keep(p: subprocess.Popen, token: str, script: str, read_token: str, key: str):
    req, digest = keep_request(script, read_token, key, 30)
    p.stdin.write(req)
    p.stdin.flush()
    return read_served(token, p.stdout.readline, 1 << 20), digest


@pytest.mark.reliability(item=26, fault="a state read kept on the host for the next run's read ahead (planted link, "
                         "another key, a bad name)", variants=4, checks=("exit code", "nothing executed"))
def test_a_kept_state_read_is_read_ahead_by_the_next_run_with_the_same_key_and_its_own_token(tmp_path):
    """Issue 42 item 3: a run keeps its state read on the host (keep_request); the next run's holder with the same
    key runs it right after the facts, with that run's token put in, and names it by its hash: the facts, the lock
    and the state in one round trip.  Another key, a kept file that is a link, a keep request whose name is no
    key-hash pair: nothing is read ahead or kept, and nothing is written outside the lock folder."""
    base = tmp_path / "bringup"
    script = "printf '@@%s:B:0\\n' {t}; echo state; printf '@@%s:E:0:0\\n' {t}"
    first = _ahead_holder(base, "r1", "abc123", "1111111111111111")
    assert answer(first) == "@@r1:noahead\n"  # nothing kept yet
    mine = script.format(t="1111111111111111")
    got, digest = _keep(first, "r1", mine, "1111111111111111", "abc123")
    assert got is not None and got.rc == 0 and got.stdout == b"@@1111111111111111:B:0\nstate\n@@1111111111111111:E:0:0\n"
    assert digest == kept_hash(mine, "1111111111111111") == kept_hash(script.format(t="2222222222222222"),
                                                                       "2222222222222222")
    kept = base / f"ahead-abc123-{digest}"
    assert "1111111111111111" not in kept.read_text() and READ_MARK in kept.read_text()
    let_go(first)
    # The next run: the kept read runs ahead with its own token, named by the hash the control machine compares.
    second = _ahead_holder(base, "r2", "abc123", "2222222222222222")
    assert answer(second) == f"@@r2:ahead:{digest}\n"
    ahead = read_served("r2", second.stdout.readline, 1 << 20)
    assert ahead is not None and ahead.stdout == b"@@2222222222222222:B:0\nstate\n@@2222222222222222:E:0:0\n"
    let_go(second)
    # Another key: nothing read ahead.
    other = _ahead_holder(base, "r3", "def456", "3333333333333333")
    assert answer(other) == "@@r3:noahead\n"
    let_go(other)
    # A keep request whose name is not key-hash (a path, two dashes): the serving ends there, nothing kept.
    for bad in (b"10 30 ../../x-1\n", b"10 30 a-b-c\n", b"10 30 -abc\n"):
        p = _ahead_holder(base, "r4", "def456", "4444444444444444")
        assert answer(p) == "@@r4:noahead\n"
        p.stdin.write(bad + b"{\necho x\n}")
        p.stdin.flush()
        p.stdin.close()
        assert p.wait(10) == 0 and p.stdout.read() == b""
    assert sorted(f.name for f in base.iterdir() if f.name.startswith("ahead")) == [kept.name]
    assert not (tmp_path / "x-1").exists()
    # A kept read replaced by a link (to a script elsewhere): skipped, never run.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(f"touch {tmp_path / 'ran'}\n")
    kept.unlink()
    kept.symlink_to(elsewhere)
    last = _ahead_holder(base, "r5", "abc123", "5555555555555555")
    assert answer(last) == "@@r5:noahead\n"
    let_go(last)
    assert not (tmp_path / "ran").exists()


def test_a_state_read_that_did_not_end_well_is_not_kept_for_the_next_run(tmp_path):
    # A read cut by its time limit (a hung nvidia-smi) or failing whole is never read ahead by the next run: the
    # next run would wait on it before its own read.
    base = tmp_path / "bringup"
    first = _ahead_holder(base, "f1", "abc123", "6666666666666666")
    assert answer(first) == "@@f1:noahead\n"
    req, _ = keep_request("echo partial; exit 3", "6666666666666666", "abc123", 30)
    first.stdin.write(req)
    first.stdin.flush()
    got = read_served("f1", first.stdout.readline, 1 << 20)
    assert got is not None and got.rc == 3
    req, _ = keep_request("sleep 30", "6666666666666666", "abc124", 1)  # past its 1 s: ended by timeout(1)
    first.stdin.write(req)
    first.stdin.flush()
    got = read_served("f1", first.stdout.readline, 1 << 20)
    assert got is not None and got.rc == 124
    assert not [f for f in base.iterdir() if f.name.startswith("ahead")]
    let_go(first)


@pytest.mark.reliability(item=26, fault="a kept state read grown past the longest script served (a planted file)",
                         variants=1, checks=("exit code", "nothing executed"))
def test_a_kept_read_grown_past_the_longest_script_is_cut_and_runs_nothing(tmp_path):
    # Every read has a size cap: the holder reads at most SERVE_MAX bytes of a kept read (a request's body, never
    # longer).  A file grown past it is cut there, and its brace group, cut short, is a syntax error: nothing runs.
    base = tmp_path / "bringup"
    first = _ahead_holder(base, "g1", "abc123", "7777777777777777")
    got, digest = _keep(first, "g1", "echo state", "7777777777777777", "abc123")
    assert got is not None and got.rc == 0
    let_go(first)
    kept = base / f"ahead-abc123-{digest}"
    kept.write_text("{\n" + f"touch {tmp_path / 'ran'}\n" + "#" * (SERVE_MAX + 10) + "\n}\n")
    second = _ahead_holder(base, "g2", "abc123", "8888888888888888")
    assert answer(second) == f"@@g2:ahead:{digest}\n"
    ahead = read_served("g2", second.stdout.readline, 1 << 20)
    assert ahead is not None and ahead.rc != 0 and b"ran" not in ahead.stdout
    assert not (tmp_path / "ran").exists()
    # The holder serves on after it.
    assert _serve(second, "g2", "echo after").stdout == b"after\n"
    let_go(second)


def test_the_kept_reads_of_one_lock_folder_are_at_most_kept_max_the_oldest_dropped_first(tmp_path):
    # One kept read per selection of roles and facts: runs that change their selection keep at most KEPT_MAX.
    base = tmp_path / "bringup"
    p = _ahead_holder(base, "k1", "a0", "9999999999999999")
    keys = [f"{i:02x}" for i in range(KEPT_MAX + 3)]
    for n, key in enumerate(keys):
        got, _ = _keep(p, "k1", f"echo {n}", "9999999999999999", key)
        assert got is not None and got.rc == 0
        time.sleep(0.01)  # distinct mtimes: ls -t orders them
    let_go(p)
    left = sorted(f.name.split("-")[1] for f in base.iterdir() if f.name.startswith("ahead-"))
    assert left == keys[-KEPT_MAX:]


def test_a_state_read_with_timed_snippets_is_read_ahead_by_the_next_run(tmp_path):
    """A full provision's state read runs its snippets in lanes under timeout(1), each tagged in its environment
    (READ_TAG_ENV) so that what it leaves behind is killed.  That tag was random per script: no run's kept read was
    ever the next run's script, so every no-op made a second round trip (its read served again after the read
    ahead was dropped).  The tag is made from the read token, kept marked as the token is, and put back by the
    next run's holder: the same hash on both sides, and the read ahead is this run's very read, tags and all."""
    from bringup.ssh.script import READ_TAG_ENV, batch, read_tag, split

    def state_read(read_token: str) -> str:
        return batch([("a", "echo one"), ("b", "echo two; printenv " + READ_TAG_ENV), ("c", "echo 3")],
                     token=read_token, lanes=4, section_max=1 << 16, time_limit_s=30)[0]

    t1, t2 = "1111111111111111", "2222222222222222"
    assert read_tag(t1) != read_tag(t2) and t1 not in read_tag(t1)
    assert read_tag(t1) in state_read(t1)  # the script carries its tag (the leftovers' kill looks for it)
    assert kept_hash(state_read(t1), t1) == kept_hash(state_read(t2), t2)
    base = tmp_path / "bringup"
    first = _ahead_holder(base, "r1", "abc123", t1)
    assert answer(first) == "@@r1:noahead\n"
    got, digest = _keep(first, "r1", state_read(t1), t1, "abc123")
    assert got is not None and got.rc == 0
    kept = (base / f"ahead-abc123-{digest}").read_text()
    assert t1 not in kept and read_tag(t1) not in kept and TAG_MARK in kept and READ_MARK in kept
    let_go(first)
    second = _ahead_holder(base, "r2", "abc123", t2)
    assert answer(second) == f"@@r2:ahead:{digest}\n"  # what the control machine compares with its own read
    ahead = read_served("r2", second.stdout.readline, 1 << 20)
    assert ahead is not None and ahead.rc == 0
    secs = split(ahead.stdout.decode(), t2, ["a", "b", "c"], section_max=1 << 16)
    # The snippet's tag is the next run's own (put back by its holder), never the mark or the first run's.
    assert [s.output.strip() for s in secs] == ["one", f"two\n{read_tag(t2)}.1", "3"]
    let_go(second)
