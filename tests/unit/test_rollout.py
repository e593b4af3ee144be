"""Rolling runs: serial spec, failure threshold, hooks, health gate, retry files.

The rollout runs through the real engine on control-machine hosts (``ansible_connection: local``) with a
small role: a host whose variable ``fail`` is set runs a command that fails, and the role's health hook
checks, on the host, a file the test controls.  Hooks are a Python script appending its argv to a file.
"""
import stat
import sys
import types
from pathlib import Path

import pytest

from bringup.ssh.command import sh
from bringup.errors import InputError
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.inventory.patterns import read_limit_file
from bringup.resources import Command
from bringup.engine.roles import Role
from bringup.engine.rollout import rollout, write_retry
from bringup.engine.rollout_input import batch_sizes, exceeds, parse_max_fail, parse_serial, validate_hooks
from bringup.engine.results import HostResult, exit_code
from bringup.engine.runner import Options
from bringup.ssh.stop import Stop
from bringup.engine.templates import Templates


# -- serial spec ------------------------------------------------------------------------------------


def sizes(spec, n):
    return batch_sizes(parse_serial(spec), n)


def test_serial_list_with_percentage_rounds_down_and_the_last_repeats():
    # Ansible's pct_to_int: int(25 / 100 * 10) = 2; the remainder is the last batch.
    assert sizes("1,25%", 10) == [1, 2, 2, 2, 2, 1]
    assert sizes("1,30%", 10) == [1, 3, 3, 3]
    assert sizes("2", 6) == [2, 2, 2]
    assert sizes("1,5,10", 20) == [1, 5, 10, 4]  # Ansible's documented list example


def test_percentage_at_least_one_host():
    assert sizes("10%", 3) == [1, 1, 1]
    assert sizes("100%", 7) == [7]


def test_batch_larger_than_the_hosts_and_no_serial():
    assert sizes("50", 6) == [6]
    assert batch_sizes(None, 6) == [6]
    assert batch_sizes(None, 0) == []


@pytest.mark.reliability(item=13, fault="--serial of 5000 digits, a non-ASCII digit, a control character",
                         variants=3, checks=("one clear line",))
@pytest.mark.parametrize("spec", ["0", "-1", "x", "1,,2", "150%", "0%", "2.5", "25 %%", "9" * 5000, "1,²",
                                  "1" + "0" * 5000 + "%", "\x1b[31m"],
                         ids=lambda s: s if len(s) < 20 else f"{len(s)}-chars")
def test_bad_serial_is_one_line(spec):
    with pytest.raises(InputError, match=r"^--serial .*: '.*'(\.\.\. \(.* characters\))? is not a batch size") as e:
        parse_serial(spec)
    assert len(str(e.value)) < 400 and "\x1b" not in str(e.value)


# -- max fail percentage ----------------------------------------------------------------------------


def test_max_fail_is_strictly_above_the_threshold_as_ansible():
    assert exceeds(1, 2, 0) and not exceeds(0, 2, 0)
    assert not exceeds(1, 2, 50) and exceeds(2, 3, 50)
    assert not exceeds(1, 4, 25) and exceeds(2, 4, 25)
    assert not exceeds(3, 3, 100)


def test_without_a_threshold_only_a_wholly_failed_batch_stops():
    assert exceeds(2, 2, None) and not exceeds(1, 2, None)


@pytest.mark.parametrize("value", ["-1", "101", "lots"])
def test_bad_max_fail_is_one_line(value):
    with pytest.raises(InputError, match="--max-fail-percentage"):
        parse_max_fail(value)
    assert parse_max_fail(None) is None and parse_max_fail("12.5") == 12.5


# -- the rollout through the engine -----------------------------------------------------------------

HOOK = """import sys
with open(sys.argv[1], "a") as f:
    f.write(" ".join(sys.argv[2:]) + "\\n")
sys.exit(int(sys.argv[2] == "exit-1"))
"""


def _role(tmp_path: Path) -> Role:
    def resources(ctx):
        if ctx.vars.get("fail"):
            return [Command("made to fail", "echo refused >&2; false", unless="false")]
        return [Command("mark", sh("touch %s", str(tmp_path / f"ran-{ctx.name}")),
                        creates=str(tmp_path / f"ran-{ctx.name}"))]

    def health(ctx, t):
        res = t.run_script(sh("cat %s 2>/dev/null || echo missing", str(tmp_path / f"health-{ctx.name}")))
        if res.stdout.strip() != "ready":
            from bringup.errors import BringupError
            raise BringupError(f"not ready ({res.stdout.strip()})")
        return "ready"

    return Role("fake", types.SimpleNamespace(FACTS=(), resources=resources, health=health))


def _hosts(tmp_path: Path, n: int, log: Path, **per_host) -> list[Host]:
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK)
    out = []
    for i in range(1, n + 1):
        name = f"h{i}"
        v = {"drain_command": [sys.executable, str(hook), str(log), "drain"],
             "undrain_command": [sys.executable, str(hook), str(log), "undrain"],
             **per_host.get(name, {})}
        out.append(Host(name, ["all"], v, ConnectionVars(ansible_connection="local", ansible_host=f"10.0.0.{i}")))
        (tmp_path / f"health-{name}").write_text("ready\n")
    return out


def _run(tmp_path, hosts, **kw):
    role = _role(tmp_path)
    seen = []
    run = rollout(hosts, [role], {h.name: h.vars for h in hosts}, Options(forks=2),
                  Templates(tmp_path), on_result=seen.append, **kw)
    return run, seen


def test_rollout_stops_after_a_failed_batch_hooks_in_order(tmp_path):
    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 6, log, h4={"fail": True})
    run, seen = _run(tmp_path, hosts, serial=parse_serial("2"), max_fail_percentage=0)
    status = {r.host: r.status for r in run.results}
    assert status == {"h1": "ok", "h2": "ok", "h3": "ok", "h4": "failed", "h5": "not started",
                      "h6": "not started"}
    assert run.batches == [["h1", "h2"], ["h3", "h4"], ["h5", "h6"]]
    assert run.stopped == "after batch 2 of 3: 1 of 2 host(s) failed, above --max-fail-percentage 0"
    assert run.never_started == ["h5", "h6"] and exit_code(run.results) == 2
    assert {r.host for r in seen} == set(status)  # every host reported, the never-started too
    # The second channel: what ran on the "hosts", and the hooks' own log.
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-h1", "ran-h2", "ran-h3"]
    lines = log.read_text().splitlines()
    for name, addr in (("h1", "10.0.0.1"), ("h2", "10.0.0.2"), ("h3", "10.0.0.3")):
        assert lines.index(f"drain {name} {addr}") < lines.index(f"undrain {name} {addr}")
    # Batch 1 was back in service before batch 2 was drained.
    assert max(lines.index("undrain h1 10.0.0.1"), lines.index("undrain h2 10.0.0.2")) < \
        min(lines.index("drain h3 10.0.0.3"), lines.index("drain h4 10.0.0.4"))
    assert "drain h4 10.0.0.4" in lines and "undrain h4 10.0.0.4" not in lines  # a failed host stays drained
    assert not any(" h5 " in ln or " h6 " in ln for ln in lines)
    h4 = run.results[3]
    assert "stays drained" in h4.message and [r.id for r in h4.resources if r.status == "failed"] == ["command:made to fail"]


@pytest.mark.reliability(item=26, fault="a drain_command that exits 1 (the host is failed as not drained, not touched)",
                         checks=("nothing touched",))
def test_failed_drain_leaves_the_host_untouched(tmp_path):
    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 2, log)
    hosts[1].vars["drain_command"] = [sys.executable, str(tmp_path / "hook.py"), str(log), "exit-1"]
    run, _ = _run(tmp_path, hosts, serial=parse_serial("1"))
    assert [r.status for r in run.results] == ["ok", "failed"]
    assert "drain_command exited 1" in run.results[1].message and "not touched" in run.results[1].message
    assert not (tmp_path / "ran-h2").exists()
    assert run.results[1].round_trips == 0


def test_health_gate_failure_fails_the_host_and_stops_the_rollout(tmp_path):
    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 3, log)
    (tmp_path / "health-h1").write_text("loading\n")
    run, _ = _run(tmp_path, hosts, serial=parse_serial("1"), max_fail_percentage=0)
    assert [r.status for r in run.results] == ["failed", "not started", "not started"]
    gate = [r for r in run.results[0].resources if r.id == "health:fake"]
    assert gate[0].status == "failed" and "not ready (loading)" in gate[0].error
    assert (tmp_path / "ran-h1").exists()  # converged, but not serving: never undrained
    assert log.read_text().splitlines() == ["drain h1 10.0.0.1"]


def test_no_serial_no_threshold_runs_everything(tmp_path):
    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 3, log, h1={"fail": True})
    run, _ = _run(tmp_path, hosts)
    assert [r.status for r in run.results] == ["failed", "ok", "ok"] and run.stopped is None


def test_a_signal_between_batches_starts_no_later_batch(tmp_path):
    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 4, log)
    stop = Stop()
    stop.signum = 2  # as after a SIGINT in the first batch
    run, _ = _run(tmp_path, hosts, serial=parse_serial("2"), stop=stop)
    assert {r.status for r in run.results} == {"not started"}
    assert not log.exists()


@pytest.mark.reliability(item=26, fault="SIGINT while drain_command runs (the console said not started, "
                                        "the host stayed drained)", checks=("recap and report",))
def test_a_signal_during_the_drain_undrains_and_the_console_says_what_the_report_says(tmp_path):
    import io
    import threading
    import time

    from rich.console import Console

    from bringup.tasks.context import print_interrupted

    log = tmp_path / "hooks.log"
    hosts = _hosts(tmp_path, 1, log)
    slow = tmp_path / "slow.py"
    started = tmp_path / "drain-started"
    slow.write_text("import sys, time\nopen(sys.argv[2], 'w').close()\ntime.sleep(1.0)\n"
                    "open(sys.argv[1], 'a').write('drain ' + sys.argv[3] + '\\n')\n")
    hosts[0].vars["drain_command"] = [sys.executable, str(slow), str(log), str(started)]
    stop = Stop()

    def signal_once_the_drain_runs() -> None:  # not after a fixed time: a loaded machine starts it late
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.request(2)

    threading.Thread(target=signal_once_the_drain_runs, daemon=True).start()
    run, seen = _run(tmp_path, hosts, stop=stop)
    r = run.results[0]
    assert r.status == "interrupted", (r.status, r.message)
    assert "after drain_command" in r.message and "back in service" in r.message, r.message
    assert log.read_text().splitlines() == ["drain h1", "undrain h1 10.0.0.1"]
    assert not (tmp_path / "ran-h1").exists()  # nothing else ran on it
    out = io.StringIO()
    print_interrupted(stop, run.results, Console(file=out, width=200))
    assert f"h1: {r.message}" in out.getvalue() and "not started" not in out.getvalue(), out.getvalue()


# -- hooks validated before connecting --------------------------------------------------------------


def _host(**v):
    return Host("h", ["all"], v, ConnectionVars(ansible_connection="local"))


@pytest.mark.parametrize("value, words", [
    ("lb drain", "must be a list of strings"),
    ([], "must be a list of strings"),
    (["lb", 3], "must be a list of strings"),
    (["/nonexistent/lb-ctl"], "is not found or not executable"),
])
def test_bad_hooks_are_one_line(value, words):
    with pytest.raises(InputError, match=words) as e:
        validate_hooks([_host(drain_command=value)])
    assert "host h: drain_command" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.reliability(item=26, fault="hook_timeout of .nan, .inf, a word", variants=3,
                         checks=("one clear line",))
def test_bad_hook_timeout():
    for bad in ("soon", float("nan"), float("inf")):
        with pytest.raises(InputError, match="hook_timeout must be a finite number of seconds > 0"):
            validate_hooks([_host(undrain_command=[sys.executable], hook_timeout=bad)])
    validate_hooks([_host(undrain_command=[sys.executable], hook_timeout=5)])


# -- retry files ------------------------------------------------------------------------------------


def test_retry_file_written_read_back_and_cleared(tmp_path):
    reports = tmp_path / "reports"
    results = [HostResult("a"), HostResult("b", status="failed"), HostResult("c", status="unreachable"),
               HostResult("d", status="not started")]
    last = write_retry(reports, results, "20250101T000000-provision")
    assert last == reports / "last.retry"
    assert read_limit_file(last) == ["b", "c", "d"]
    assert read_limit_file(reports / "20250101T000000-provision.retry") == ["b", "c", "d"]
    assert not list(reports.glob(".*.tmp"))
    # A later run where b and c succeeded takes them out; d stays to retry.
    assert write_retry(reports, [HostResult("b"), HostResult("c")], "x") is None
    assert read_limit_file(last) == ["d"]
    # Once every host in it succeeded, the file bringup wrote goes.
    write_retry(reports, [HostResult("d")], "y")
    assert not last.exists()
    assert (reports / "20250101T000000-provision.retry").exists()  # the run's own record stays


@pytest.mark.reliability(item=40, fault="reports/last.retry a planted link to a file only root may read: a run "
                                        "that took a host out of it rewrote the rest of that file as reports/"
                                        "last.retry (0644), and the prune removed links named as bringup's retry files",
                         variants=2, checks=("secret never shown", "others' files kept"))
def test_a_link_at_a_retry_files_name_is_never_read_through_nor_pruned(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    private = tmp_path / "private"
    private.write_text("a\nroot:$6$SeCrEtHaSh:19000::::::\n")
    private.chmod(0o600)
    (reports / "last.retry").symlink_to(private)
    assert write_retry(reports, [HostResult("a")], "20250101T000000-provision") is None
    assert (reports / "last.retry").is_symlink() and private.read_text().startswith("a\n")  # left as it is
    assert not [p for p in reports.iterdir() if not p.is_symlink()], "the private file's text was written"
    for i in range(12):  # links named as bringup names its retry files: none of its own, never pruned
        (reports / f"202401{i + 1:02d}T000000-provision.retry").symlink_to(private)
    write_retry(reports, [HostResult("b", status="failed")], "20250102T000000-provision")
    assert len([p for p in reports.glob("2024*.retry") if p.is_symlink()]) == 12 and private.exists()
    assert "SeCrEt" not in (reports / "last.retry").read_text()  # the failed run's own list replaced the link


def test_all_ok_run_writes_no_retry(tmp_path):
    assert write_retry(tmp_path, [HostResult("a")], "z") is None and not list(tmp_path.iterdir())


@pytest.mark.reliability(item=25, fault="per-run .retry files piling up under reports/", checks=("others' files kept",))
def test_per_run_retry_files_are_pruned_to_the_newest(tmp_path):
    from bringup.engine.rollout import RETRY_KEEP

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "mine.retry").write_text("x\n")  # not named as bringup names them: kept
    for i in range(RETRY_KEEP + 5):
        write_retry(reports, [HostResult("b", status="failed")], f"202501{i + 1:02d}T000000-provision")
    write_retry(reports, [HostResult("b", status="failed")], "20250131T000000-plan-2")
    runs = sorted(p.name for p in reports.glob("2025*.retry"))
    assert len(runs) == RETRY_KEEP and runs[-1] == "20250131T000000-plan-2.retry", runs
    # 16 written, the newest 10 kept: the 15 provision runs lost their first 6.
    assert runs[0] == f"202501{16 - RETRY_KEEP + 1:02d}T000000-provision.retry", runs
    assert (reports / "mine.retry").exists() and (reports / "last.retry").exists()
