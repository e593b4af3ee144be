"""Issue 26: the Prometheus target of ``invoke drift --prometheus FILE`` under the tuner's --record rule.

bringup writes its textfile into the node exporter's collector folder, which other exporters share: what
is at the path must be nothing yet, or bringup's own textfile (every metric family one of
``bringup.engine.drift.METRICS``).  Another exporter's file, text that is not Prometheus', a link (even to
bringup's file) or a pipe is refused with one line, before the run and again at the write, and is left as
it was.  The write itself is atomic: a temporary file in the same folder, renamed; none left on failure.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.engine import drift as D
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
def test_a_write_failing_in_the_temporary_file_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    import prometheus_client.exposition as exposition

    path = tmp_path / "bringup.prom"
    D.write_prometheus(report(converged()), path)
    before = path.read_text()
    written = []
    real_open = open

    def tracking_open(file, mode="r", *a, **kw):
        f = real_open(file, mode, *a, **kw)
        if "w" in mode:
            written.append(str(file))
        return f

    def full_disk(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("builtins.open", tracking_open)
    monkeypatch.setattr(exposition, "generate_latest", full_disk)
    with pytest.raises(OSError, match="No space left"):
        D.write_prometheus(report(drifted()), path)
    monkeypatch.undo()
    # The temporary file was in the same folder (the rename is atomic there), and is gone.
    assert written and all(Path(w).parent == tmp_path and Path(w).name.startswith("bringup.prom.") for w in written)
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["bringup.prom"]
