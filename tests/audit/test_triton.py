"""Role triton: the compose project up at the role's revision, ports listening, server and models ready."""
from __future__ import annotations

import pytest

from bringup.command import sh
from roles.triton import _Desired, resources

from bringup.auditkit import context, listening, listening_snippets


@pytest.fixture(scope="module")
def want(target):
    ctx = context(target, "triton")
    serves = bool(ctx.vars.get("triton_models") or ctx.vars.get("models_dir"))
    d = _Desired(ctx) if serves else None
    if d is None:
        return None, resources(ctx), {}
    base = f"http://127.0.0.1:{int(d.vars['triton_ports']['http'])}"
    code = "curl -s -o /dev/null -w '%%{http_code}' --max-time 5 %s || true"
    snippets = {
        "@container": sh("docker inspect --format '{{.State.Status}} {{index .Config.Labels \"bringup.revision\"}} "
                         "{{index .Config.Labels \"com.docker.compose.project\"}}' -- %s 2>/dev/null || echo absent",
                         d.container),
        "@compose": sh("cat -- %s", d.compose_file),
        "@ready": sh(code, f"{base}/v2/health/ready"),
        **{f"model:{m}": sh(code, f"{base}/v2/models/{m}/ready") for m in d.models},
        **{f"config:{m}": sh("cat -- %s", f"{d.repo}/{m}/config.pbtxt") for m in d.configs},
        **listening_snippets(),
    }
    return d, None, target.read_many(snippets)


def test_compose_project_up_at_this_revision(target, want):
    d, skipped, state = want
    if d is None:
        # The role skips a host with nothing to serve; its one promise there is that it has nothing to check.
        assert skipped and type(skipped[0]).__name__ == "Skip", f"{target.name}: triton: {skipped}"
        return
    got = (state["@container"] or "absent").split()
    assert got[:1] == ["running"], f"{target.name}: container {d.container} is {' '.join(got)}, want running"
    assert got[2:] == ["triton"], f"{target.name}: container {d.container} is not of compose project triton"
    assert got[1:2] == [d.revision], f"{target.name}: container {d.container} runs revision " \
                                     f"{''.join(got[1:2]) or 'none'}, want {d.revision}"


def test_files_as_rendered(target, want):
    d, _, state = want
    if d is None:
        return
    wrong = [] if state["@compose"] == d.compose else [f"{d.compose_file} differs from the role's render"]
    wrong += [f"{d.repo}/{m}/config.pbtxt " + ("is missing" if not state[f"config:{m}"] else "differs from the "
                                                "role's render")
              for m, text in d.configs.items() if state[f"config:{m}"] != text]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_ports_listening(target, want):
    d, _, state = want
    if d is None:
        return
    ports = {k: int(p) for k, p in d.vars["triton_ports"].items()}
    up = listening(state["@tcp"])
    missing = [f"{k} {p}" for k, p in ports.items() if p not in up]
    assert not missing, f"{target.name}: triton: nothing listens on TCP port(s) {', '.join(missing)}"


def test_server_ready(target, want):
    d, _, state = want
    if d is None:
        return
    code = (state["@ready"] or "").strip() or "no answer"
    assert code == "200", f"{target.name}: triton /v2/health/ready answers {code}, want 200"


def test_every_model_ready(target, want):
    d, _, state = want
    if d is None:
        return
    bad = [f"{m} ({(state[f'model:{m}'] or '').strip() or 'no answer'})" for m in d.models
           if (state[f"model:{m}"] or "").strip() != "200"]
    assert not bad, f"{target.name}: triton model(s) not ready: {', '.join(bad)}"
