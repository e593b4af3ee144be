"""Role dcgm_exporter: the unit and container this revision, port listening, /metrics serving.

Where the role skips (no GPU on a cpu profile, no systemd) its promise is that
no exporter is deployed: that is what is audited there.
"""
from __future__ import annotations

import re

import pytest

from bringup.command import sh
from bringup.resources import File
from bringup.resources.guard import Fail, Skip
from roles.dcgm_exporter import NAME, UNIT, counters, resources

from bringup.auditkit import context, listening, listening_snippets


@pytest.fixture(scope="module")
def want(target):
    """The role's own resources for this host, and what the host has of them (one round trip)."""
    ctx = context(target, "dcgm_exporter")
    res = resources(ctx)
    v = ctx.vars
    snippets = {
        "@unit": sh("cat -- %s", UNIT),
        "@active": sh("systemctl is-active -- %s 2>/dev/null", NAME),
        "@container": sh("docker inspect --format '{{.State.Status}} {{index .Config.Labels \"bringup.revision\"}}' "
                         "-- %s 2>/dev/null || echo absent", NAME),
        "@metrics": sh("curl -fsS --max-time 5 %s 2>&1 | grep -E '^(# TYPE )?DCGM_' | head -200",
                       f"http://127.0.0.1:{v['dcgm_exporter_port']}/metrics"),
        **listening_snippets(),
    }
    files = [r for r in res if isinstance(r, File)]
    snippets.update({f"file:{f.path}": sh("cat -- %s", f.path) for f in files})
    return res, files, v, target.read_many(snippets)


def _gated(res) -> Skip | Fail | None:
    return res[0] if len(res) == 1 and isinstance(res[0], (Skip, Fail)) else None


def test_role_would_run_here(target, want):
    res, _, _, _ = want
    gate = _gated(res)
    assert not isinstance(gate, Fail), f"{target.name}: dcgm exporter: {gate.error if gate else ''}"


def test_files_as_rendered(target, want):
    res, files, _, state = want
    if _gated(res):
        # The role's promise where it skips: nothing of the exporter deployed.
        assert not state["@unit"], f"{target.name}: {UNIT} exists but the role skips this host ({res[0].reason})"
        return
    wrong = [f.path + (" is missing" if not state[f"file:{f.path}"] else " differs from the role's render")
             for f in files if (state[f"file:{f.path}"] or "").encode() != f.content]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_container_runs_this_revision(target, want):
    res, files, _, state = want
    got = (state["@container"] or "absent").split()
    if _gated(res):
        assert got == ["absent"], f"{target.name}: container {NAME} exists but the role skips this host " \
                                  f"({res[0].reason})"
        return
    unit = next(f for f in files if f.path == UNIT).content.decode()
    revision = re.search(r"--label bringup\.revision=(\S+)", unit).group(1)
    assert (state["@active"] or "").strip() == "active", \
        f"{target.name}: unit {NAME} is {(state['@active'] or '').strip() or 'unknown'}, want active"
    assert got[:1] == ["running"], f"{target.name}: container {NAME} is {' '.join(got)}, want running"
    assert got[1:] == [revision], f"{target.name}: container {NAME} runs revision {''.join(got[1:]) or 'none'}, " \
                                  f"want {revision}"


def test_port_listening(target, want):
    res, _, v, state = want
    port = int(v["dcgm_exporter_port"])
    if _gated(res):
        return  # the port may be anyone's on a host the role skips; the unit and container are checked above
    assert port in listening(state["@tcp"]), f"{target.name}: nothing listens on TCP port {port} (dcgm exporter)"


def test_metrics_carry_the_counters(target, want):
    res, _, v, state = want
    if _gated(res):
        return
    body = state["@metrics"] or ""
    first = counters(v)[0][0]
    assert re.search(rf"^{first}\{{", body, re.M), \
        f"{target.name}: http://127.0.0.1:{v['dcgm_exporter_port']}/metrics carries no {first} sample"
    missing = [n for n, typ, _ in counters(v) if f"# TYPE {n} {typ}" not in body]
    assert not missing, f"{target.name}: /metrics lacks counter(s) {', '.join(missing)}"
