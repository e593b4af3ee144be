"""One mechanism starts and ends child process groups: bringup/child.py (issue 43 item 3).

Every other module of bringup starts a process through :func:`bringup.child.start` / :func:`capture` /
:func:`run_bounded` and ends it through :class:`bringup.child.Child` (SIGTERM, a grace, SIGKILL to the whole
group; output read with a cap).  This test reads the package's source (AST) and fails when a module other than
child.py calls Popen, subprocess.run and its kin, os.killpg / setsid / setpgid, or passes start_new_session:
a second mechanism cannot come back unseen.
"""
from __future__ import annotations

import ast
from pathlib import Path

import bringup

PACKAGE = Path(bringup.__file__).parent
#: The one module allowed to, and the scripts shipped to a host and run there alone (no bringup to import).
ALLOWED = {"child.py": "the mechanism itself",
           "acceptance/probe.py": "shipped to the host and run there by python3 alone (standard library only)"}
#: Calls that start a process or end a process group (by their last name).
FORBIDDEN_CALLS = {"Popen", "killpg", "setsid", "setpgid", "setpgrp", "check_output", "check_call",
                   "getoutput", "getstatusoutput", "system", "popen", "create_subprocess_exec",
                   "create_subprocess_shell", "spawnv", "spawnvp", "spawnl", "spawnlp", "posix_spawn",
                   "posix_spawnp", "fork", "forkpty"}
#: ``subprocess.run`` / ``subprocess.call``: ``run`` alone is too common a name to forbid everywhere.
FORBIDDEN_QUALIFIED = {("subprocess", "run"), ("subprocess", "call")}


def offences(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Call):
            f = node.func
            last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if last in FORBIDDEN_CALLS or (owner, last) in FORBIDDEN_QUALIFIED:
                found.append(f"{name}:{node.lineno}: calls {last}")
            found += [f"{name}:{node.lineno}: passes {k.arg}" for k in node.keywords
                      if k.arg in ("start_new_session", "process_group", "preexec_fn")]
        elif isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "os", "pty"):
            found += [f"{name}:{node.lineno}: imports {a.name} from {node.module}" for a in node.names
                      if a.name in FORBIDDEN_CALLS or (node.module, a.name) in FORBIDDEN_QUALIFIED]
    return found


def test_only_child_py_starts_and_ends_process_groups():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in ALLOWED:
            found += offences(path.read_text(encoding="utf-8"), rel)
    assert not found, "start and end child processes through bringup.child:\n" + "\n".join(found)


def test_the_check_sees_each_way_back():
    # The test above would pass on a check that sees nothing: each spelling it must catch, caught.
    for line in ("subprocess.Popen(['x'])", "Popen(['x'])", "os.killpg(1, 9)", "os.setsid()",
                 "subprocess.run(['x'])", "sp.Popen(['x'], start_new_session=True)", "f(start_new_session=True)",
                 "os.setpgid(0, 0)", "subprocess.check_output(['x'])", "os.system('x')",
                 "from subprocess import Popen", "from os import killpg"):
        assert offences(line, "m.py"), line
    assert not offences("child.start(['x'])\nsubprocess.TimeoutExpired\nrun(1)\nos.kill(1, 9)", "m.py")


def test_the_shipped_exceptions_still_exist_and_import_no_bringup():
    for rel in ALLOWED:
        text = (PACKAGE / rel).read_text(encoding="utf-8")
        if rel != "child.py":
            assert "from bringup" not in text and "from .." not in text, rel
