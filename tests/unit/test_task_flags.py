"""Issue 26: the flags of every task are checked like inventory input, one row per task.

Through the real CLI (``python -m invoke``) in a subprocess, from a temporary folder whose inventory's
host points at 127.0.0.1 port 9, where nothing listens: a flag value that were checked only after
connecting would end as "unreachable" (exit 4), not as the flag's one ``error:`` line with exit 1.  The
second channel: no ``reports/`` folder appears (a run that reached a host writes one), no output the
flag names is created, and stderr holds no traceback.  bench, tune and tune-window have their rows in
test_latency_input.py; ``sandbox`` takes only two switches (no value to get wrong).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .test_bad_input import _refused
from .test_latency_input import _invoke

CHECKS = ("one clear line", "exit code", "nothing touched")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9, ansible_user: nobody}\n"


@pytest.fixture
def work(tmp_path):
    (tmp_path / "hosts").write_text(INVENTORY)
    (tmp_path / "a-folder").mkdir()
    os.mkfifo(tmp_path / "a-pipe")  # a read of it waits for a writer that never comes
    (tmp_path / "node.prom").write_text("# HELP node_raid_ok RAID healthy\n# TYPE node_raid_ok gauge\nnode_raid_ok 1\n")
    return tmp_path


def _check(work: Path, task: str, args: list[str], words: list[str]) -> None:
    before = sorted(p.name for p in work.iterdir())
    line = _refused(_invoke(work, task, *args), work, *words)
    assert sorted(p.name for p in work.iterdir()) == before, f"{task} {args}: a file appeared ({line})"
    assert "unreachable" not in line, line


def _flag(flag: str, value: str, *more: str) -> tuple[list[str], list[str]]:
    """A case: ``--host h1 FLAG VALUE``, whose error line names the flag, the value and ``more``."""
    return ["--host", "h1", flag, value], [flag, value, *more]


# Flags most tasks share (the selection, the inventory, --set, --forks), tried on each task that has them.
SELECTION = [
    (["--host", "nosuch"], ["nosuch"]),
    _flag("--set", "no-equals-sign"),
    _flag("--inventory", "a-folder"),
    _flag("--inventory", "a-pipe"),
    _flag("--inventory", "missing.yml"),
    _flag("--inventory", "/dev/zero"),
    _flag("--vault-password-file", "missing-pw"),
]
FORKS = [_flag("--forks", "0"), _flag("--forks", "many")]
ROLES = [_flag("--roles", "no_such_role")]
LIMIT = [_flag("--limit", "@a-folder"), _flag("--limit", "@a-pipe")]
FACTS_FILE = [_flag("--facts", "missing.json"), _flag("--facts", "a-folder"), _flag("--facts", "/dev/zero"),
              _flag("--facts", "a-pipe")]


def _cases(*groups):
    return [c for g in groups for c in g]


@pytest.mark.reliability(item=26, fault="provision flags: --serial 0/150%, --max-fail-percentage nan/101, "
                                        "an unknown role, --forks 0, --inventory a folder/a pipe (hung)/missing/"
                                        "/dev/zero, --set, --limit @a folder/@a pipe",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, FORKS, ROLES, LIMIT, [
    _flag("--serial", "0"), _flag("--serial", "150%"),
    _flag("--max-fail-percentage", "nan"), _flag("--max-fail-percentage", "101"),
]))
def test_provision_flags(work, args, words):
    _check(work, "provision", args, words)


@pytest.mark.reliability(item=26, fault="plan flags: an unknown host or role, --forks 0/a word, --inventory a "
                                        "folder/a pipe (hung)/missing//dev/zero, --set without =, --limit @a folder",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, FORKS, ROLES, LIMIT))
def test_plan_flags(work, args, words):
    _check(work, "plan", args, words)


@pytest.mark.reliability(item=26, fault="audit flags: --testinfra missing or /dev/zero, --export-testinfra a file, "
                                        "an unknown host or role, --forks 0, a bad inventory or --set",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, FORKS, ROLES, [
    _flag("--testinfra", "missing_tests"), _flag("--testinfra", "/dev/zero"),
    _flag("--export-testinfra", "hosts"),
]))
def test_audit_flags(work, args, words):
    _check(work, "audit", args, words)


@pytest.mark.reliability(item=26, fault="checklist flags: --out a file (was a traceback), --facts "
                                        "missing/a folder//dev/zero/a pipe (left an empty reports/checklist), an "
                                        "unknown host or role, a bad inventory or --set",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, ROLES, FACTS_FILE, [
    _flag("--out", "hosts", "not a folder"), _flag("--out", "hosts/pages", "not a folder"),
]))
def test_checklist_flags(work, args, words):
    _check(work, "checklist", args, words)


@pytest.mark.reliability(item=26, fault="drift flags: --prometheus not *.prom/in a missing folder/a folder/another "
                                        "exporter's file, an unknown host or role, --forks 0, a bad inventory or "
                                        "--set", checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, FORKS, ROLES, LIMIT, [
    _flag("--prometheus", "drift.txt", ".prom"), _flag("--prometheus", "nowhere/bringup.prom"),
    _flag("--prometheus", "a-folder"), _flag("--prometheus", "node.prom", "not a textfile bringup wrote"),
]))
def test_drift_flags(work, args, words):
    _check(work, "drift", args, words)


@pytest.mark.reliability(item=26, fault="engines flags: an unknown host, --forks 0/a word, a bad inventory or --set",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, FORKS))
def test_engines_flags(work, args, words):
    _check(work, "engines", args, words)


@pytest.mark.reliability(item=26, fault="facts flags: no --host, an unknown host, a bad inventory or --set",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, [([], ["--host"])]))
def test_facts_flags(work, args, words):
    _check(work, "facts", args, words)


@pytest.mark.reliability(item=26, fault="hosts flags: --inventory a folder/a pipe (hung)/missing//dev/zero, "
                                        "--set without =",
                         checks=CHECKS)
@pytest.mark.parametrize("args, words", [(a[2:], w) for a, w in SELECTION[1:]])
def test_hosts_flags(work, args, words):
    _check(work, "hosts", args, words)


@pytest.mark.reliability(item=26, fault="topology flags: --facts missing/a folder//dev/zero/a pipe, an unknown host, "
                                        "a bad inventory or --set", checks=CHECKS)
@pytest.mark.parametrize("args, words", _cases(SELECTION, FACTS_FILE))
def test_topology_flags(work, args, words):
    _check(work, "topology", args, words)


@pytest.mark.reliability(item=34, fault="an empty flag value read as no flag: --serial '' (one batch), "
                                        "--max-fail-percentage '' (no bound), audit --testinfra '' (every test "
                                        "under the current folder), --limit '' (every host), --host ''",
                         variants=6, checks=CHECKS)
@pytest.mark.parametrize("task, flag", [("provision", "--serial"), ("provision", "--max-fail-percentage"),
                                        ("audit", "--testinfra"), ("provision", "--limit"), ("plan", "--host"),
                                        ("checklist", "--out")])
def test_empty_flag_value_is_one_line(work, task, flag):
    (work / "test_site.py").write_text("def test_site(host):\n    assert host.file('/etc').is_directory\n")
    args = ["--host", "h1"] if flag != "--host" else []
    _check(work, task, [*args, flag, ""], [f"{flag} ''", "empty", "leave the flag out"])


def _value_flags():
    """(task, parameter, flag) for every flag of every task that takes a value (a boolean switch takes none)."""
    import inspect

    from bringup.cli import ns

    for name, t in sorted(ns.tasks.items()):
        for p in list(inspect.signature(t.body).parameters.values())[1:]:
            if not isinstance(p.default, bool):
                yield name, p.name, "--" + p.name.strip("_").replace("_", "-")


@pytest.mark.reliability(item=34, fault="an empty value for each flag of each task that takes a value (in process)",
                         checks=("one clear line", "exit code"))
def test_every_value_flag_refuses_an_empty_value(tmp_path, monkeypatch):
    """Called in process with the flag given as ''; the check comes before anything is read or contacted (the
    current folder is empty: a task that went on would find no inventory, a different line)."""
    from invoke import Context, Exit

    from bringup.cli import ns

    monkeypatch.chdir(tmp_path)
    seen = 0
    for task, param, flag in _value_flags():
        t = ns.tasks[task]
        value = [""] if param in t.iterable else ""
        with pytest.raises(Exit) as e:
            t(Context(), **{param: value})
        assert e.value.code == 1 and str(e.value.message).startswith(f"error: {flag} '': empty"), (task, flag,
                                                                                                    e.value.message)
        seen += 1
    assert seen > 50, seen
    assert list(tmp_path.iterdir()) == []


@pytest.mark.reliability(item=34, fault="a retry file (--limit @FILE) with a line that is a pattern, not a host: "
                                        "'*' ran every host, a group name its every host", variants=3,
                         checks=CHECKS)
@pytest.mark.parametrize("line", ["*", "all", "h*"])
def test_retry_file_holds_host_names_only(work, line):
    (work / "last.retry").write_text(f"h1\n{line}\n")
    _check(work, "provision", ["--limit", "@last.retry"],
           ["--limit @last.retry", "line 2 is not a host of the inventory", "one a line"])


def _saved_facts(work: Path, change) -> None:
    import json

    from .fixture_hosts import h200_facts

    facts = h200_facts()
    change(facts)
    (work / "f.json").write_text(json.dumps({"host": "h1", "facts": facts}))


@pytest.mark.reliability(item=34, fault="a saved facts file with a CPU list written as text ('0-15' for a NUMA node, "
                                        "an L3 group, a device's local CPUs): a traceback, or '0-15' read as 4 CPUs",
                         variants=4, checks=CHECKS)
@pytest.mark.parametrize("change, words", [
    (lambda f: f["cpu.topology"]["numa_nodes"].update({"0": "0-15"}), ["cpu.topology numa_nodes.0", "'0-15'"]),
    (lambda f: (f["cpu.topology"]["l3_groups"].update({"0": "0-15"}),
                f["cpu.topology"]["numa_nodes"].update({"0": "0123456789abcdef"})), ["cpu.topology numa_nodes.0"]),
    (lambda f: f["pci.devices"][3].update({"local_cpus": "0-15"}), ["pci.devices 3.local_cpus", "'0-15'"]),
    (lambda f: f["cpu.topology"].update({"online": [0, 1, "2"]}), ["cpu.topology online", "'2'"]),
])
def test_saved_cpu_list_as_text_is_one_line(work, change, words):
    _saved_facts(work, change)
    _check(work, "topology", ["--host", "h1", "--facts", "f.json"],
           ["--facts f.json", *words, "a list of CPU ids"])


REPORTS_FIX = ("move it away or remove it (bringup keeps its JSON reports and retry files in a folder reports/ of "
               "its own here, never written through a link)")


def _plant_reports(work: Path, kind: str, elsewhere: Path) -> str:
    """``reports`` in the working folder as ``kind``; the error line bringup must give for it."""
    reports = work / "reports"
    if kind == "a link out":
        reports.symlink_to(elsewhere)
        return (f"error: reports folder 'reports' is a symbolic link to '{elsewhere}', outside the working folder; "
                + REPORTS_FIX)
    if kind == "a dangling link":
        reports.symlink_to(work / "gone")
    elif kind == "a file":
        reports.write_text("mine\n")
    elif kind == "a fifo":
        os.mkfifo(reports)
    return "error: reports folder 'reports': it is not a folder; " + REPORTS_FIX


@pytest.mark.reliability(item=26, fault="a link, a file, a FIFO or a dangling link named reports in the working "
                                        "folder (written through, or a FileExistsError traceback after the run)",
                         checks=CHECKS)
@pytest.mark.parametrize("task, kind", [
    *((t, k) for t in ("provision", "plan", "audit", "drift", "engines") for k in ("a link out", "a file")),
    ("provision", "a fifo"), ("provision", "a dangling link"), ("audit", "a fifo"), ("drift", "a dangling link"),
])
def test_a_reports_entry_that_is_no_folder_of_bringups_is_one_line_before_connecting(work, tmp_path_factory, task,
                                                                                    kind):
    """F3: provision, plan, engines, audit and drift keep their JSON report (and retry files) in reports/ of the
    working folder; a link there out of it was written through (the link's target got the reports and
    last.retry), a file, a FIFO or a dangling link ended in FileExistsError's traceback after the run."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    want = _plant_reports(work, kind, elsewhere)
    before = sorted(p.name for p in work.iterdir())
    r = _invoke(work, task, "--host", "h1")
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "Traceback" not in out, out
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [want], out
    assert "unreachable" not in out, out  # refused before connecting
    assert sorted(p.name for p in work.iterdir()) == before and list(elsewhere.iterdir()) == []
