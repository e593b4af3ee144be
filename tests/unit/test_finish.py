"""The program's end (bringup.process.finish): without the interpreter's teardown, yet nothing of a run is lost:
the atexit handlers ran, what was written to stdout and stderr came out, the exit status is the run's, and a
thread the interpreter would have waited for is waited for."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, *args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=env)


def _run(body: str, *args: str) -> subprocess.CompletedProcess:
    return _python("import sys\nfrom bringup.process import finish\n" + body, *args)


def test_the_status_the_output_and_the_atexit_handlers_survive_the_fast_end(tmp_path):
    mark = tmp_path / "atexit"
    r = _run("import atexit\natexit.register(lambda: open(sys.argv[1], 'w').write('ran'))\n"
             "sys.stdout.write('partial line, no newline')\nsys.stderr.write('err, unflushed')\n"
             "finish(3)\nprint('never')\n", str(mark))
    assert r.returncode == 3, r
    assert r.stdout == "partial line, no newline" and r.stderr == "err, unflushed", r
    assert mark.read_text() == "ran"


def test_no_status_is_zero_and_a_message_is_said_as_sys_exit_says_it():
    assert _run("finish(None)\n").returncode == 0
    r = _run("finish('error: the run failed')\n")
    assert r.returncode == 1 and r.stderr.strip() == "error: the run failed", r


def test_a_thread_still_working_is_waited_for(tmp_path):
    # os._exit would end a non-daemon thread mid-way; the interpreter's exit waits for it, so finish() takes that.
    done = tmp_path / "done"
    r = _run("import threading, time\n"
             "t = threading.Thread(target=lambda: (time.sleep(0.5), open(sys.argv[1], 'w').write('done')))\n"
             "t.start()\nfinish(0)\n", str(done))
    assert r.returncode == 0, r
    assert done.read_text() == "done"


def test_a_failed_task_of_the_console_script_keeps_its_status_and_words(tmp_path):
    # Invoke's program ends a failed task by sys.exit(code), its one line already said.
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    ctl:\n      ansible_connection: local\n")
    r = _python("from bringup.entry import main; main()", "provision", "--host", "nosuch", "--inventory", "hosts.yml",
                cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)})
    assert r.returncode == 1 and "nosuch" in r.stderr and "Traceback" not in r.stderr, r
