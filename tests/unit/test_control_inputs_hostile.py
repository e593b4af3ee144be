"""Issue 40 items 1, 3 and 4 on the control machine's inputs (inventories, ssh_config, vault, secret references),
tried through the real ``bringup`` program: every bad input is one line and exit 1 (never a traceback), and no
decrypted value shows, whatever its length."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.userfile import home

REPO = Path(__file__).resolve().parents[2]


def bringup(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from bringup.entry import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"))


def one_line_refusal(p: subprocess.CompletedProcess, *words: str) -> str:
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "Traceback" not in out and "Error:" not in out.replace("error:", ""), out
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for w in words:
        assert w in lines[0], out
    return lines[0]


# --- a path starting with ~ of a user this machine does not know ------------------------------------------------

HOSTS = "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"

#: name -> (extra lines of the host, the command's flags after the inventory, a word the line must hold).  Each
#: was a Python traceback: pathlib's expanduser() raises RuntimeError for ~nouser, os.path.expanduser ValueError
#: for a NUL byte in the user's name.
UNKNOWN_HOME = {
    "secret file ~nouser": ('      db_password: {bringup_secret: {file: "~nouser-x9/pw"}}\n', ("hosts",),
                            "secret file ~nouser-x9/pw does not exist"),
    "--vault-password-file ~nouser": ("", ("hosts", "--vault-password-file", "~nouser-x9/pw"),
                                      "--vault-password-file ~nouser-x9/pw: no such file"),
    "--vault-id label@~nouser": ("", ("hosts", "--vault-id", "prod@~nouser-x9/pw"),
                                 "--vault-id prod@~nouser-x9/pw: no such file"),
    "-F ~user with a NUL byte": ('      ansible_ssh_common_args: "-F ~no\\0user/cfg"\n', ("plan", "--host", "h1"),
                                 "a path holding a NUL byte"),
    "-i ~nouser": (None, ("hosts", "--inventory", "~nouser-x9/hosts"), "no such inventory file"),
}


@pytest.mark.reliability(item=40, fault="control inputs: a path of ~user this machine does not know (secret file, "
                                        "vault password file, --vault-id, -F, -i)", variants=len(UNKNOWN_HOME),
                         checks=("one clear line", "nothing touched"))
@pytest.mark.parametrize("case", sorted(UNKNOWN_HOME))
def test_a_home_of_an_unknown_user_is_one_line(case, tmp_path):
    extra, args, want = UNKNOWN_HOME[case]
    (tmp_path / "hosts.yml").write_text(HOSTS + (extra or ""))
    if extra is None:
        p = bringup(*args, cwd=tmp_path)
    else:
        p = bringup(args[0], "--inventory", str(tmp_path / "hosts.yml"), *args[1:], cwd=tmp_path)
    one_line_refusal(p, want)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["hosts.yml"]  # nothing written, no report


@pytest.mark.parametrize("text", ["~nouser-x9/k", "~no\x00user/k", "~\x00", "~", "~/k", "/abs/~x", "rel"])
def test_home_never_raises_and_expands_what_it_can(text):
    got = home(text)
    assert isinstance(got, str)
    if text in ("~", "~/k"):
        assert got == os.path.expanduser(text)
    elif text.startswith("~") and text.split("/")[0] not in ("~",):
        assert got == text
