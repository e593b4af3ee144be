"""Issue 26: hook commands (drain_command, undrain_command) that fail, flood, hang or carry shell syntax.

Through the real rollout on control-machine hosts (``ansible_connection: local``), as tests/unit/test_rollout.py
runs it: a host whose drain hook misbehaves is failed with one bounded line and never touched (its role's
marker file is not created); a hung hook is ended with everything it started, within its hook_timeout;
an argument with quotes or ``$(...)`` reaches the program as written, no shell reads it.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.processes import running

from bringup.engine.rollout_input import parse_serial

from .test_rollout import _hosts, _run


def _one_host(tmp_path: Path, drain: list[str], **extra):
    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 1, log)
    hosts[0].vars.update(drain_command=drain, **extra)
    return hosts, log


def _script(tmp_path: Path, name: str, text: str) -> list[str]:
    (tmp_path / name).write_text(text)
    return [sys.executable, str(tmp_path / name)]


@pytest.mark.reliability(item=26, fault="a drain_command that prints megabytes, then exits 1 (on stdout or stderr)",
                         checks=("nothing touched", "report written"))
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_failing_hook_that_floods_is_one_bounded_line_and_the_host_untouched(tmp_path, stream):
    drain = _script(tmp_path, "flood.py", f"import sys\nfor i in range(200000): sys.{stream}.write('x' * 40 + "
                                          f"' lb said %d\\n' % i)\nsys.{stream}.write('E: pool lb-7 unknown\\n')\n"
                                          "sys.exit(1)\n")
    hosts, log = _one_host(tmp_path, drain)
    run, seen = _run(tmp_path, hosts)
    r = run.results[0]
    assert r.status == "failed" and r.message.startswith("drain_command exited 1: "), r.message[:300]
    assert "E: pool lb-7 unknown" in r.message and "the host was not touched" in r.message
    assert len(r.message) < 1000 and "\n" not in r.message  # 9 MB printed: the report holds one line
    assert all(len(x.error or "") < 1000 for x in r.resources)
    assert seen == [r] and not (tmp_path / "ran-h1").exists() and r.round_trips == 0
    assert not log.exists()  # no undrain either: the drain failed, the host was never taken out


@pytest.mark.reliability(item=26, fault="a hook that prints 200 MB (held whole in memory until it ended)",
                         checks=("report written",))
def test_a_hook_that_prints_without_end_is_read_in_bounded_memory(tmp_path):
    import tracemalloc

    from bringup.engine.rollout import HOOK_OUTPUT_KEEP, run_hook

    hook = _script(tmp_path, "firehose.py", "import sys\nsys.stdout.write('E: lb-7 refused the drain\\n')\n"
                                            "line = b'x' * 1023 + b'\\n'\nfor _ in range(200 * 1024): "
                                            "sys.stdout.buffer.write(line)\nsys.stdout.write('last words\\n')\n"
                                            "sys.exit(1)\n")
    host, = _hosts(tmp_path, 1, tmp_path / "hooks.log")
    host.vars["drain_command"] = hook
    tracemalloc.start()
    try:
        why = run_hook("drain_command", host)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * HOOK_OUTPUT_KEEP, peak  # 200 MB went through; a few times what is kept stayed
    assert why.startswith("drain_command exited 1: E: lb-7 refused the drain") and "last words" in why, why[:200]
    assert len(why) < 1000


@pytest.mark.reliability(item=26, fault="a drain_command that prints bytes that are not UTF-8, then exits 1",
                         checks=("nothing touched", "report written"))
def test_a_failing_hook_that_prints_other_bytes_is_one_line(tmp_path):
    drain = _script(tmp_path, "latin.py", "import sys\nsys.stderr.buffer.write(b'pool \\xe9t\\xe9 \\xff unknown\\n')\n"
                                          "sys.exit(3)\n")
    hosts, log = _one_host(tmp_path, drain)
    run, _ = _run(tmp_path, hosts)
    r = run.results[0]
    assert r.status == "failed" and r.message.startswith("drain_command exited 3: pool "), r.message
    assert "unknown" in r.message and "the host was not touched" in r.message
    assert not (tmp_path / "ran-h1").exists() and not log.exists()


def _ended_within_the_timeout(tmp_path: Path, start_child: str) -> None:
    """A drain hook that runs ``start_child`` (a shell command starting ``sleep 600`` in the background), records
    the child's pid and its own, and hangs: the host fails within the timeout, untouched, and both are gone."""
    pids = tmp_path / "pids"
    drain = ["/bin/sh", "-c", f'{start_child} & echo $! > {pids}; echo $$ >> {pids}; sleep 600; echo done']
    hosts, log = _one_host(tmp_path, drain, hook_timeout=1)
    t0 = time.monotonic()
    run, _ = _run(tmp_path, hosts, serial=parse_serial("1"))
    took = time.monotonic() - t0
    r = run.results[0]
    assert r.status == "failed", r.message
    assert r.message == "drain_command did not finish within 1 s (hook_timeout); the host was not touched"
    assert took < 20, took
    assert not (tmp_path / "ran-h1").exists() and not log.exists()
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    deadline = time.monotonic() + 5
    while any(running(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in started if running(p)], "the hook's processes outlived its timeout"


@pytest.mark.reliability(item=26, fault="a drain_command that hangs past hook_timeout, with a child of its own",
                         checks=("nothing touched", "no hang", "no leftovers"))
def test_a_hung_hook_is_ended_with_its_children_within_the_timeout(tmp_path):
    _ended_within_the_timeout(tmp_path, "sleep 600")


@pytest.mark.reliability(item=26, fault="a drain_command that hangs past hook_timeout after starting a child "
                         "in a session of its own (setsid)", checks=("nothing touched", "no hang", "no leftovers"))
def test_a_hung_hook_is_ended_with_a_child_that_left_its_process_group(tmp_path):
    # setsid: the child leaves the hook's session and process group, which the group kill alone misses; it
    # keeps the hook's stdout open, as a daemon started without redirections does.
    _ended_within_the_timeout(tmp_path, "setsid sleep 600")


@pytest.mark.reliability(item=26, fault="a hook argument with quotes, $(...), ; and a newline",
                         checks=("nothing executed",))
def test_a_hook_argument_reaches_the_program_as_written(tmp_path):
    marker = tmp_path / "pwned"
    odd = f"it's \"x\" $(touch {marker}) `touch {marker}`; touch {marker}\nnext"
    argv_log = tmp_path / "argv.log"
    record = _script(tmp_path, "record.py", "import json, sys\nopen(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) "
                                            "+ '\\n')\n")
    hosts, log = _one_host(tmp_path, [*record, str(argv_log), odd])
    run, _ = _run(tmp_path, hosts)
    assert run.results[0].status == "ok", run.results[0].message
    import json

    assert json.loads(argv_log.read_text()) == [odd, "h1", "10.0.0.1"]  # as written, then name and address
    assert not marker.exists()
