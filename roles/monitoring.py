"""Prometheus, its Triton/DCGM alert rules and Grafana, beside Triton.

Prometheus scrapes Triton (:8002), the DCGM exporter (:9400) and the node
exporter (:9100) of ``monitoring_targets``.  The alert rules are the guide's
(p95 above ``latency_slo_p95_ms`` for 5 minutes while queue time rises), Triton
down, DCGM XID errors and GPU temperature, and the drift report's (``invoke drift
--prometheus``: drift, unreachable hosts, a nightly check that stopped), written against the summaries and
counters Triton really exports; they are unit-tested with ``promtool test
rules``.  Grafana is provisioned with a Prometheus data source and a Triton
dashboard (p50/p95, queue vs compute time, average batch size, GPU and memory
copy utilization).  With ``monitoring_stack: true`` (the shipped inventory's
gpu hosts) the three run as pinned compose services in host networking, their
images pulled or pushed (``image_transfer``); ``false`` (default) writes the
files only.

Variables:
    latency_slo_p95_ms: the p95 SLO in ms (50: the guide's result was 48).
    monitoring_targets: hosts to scrape (default: this host, 127.0.0.1).
    monitoring_stack, monitoring_node_exporter, monitoring_images, monitoring_dir,
    monitoring_gpu_temp_c, monitoring_scrape_interval, monitoring_retention,
    monitoring_drift_stale_hours (26: the nightly drift check plus slack), monitoring_pull_stale_hours (null:
    no pull mode alerts; N: BringupPullRefused, BringupPullFailing and BringupPullStale after N h without a run).
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Optional

import yaml
from pydantic import Field

from bringup.engine.auditkit import Expect
from bringup.ssh.command import sh
from bringup.inventory.vars import AbsPath, RoleVars, Spec, defaults_of, want
from bringup.resources import Directory, File
from bringup.resources.compose import ComposeUp, revision_hash
from bringup.resources.guard import Unused
from bringup.resources.image import DockerImage
from bringup.resources import image

#: The facts this role reads (only these are gathered for it).
FACTS = ()

_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$|^\[[0-9a-fA-F:]+\]$")
_DURATION = r"^\d+[smhdwy]$"
_IMAGE = Annotated[str, Field(pattern=r"^[\w.\-/:@]+$")]
_PORT = Annotated[int, Field(ge=1, le=65535)]


class Images(Spec):
    prometheus: _IMAGE
    grafana: _IMAGE
    node_exporter: _IMAGE


class Ports(Spec):
    triton: _PORT
    dcgm: _PORT
    node: _PORT
    prometheus: _PORT
    grafana: _PORT


class Vars(image.ImageVars, RoleVars):
    latency_slo_p95_ms: float = want(50, "must be a number within 1-60000", ge=1, le=60000)
    monitoring_targets: list[Annotated[str, Field(pattern=_HOST.pattern)]] = want(
        ["127.0.0.1"], "a list of host names or addresses", min_length=1)
    monitoring_stack: bool = False
    monitoring_node_exporter: bool = True
    monitoring_dir: AbsPath = "/opt/monitoring"
    monitoring_gpu_temp_c: float = want(85, "must be a number within 30-120", ge=30, le=120)
    monitoring_scrape_interval: str = want("5s", "a Prometheus duration like 15s or 15d", pattern=_DURATION)
    monitoring_retention: str = want("15d", "a Prometheus duration like 15s or 15d", pattern=_DURATION)
    #: invoke drift runs nightly: a host whose last check is older than this is alerted on.
    monitoring_drift_stale_hours: float = want(26, "must be a number within 1-744", ge=1, le=24 * 31)
    #: Pull mode's alerts (bringup_pull_*: refused, failing, no run for this many hours); null: not written.
    monitoring_pull_stale_hours: Optional[float] = want(None, "a number within 1-744, or null", ge=1, le=24 * 31)
    monitoring_images: Images = want({
        "prometheus": "prom/prometheus:v2.53.0",
        "grafana": "grafana/grafana:11.1.0",
        "node_exporter": "prom/node-exporter:v1.8.1",
    }, "prometheus, grafana and node_exporter image references")
    monitoring_ports: Ports = want({"triton": 8002, "dcgm": 9400, "node": 9100, "prometheus": 9090, "grafana": 3000},
                                   "a mapping with triton, dcgm, node, prometheus and grafana ports")


DEFAULTS = defaults_of(Vars)


def _panel(pid: int, title: str, targets: list[tuple[str, str]], unit: str, x: int, y: int) -> dict:
    return {
        "id": pid, "type": "timeseries", "title": title,
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(65 + i), "expr": e, "legendFormat": legend,
                     "datasource": {"type": "prometheus", "uid": "prometheus"}}
                    for i, (e, legend) in enumerate(targets)],
    }


def dashboard(slo_ms: float) -> dict:
    """The Triton dashboard; every expression is PromQL over Triton's and DCGM's real metric names."""
    per_req = "sum by (model) (rate({m}[1m])) / sum by (model) (rate(nv_inference_request_success[1m]))"
    panels = [
        _panel(1, f"Request latency p50 / p95 (SLO {slo_ms:g} ms)", [
            ('max by (model) (nv_inference_request_summary_us{quantile="0.5"}) / 1000', "{{model}} p50"),
            ('max by (model) (nv_inference_request_summary_us{quantile="0.95"}) / 1000', "{{model}} p95"),
        ], "ms", 0, 0),
        _panel(2, "Queue vs compute time per request", [
            (per_req.format(m="nv_inference_queue_duration_us"), "{{model}} queue"),
            (per_req.format(m="nv_inference_compute_infer_duration_us"), "{{model}} compute"),
        ], "µs", 12, 0),
        _panel(3, "Average batch size (inferences per execution: >1 = the window works)", [
            ("sum by (model) (rate(nv_inference_count[1m])) / sum by (model) (rate(nv_inference_exec_count[1m]))",
             "{{model}}"),
        ], "none", 0, 8),
        _panel(4, "Requests per second", [
            ("sum by (model) (rate(nv_inference_request_success[1m]))", "{{model}} ok"),
            ("sum by (model) (rate(nv_inference_request_failure[1m]))", "{{model}} failed"),
        ], "reqps", 12, 8),
        _panel(5, "GPU utilization", [("DCGM_FI_DEV_GPU_UTIL", "{{instance}} GPU {{gpu}}")], "percent", 0, 16),
        _panel(6, "GPU memory copy utilization", [("DCGM_FI_DEV_MEM_COPY_UTIL", "{{instance}} GPU {{gpu}}")],
               "percent", 12, 16),
    ]
    return {"uid": "bringup-triton", "title": "Triton inference (bringup)", "schemaVersion": 39, "version": 1,
            "time": {"from": "now-1h", "to": "now"}, "refresh": "10s", "tags": ["triton", "bringup"],
            "panels": panels}


def files(host) -> tuple[dict[str, str], str]:
    """``({path: content}, revision)``: every file the role writes (the compose file included)."""
    v = host.vars
    d = v["monitoring_dir"].rstrip("/")
    ports = v["monitoring_ports"]
    out = {
        f"{d}/prometheus/prometheus.yml": host.render(
            "monitoring/prometheus.yml.j2", interval=v["monitoring_scrape_interval"],
            targets=v["monitoring_targets"], ports=ports),
        f"{d}/prometheus/rules/triton.rules.yml": host.render(
            "monitoring/triton.rules.yml.j2", slo_ms=v["latency_slo_p95_ms"], gpu_temp_c=v["monitoring_gpu_temp_c"],
            drift_stale_hours=v["monitoring_drift_stale_hours"],
            pull_stale_hours=v.get("monitoring_pull_stale_hours")),
        f"{d}/grafana/provisioning/datasources/prometheus.yml": host.render(
            "monitoring/grafana-datasource.yml.j2", url=f"http://127.0.0.1:{int(ports['prometheus'])}"),
        f"{d}/grafana/provisioning/dashboards/bringup.yml": host.render("monitoring/grafana-dashboards.yml.j2"),
        f"{d}/grafana/dashboards/triton.json": json.dumps(dashboard(v["latency_slo_p95_ms"]), indent=2) + "\n",
    }
    ctx = dict(images=v["monitoring_images"], ports=ports, dir=d, retention=v["monitoring_retention"],
               node_exporter=bool(v["monitoring_node_exporter"]))
    rev = revision_hash(host.render("monitoring/docker-compose.yml.j2", revision="", **ctx), sorted(out.items()))
    out[f"{d}/docker-compose.yml"] = host.render("monitoring/docker-compose.yml.j2", revision=rev, **ctx)
    return out, rev


def resources(host):
    d = host.vars["monitoring_dir"].rstrip("/")
    wanted, rev = files(host)
    dirs = [d, f"{d}/prometheus", f"{d}/prometheus/rules", f"{d}/grafana", f"{d}/grafana/provisioning",
            f"{d}/grafana/provisioning/datasources", f"{d}/grafana/provisioning/dashboards", f"{d}/grafana/dashboards"]
    out = [Directory(p, mode="0755") for p in dirs]
    out += [File(p, content=c, mode="0644", backup=False) for p, c in wanted.items()]
    if host.vars["monitoring_stack"]:
        images = host.vars["monitoring_images"]
        out += [DockerImage(images[k], source=host.vars["image_transfer"])
                for k in ("prometheus", "grafana", "node_exporter")
                if k != "node_exporter" or host.vars["monitoring_node_exporter"]]
        # Prometheus and Grafana read their files at start: the revision label recreates them on change.
        out.append(ComposeUp(f"{d}/docker-compose.yml", project="monitoring", container="prometheus", revision=rev))
    return out


def rule_names(text: str) -> dict[str, list[str]]:
    """``{group: [record/alert names]}`` of a rendered rules file."""
    doc = yaml.safe_load(text) or {}
    return {g["name"]: [r.get("record") or r.get("alert") for r in g.get("rules") or []]
            for g in doc.get("groups") or []}


def audit(host):
    """What the files do not show: Prometheus (this revision: the compose resource) has loaded every rule.

    With ``monitoring_stack: false`` the role writes files only: they are audited, the loaded rules are not.
    """
    if not host.vars["monitoring_stack"]:
        return [Unused("prometheus rules", "monitoring_stack is false: the role writes files only, so only the "
                                           "files are audited, not Prometheus' loaded rules")]
    wanted, _ = files(host)
    expected = rule_names(next(text for path, text in wanted.items() if path.endswith(".rules.yml")))
    url = f"http://127.0.0.1:{int(host.vars['monitoring_ports']['prometheus'])}/api/v1/rules"

    def judge(out: str) -> str | None:
        try:
            groups = json.loads(out)["data"]["groups"]
        except (ValueError, KeyError, TypeError):
            return f"Prometheus {url} answers {out.strip()[:200] or 'nothing'}, want its loaded rules"
        loaded = {g["name"]: [r["name"] for r in g.get("rules") or []] for g in groups}
        missing = [f"{g}/{n}" for g, names in expected.items() for n in names if n not in loaded.get(g, [])]
        return f"Prometheus has not loaded rule(s) {', '.join(missing)}, want every rule the role renders" \
            if missing else None

    return [Expect("prometheus rules loaded", sh("curl -fsS --max-time 5 %s 2>&1", url), judge)]
