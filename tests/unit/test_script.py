"""Batching many snippets into one script, and the quoting helper."""
import subprocess

from bringup.command import join, sh
from bringup.script import batch, split


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
