"""The one triton_cpuset rule that the triton role and the checklist both ask."""
from __future__ import annotations

import pytest

import roles.triton as triton_role
from bringup.checklist import cpu_plan
from bringup.facts.base import parse_cpulist
from bringup.topology import triton_pin

from .test_topology import h200_facts


@pytest.mark.parametrize("value,pin", [(None, None), ("", None), (0, "0"), ("0", "0"), ("4-7", "4-7"),
                                       (False, None), (True, None)])
def test_triton_pin_is_one_rule(value, pin):
    assert triton_pin({"triton_cpuset": value}) == pin
    assert triton_pin({}) is None


@pytest.mark.parametrize("value", [None, "", 0, "3", "8-11,14"])
def test_the_checklist_draws_triton_where_the_role_puts_it(value):
    """The checklist's picture and the compose cpuset come from one rule: a pin (CPU 0 too)
    is where Triton runs; no pin is the plan's Triton CPUs."""
    facts = h200_facts()
    v = {"triton_cpuset": value}
    roles, _ = cpu_plan(facts, v)
    drawn = sorted(c for c, r in roles.items() if r.startswith("triton"))
    assert drawn == parse_cpulist(triton_role.cpuset(v, facts))
    assert drawn == (parse_cpulist(str(value)) if value not in (None, "") else [2, 3, 4, 5])
