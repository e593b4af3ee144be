"""Role monitoring: the rendered Prometheus config, rules (and Grafana files) as the role renders them;
with ``monitoring_stack: true``, Prometheus running this revision with every rule loaded.

With ``monitoring_stack: false`` the role writes the files only, so only the files are
audited; the rules test says so (a warning in the audit's output).
"""
from __future__ import annotations

import json
import warnings

import pytest
import yaml

from bringup.command import sh
from roles.monitoring import files

from bringup.auditkit import context


def _rule_names(text: str) -> dict[str, list[str]]:
    """``{group: [record/alert names]}`` of a rendered rules file."""
    doc = yaml.safe_load(text) or {}
    return {g["name"]: [r.get("record") or r.get("alert") for r in g.get("rules") or []]
            for g in doc.get("groups") or []}


@pytest.fixture(scope="module")
def want(target):
    ctx = context(target, "monitoring")
    wanted, rev = files(ctx)
    v = ctx.vars
    snippets = {f"file:{p}": sh("cat -- %s", p) for p in wanted}
    if v["monitoring_stack"]:
        snippets["@container"] = sh("docker inspect --format '{{.State.Status}} "
                                    "{{index .Config.Labels \"bringup.revision\"}}' -- prometheus 2>/dev/null "
                                    "|| echo absent")
        snippets["@rules"] = sh("curl -fsS --max-time 5 %s 2>&1",
                                f"http://127.0.0.1:{int(v['monitoring_ports']['prometheus'])}/api/v1/rules")
    return wanted, rev, v, target.read_many(snippets)


def _check(target, want, pick):
    wanted, _, _, state = want
    wrong = [p + (" is missing" if not state[f"file:{p}"] else " differs from the role's render")
             for p, text in wanted.items() if pick(p) and state[f"file:{p}"] != text]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_prometheus_config_and_rules_as_rendered(target, want):
    _check(target, want, lambda p: "/prometheus/" in p)


def test_other_files_as_rendered(target, want):
    _check(target, want, lambda p: "/prometheus/" not in p)


def test_rules_loaded_or_files_only(target, want):
    wanted, rev, v, state = want
    rules_file = next(p for p in wanted if p.endswith(".rules.yml"))
    expected = _rule_names(wanted[rules_file])
    assert expected and all(expected.values()), f"{target.name}: the role renders no rules"
    if not v["monitoring_stack"]:
        warnings.warn(f"{target.name}: monitoring_stack is false: the role writes files only, so only the "
                      "files are audited, not Prometheus' loaded rules")
        return
    got = (state["@container"] or "absent").split()
    assert got[:1] == ["running"], f"{target.name}: container prometheus is {' '.join(got)}, want running"
    assert got[1:] == [rev], f"{target.name}: prometheus runs revision {''.join(got[1:]) or 'none'}, want {rev}"
    try:
        groups = json.loads(state["@rules"] or "")["data"]["groups"]
    except (ValueError, KeyError, TypeError):
        pytest.fail(f"{target.name}: Prometheus /api/v1/rules did not answer: {(state['@rules'] or '')[:200]}")
    loaded = {g["name"]: [r["name"] for r in g.get("rules") or []] for g in groups}
    missing = [f"{g}/{n}" for g, names in expected.items() for n in names if n not in loaded.get(g, [])]
    assert not missing, f"{target.name}: Prometheus has not loaded rule(s) {', '.join(missing)}"
