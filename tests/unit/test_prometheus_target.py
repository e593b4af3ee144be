"""Issue 26: the Prometheus target of ``invoke drift --prometheus FILE`` under the tuner's --record rule.

bringup writes its textfile into the node exporter's collector folder, which other exporters share: what
is at the path must be nothing yet, or bringup's own textfile (every metric family one of
``bringup.engine.drift.METRICS``).  Another exporter's file, text that is not Prometheus', a link (even to
bringup's file) or a pipe is refused with one line, before the run and again at the write, and is left as
it was.  The write itself is atomic: a temporary file in the same folder, renamed; none left on failure.
"""
from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from bringup import outfile
from bringup.engine import drift as D
from bringup.engine.results import HostResult
from bringup.errors import InputError

from .test_drift import converged, drifted, report, samples

OTHER_EXPORTER = "# HELP node_raid_ok RAID healthy\n# TYPE node_raid_ok gauge\nnode_raid_ok 1\n"


def _not_bringups(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "bringup.prom"
    if kind == "another exporter's textfile":
        path.write_text(OTHER_EXPORTER)
    elif kind == "a file that is not Prometheus text":
        path.write_bytes(b"\x00\xffnot metrics {{{\n")
    elif kind == "a link to bringup's own textfile":
        D.write_prometheus(report(converged()), tmp_path / "real.prom")
        path.symlink_to(tmp_path / "real.prom")
    elif kind == "a pipe":
        os.mkfifo(path)
    return path


def _listing(folder: Path) -> dict[str, str]:
    return {p.name: (os.readlink(p) if p.is_symlink() else p.read_text(errors="replace") if p.is_file() else "?")
            for p in folder.iterdir()}


@pytest.mark.reliability(item=26, fault="--prometheus naming a file bringup did not write (another exporter's "
                                        ".prom, not Prometheus text, a link, a pipe)",
                         checks=("nothing touched", "others' files kept", "one clear line"))
@pytest.mark.parametrize("kind", ["another exporter's textfile", "a file that is not Prometheus text",
                                  "a link to bringup's own textfile", "a pipe"])
def test_a_prometheus_path_that_is_not_bringups_file_is_refused(tmp_path, kind):
    path = _not_bringups(tmp_path, kind)
    before = _listing(tmp_path)
    # Before the run (the task's check) and again at the write, after a run that took minutes.
    with pytest.raises(InputError) as e:
        D.check_prometheus_path(str(path))
    assert "\n" not in str(e.value) and str(e.value).startswith(f"--prometheus {path}: ")
    assert "bringup.prom" in str(e.value)  # how to fix: a file of its own
    with pytest.raises(FileExistsError, match="nothing written"):
        D.write_prometheus(report(drifted()), path)
    assert _listing(tmp_path) == before  # nothing replaced, followed or left behind


def test_bringups_own_or_an_empty_textfile_is_rewritten(tmp_path):
    path = tmp_path / "bringup.prom"
    path.write_text("")
    D.check_prometheus_path(str(path))
    D.write_prometheus(report(converged()), path)
    assert D.prometheus_file_problem(path) is None and D.check_prometheus_path(str(path)) == path
    D.write_prometheus(report(drifted()), path)
    assert ("bringup_drift_resources", (("host", "drift-01"), ("role", "sysctl"))) in samples(path.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bringup.prom"]


@pytest.mark.reliability(item=26, fault="--prometheus write failing mid-way (disk full while the temporary "
                                        "file is written, then at the rename)",
                         checks=("whole old or new file", "no leftovers"))
@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_a_write_failing_in_the_temporary_file_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, where):
    # Changed with F1: the textfile is written by bringup's write_atomic (mkstemp in the same folder, fchmod,
    # fsync, rename), no longer by prometheus_client's write_to_textfile; the fault is put where it now writes.
    path = tmp_path / "bringup.prom"
    D.write_prometheus(report(converged()), path)
    before = path.read_text()
    made = []
    real_temporary = outfile._temporary  # made through the folder's descriptor since the eighth pass (no mkstemp)

    def tracking_temporary(dfd, name):
        fd, tmp = real_temporary(dfd, name)
        made.append(os.path.join(os.readlink(f"/proc/self/fd/{dfd}"), tmp))
        return fd, tmp

    def full_disk(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outfile, "_temporary", tracking_temporary)
    monkeypatch.setattr(os, where, full_disk)
    with pytest.raises(OSError, match="No space left"):
        D.write_prometheus(report(drifted()), path)
    monkeypatch.undo()
    # The temporary file was in the same folder (the rename is atomic there), and is gone.
    assert made and all(Path(w).parent == tmp_path and Path(w).name.startswith(".bringup.prom.") for w in made)
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["bringup.prom"]


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "root_secret"
    secret.write_text("token\n")
    secret.chmod(0o600)
    return secret


def test_a_link_planted_at_the_temporary_name_is_never_followed(tmp_path):
    """F1: the folder is shared (the node exporter's); prometheus_client wrote ``<path>.<pid>.<tid>`` with a
    plain open() and chmodded by name: a link planted at that name had root write the target and make it 0644."""
    secret = _secret(tmp_path)
    folder = tmp_path / "textfiles"
    folder.mkdir()
    path = folder / "bringup.prom"
    (folder / f"bringup.prom.{os.getpid()}.{threading.current_thread().ident}").symlink_to(secret)
    D.write_prometheus(report(converged()), path)
    assert secret.read_text() == "token\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o644
    assert "bringup_drift_resources" in path.read_text()


def test_a_link_swapped_in_between_the_write_and_the_rename_never_gets_its_target_chmodded(tmp_path, monkeypatch):
    """F1: someone who can write the textfile folder swaps the temporary file for a link to a root-only file
    between its write and its rename; the rename puts the link in place, and nothing is chmodded by name."""
    secret = _secret(tmp_path)
    path = tmp_path / "bringup.prom"
    real = {n: getattr(os, n) for n in ("rename", "replace")}

    def swap_then(name):
        def moved(src, dst, *a, **kw):
            os.unlink(src, dir_fd=kw.get("src_dir_fd"))  # the name in the folder's descriptor, as the writer's
            os.symlink(secret, src, dir_fd=kw.get("src_dir_fd"))
            return real[name](src, dst, *a, **kw)
        return moved

    for n in real:
        monkeypatch.setattr(os, n, swap_then(n))
    D.write_prometheus(report(converged()), path)
    monkeypatch.undo()
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_text() == "token\n"


def test_the_textfile_is_0644_whatever_the_umask(tmp_path):
    """The node exporter runs as its own user: the mode is set on the descriptor, the umask left out."""
    old = os.umask(0o077)
    try:
        D.write_prometheus(report(converged()), tmp_path / "bringup.prom")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "bringup.prom").stat().st_mode) == 0o644


def test_a_label_value_that_is_not_utf8_text_is_one_line_and_nothing_written(tmp_path):
    """F9: a host name of raw bytes (``pull --name $'\\xff'``: a surrogate) ended in a UnicodeEncodeError traceback
    from the writer; it is an OSError naming the label, and the textfile is left as it was."""
    from bringup.pull import record

    path = tmp_path / "bringup-pull.prom"
    state = record.State(last=record.Attempt(at=1.0, status="error"))
    state.host = "\udcff"  # as pull's run sets it from --name (the model refuses it when state.json is read)
    with pytest.raises(OSError) as e:
        record.write_metrics(state, path)
    assert e.value.strerror == ("label host='\\udcff': not UTF-8 text; nothing written (name the host in "
                                "plain text)")
    assert e.value.filename == str(path) and list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match=r"label host='h\\udce9'"):
        D.write_prometheus(report(HostResult("h\udce9", status="unreachable", message="x")), path)
    assert list(tmp_path.iterdir()) == []
