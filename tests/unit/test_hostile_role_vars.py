"""Issue 40 item 8: role variables of absurd sizes through the CLI are one line, never a traceback: a
gpu_count of 32 digits (range() overflowed, and a large one made a list of that many GPUs) and a models_dir
of 5,000 characters (the file system refuses the name)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.reliability(item=40, fault="role variables of absurd size (gpu_count of 32 digits, models_dir of "
                                        "5,000 characters)", variants=2,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("var, value, words", [
    ("gpu_count", "1" + "0" * 31, "gpu_count of 32 digits: more GPUs than one host holds"),
    ("models_dir", "x" * 5000, "File name too long"),
])
def test_absurd_role_variables_are_one_line(tmp_path, var, value, words):
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                                    f"      {var}: {value}\n")
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "plan", "--host", "h1"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=180)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert len(lines) == 1 and words in lines[0] and len(lines[0]) < 400, lines
    assert not (tmp_path / "reports").exists()
