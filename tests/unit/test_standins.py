"""bringup.standins (issue 42): the console script's stand-ins for asyncio and unittest.mock keep ~40 modules out
of every command's start-up, and never answer wrongly: each real use gets the real module.

Each case runs in a fresh interpreter (the test process has both imported already, so nothing would be placed).
"""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PLACE = """if True:
    import sys
    from bringup import standins
    standins.place()
    import pydantic, invoke
    from pydantic import BaseModel

    class M(BaseModel):
        x: int = 1

    assert M(x=3).x == 3
    placed = [m for m in standins.STANDS_IN_FOR if type(sys.modules.get(m)).__name__ == "_StandIn"]
    assert placed == list(standins.STANDS_IN_FOR), placed
"""


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", PLACE + textwrap.indent(textwrap.dedent(code), "    ")],
                       capture_output=True, text=True, timeout=120, cwd=REPO, env={"PYTHONPATH": str(REPO),
                                                                                 "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_pydantic_and_invoke_load_with_none_of_the_modules_stood_in_for():
    out = _run("""
        real = [m for m in ("asyncio", "asyncio.coroutines", "asyncio.events", "unittest", "unittest.mock",
                            "unittest.case", "ssl") if type(sys.modules.get(m)).__name__ == "module"]
        print(real)
    """)
    assert out.strip() == "[]"


@pytest.mark.parametrize("use, expect", [
    # a submodule of the package stood in for
    ("import asyncio.subprocess; print(asyncio.subprocess.PIPE, asyncio.run.__module__)", "-1 asyncio.runners"),
    # a name the stand-in does not have, then a coroutine run for real
    ("import asyncio\nasync def f():\n    return 7\nprint(asyncio.run(f()), asyncio.iscoroutinefunction(f))",
     "7 True"),
    ("from asyncio import Future\nprint(Future.__module__)", "_asyncio"),
    # a submodule imported while the stand-ins stand is the real package's own, loaded once (a review found
    # unittest.case loaded twice: unittest.TestCase was not unittest.case.TestCase)
    ("import unittest.case, unittest\nprint(unittest.TestCase is unittest.case.TestCase, "
     "unittest.case.__spec__.loader.__class__.__name__)", "True SourceFileLoader"),
    ("import asyncio.events, asyncio\nasyncio.events.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())\n"
     "print(asyncio.events is sys.modules['asyncio.events'], asyncio.get_event_loop_policy().__class__.__name__)",
     "True _UnixDefaultEventLoopPolicy"),
    ("import asyncio.base_events, asyncio.tasks, asyncio\nasync def f():\n    return 5\n"
     "print(asyncio.run(f()), asyncio.tasks.Task is asyncio.Task)", "5 True"),
    ("import unittest.mock\nprint(unittest.mock.patch.__module__, unittest.TestCase.__module__)",
     "unittest.mock unittest.case"),
    # Invoke's MockContext makes a real Mock
    ("from invoke import MockContext, Result\nc = MockContext(run=Result('y'))\n"
     "print(c.run('x').stdout, type(c.run).__module__, c.run.call_count)", "y unittest.mock 1"),
    # typing_extensions' deprecated() on a coroutine function marks its wrapper as the real asyncio does
    ("import asyncio, warnings\nfrom typing_extensions import deprecated\n"
     "@deprecated('old')\nasync def g():\n    return 1\n"
     "print(asyncio.iscoroutinefunction(g), g.__deprecated__)", "True old"),
])
def test_every_real_use_gets_the_real_module(use, expect):
    out = _run(use + "\nprint(sorted(type(sys.modules.get(m)).__name__ for m in ('asyncio', 'asyncio.coroutines')))")
    first, kinds = out.strip().splitlines()[-2:]
    assert first == expect
    if "asyncio" in use:
        assert kinds == "['module', 'module']"  # the real package from then on


def test_nothing_is_placed_where_a_module_is_already_imported():
    r = subprocess.run([sys.executable, "-c", "import sys, asyncio\nfrom bringup import standins\n"
                        "standins.place()\nprint(type(sys.modules['unittest.mock']).__name__ "
                        "if 'unittest.mock' in sys.modules else 'absent', sys.modules['asyncio'] is asyncio)"],
                       capture_output=True, text=True, timeout=60, cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert r.stdout.split() == ["absent", "True"], r.stderr
