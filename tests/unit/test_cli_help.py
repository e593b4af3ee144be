"""Every task's --help lists well-formed flags: Invoke's automatic short flags once gave tune-window a
flag spelt ``--=STRING`` for --http-port (every letter of it was taken)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("entry", ["bringup.cli", "bringup.entry"])
def test_a_reader_that_goes_away_ends_bringup_quietly(entry):
    # `bringup --help | head -1` once printed Python's BrokenPipeError traceback.  Here the reader has gone
    # before bringup writes its first byte, so every write meets a closed pipe: Invoke's help (bringup.cli)
    # and the kept one (bringup.entry, the console script) alike.
    p = subprocess.Popen([sys.executable, "-c", f"from {entry} import main; main()", "--help"], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141 and "Traceback" not in err, err


# The programs' starts: the console script running a task (its --version: no hosts), and Invoke's tasks.py.
STARTS = {"bringup": "import sys; sys.argv = ['bringup', '--version']\nfrom bringup.entry import main\nmain()\n",
          "invoke": "import tasks\n"}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_the_exit_leaves_the_runs_objects_out_of_the_last_garbage_collection(start):
    # atexit runs the last registered first: the probe, registered before the program starts, runs after
    # bringup's handler and sees the objects frozen (bench/RESULTS.md has what the skipped passes cost).
    probe = ("import atexit, gc\natexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             + STARTS[start])
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "frozen True", out


@pytest.mark.parametrize("start", sorted(STARTS))
def test_cyclic_garbage_left_at_exit_is_still_finalized(tmp_path, start):
    # An object with __del__ in a reference cycle: a bare gc.freeze() at exit would skip it, the collection
    # before the freeze runs it as Python's own teardown does.
    probe = ("import sys\nclass Holder:\n    def __init__(self):\n        self.path = sys.argv[1]\n"
             "    def __del__(self):\n        open(self.path, 'w').write('finalized')\nh = Holder(); h.me = h\ndel h\n")
    subprocess.run([sys.executable, "-c", probe + STARTS[start], str(tmp_path / "out")], cwd=REPO, check=True,
                   timeout=60)
    assert (tmp_path / "out").read_text() == "finalized"


@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_program_collects_rarely(start):
    # The program's start raises the young generation's threshold (bringup.process.quiet_gc).
    probe = ("import atexit, gc\natexit.register(lambda: print('threshold', gc.get_threshold()[0]))\n"
             + STARTS[start])
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    from bringup.process import RUN_GC_THRESHOLD

    assert out.stdout.strip().splitlines()[-1] == f"threshold {RUN_GC_THRESHOLD}", out


def test_a_run_never_walks_its_imports_again(tmp_path):
    # Once the run imported its modules (tasks/context.running calls freeze_imports) they are frozen, so the
    # exit's collection walks only what the run made after: here a cycle with __del__, which is still finalized.
    probe = (STARTS["invoke"] + "import gc, sys\nfrom bringup.process import freeze_imports\n"
             "freeze_imports()\nassert gc.get_freeze_count() > 1000, gc.get_freeze_count()\n"
             "class Holder:\n    def __del__(self):\n        open(sys.argv[1], 'w').write('finalized')\n"
             "h = Holder(); h.me = h\ndel h\n"
             "import atexit\natexit.register(lambda: print('unfrozen', len(gc.get_objects())))\n")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "out")], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out").read_text() == "finalized"
    # What the exit's collection walked: the few objects made after the freeze, not the program's modules.
    assert int(out.stdout.split()[-1]) < 1000, out.stdout


def test_library_use_leaves_the_process_as_it_was():
    # Importing the tasks (prepared, for bench/peers/audit_spec.py) or the program is no program's start: the
    # bytecode setting and the exit are the importer's.
    probe = ("import sys, gc, atexit\nsys.dont_write_bytecode = True\n"
             "import bringup.cli, bringup.tasks.context\nfrom bringup.tasks.context import prepared\n"
             "from bringup.process import freeze_imports\nthreshold = gc.get_threshold()\nfreeze_imports()\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "print('dont_write', sys.dont_write_bytecode, 'threshold', threshold == (700, 10, 10))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["dont_write", "True", "threshold", "True", "frozen", "False"], out


def _entry(*args, code="from bringup.entry import main; main()"):
    return subprocess.run([sys.executable, "-c", f"import sys; sys.argv = ['bringup', *sys.argv[1:]]; {code}", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_kept_help_and_list_are_what_invoke_prints():
    # bringup/data/{help,list}.txt answer `bringup --help` and `bringup --list` without importing Invoke;
    # after a task or its docstring changed: python scripts/kept_help.py
    for args, kept in ((("--help",), "help.txt"), (("--list",), "list.txt")):
        live = _entry(*args, code=f"sys.path.insert(0, 'scripts'); from kept_help import live_text; "
                                  f"print(live_text({args!r}), end='')").stdout
        assert live.startswith(("Usage: bringup", "Subcommands:")) and "provision" in live
        assert (REPO / "bringup" / "data" / kept).read_text() == live, (
            f"bringup/data/{kept} is out of date: python scripts/kept_help.py")


def test_the_installed_program_offers_no_checkout_only_task():
    # `sandbox` drives the test harness, which does not ship: the checkout's tasks.py adds it for `invoke`.
    listed = _entry("--list", code="from bringup.cli import main; main()").stdout
    assert "provision" in listed and "sandbox" not in listed
    assert "sandbox" in _invoke("--list").stdout


def test_the_console_scripts_help_imports_no_invoke():
    probe = "from bringup.entry import main; main(); print('invoke' in sys.modules, file=sys.stderr)"
    for args in ((), ("--help",), ("-h",), ("--list",), ("-l",)):
        r = _entry(*args, code=probe)
        assert r.returncode == 0 and r.stderr.strip() == "False" and r.stdout.startswith(("Usage:", "Subcommands:"))
    task = _entry("provision", "--help")  # a task's help is Invoke's, as every other command
    assert task.returncode == 0 and task.stdout.startswith("Usage: bringup [--core-opts] provision")
    bad = _entry("--no-such-flag")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr



def test_a_task_line_collects_the_tasks_it_names_and_any_other_line_the_whole_program():
    # bringup.cli: `bringup provision ...` imports and parses provision alone (tests/unit/test_import_set.py
    # pins what a no-op loads); a line of several tasks gets each; anything else is the whole program.
    from bringup.cli import TASKS, named, ns

    assert set(TASKS) == set(ns.task_names)  # every task of the program is one the console script can name
    assert named(["provision", "-i", "hosts", "--roles", "sysctl"]) == {"provision", "hosts"}
    assert named(["facts", "--host", "a", "audit", "--host", "a"]) == {"facts", "audit"}
    assert named(["tune-window", "--host", "a"]) == {"tune-window"}
    for line in ([], ["--version"], ["-e", "provision"], ["provison"], ["sandbox"]):
        assert named(line) is None, line
    both = _entry("facts", "--no-such-flag")
    assert both.returncode == 1 and "No idea what '--no-such-flag' is!" in both.stderr, both
    typo = _entry("provison")  # the whole program: Invoke's own word for a task it does not know
    assert typo.returncode == 1 and "No idea what 'provison' is!" in typo.stderr, typo


@pytest.mark.reliability(item=40, fault="a flag that takes one value given twice (pull --allow-rollback A "
                                        "--allow-rollback B, --url x --url=y): Invoke's \"No idea what 'B' is!\"",
                         variants=6, checks=("one clear line", "exit code"))
@pytest.mark.parametrize("args, line", [
    (["pull", "--allow-rollback", "3f2a9c1d", "--allow-rollback", "07be11aa"],
     "error: --allow-rollback is given twice ('3f2a9c1d', then '07be11aa'): it takes one value; give it once"),
    (["pull", "--allow-rollback", "3f2a9c1d", "--allow-rollback", "3f2a9c1d"],
     "error: --allow-rollback is given twice ('3f2a9c1d', then '3f2a9c1d'): it takes one value; give it once"),
    (["pull", "--url", "file:///a", "--url=file:///b"],
     "error: --url is given twice ('file:///a', then 'file:///b'): it takes one value; give it once"),
    (["checklist", "--host", "h1", "--out", "pages", "--out", "other"],
     "error: --out is given twice ('pages', then 'other'): it takes one value; give it once"),
    (["pull", "--url", "https://u:s3cretTok@127.0.0.1:9/r.git", "--url=https://u:s3cretTok@127.0.0.1:9/r2.git"],
     "error: --url is given twice ('https://u:********@127.0.0.1:9/r.git', then "
     "'https://u:********@127.0.0.1:9/r2.git'): it takes one value; give it once"),
    (["pull", "--url", "https://x-access-token:ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@github.com/org/r.git",
      "--url", "https://x-access-token:ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@github.com/org/r.gitx"],
     "error: --url is given twice ('https://x-access-token:********@github.com/org/r.git', then "
     "'https://x-access-token:********@github.com/org/r.gitx'): it takes one value; give it once"),
], ids=["allow-rollback", "allow-rollback-same", "url-equals", "out", "url-password-masked", "long-token-masked"])
def test_a_flag_given_twice_is_named_as_such(tmp_path, args, line):
    r = _entry(*args)
    assert (r.returncode, r.stderr.splitlines(), r.stdout) == (1, [line], ""), r
    # An unknown flag stays Invoke's own word, however often given; a switch given twice is no error.
    r = _entry("pull", "--bogus", "a", "--bogus", "b")
    assert r.returncode == 1 and r.stderr.strip() == "No idea what '--bogus' is!", r
    # Invoke's own word passes the masker too: a URL given without its flag, or to a core flag.
    for argv in (["pull", "https://u:s3cretTok@127.0.0.1:9/r.git"], ["--help=https://u:s3cretTok@h"],
                 ["-h", "https://u:s3cretTok@h"], ["--list=https://u:s3cretTok@h"]):
        r = _entry(*argv)
        assert r.returncode == 1 and "s3cretTok" not in r.stderr + r.stdout and "u:********@" in r.stderr, (argv, r)


def test_only_a_closed_stdout_counts_as_the_reader_gone():
    # A BrokenPipeError from a socket or a child's pipe is a fault to show; only stdout's reader leaving ends quietly.
    probe = ("import os\nr, w = os.pipe()\nos.dup2(w, 1)\nfrom bringup.process import stdout_gone\n"
             "before = stdout_gone()\nos.close(r)\nos.write(2, f'{before} {stdout_gone()}'.encode())\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.stderr == "False True", r.stderr


def _listed(text: str) -> dict[str, str]:
    """``--list``'s tasks: name -> its description, the wrapped lines joined."""
    out, name = {}, None
    for ln in text.splitlines():
        m = re.fullmatch(r"  (\S+)\s{2,}(\S.*)", ln)
        if m:
            name, out[m[1]] = m[1], m[2]
        elif name and ln.startswith("    ") and ln.strip():
            out[name] += " " + ln.strip()
        else:
            name = None
    return out


@pytest.mark.parametrize("program", ["bringup", "invoke"])
def test_every_listed_description_is_the_docstrings_whole_first_sentence(program):
    # Issue 25: `--list` showed audit as "... one line per failed item; JUnit + JSON in": Invoke lists a
    # docstring's first line, which was a sentence cut where the line wrapped.
    if program == "bringup":
        listed, module = _entry("--list").stdout, "bringup.cli"
    else:
        listed, module = _invoke("--list").stdout, "tasks"
    docs = json.loads(subprocess.run(
        [sys.executable, "-c", f"import json; from {module} import ns; "
                               "print(json.dumps({n: t.__doc__ for n, t in ns.tasks.items()}))"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True).stdout)
    shown = _listed(listed)
    assert set(shown) == {n.replace("_", "-") for n in docs}, (shown, docs)
    for name, doc in docs.items():
        first, *rest = doc.strip().splitlines()
        assert shown[name.replace("_", "-")] == first.strip(), (name, shown)
        assert first.rstrip().endswith((".", "?")) and (not rest or not rest[0].strip()), (
            f"{name}: the docstring's first line is not a whole sentence and paragraph: {first!r}")
        assert "invoke " not in first and "bringup " not in first, (
            f"{name}: the listed description names one program; both list it")


@pytest.mark.parametrize("program", ["bringup", "invoke"])
def test_hints_name_the_program_the_user_ran(tmp_path, program):
    # Issue 25: from an installed copy the hints said `invoke hosts` to a user who ran `bringup`.
    inv = tmp_path / "hosts"
    inv.write_text("all:\n  hosts:\n    h1: {ansible_host: 192.0.2.1}\n")
    args = ["facts", "--host", "nosuch", "--inventory", str(inv)]
    if program == "bringup":
        argv = [sys.executable, "-c", "import sys; sys.argv[0] = 'bringup'\nfrom bringup.entry import main\nmain()"]
    else:
        argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO)]
    r = subprocess.run(argv + args, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    other = "invoke" if program == "bringup" else "bringup"
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"unknown host 'nosuch'" in r.stderr and f"(`{program} hosts` lists them)" in r.stderr, r.stderr
    assert f"{other} hosts" not in r.stderr, r.stderr


def test_python_dash_m_bringup_is_the_bringup_command(tmp_path):
    """``python3 -m bringup`` (where the console script is not on PATH) runs the same program: its list, and a
    bad inventory's one line and exit 1."""
    listed = subprocess.run([sys.executable, "-m", "bringup", "--list"], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert listed.returncode == 0 and "provision" in listed.stdout, listed.stderr[-400:]
    bad = subprocess.run([sys.executable, "-m", "bringup", "hosts", "-i", str(tmp_path / "none.yml")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "none.yml" in bad.stderr, bad.stderr[-400:]


@pytest.mark.parametrize("args, line", [
    (["--list-depth=5x"], "error: a number is wanted (--list-depth N, -T N), got '5x'"),
    (["-T", "x"], "error: a number is wanted (--list-depth N, -T N), got 'x'"),
    (["--list-format=x"], "error: --list-format 'x': give flat, nested or json"),
    (["--list-depth=https://u:S3cretTok3n@h"], "error: a number is wanted (--list-depth N, -T N), got "
                                               "'https://u:********@h'"),
])
def test_a_core_flags_bad_value_is_one_line(args, line):
    """Invoke let int()'s ValueError (--list-depth) and a missing lister's AttributeError (--list-format)
    through as tracebacks, quoting the value given (a URL's password in clear)."""
    r = _entry(*args)
    assert (r.returncode, r.stderr.strip(), r.stdout) == (1, line, ""), r
