"""A GPU the driver says needs a reset, a reboot or a drain (``nvidia-smi -q``'s ``GPU Reset Status`` and, from
driver 550, ``GPU Recovery Action``) is a FAIL line, never a host whose every line passes.

``tests/fixtures/hosts/public/nvsmi-q-rtx3090-reset-required-excerpt-drv535.txt`` (source in its ``# source:`` line)
is the published excerpt of a GPU in that state: ``Reset Required : Yes``, its CUDA failing.  The excerpt alone is
no whole report (its author picked lines out of several sections), so its reset block is put in place of the same
block of a real report of the same driver (``nvsmi-q-a10g.txt``, 535.247.01); the actions of newer drivers are
written over the real H200 report's ``GPU Recovery Action : None`` (driver 580).  Each test says what it changed;
the stored files are never edited.
"""
from __future__ import annotations

import re

import pytest

from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import parse_raw
from bringup.hardware.health import health_checks
from harness.captures import strip_comments

from .fixture_hosts import FIX

PUB = FIX / "public"
EXCERPT = PUB / "nvsmi-q-rtx3090-reset-required-excerpt-drv535.txt"
A10G = PUB / "nvsmi-q-a10g.txt"
H200 = FIX / "h200-vm" / "nvidia-smi-q.txt"
ACTION = "    GPU Recovery Action                                : None\n"


def lines(output: str, name: str = "GPU recovery"):
    values, errors = parse_raw([FACTS_BY_NAME["nvidia.query"]], {"nvidia.query": {"rc": 0, "output": output}})
    assert errors == {}, errors
    return [c for c in health_checks(values, {}, errors) if c.name == name]


def with_the_excerpts_reset_block() -> str:
    """The A10G report (driver 535.247.01) with its ``GPU Reset Status`` block replaced by the excerpt's, indented as
    nvidia-smi indents it under a GPU."""
    block = strip_comments(EXCERPT.read_text()).split("\n\n")[0].splitlines()
    assert block[0] == "GPU Reset Status" and len(block) == 3
    text = strip_comments(A10G.read_text())
    old = re.search(r"^    GPU Reset Status\n(?:        .*\n){2}", text, flags=re.M).group(0)
    new = "".join(f"    {l}\n" for l in block)
    assert old != new
    return text.replace(old, new, 1)


def test_the_real_reset_required_excerpt_fails():
    (rec,) = lines(with_the_excerpts_reset_block())
    assert rec.status == "FAIL" and rec.subject == "GPU 00000000:00:1E.0", rec
    assert rec.seen == "Reset Required Yes: the GPU needs a reset before it is used again"
    assert "nvidia-smi -r -i 00000000:00:1E.0" in rec.fix
    # The other lines of the same report still read as before.
    assert [c.status for c in lines(with_the_excerpts_reset_block(), "ECC errors")] == ["PASS"]


def test_reports_that_ask_nothing_have_no_recovery_line():
    # A10G (Reset Required No, Drain and Reset Recommended No) and H200 (GPU Recovery Action None).
    assert lines(strip_comments(A10G.read_text())) == [] and lines(H200.read_text()) == []


@pytest.mark.reliability(item=41, fault="a GPU the driver asks to reset, reboot or drain; its recovery values "
                         "garbled", variants=7, checks=("one clear line",))
@pytest.mark.parametrize(("action", "want", "words"), [
    ("Reset", "FAIL", "GPU Recovery Action Reset"),
    ("Reboot", "FAIL", "GPU Recovery Action Reboot"),
    ("Drain P2P", "FAIL", "GPU Recovery Action Drain P2P"),
    ("Drain and Reset", "FAIL", "GPU Recovery Action Drain and Reset"),
    ("Rset", "WARN", "not checked: nvidia.query unreadable: GPU Recovery Action 'Rset'"),
    ("", "WARN", "not checked: nvidia.query unreadable: GPU Recovery Action ''"),
    ("Reset\x1b[2J", "WARN", "not checked: nvidia.query unreadable: GPU Recovery Action"),
])
def test_every_recovery_action_is_said(action, want, words):
    text = H200.read_text()
    assert ACTION in text
    (rec,) = lines(text.replace(ACTION, ACTION.replace("None", action)))
    assert rec.status == want and rec.seen.startswith(words), (action, rec)


@pytest.mark.parametrize("value", ["Maybe", "yes", "Requested functionality has been deprecated"])
def test_a_reset_required_that_is_no_yes_or_no(value):
    text = strip_comments(A10G.read_text())
    changed = text.replace("Reset Required                    : No", f"Reset Required                    : {value}")
    assert changed != text
    got = lines(changed)
    if value.startswith("Requested"):  # what drivers 570+ print there: no reading, and no line
        assert got == []
    else:
        (rec,) = got
        assert rec.status == "WARN" and f"GPU Reset Status Reset Required '{value}'" in rec.seen, rec
