"""Every task's --help lists well-formed flags: Invoke's automatic short flags once gave tune-window a
flag spelt ``--=STRING`` for --http-port (every letter of it was taken)."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _invoke(*args):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args],
                          capture_output=True, text=True, timeout=120)


def test_every_task_has_well_formed_flags():
    import json
    names = [t["name"] for t in json.loads(_invoke("--list", "--list-format", "json").stdout)["tasks"]]
    assert "tune-window" in names and "provision" in names
    for name in names:
        out = _invoke(name, "--help").stdout
        flags = [f for line in out.splitlines() if line.startswith("  -") for f in re.findall(r"(?<!\S)-[-\w]*=?", line)]
        assert flags, name
        bad = [f for f in flags if re.fullmatch(r"-\w|--\w[\w-]*=?", f) is None]
        assert not bad, (name, bad)


def test_a_reader_that_goes_away_ends_bringup_quietly():
    # `bringup --help | head -1` once printed Python's BrokenPipeError traceback.  Here the reader has gone
    # before bringup writes its first byte, so every write meets a closed pipe.
    p = subprocess.Popen([sys.executable, "-c", "from bringup.cli import main; main()", "--help"], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and "Traceback" not in err, err


def test_the_exit_leaves_the_runs_objects_out_of_the_last_garbage_collection():
    # atexit runs the last registered first: the probe, registered before bringup.cli is imported, runs after
    # bringup's handler and sees the objects frozen (bench/RESULTS.md has what the skipped passes cost).
    probe = ("import atexit, gc\natexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "import bringup.cli\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "frozen True", out
