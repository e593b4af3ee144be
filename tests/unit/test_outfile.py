"""Issue 40 item 2: pages, reports and results are replaced whole, never written through a planted link or
into a FIFO, and an ``--out`` folder that is a link out of its own folder is refused naming the link.

The checklist is run for real through Invoke (``--facts``: no connection); what it wrote, and what the
planted link points at, are read back from the file system."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bringup.errors import InputError
from bringup import outfile
from bringup.outfile import out_folder, sub_folder, write_atomic

from .fixture_hosts import h200_facts

REPO = Path(__file__).resolve().parents[2]


def _invoke(*args, cwd):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180)


def _setup(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "h200.json").write_text(json.dumps({"host": "h200", "facts": h200_facts()}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200": {
        "ansible_host": "127.0.0.1", "ansible_port": 9}}}}))


@pytest.mark.reliability(item=40, fault="checklist pages over a planted link (to a file outside) and a FIFO",
                         variants=3, checks=("others' files kept", "exit code"))
def test_checklist_pages_replace_a_planted_link_and_a_fifo(tmp_path):
    _setup(tmp_path)
    pages = tmp_path / "pages"
    pages.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (pages / "h200.md").symlink_to(victim)
    (pages / ".h200.html.tmp").symlink_to(victim)  # the old fixed temporary name
    os.mkfifo(pages / "h200.json")
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", cwd=tmp_path)
    assert r.returncode in (0, 2), r.stdout + r.stderr
    assert victim.read_text() == "precious\n"
    for ext in ("md", "html", "json"):
        st = (pages / f"h200.{ext}").lstat()
        assert stat.S_ISREG(st.st_mode), ext
    assert "h200" in (pages / "h200.md").read_text()
    json.loads((pages / "h200.json").read_text())
    assert not [p for p in pages.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


@pytest.mark.reliability(item=40, fault="--out naming a symbolic link out of its folder (checklist, bench)",
                         variants=2, checks=("one clear line", "exit code", "nothing touched"))
def test_an_out_folder_linked_outside_is_refused_naming_the_link(tmp_path):
    _setup(tmp_path)
    elsewhere = tmp_path.parent / (tmp_path.name + "-elsewhere")
    elsewhere.mkdir()
    (tmp_path / "pages").symlink_to(elsewhere)
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", cwd=tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1, r.stdout + r.stderr
    assert "symbolic link" in lines[0] and str(elsewhere) in lines[0], lines[0]
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(InputError, match="symbolic link"):
        out_folder(str(tmp_path / "pages"))
    # A link that stays beside it is an ordinary folder.
    (tmp_path / "pages.2026").mkdir()
    (tmp_path / "cur").symlink_to("pages.2026")
    assert out_folder(str(tmp_path / "cur")) == tmp_path / "cur"


def test_write_atomic_replaces_whole_keeps_the_old_file_on_a_fault_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "page.md"
    write_atomic(p, "one\n")
    assert p.read_text() == "one\n" and stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044

    class Boom(str):
        def encode(self, *a, **k):  # the text cannot be encoded: the fault comes before anything is written
            raise UnicodeError("boom")

    with pytest.raises(UnicodeError):
        write_atomic(p, Boom("two"))
    assert p.read_text() == "one\n" and sorted(x.name for x in tmp_path.iterdir()) == ["page.md"]
    # A FIFO under the final name: replaced at once, never opened (an open would wait for a reader).
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    t = threading.Thread(target=write_atomic, args=(fifo, "{}"), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive() and fifo.read_text() == "{}"


def test_sub_folder_refuses_a_planted_link(tmp_path):
    (tmp_path / "h1").symlink_to("/etc")
    with pytest.raises(InputError, match="symbolic link"):
        sub_folder(tmp_path, "h1")
    assert sub_folder(tmp_path, "h2").is_dir()


@pytest.mark.reliability(item=40, fault="--out of 5,000 characters (a name the file system refuses)", variants=1,
                         checks=("one clear line",))
def test_a_name_too_long_is_one_line(tmp_path):
    with pytest.raises(InputError, match="File name too long") as e:
        out_folder(str(tmp_path / ("x" * 5000)))
    assert len(str(e.value)) < 400


@pytest.mark.reliability(item=40, fault="--out lnk/sub: a folder on the way is a symbolic link out of its folder "
                                        "(relative, and absolute under the working folder)", variants=3,
                         checks=("one clear line", "exit code", "nothing touched"))
def test_an_out_folder_below_a_link_outside_is_refused_naming_the_link(tmp_path):
    _setup(tmp_path)
    elsewhere = tmp_path.parent / (tmp_path.name + "-away")
    elsewhere.mkdir()
    (tmp_path / "reports").symlink_to(elsewhere)
    for out in ("reports/sub", "reports/a/b", str(tmp_path / "reports" / "sub")):
        r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", out, cwd=tmp_path)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 1 and len(lines) == 1, r.stdout + r.stderr
        assert "goes through" in lines[0] and "reports" in lines[0] and str(elsewhere) in lines[0], lines[0]
        assert list(elsewhere.iterdir()) == [], out
    # A link on the way that stays inside its folder is an ordinary folder.
    (tmp_path / "real").mkdir()
    (tmp_path / "cur").symlink_to("real")
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "cur/pages", cwd=tmp_path)
    assert r.returncode in (0, 2) and (tmp_path / "real" / "pages").is_dir(), r.stdout + r.stderr


@pytest.mark.reliability(item=40, fault="a symbolic link or a FIFO planted at a log bringup appends to (tune --follow "
                                        "log), or at the pull state's old temporary name", variants=3,
                         checks=("nothing touched", "one clear line"))
def test_logs_and_pull_state_never_write_through_a_planted_link_or_fifo(tmp_path):
    from bringup.outfile import append_text
    from bringup.pull.record import State, save_state

    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    log = tmp_path / "follow.jsonl"
    log.symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        append_text(log, "x\n")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    done: list[str] = []

    def try_fifo() -> None:
        try:
            append_text(fifo, "x\n")
        except InputError as e:
            done.append(str(e))

    t = threading.Thread(target=try_fifo, daemon=True)
    t.start()
    t.join(10)
    assert done and "no regular file" in done[0], "appending to a FIFO with no reader waited or wrote"
    append_text(tmp_path / "real.jsonl", "a\n")
    append_text(tmp_path / "real.jsonl", "b\n")
    assert (tmp_path / "real.jsonl").read_text() == "a\nb\n"
    # The pull state's temporary name was .state.json.<pid>: a link planted there was written through.
    state = tmp_path / "state.json"
    (tmp_path / f".state.json.{os.getpid()}").symlink_to(victim)
    save_state(State(host="h1"), state)
    assert victim.read_text() == "keep\n" and json.loads(state.read_text())["host"] == "h1"
    assert not stat.S_ISLNK(os.lstat(state).st_mode)


@pytest.mark.reliability(item=40, fault="saved parsed facts ({\"facts\": ...}) holding NaN, Infinity, 1e308 or a "
                                        "400-digit number inside a GPU's fields", variants=4,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e308", "1" * 400])
def test_saved_facts_with_absurd_numbers_are_refused_not_passed(tmp_path, value):
    _setup(tmp_path)
    text = (tmp_path / "h200.json").read_text()
    assert text.count('"pcie_width_current": 16') == 1
    (tmp_path / "h200.json").write_text(text.replace('"pcie_width_current": 16', f'"pcie_width_current": {value}'))
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", cwd=tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "pcie_width_current" in lines[0], r.stdout + r.stderr
    assert "no reading a host gives" in lines[0] and not (tmp_path / "pages").exists()


@pytest.mark.reliability(item=40, fault="a folder under one of a host's checklist page names (a traceback, "
                                        "the .md written without the .json)",
                         checks=("one clear line", "exit code", "nothing touched"))
def test_a_folder_under_a_page_name_is_one_line_and_no_page_of_the_set_is_written(tmp_path):
    """F6: os.replace over a folder raised IsADirectoryError after h200.md was written: a traceback and a
    partial set.  Every name of the set is checked first; one line names the folder; no page is written."""
    _setup(tmp_path)
    (tmp_path / "pages" / "h200.html").mkdir(parents=True)
    r = _invoke("checklist", "--host", "h200", "--facts", "h200.json", "--out", "pages", cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "Traceback" not in out, out
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [
        "error: pages/h200.html is a folder: bringup writes a file under that name; move the folder away or remove "
        "it, then run again (none of the 3 files that go together was written)"], out
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == ["h200.html"]


def test_write_set_writes_all_or_none(tmp_path):
    from bringup.outfile import write_set

    (tmp_path / "b.csv").mkdir()
    with pytest.raises(InputError) as e:
        write_set([(tmp_path / "a.json", "{}\n"), (tmp_path / "b.csv", "x\n")])
    assert str(e.value) == (f"{tmp_path}/b.csv is a folder: bringup writes a file under that name; move the folder "
                            "away or remove it, then run again (none of the 2 files that go together was written)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]
    (tmp_path / "b.csv").rmdir()
    assert write_set([(tmp_path / "a.json", "{}\n"), (tmp_path / "b.csv", "x\n")]) == [tmp_path / "a.json",
                                                                                      tmp_path / "b.csv"]
    assert (tmp_path / "a.json").read_text() == "{}\n" and (tmp_path / "b.csv").read_text() == "x\n"
    # A fault while the second file is written: the first is not renamed into place either, no temporary left.
    real = os.fsync
    calls = []

    def second_fails(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(fd)

    os.fsync = second_fails
    try:
        with pytest.raises(OSError, match="No space left"):
            write_set([(tmp_path / "a.json", "new\n"), (tmp_path / "b.csv", "new\n")])
    finally:
        os.fsync = real
    assert (tmp_path / "a.json").read_text() == "{}\n" and (tmp_path / "b.csv").read_text() == "x\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.csv"]
    (tmp_path / "one.md").mkdir()
    with pytest.raises(InputError, match=r"one\.md is a folder: .*then run again \(nothing was written\)$"):
        write_atomic(tmp_path / "one.md", "x")


@pytest.mark.reliability(item=40, fault="a Ctrl-C or SIGTERM between the renames of a host's pages: the .md of "
                                        "this run left beside the .html and .json of the last", variants=2,
                         checks=("whole old or new file", "no leftovers"))
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_between_the_renames_of_a_set_never_leaves_two_runs_pages(tmp_path, monkeypatch, sig):
    import signal

    from bringup import outfile

    class Stopped(Exception):
        pass

    def stop(signum, _frame):
        raise Stopped(signum)

    names = [tmp_path / f"h.{ext}" for ext in ("md", "html", "json")]
    for p in names:
        p.write_text("old\n")
    real = os.replace

    def replace_then_signal(src, dst, **kw):  # the folder's descriptor in kw
        real(src, dst, **kw)
        os.kill(os.getpid(), getattr(signal, sig))  # arrives between this rename and the next

    before = signal.signal(getattr(signal, sig), stop)
    monkeypatch.setattr(outfile.os, "replace", replace_then_signal)
    try:
        with pytest.raises(Stopped):  # still taken, once the set is whole
            outfile.write_set([(p, "new\n") for p in names])
    finally:
        signal.signal(getattr(signal, sig), before)
    assert [p.read_text() for p in names] == ["new\n"] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.html", "h.json", "h.md"]
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, set()) & {signal.SIGINT, signal.SIGTERM}  # mask restored



@pytest.mark.reliability(item=40, fault="two signals between the renames of a set (SIGINT, SIGTERM), the first one's "
                                        "handler raising as it is raised again, or one raising as the handlers come "
                                        "back or are swapped: the second was lost, or a recorder was left in place",
                         variants=3, checks=("whole old or new file", "exit code"))
def test_two_signals_held_by_a_set_are_both_taken_and_every_handler_comes_back(tmp_path, monkeypatch):
    import signal

    from bringup import outfile

    class Stopped(Exception):
        pass

    took: list[int] = []

    def stop(signum, _frame):
        took.append(signum)
        if signum == signal.SIGINT:
            raise Stopped(signum)

    real_replace, real_signal = os.replace, signal.signal
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for s in saved:
            real_signal(s, stop)
        # 1. SIGINT (its handler raising) and SIGTERM both come between two renames: both are taken after the set.
        def replace_then_two(src, dst, **kw):
            real_replace(src, dst, **kw)
            if not took:
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)

        monkeypatch.setattr(outfile.os, "replace", replace_then_two)
        names = [tmp_path / f"h.{ext}" for ext in ("md", "html")]
        with pytest.raises(Stopped):
            outfile.write_set([(p, "new\n") for p in names])
        monkeypatch.undo()
        assert took == [signal.SIGINT, signal.SIGTERM] and [p.read_text() for p in names] == ["new\n"] * 2
        assert signal.getsignal(signal.SIGINT) is stop and signal.getsignal(signal.SIGTERM) is stop

        # 2. A Ctrl-C landing as SIGINT's handler comes back (it raises there): SIGTERM's comes back all the same.
        # 3. A SIGTERM whose handler raises (pull's Stopped) landing between the swaps of the hold: SIGINT's
        #    handler is put back, no recorder left in its place.
        def term_raises(signum, _frame):
            raise Stopped(signum)

        for when, term in (("release", stop), ("hold", term_raises)):
            real_signal(signal.SIGTERM, term)
            swaps = []

            def signal_then_one_more(s, h):
                old = real_signal(s, h)
                swaps.append(s)
                if when == "release" and s == signal.SIGINT and h is stop:
                    os.kill(os.getpid(), signal.SIGINT)
                if when == "hold" and len(swaps) == 1:
                    os.kill(os.getpid(), signal.SIGTERM)
                return old

            monkeypatch.setattr(outfile.signal, "signal", signal_then_one_more)
            with pytest.raises(Stopped):
                outfile.write_set([(tmp_path / f"{when}.md", "x")])
            monkeypatch.undo()
            assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == (stop, term), when
    finally:
        for s, h in saved.items():
            real_signal(s, h)


_SET_KILLED = """
import os, signal, sys, threading, time
from pathlib import Path
from bringup import outfile
d = Path(sys.argv[1])
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()  # a transport's thread, alive
real = os.replace
def replace_then_signal(src, dst, **kw):
    real(src, dst, **kw)
    os.kill(os.getpid(), signal.SIGTERM)  # the default action: the process ends, Python or not
outfile.os.replace = replace_then_signal
outfile.write_set([(d / f"h.{ext}", "new") for ext in ("md", "html", "json")])
print("not reached")
"""


def test_a_sigterm_of_default_action_between_the_renames_ends_the_run_after_the_set(tmp_path):
    # A mask of the main thread alone let the kernel hand SIGTERM to another thread, which ended the process
    # between two renames; the handlers are replaced instead, and the signal raised again once the set is whole.
    import signal

    for ext in ("md", "html", "json"):
        (tmp_path / f"h.{ext}").write_text("old")
    r = subprocess.run([sys.executable, "-c", _SET_KILLED, str(tmp_path)], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert r.returncode == -signal.SIGTERM and "not reached" not in r.stdout, (r.returncode, r.stderr[-500:])
    assert [(tmp_path / f"h.{ext}").read_text() for ext in ("md", "html", "json")] == ["new"] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.html", "h.json", "h.md"]


@pytest.mark.parametrize("ext", ["json", "csv"])
def test_a_folder_under_a_bench_result_name_keeps_neither_file(tmp_path, ext):
    """F6: bench wrote the JSON, then os.replace over a folder named like the CSV was a traceback after
    measuring, the JSON kept without its CSV."""
    from bringup.latency.results import write_json_csv

    doc = {"host": "h1", "finished": "2026-01-02T03:04:05+00:00"}
    (tmp_path / f"h1-20260102T030405Z.{ext}").mkdir()
    with pytest.raises(InputError, match=rf"h1-20260102T030405Z\.{ext} is a folder: .*none of the 2 files"):
        write_json_csv(doc, tmp_path, "", ["a"], [{"a": 1}])
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"h1-20260102T030405Z.{ext}"]


@pytest.mark.reliability(item=40, fault="a full disk under --out (a 64 KiB tmpfs): checklist pages ended in an "
                                        "OSError traceback", variants=2,
                         checks=("one clear line", "exit code", "no leftovers"))
def test_a_full_disk_under_the_pages_is_one_line_and_no_partial_file(tmp_path):
    """A real full disk: a tmpfs of 64 KiB mounted in a mount namespace of the test's own (``unshare -rm``),
    40 KiB of it taken, the checklist's three pages (about 30 KiB) written into it."""
    import shutil

    if not shutil.which("unshare"):
        pytest.fail("unshare is not installed (apt-get install util-linux)")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"no mount namespace here ({probe.stderr.strip()})")
    _setup(tmp_path)
    small = tmp_path / "small"
    small.mkdir()
    run = ('mount -t tmpfs -o size=64k tmpfs "$0" && head -c 40960 /dev/zero > "$0/fill" && mkdir "$0/pages" && '
           '"$1" -m invoke --search-root "$2" checklist --host h200 --facts h200.json --out "$0/pages"; '
           'echo "rc=$?"; ls -A "$0/pages"')
    r = subprocess.run(["unshare", "-rm", "sh", "-c", run, str(small), sys.executable, str(REPO)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {small}/pages/h200."), r.stderr
    assert "could not be written: No space left on device" in lines[0] and "the disk is full" in lines[0]
    assert "none of the 3 files that go together was written, no temporary file left" in lines[0]
    assert r.stdout.strip().splitlines()[-1] == "rc=1", r.stdout  # and ls -A listed nothing: no page, no .tmp


def test_write_set_says_a_failed_write_in_one_line_and_stays_an_oserror(tmp_path, monkeypatch):
    import errno

    from bringup.errors import BringupError
    from bringup.outfile import NotWritten, write_set

    def full(fd):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(NotWritten) as e:
        write_set([(tmp_path / "a.md", "x"), (tmp_path / "a.json", "{}")])
    assert isinstance(e.value, BringupError) and isinstance(e.value, OSError) and e.value.errno == errno.EDQUOT
    assert str(e.value).startswith(f"{tmp_path}/a.md: could not be written: Disk quota exceeded; ")
    assert os.listdir(tmp_path) == []


def test_a_log_line_the_disk_refuses_is_one_line_too(tmp_path, monkeypatch):
    # tune-window --follow's log (append_text): a full disk was an OSError traceback mid-run.
    import errno

    from bringup.outfile import NotWritten, append_text

    log = tmp_path / "window.log"
    append_text(log, "one\n")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(NotWritten) as e:
        append_text(log, "two\n")
    assert e.value.errno == errno.ENOSPC and str(e.value).startswith(
        f"{log}: could not be written: No space left on device; ") and "the line was not added" in str(e.value)
    monkeypatch.undo()
    assert log.read_text() == "one\n"


@pytest.mark.reliability(item=40, fault="two runs appending to one log on a full disk: the cut line taken back by "
                                        "truncating to the size before it, which cut the other run's line too",
                         variants=2, checks=("others' files kept", "one clear line"))
@pytest.mark.parametrize("other_after", [False, True])
def test_a_cut_log_line_is_taken_back_without_cutting_another_runs_line(tmp_path, monkeypatch, other_after):
    import errno

    from bringup import outfile
    from bringup.outfile import NotWritten, append_text

    log = tmp_path / "window.log"
    append_text(log, "one\n")
    real = os.write
    calls = []

    def short_beside_another_run(fd, data):
        calls.append(data)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        other = os.open(log, os.O_WRONLY | os.O_APPEND)
        try:
            if not other_after:
                real(other, b"other run\n")  # its whole line lands before this run's cut one
            wrote = real(fd, data[:3])
            if other_after:
                real(other, b"other run\n")  # after it: this run's cut bytes are no longer the log's end
        finally:
            os.close(other)
        return wrote

    monkeypatch.setattr(outfile.os, "write", short_beside_another_run)
    with pytest.raises(NotWritten) as e:
        append_text(log, "two two\n")
    monkeypatch.undo()
    if other_after:
        assert log.read_text() == "one\ntwoother run\n" and "the line was not added whole" in str(e.value)
    else:
        assert log.read_text() == "one\nother run\n" and "the log is as it was" in str(e.value)


@pytest.mark.reliability(item=40, fault="two runs appending to one log on a full disk: the other run's line landing "
                                        "between this run's short write and its retry, the take-back cut into it",
                         variants=2, checks=("others' files kept", "one clear line"))
@pytest.mark.parametrize("rest", ["refused", "written"])
def test_a_cut_log_line_whose_rest_lands_after_another_runs_line_never_cuts_that_line(tmp_path, monkeypatch, rest):
    import errno

    from bringup import outfile
    from bringup.outfile import NotWritten, append_text

    log = tmp_path / "window.log"
    append_text(log, "one\n")
    real = os.write
    calls = []

    def short_then_another_run(fd, data):
        calls.append(data)
        if len(calls) == 1:
            wrote = real(fd, data[:3])
            other = os.open(log, os.O_WRONLY | os.O_APPEND)
            real(other, b"other run\n")  # between this run's two writes
            os.close(other)
            return wrote
        if rest == "refused":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data[:2])  # part of the rest, after the other run's line

    monkeypatch.setattr(outfile.os, "write", short_then_another_run)
    with pytest.raises(NotWritten) as e:
        append_text(log, "two two\n")
    monkeypatch.undo()
    assert log.read_text() == "one\ntwoother run\n" and "the line was not added whole" in str(e.value)


_FSIZE_PROBE = """
import resource, sys
from pathlib import Path
from bringup.outfile import NotWritten, append_text, write_set
d = Path(sys.argv[1])
(d / "log").write_text("x" * 4050)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # files past 4 KiB refused (EFBIG), as a quota would
try:
    append_text(d / "log", '{"window_us": 100, "p95_ms": 12.5, "at": "2026-12-07T14:00:00Z", "pad": "' + "p" * 120 + '"}\\n')
except NotWritten as e:
    print("append:", e)
try:
    write_set([(d / "h1.md", "small"), (d / "h1.html", "h" * 10_000), (d / "h1.json", "{}")])
except NotWritten as e:
    print("set:", e)
"""


@pytest.mark.reliability(item=40, fault="a write the system cuts short (file size limit) in a set or a log",
                         variants=2, checks=("one clear line", "whole old or new file", "no leftovers"))
def test_a_write_cut_short_names_its_own_file_and_leaves_no_half_line(tmp_path):
    """write_set names the file whose write failed (it named the set's first, h1.md, when h1.html failed), and
    append_text leaves the log as it was (half a JSON line was left, the next line glued to it)."""
    r = subprocess.run([sys.executable, "-c", _FSIZE_PROBE, str(tmp_path)], capture_output=True, text=True,
                       timeout=60)
    lines = dict(ln.split(": ", 1) for ln in r.stdout.splitlines())
    assert set(lines) == {"append", "set"}, (r.stdout, r.stderr[-600:])
    assert lines["append"].startswith(f"{tmp_path / 'log'}: could not be written: File too large; "), lines
    assert "the log is as it was" in lines["append"]
    assert (tmp_path / "log").read_text() == "x" * 4050  # no half line
    assert lines["set"].startswith(f"{tmp_path / 'h1.html'}: could not be written: File too large; "), lines
    assert "none of the 3 files" in lines["set"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]  # no page, no temporary file


@pytest.mark.reliability(item=40, fault="reports/last.retry (any file bringup replaces) an operator tightened to 0600 "
                                        "was rewritten 0644: the mode was the writer's alone",
                         variants=3, checks=("others' files kept",))
@pytest.mark.parametrize("before,after", [(0o600, 0o600), (0o640, 0o640), (0o664, 0o644)])
def test_a_replaced_files_tightened_mode_is_kept_never_loosened(tmp_path, before, after):
    from bringup.engine.results import HostResult
    from bringup.engine.rollout import write_retry

    last = tmp_path / "last.retry"
    last.write_text("old\n")
    last.chmod(before)
    old = os.umask(0o022)
    try:
        write_retry(tmp_path, [HostResult(host="h1", status="failed")], "20260101T000000-provision")
    finally:
        os.umask(old)
    assert "h1" in last.read_text() and stat.S_IMODE(last.stat().st_mode) == after


def test_a_file_of_another_users_under_the_name_does_not_lend_its_mode(tmp_path):
    # Its 0600 on bringup's new file would lock that user out of a file now this user's: the writer's mode.
    p = tmp_path / "page.md"
    p.write_text("old\n")
    p.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(p, 65534, 65534)
    else:
        pytest.skip("needs root to make a file of another user's")
    outfile.write_atomic(p, "new\n", mode=0o644, umask=False)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644 and p.stat().st_uid == 0


@pytest.mark.reliability(item=40, fault="--out folder swapped for a symbolic link out of its folder between its check "
                                        "and the write (a bench of minutes): the pages were written where the link "
                                        "led", variants=2, checks=("one clear line", "others' files kept"))
@pytest.mark.parametrize("swapped", ["the folder", "a folder above it"])
def test_an_out_folder_swapped_for_a_link_after_its_check_is_never_written_through(tmp_path, monkeypatch, swapped):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "bench").mkdir(parents=True)
    (tmp_path / "reports" / "bench").mkdir(parents=True)
    out = outfile.out_folder("reports/bench")
    if swapped == "the folder":
        (tmp_path / "reports" / "bench").rename(tmp_path / "moved")
        (tmp_path / "reports" / "bench").symlink_to(elsewhere / "bench")
    else:
        (tmp_path / "reports").rename(tmp_path / "moved")
        (tmp_path / "reports").symlink_to(elsewhere)
    with pytest.raises(InputError) as e:
        outfile.write_set([(out / "h1.json", "{}\n"), (out / "h1.csv", "x\n")])
    assert "now, not to" in str(e.value) and "nothing was written there" in str(e.value), e.value
    assert list((elsewhere / "bench").iterdir()) == []


def test_a_checked_out_folder_still_in_place_is_written_and_a_link_inside_it_is_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "real").mkdir(parents=True)
    out = outfile.out_folder("out")
    (tmp_path / "out" / "lnk").symlink_to("real")
    outfile.write_set([(out / "a.md", "a"), (out / "lnk" / "b.md", "b")])
    assert (tmp_path / "out" / "a.md").read_text() == "a" and (tmp_path / "out" / "real" / "b.md").read_text() == "b"


def test_a_current_link_repointed_within_its_folder_is_written_through_as_checked(tmp_path):
    # --out /srv/reports/current, rotated by cron from day1 to day2 (beside it) during a long bench: out_folder's
    # own rule allows a link within the folder it sits in, and so does the write (a second reader: refused, the
    # measured pages lost).
    base = tmp_path / "srv"
    (base / "day1").mkdir(parents=True)
    (base / "day2").mkdir()
    (base / "current").symlink_to("day1")
    out = outfile.out_folder(str(base / "current"))
    (base / "current").unlink()
    (base / "current").symlink_to("day2")
    write_atomic(out / "h1.json", "{}\n")
    assert (base / "day2" / "h1.json").read_text() == "{}\n" and not (base / "day1" / "h1.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another group needs root")
def test_a_replaced_files_group_is_kept_with_its_mode_and_a_textfile_stays_0644(tmp_path):
    # A second reader: a page an operator made 0640 group adm came back 0640 group root (adm locked out), and a
    # metrics textfile (umask=False: the node exporter's user reads it) kept a 0600 a one-off umask left.
    page = tmp_path / "report.html"
    page.write_text("old")
    os.chown(page, -1, 4)
    page.chmod(0o640)
    write_atomic(page, "new")
    st = page.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o640, 4)
    prom = tmp_path / "bringup.prom"
    prom.write_text("x 1\n")
    prom.chmod(0o600)
    write_atomic(prom, "x 2\n", umask=False)
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644


@pytest.mark.skipif(os.geteuid() != 0, reason="writing as another user needs root to become it")
def test_a_folder_this_user_may_write_but_not_list_is_written(tmp_path):
    # A drop folder of mode 1733 (-wx for others): out_folder passes it; the write held it open for reading, which
    # failed (a second reader), so every page of the run was lost.
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="bringup-drop-", dir="/tmp"))  # pytest's own folders are root's alone
    request_cleanup = lambda: shutil.rmtree(top, ignore_errors=True)  # noqa: E731
    top.chmod(0o755)
    drop = top / "drop"
    drop.mkdir()
    drop.chmod(0o1733)
    # Imported as root (the interpreter's own files may be root's alone), then that user.
    code = ("import os, sys; sys.path.insert(0, sys.argv[2]); "
            "from bringup.outfile import out_folder, write_atomic; os.setgid(65534); os.setuid(65534); "
            "write_atomic(out_folder(sys.argv[1]) / 'h1.json', '{}')")
    r = subprocess.run([sys.executable, "-c", code, str(drop), str(Path(__file__).resolve().parents[2])],
                       capture_output=True, text=True, timeout=60)
    try:
        assert r.returncode == 0, r.stderr[-2000:]
        assert (drop / "h1.json").read_text() == "{}" and (drop / "h1.json").stat().st_uid == 65534
    finally:
        request_cleanup()


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another group than the writer's needs root to make")
def test_a_tightened_mode_is_kept_where_the_group_cannot_be(tmp_path):
    # A second reader of 8095599: a 0600 file of group root, rewritten by a user not of that group, came back 0644.
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="bringup-mode-", dir="/tmp"))
    try:
        top.chmod(0o755)
        f = top / "last.retry"
        f.write_text("old\n")
        os.chown(top, 65534, 65534)
        os.chown(f, 65534, 0)
        f.chmod(0o600)
        code = ("import os, sys; sys.path.insert(0, sys.argv[2]); from bringup.outfile import write_atomic; "
                "os.setgid(65534); os.setuid(65534); write_atomic(sys.argv[1], 'new')")
        r = subprocess.run([sys.executable, "-c", code, str(f), str(Path(__file__).resolve().parents[2])],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == "new"
    finally:
        shutil.rmtree(top, ignore_errors=True)
