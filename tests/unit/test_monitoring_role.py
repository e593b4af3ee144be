"""The monitoring role's files: alert rules tested with promtool, Prometheus config and dashboard PromQL checked."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bringup.errors import InputError
from bringup.engine.roles import HostContext, Role
from bringup.engine.templates import Templates

import roles.monitoring as M

#: The role as the engine checks it: its Vars model, then its validate hook.
CHECK = Role('monitoring', M).validate

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).parent / "promtool" / "triton_rules_test.yml"
D = M.DEFAULTS["monitoring_dir"]


def promtool() -> str:
    path = shutil.which("promtool")
    # Not a skip: a machine without it cannot prove the rules (scripts/ci-setup.sh installs it).
    assert path, "promtool is not installed: apt-get install prometheus (scripts/ci-setup.sh does)"
    return path


def rendered(**over) -> tuple[dict[str, str], str]:
    host = HostContext("h", {**M.DEFAULTS, **over}, {}, Templates(REPO / "templates").render)
    return M.files(host)


def run_rule_tests(tmp_path: Path, tests: Path = TESTS, **over) -> subprocess.CompletedProcess:
    """``promtool test rules`` of ``tests`` against the rules rendered with ``over``."""
    files, _ = rendered(**over)
    (tmp_path / "triton.rules.yml").write_text(files[f"{D}/prometheus/rules/triton.rules.yml"])
    shutil.copy(tests, tmp_path / tests.name)
    return subprocess.run([promtool(), "test", "rules", tests.name], cwd=tmp_path, capture_output=True, text=True)


def test_alert_rules_pass_promtool_unit_tests(tmp_path):
    r = run_rule_tests(tmp_path, latency_slo_p95_ms=50, monitoring_gpu_temp_c=85)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_the_unit_tests_notice_a_different_slo(tmp_path):
    # With a 70 ms SLO the 60 ms p95 no longer fires: the tests really exercise the threshold.
    r = run_rule_tests(tmp_path, latency_slo_p95_ms=70)
    assert r.returncode != 0 and "TritonP95AboveSLO" in r.stdout + r.stderr


def test_rules_use_what_triton_exports():
    files, _ = rendered()
    rules = yaml.safe_load(files[f"{D}/prometheus/rules/triton.rules.yml"])
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    assert 'nv_inference_request_summary_us{quantile="0.95"}' in exprs
    assert "nv_inference_queue_duration_us" in exprs and "nv_inference_exec_count" in exprs
    assert "_bucket" not in exprs and "histogram_quantile" not in exprs  # Triton has no latency histogram
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert alerts >= {"TritonP95AboveSLO", "TritonDown", "DcgmXidError", "GpuTemperatureHigh"}


def test_prometheus_config_is_valid_and_scrapes_the_three_exporters(tmp_path):
    files, _ = rendered(monitoring_targets=["trt-l40s-01", "trt-a10-01"])
    (tmp_path / "prometheus.yml").write_text(files[f"{D}/prometheus/prometheus.yml"])
    r = subprocess.run([promtool(), "check", "config", "prometheus.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = yaml.safe_load(files[f"{D}/prometheus/prometheus.yml"])
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in cfg["scrape_configs"]}
    assert jobs == {"triton": ["trt-l40s-01:8002", "trt-a10-01:8002"], "dcgm": ["trt-l40s-01:9400", "trt-a10-01:9400"],
                    "node": ["trt-l40s-01:9100", "trt-a10-01:9100"]}


def test_dashboard_expressions_are_valid_promql(tmp_path):
    files, _ = rendered()
    dash = json.loads(files[f"{D}/grafana/dashboards/triton.json"])
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    text = " ".join(exprs)
    for needed in ('quantile="0.5"', 'quantile="0.95"', "nv_inference_queue_duration_us",
                   "nv_inference_compute_infer_duration_us", "rate(nv_inference_count[1m])) / sum by (model) "
                   "(rate(nv_inference_exec_count[1m]))", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"):
        assert needed in text, needed
    # promtool parses each one as a recording rule's expression.
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    (tmp_path / "dash.yml").write_text(yaml.safe_dump(rules))
    r = subprocess.run([promtool(), "check", "rules", "dash.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    ds = yaml.safe_load(files[f"{D}/grafana/provisioning/datasources/prometheus.yml"])["datasources"][0]
    assert ds["type"] == "prometheus" and ds["uid"] == "prometheus" and ds["url"] == "http://127.0.0.1:9090"
    assert all(p["datasource"]["uid"] == "prometheus" for p in dash["panels"])


def test_compose_services_are_pinned_and_optional():
    files, rev = rendered()
    svc = yaml.safe_load(files[f"{D}/docker-compose.yml"])["services"]
    assert set(svc) == {"prometheus", "grafana", "node-exporter"}
    for s in svc.values():
        tag = s["image"].rsplit(":", 1)[-1]
        assert ":" in s["image"] and tag not in ("latest", "") and s["labels"]["bringup.revision"] == rev
    files2, rev2 = rendered(monitoring_node_exporter=False, latency_slo_p95_ms=40)
    assert "node-exporter" not in yaml.safe_load(files2[f"{D}/docker-compose.yml"])["services"] and rev2 != rev
    host = HostContext("h", dict(M.DEFAULTS), {}, Templates(REPO / "templates").render)
    assert not any(r.kind in ("compose", "image") for r in M.resources(host))  # default: files only
    host = HostContext("h", {**M.DEFAULTS, "monitoring_stack": True}, {}, Templates(REPO / "templates").render)
    kinds = [r.id for r in M.resources(host) if r.kind in ("compose", "image")]
    assert kinds == [f"image:{svc[k]['image']}" for k in ("prometheus", "grafana", "node-exporter")] + \
        ["compose:monitoring:prometheus"]


@pytest.mark.parametrize("key,value", [("latency_slo_p95_ms", "fast"), ("monitoring_targets", ["a b"]),
                                       ("monitoring_retention", "forever"), ("monitoring_gpu_temp_c", 500),
                                       ("monitoring_drift_stale_hours", 0)])
def test_bad_values_are_refused(key, value):
    with pytest.raises(InputError, match=key):
        CHECK({**M.DEFAULTS, key: value})


DRIFT_TESTS = Path(__file__).parent / "promtool" / "drift_rules_test.yml"


def test_drift_alert_rules_pass_promtool_unit_tests(tmp_path):
    r = run_rule_tests(tmp_path, DRIFT_TESTS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_the_drift_unit_tests_notice_a_different_staleness_limit(tmp_path):
    # With 28 h the host checked 27 h ago is not stale yet: the test really exercises the limit.
    r = run_rule_tests(tmp_path, DRIFT_TESTS, monitoring_drift_stale_hours=28)
    assert r.returncode != 0 and "BringupDriftCheckStale" in r.stdout + r.stderr


def test_drift_rules_read_the_metrics_invoke_drift_writes():
    from bringup.engine.drift import METRICS

    files, _ = rendered()
    rules = yaml.safe_load(files[f"{D}/prometheus/rules/triton.rules.yml"])
    group = next(g for g in rules["groups"] if g["name"] == "bringup-drift")
    exprs = " ".join(r["expr"] for r in group["rules"])
    assert {r["alert"] for r in group["rules"]} == {"BringupDrift", "BringupDriftCheckFailed", "BringupUnreachable",
                                                     "BringupDriftCheckStale"}
    assert all(name in exprs for name in METRICS)
    assert "> 26 * 3600" in exprs
