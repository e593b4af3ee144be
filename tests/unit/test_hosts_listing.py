"""Issue 40 item 6: 40,000 hosts listed by ``invoke hosts`` in seconds (a Rich table of them took ~19 s on
this 2-core machine; above PLAIN_ROWS the rows are plain aligned text), every host on its own line."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.tasks.inspect import PLAIN_ROWS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.reliability(item=40, fault="an inventory of 40,000 hosts listed by invoke hosts", variants=1,
                         checks=("no hang",))
def test_forty_thousand_hosts_are_listed_in_seconds(tmp_path):
    n = 40_000
    (tmp_path / "hosts.ini").write_text("[gpu]\n" + "".join(f"h{i:05d} ansible_host=10.0.{i // 250}.{i % 250}\n"
                                                            for i in range(n)))
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "hosts.ini"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stderr
    assert len(lines) == n + 1 and lines[0].split() == ["host", "groups", "address", "connection", "gpu_profile"]
    assert lines[-1].split() == ["h39999", "gpu", "root@10.0.159.249:22", "ssh", "-"]
    assert took < 60, f"{took:.1f} s"  # generous on a busy machine; ~3 s alone


def test_a_small_inventory_keeps_the_table(tmp_path):
    (tmp_path / "hosts.ini").write_text("[gpu]\n" + "".join(f"h{i} ansible_host=10.0.0.{i}\n" for i in range(3)))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "hosts.ini"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "h2" in r.stdout and PLAIN_ROWS >= 3


@pytest.mark.reliability(item=40, fault="Rich markup in inventory values shown by invoke hosts (a table, and --host's "
                                        "variables)", variants=2, checks=("data shown as data",))
def test_markup_in_inventory_values_is_shown_not_read(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_host: 10.0.0.1\n"
                                        "      gpu_profile: '[bold red]l40s[/bold red]'\n"
                                        "      note: '[link=file:///etc/passwd]x[/link]'\n")
    for extra in ([], ["--host", "h1"]):
        r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "hosts.yml",
                            *extra], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "[bold red]l40s[/bold red]" in r.stdout, r.stdout + r.stderr
        if extra:
            assert "[link=file:///etc/passwd]x[/link]" in r.stdout, r.stdout


@pytest.mark.reliability(item=40, fault="Rich markup in a group name, the title of invoke hosts --host's table",
                         checks=("data shown as data",))
def test_markup_in_a_group_name_is_shown_not_read(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    '[bold red]G[link=http:]':\n      hosts:\n"
                                        "        h1: {ansible_host: 10.0.0.1}\n")
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "hosts.yml",
                        "--host", "h1"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "FORCE_COLOR": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "[bold red]G[link=http:]" in r.stdout and "\x1b]8;" not in r.stdout, r.stdout


@pytest.mark.reliability(item=40, fault="a variable whose nested key is a YAML date or !!binary, or an INI literal "
                                        "with a tuple, ... or 1j key, shown by invoke hosts --host",
                         variants=4, checks=("data shown as data",))
@pytest.mark.parametrize("json_", [False, True])
@pytest.mark.parametrize("kind", ["yaml", "ini"])
def test_variables_with_keys_json_cannot_write_are_shown(tmp_path, kind, json_):
    if kind == "yaml":
        (tmp_path / "inv").write_text("all:\n  hosts:\n    h1:\n      x: {2001-12-14: 1, !!binary aGk=: 3}\n")
        want = "2001-12-14"
    else:
        (tmp_path / "inv").write_text("h1 a='{(1,):2}' b=... c=1j d={1j:1} e={...:1}\n")
        want = "{(1,):2}"
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "inv",
                        "--host", "h1", *(["--json"] if json_ else [])], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert want in r.stdout, r.stdout


@pytest.mark.reliability(item=40, fault="a YAML .nan / -.inf / .inf value or key shown by invoke hosts --host --json "
                                        "(NaN, -Infinity: no JSON)", variants=1, checks=("data shown as data",))
def test_hosts_json_writes_a_float_that_is_no_number_as_its_yaml_text(tmp_path):
    import json

    (tmp_path / "inv").write_text("all:\n  hosts:\n    h1:\n      a: .nan\n      b: -.inf\n      c: [.inf, 1.5]\n"
                                  "      d: {.nan: 1, 2.5: .NaN}\n")
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "inv",
                        "--host", "h1", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} is no JSON: {r.stdout}"))
    assert {k: doc[k]["value"] for k in "abcd"} == {"a": ".nan", "b": "-.inf", "c": [".inf", 1.5],
                                                    "d": {".nan": 1, "2.5": ".nan"}}
