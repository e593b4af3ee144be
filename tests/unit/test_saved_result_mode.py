"""A saved acceptance result is written by the shared writer (issue 40 item 2): its mode set on the open file,
never by a chmod of the temporary name, which a link swapped in there would lead to another file (as root: any)."""
from __future__ import annotations

import os
import stat
from datetime import datetime, timezone

import pytest

from bringup.checks import line


@pytest.mark.reliability(item=40, fault="accept result, tune-window record: a link swapped in under the temporary "
                                        "name before its mode is set", variants=2,
                         checks=("others' files kept",))
@pytest.mark.parametrize("writer", ["accept result", "window record"])
def test_a_link_swapped_in_under_the_temporary_name_never_has_its_target_chmodded(tmp_path, monkeypatch, writer):
    # Before: save() (and the window tuner's _replace_local) wrote the temporary file, closed it, then chmod'ed it
    # by name: a link put there in between made the file it leads to (here a 0600 secret) world-readable.
    from bringup.acceptance import saved
    from bringup.latency import window_tuner

    secret = tmp_path / "secret"
    secret.write_text("token")
    secret.chmod(0o600)
    out = tmp_path / "bringup"
    real_fdopen = os.fdopen

    class Swapping:
        """The temporary file, which on close is moved away and a link to the secret put under its name."""

        def __init__(self, f):
            self.f = f

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()
            tmp = next(p for p in out.iterdir() if p.name.startswith("."))
            tmp.rename(tmp_path / "moved")
            tmp.symlink_to(secret)
            return False

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **kw: Swapping(real_fdopen(fd, *a, **kw)))
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    if writer == "accept result":
        saved.save("h1", {"seconds": 1}, [line("acceptance", "x", "PASS", "seen", "")], out, when)
    else:
        out.mkdir()
        window_tuner.write_local_record(str(out / "triton-window.json"), "m", 800, "why", when.isoformat())
    monkeypatch.undo()
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_text() == "token"
    assert stat.S_IMODE((tmp_path / "moved").stat().st_mode) == 0o644  # the mode went to the result's own file


@pytest.mark.reliability(item=40, fault="tune-window record on the host: a byte that is not UTF-8 in a record the check "
                                        "took (a traceback ending the controller); the reason given recorded as null",
                         variants=2, checks=("one clear line", "data shown as data"))
def test_the_window_record_is_read_once_as_checked_and_keeps_the_reason_given(tmp_path):
    # Before: write_local_record checked the record through read_local (bytes that are not UTF-8 replaced), then
    # read it again with open() (following a link, waiting on a FIFO, strict UTF-8: UnicodeDecodeError, which no
    # caller takes, so the --follow controller died), and the check's None overwrote the reason it was given.
    import json

    from bringup.latency import window_tuner

    out = tmp_path / "bringup"
    out.mkdir()
    record = out / "triton-window.json"
    record.write_bytes(b'{"m": {"window_us": 500, "when": "2026-01-01", "why": "x\xff"}, '
                       b'"n": {"window_us": 700, "when": "2026-01-01", "why": "kept"}}')
    window_tuner.write_local_record(str(record), "m", 800, "p95 above target", "2026-12-07T00:00:00+00:00")
    doc = json.loads(record.read_text())
    assert doc["m"] == {"window_us": 800, "why": "p95 above target", "when": "2026-12-07T00:00:00+00:00"}
    assert doc["n"]["why"] == "kept"


_APPEND = """
import sys
from bringup.latency.window_tuner import _append
for name in sys.argv[1:]:
    _append(name, {"window_us": 800})
"""


@pytest.mark.reliability(item=40, fault="tune-window --follow on the host: a symbolic link or a FIFO planted at its log "
                                        "(written through the link, as root into any file; the controller waiting for "
                                        "ever on the FIFO)", variants=2,
                         checks=("others' files kept", "no hang", "one clear line"))
def test_the_host_tuners_log_is_never_written_through_a_link_or_into_a_fifo(tmp_path):
    import subprocess
    import sys

    victim = tmp_path / "victim"
    victim.write_text("root:x:0:0\n")
    (tmp_path / "link.jsonl").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo.jsonl")
    r = subprocess.run([sys.executable, "-c", _APPEND, *(str(tmp_path / n) for n in ("link.jsonl", "fifo.jsonl",
                                                                                     "own.jsonl"))],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-800:]
    assert victim.read_text() == "root:x:0:0\n"
    assert (tmp_path / "own.jsonl").read_text() == '{"window_us": 800}\n'
    warns = r.stderr.splitlines()
    assert len(warns) == 2 and "link.jsonl is a symbolic link: the interval is not logged there" in warns[0]
    assert "fifo.jsonl is no regular file (a FIFO, a device)" in warns[1]


_APPEND_CUT = """
import os, sys
from bringup.latency import window_tuner
real = os.write
def short(fd, data):
    if data.startswith(b"{"):
        return real(fd, data[:5])  # the disk fills mid-line
    return real(fd, data)
if sys.argv[2] == "short":
    window_tuner.os.write = short
else:
    def full(fd, data):
        if data.startswith(b"{"):
            raise OSError(28, "No space left on device")
        return real(fd, data)
    window_tuner.os.write = full
window_tuner._append(sys.argv[1], {"window_us": 800})
"""


@pytest.mark.reliability(item=40, fault="tune-window --follow on the host, its log's disk full: a cut line left for the "
                                        "next one to be glued to, and a WARN telling the operator to remove the "
                                        "tuner's own log", variants=2, checks=("one clear line", "whole old or new file"))
@pytest.mark.parametrize("how", ["short", "refused"])
def test_the_host_tuners_log_on_a_full_disk_is_kept_whole_and_not_to_be_removed(tmp_path, how):
    import subprocess
    import sys

    log = tmp_path / "own.jsonl"
    log.write_text('{"window_us": 700}\n')
    r = subprocess.run([sys.executable, "-c", _APPEND_CUT, str(log), how], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-800:]
    assert log.read_text() == '{"window_us": 700}\n'
    warns = r.stderr.splitlines()
    assert len(warns) == 1 and f"{log} cannot be written: " in warns[0] and "remove it" not in warns[0], warns
    assert "the log is as it was" in warns[0] or how == "refused", warns
