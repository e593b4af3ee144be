"""The triton role against a real (CPU) Triton on a sandbox host, over SSH.

The server is the TEST DOUBLE image of ``harness/triton_image.py`` (tritonserver 2.51
from the nvidia-pytriton wheel), loaded into the host's own Docker; the role
deploys a Python-backend model on the ``cpu`` profile with the host's
docker-compose.  Checks go through ``docker exec`` and Triton's own HTTP API
on the host container's address.
"""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness import write_inventory

from .helpers import invoke, last_report, recap
from harness.triton_image import build_triton_image

pytestmark = pytest.mark.integration

MODELS = Path(__file__).parent / "triton_models"
REPO = "/data/models"
ADD = {"backend": "python", "max_batch_size": 16, "instance_count": 1, "preferred_batch_size": [4, 8, 16],
       "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
       "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}


@pytest.fixture(scope="module")
def triton_host(sandbox_host):
    tag = build_triton_image()
    sandbox_host.exec("systemctl enable --now docker.service && "
                      "for i in $(seq 60); do docker info >/dev/null 2>&1 && exit 0; sleep 0.5; done; exit 1")
    return sandbox_host, tag


@pytest.fixture(scope="module")
def project(triton_host, tmp_path_factory):
    host, tag = triton_host
    d = tmp_path_factory.mktemp("triton")
    shutil.copytree(MODELS / "add", d / "models" / "add")
    write_inventory(d / "hosts", [host], extra_vars={
        # Streamed from this machine's Docker (no registry here): the NVIDIA stack's image transfer.
        "triton_image": tag, "image_transfer": "push", "triton_shm_size": "256m", "models_dir": "models",
        "triton_models": {"add": ADD}, "triton_ready_timeout": 90,
    })
    return d


@pytest.fixture(scope="module")
def address(triton_host):
    host, _ = triton_host
    return host.address()


def provision(project, host, *extra):
    return invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "triton", *extra,
                  cwd=project, timeout=400)


def started(host) -> str:
    return host.exec(["docker", "inspect", "--format", "{{.Id}} {{.State.StartedAt}}", "triton"]).stdout.strip()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except urllib.error.URLError as e:  # not listening (yet)
        return 0, str(e)


def infer(address: str, values: list[float]) -> list[float]:
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": values}]})
    req = urllib.request.Request(f"http://{address}:8000/v2/models/add/infer", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["outputs"][0]["data"]


def metric(address: str, name: str, model: str = "add") -> float:
    _, text = get(f"http://{address}:8002/metrics")
    m = re.search(rf'^{name}{{model="{model}",version="1"}} (\S+)$', text, re.M)
    assert m, f"{name} not exported"
    return float(m.group(1))


def test_deploy_gates_on_readiness_and_serves(triton_host, project, address):
    host, tag = triton_host
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = {x["id"]: x for x in last_report(project)["hosts"][0]["resources"]}
    assert rep["verify:triton"]["status"] == "ok" and "ready" in rep["verify:triton"]["reason"]
    assert rep["compose:triton:triton"]["status"] == "changed"
    assert rep[f"image:{tag}"]["status"] == "changed"
    assert host.exec(["docker", "image", "inspect", tag], check=False).returncode == 0
    cfg = host.exec(["cat", f"{REPO}/add/config.pbtxt"]).stdout
    assert "kind: KIND_CPU count: 1 }" in cfg and "max_queue_delay_microseconds: 800" in cfg
    assert "preferred_batch_size: [ 4, 8, 16 ]" in cfg
    compose = yaml.safe_load(host.exec(["cat", "/opt/triton/docker-compose.yml"]).stdout)["services"]["triton"]
    assert compose["restart"] == "always" and "deploy" not in compose  # no GPU reservation on cpu
    assert "--metrics-config=summary_latencies=true" in compose["command"]
    assert "--rate-limit=execution_count" in compose["command"]
    assert get(f"http://{address}:8000/v2/health/ready")[0] == 200
    assert get(f"http://{address}:8000/v2/models/add/ready")[0] == 200
    assert infer(address, [1, 2, 3, 4.5]) == [3.0, 5.0, 7.0, 10.0]
    assert 'quantile="0.95"' in get(f"http://{address}:8002/metrics")[1]  # the summaries the alerts use


def test_concurrent_load_is_batched(triton_host, project, address):
    before_req, before_exec = metric(address, "nv_inference_count"), metric(address, "nv_inference_exec_count")
    n = 96
    assert all(asyncio.run(_load(address, n)))
    reqs = metric(address, "nv_inference_count") - before_req
    execs = metric(address, "nv_inference_exec_count") - before_exec
    assert reqs == n
    assert execs < reqs / 2, f"{execs} executions for {reqs} requests: the dynamic batcher did not batch"


def test_second_run_is_a_noop_and_keeps_the_container(triton_host, project):
    host, _ = triton_host
    before = started(host)
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[host.name]["changed"] == 0
    ids = [x["id"] for x in last_report(project)["hosts"][0]["resources"]]
    assert "verify:triton" not in ids  # nothing changed: no readiness gate, no restart
    assert started(host) == before


def test_broken_config_is_caught_before_shipping(triton_host, project):
    host, _ = triton_host
    before = host.exec(["sh", "-c", f"find {REPO} -type f | sort | xargs sha256sum"]).stdout
    bad = project / "models" / "typo"
    (bad / "1").mkdir(parents=True)
    (bad / "config.pbtxt").write_text('name: "typo"\nbackend: "python"\nmax_batch_sise: 4\n')
    try:
        r = provision(project, host)
    finally:
        shutil.rmtree(bad)
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stdout + r.stderr
    assert "typo" in err[0] and "line 3" in err[0] and "max_batch_sise" in err[0]
    # A typo in an inventory value too: one line naming model, line and field.
    r = provision(project, host, "--set", "triton_models={add: {backend: python, max_batch_size: 16, "
                  "input: [{name: INPUT0, data_type: TYPE_FP23, dims: [4]}], "
                  "output: [{name: OUTPUT0, data_type: TYPE_FP32, dims: [4]}]}}")
    assert r.returncode == 1 and "model add: config.pbtxt line 6" in r.stderr and "TYPE_FP23" in r.stderr
    assert host.exec(["sh", "-c", f"find {REPO} -type f | sort | xargs sha256sum"]).stdout == before


def test_window_outside_bounds_is_refused(triton_host, project):
    host, _ = triton_host
    r = provision(project, host, "--set", "triton_max_queue_delay_microseconds=5000")
    assert r.returncode == 1 and "within 200-1500" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_model_that_fails_to_load_is_rolled_back(triton_host, project, address):
    host, _ = triton_host
    good = host.exec(["cat", "/opt/triton/docker-compose.yml"]).stdout
    shutil.copytree(MODELS / "broken", project / "models" / "broken")
    try:
        t0 = time.monotonic()
        r = provision(project, host)
        took = time.monotonic() - t0
    finally:
        shutil.rmtree(project / "models" / "broken")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "a model failed to load" in r.stdout
    assert "weights file is corrupt" in r.stdout  # Triton's own log line
    assert "rolled back: revision" in r.stdout and "restored and ready" in r.stdout
    assert took < 200
    # The old revision is back and keeps answering.
    assert host.exec(["cat", "/opt/triton/docker-compose.yml"]).stdout == good
    assert host.exec(["test", "-e", f"{REPO}/broken"], check=False).returncode == 1
    assert get(f"http://{address}:8000/v2/health/ready")[0] == 200
    assert infer(address, [0, 1, 2, 3]) == [1.0, 3.0, 5.0, 7.0]
    # And the inventory's state is a no-op again.
    r = provision(project, host)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout


async def _load(address: str, n: int) -> list[bool]:
    """``n`` concurrent inferences of ``add`` (bounded: 60 s); each True when Triton answered 2x+1."""
    import tritonclient.http.aio as httpclient

    client = httpclient.InferenceServerClient(f"{address}:8000", conn_limit=n)
    try:
        async def one(i):
            inp = httpclient.InferInput("INPUT0", [1, 4], "FP32")
            x = np.full((1, 4), i, dtype=np.float32)
            inp.set_data_from_numpy(x)
            return np.array_equal((await client.infer("add", [inp])).as_numpy("OUTPUT0"), x * 2 + 1)
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), timeout=60)
    finally:
        await client.close()


def test_monitoring_rules_evaluate_on_the_real_triton_metrics(triton_host, project, address, tmp_path):
    """Debian's Prometheus runs the role's own config and rules against this Triton."""
    import socket
    import subprocess

    host, _ = triton_host
    r = invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "triton,monitoring",
               "--set", "monitoring_stack=false", "--set", f"monitoring_targets=[{address}]",
               "--set", "monitoring_scrape_interval=1s", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    rc = recap(r.stdout)[host.name]
    assert rc["failed"] == 0 and rc["changed"] >= 5
    assert not [x for x in last_report(project)["hosts"][0]["resources"]
                if x["role"] == "triton" and x["status"] == "changed"]  # triton untouched
    # The compose file is valid for this host's docker-compose; the files are where the services read them.
    host.exec(["docker-compose", "-f", "/opt/monitoring/docker-compose.yml", "config", "-q"])
    cfg = yaml.safe_load(host.exec(["cat", "/opt/monitoring/prometheus/prometheus.yml"]).stdout)
    rules = host.exec(["cat", "/opt/monitoring/prometheus/rules/triton.rules.yml"]).stdout
    r = invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "triton,monitoring",
               "--set", "monitoring_stack=false", "--set", f"monitoring_targets=[{address}]",
               "--set", "monitoring_scrape_interval=1s", cwd=project)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout

    (tmp_path / "triton.rules.yml").write_text(rules)
    cfg["rule_files"] = [str(tmp_path / "triton.rules.yml")]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prom = subprocess.Popen([shutil.which("prometheus") or "/usr/bin/prometheus",
                             f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))

    def query(q: str) -> list:
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        code, body = get(url)
        return json.loads(body)["data"]["result"] if code == 200 else []

    try:
        deadline = time.monotonic() + 30
        while not query('up{job="triton"} == 1'):
            assert time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()[-1000:]
            time.sleep(0.5)
        for _ in range(3):  # load across a few scrapes
            assert all(asyncio.run(_load(address, 48)))
            time.sleep(1.2)
        deadline = time.monotonic() + 20
        while True:
            batch = query('triton:avg_batch_size:rate1m{model="add"}')
            p95 = query('triton:request_p95_ms{model="add"}')
            if batch and p95:
                break
            assert time.monotonic() < deadline, "recording rules produced nothing from Triton's metrics"
            time.sleep(1)
        assert float(batch[0]["value"][1]) > 1.5  # the window batches: more inferences than executions
        assert float(p95[0]["value"][1]) > 0
    finally:
        prom.terminate()
        prom.wait(timeout=30)


def test_audit_passes_then_names_a_stopped_triton_and_drifted_rules(triton_host, project):
    """`invoke audit --roles triton,monitoring` on this host: green as provisioned, red (host and item) on drift."""
    host, _ = triton_host
    addr = host.exec(["hostname", "-I"]).stdout.split()[0]  # any address: the audit compares what the role renders
    mon = ["--set", "monitoring_stack=false", "--set", f"monitoring_targets=[{addr}]",
           "--set", "monitoring_scrape_interval=1s"]
    r = invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "triton,monitoring", *mon,
               cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    r = invoke("audit", "--host", host.name, "--roles", "triton,monitoring", *mon, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "monitoring_stack is false: the role writes files only" in r.stdout
    rules = "/opt/monitoring/prometheus/rules/triton.rules.yml"
    host.exec(["sh", "-c", f"docker stop -t 5 triton >/dev/null && sed -i 's/TritonP95AboveSLO/Renamed/' {rules}"])
    try:
        r = invoke("audit", "--host", host.name, "--roles", "triton,monitoring", *mon, cwd=project)
        assert r.returncode != 0, r.stdout
        assert f"{host.name}: container triton is exited" in r.stdout
        # One cause, one line: the ports, the server and the models follow from it and are not judged.
        assert "nothing listens" not in r.stdout and "answers 000" not in r.stdout, r.stdout
        assert "not ready" not in r.stdout, r.stdout
        assert f"{host.name}: {rules} lacks - alert: TritonP95AboveSLO; has - alert: Renamed" in r.stdout
    finally:
        r = invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "triton,monitoring", *mon,
                   cwd=project, timeout=400)
        assert r.returncode == 0, r.stdout + r.stderr
    r = invoke("audit", "--host", host.name, "--roles", "triton,monitoring", *mon, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr


def _sha(host, path: str) -> str:
    return host.exec(["sha256sum", "--", path]).stdout.split()[0]


@pytest.mark.reliability(item=5, fault='model files bringup did not ship, through a good, a failed and a correct run',
                         checks=("others' files kept", 'old revision serving', 'next run converges'))
def test_files_bringup_did_not_ship_are_kept_and_stale_ones_go_only_once_ready(triton_host, project, address):
    """Item 5: a hand-placed engine survives every run, a failed one included; a file bringup shipped and
    no longer wants is gone only after the new revision is ready (a failed run's rollback brings it back)."""
    host, _ = triton_host
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = f"{REPO}/add/1/model.plan"  # put there by hand: never in models_dir
    host.exec(["sh", "-c", f"head -c 1048576 /dev/urandom > {plan} && echo notes > {REPO}/README.txt"])
    hand = _sha(host, plan)
    helper = project / "models" / "add" / "1" / "helper.txt"
    helper.write_text("shipped by bringup\n")
    try:
        r = provision(project, host)
        assert r.returncode == 0, r.stdout + r.stderr
        assert host.exec(["cat", f"{REPO}/add/1/helper.txt"]).stdout == "shipped by bringup\n"
        assert _sha(host, plan) == hand and host.exec(["test", "-f", f"{REPO}/README.txt"], check=False).returncode == 0
    finally:
        helper.unlink()
    # helper.txt is no longer wanted and a model that fails to load comes in: the run fails, rolls back,
    # and nothing that was there before is lost.
    shutil.copytree(MODELS / "broken", project / "models" / "broken")
    try:
        r = provision(project, host)
    finally:
        shutil.rmtree(project / "models" / "broken")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "rolled back: revision" in r.stdout and "restored and ready" in r.stdout, r.stdout
    assert host.exec(["cat", f"{REPO}/add/1/helper.txt"]).stdout == "shipped by bringup\n"
    assert _sha(host, plan) == hand and host.exec(["test", "-f", f"{REPO}/README.txt"], check=False).returncode == 0
    assert host.exec(["test", "-e", f"{REPO}/broken"], check=False).returncode == 1
    assert infer(address, [0, 1, 2, 3]) == [1.0, 3.0, 5.0, 7.0]
    # The correct run: the stale file goes now that the new revision is up; the hand-placed ones stay.
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec(["test", "-e", f"{REPO}/add/1/helper.txt"], check=False).returncode == 1
    assert _sha(host, plan) == hand and host.exec(["test", "-f", f"{REPO}/README.txt"], check=False).returncode == 0
    assert host.exec(["sh", "-c", "ls -A /opt/triton/held 2>/dev/null"], check=False).stdout.strip() == ""
    r = provision(project, host)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout
    tree = {x["id"]: x for x in last_report(project)["hosts"][0]["resources"]}[f"tree:{REPO}"]
    assert "2 file(s) bringup did not ship" in tree["reason"], tree
    host.exec(["rm", "-f", "--", plan, f"{REPO}/README.txt"])


@pytest.mark.reliability(item=5, fault='a system directory as model repository or stack folder',
                         checks=('one clear line', 'exit code'))
@pytest.mark.parametrize("key,path", [("triton_model_repository", "/etc"), ("triton_model_repository", "/"),
                                      ("triton_model_repository", "/var/lib"), ("triton_stack_dir", "/usr")])
def test_a_system_directory_is_refused_before_connecting(triton_host, project, key, path):
    host, _ = triton_host
    r = provision(project, host, "--check", "--set", f"{key}={path}")
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1, r.stdout + r.stderr
    assert key in err[0] and repr(path) in err[0] and "system directory" in err[0], err


@pytest.mark.reliability(item=5, fault="a shared folder of others' files as model repository (--check plans no removal)")
def test_a_repository_with_files_of_others_plans_no_removal(triton_host, project):
    host, _ = triton_host
    host.exec(["sh", "-c", "mkdir -p /srv/shared/other && for i in 1 2 3; do echo $i > /srv/shared/other/f$i; done"])
    r = provision(project, host, "--check", "--set", "triton_model_repository=/srv/shared")
    assert r.returncode == 0, r.stdout + r.stderr
    tree = {x["id"]: x for x in last_report(project)["hosts"][0]["resources"]}["tree:/srv/shared"]
    assert not [k for k, v in tree["changes"].items() if isinstance(v, list) and v[1] == "absent"], tree
    assert "3 file(s) bringup did not ship" in tree["changes"]["kept"], tree
    host.exec(["rm", "-rf", "/srv/shared"])


def _containers(host) -> list[str]:
    return host.exec(["docker", "ps", "-a", "--format", "{{.Names}} {{.State}}"]).stdout.split("\n")


@pytest.mark.reliability(item=8, fault='a revision compose cannot create (cpuset of absent CPUs, compose v1)',
                         checks=('whole old or new file', 'next run converges', 'old revision serving', "others' files kept", 'no hang'))
def test_a_revision_compose_cannot_create_is_rolled_back_and_the_next_run_converges(triton_host, project, address):
    """Item 8: with the host's docker-compose (v1), a cpuset naming CPUs the host lacks fails the run fast,
    the old revision is back under its own name, and the next correct run converges."""
    host, _ = triton_host
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = f"{REPO}/add/1/model.plan"
    host.exec(["sh", "-c", f"head -c 1048576 /dev/urandom > {plan}"])
    hand = _sha(host, plan)
    good = host.exec(["cat", "/opt/triton/docker-compose.yml"]).stdout
    t0 = time.monotonic()
    r = provision(project, host, "--set", "triton_cpuset=900-901")
    took = time.monotonic() - t0
    assert r.returncode == 2, r.stdout + r.stderr
    assert "rolled back: revision" in r.stdout and "restored and ready" in r.stdout, r.stdout
    assert took < 60, f"{took:.0f} s: the readiness wait did not stop when compose failed"
    assert host.exec(["cat", "/opt/triton/docker-compose.yml"]).stdout == good
    names = _containers(host)
    assert "triton running" in names, names
    assert not [n for n in names if n.split(" ")[0].endswith("_triton")], names
    assert get(f"http://{address}:8000/v2/health/ready")[0] == 200
    assert infer(address, [0, 1, 2, 3]) == [1.0, 3.0, 5.0, 7.0]
    assert _sha(host, plan) == hand
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    r = provision(project, host)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout
    assert _sha(host, plan) == hand
    host.exec(["rm", "-f", "--", plan])


@pytest.mark.reliability(item=8, fault='a host wedged by an earlier version (old revision serving as <id>_triton)',
                         checks=('next run converges',))
def test_compose_leftovers_of_a_wedged_host_are_cleared_by_the_next_run(triton_host, project, address):
    """A host wedged by an earlier version (the old revision serving as <id>_triton, no `triton`) converges."""
    host, _ = triton_host
    cid = host.exec(["docker", "inspect", "--format", "{{.Id}}", "triton"]).stdout.strip()
    host.exec(["docker", "rename", "triton", f"{cid[:12]}_triton"])
    r = provision(project, host)
    assert r.returncode == 0, r.stdout + r.stderr
    names = _containers(host)
    assert "triton running" in names and not [n for n in names if n.split(" ")[0].endswith("_triton")], names
    assert infer(address, [0, 1, 2, 3]) == [1.0, 3.0, 5.0, 7.0]
    r = provision(project, host)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout


@pytest.mark.reliability(item=8, fault='a GPU profile on a host without a GPU',
                         checks=('exit code', 'old revision serving'))
def test_a_gpu_profile_on_a_host_without_gpu_fails_like_the_gpu_roles(triton_host, project, address):
    host, _ = triton_host
    before = started(host)
    r = provision(project, host, "--set", "gpu_profile=l40s", "--set", "gpu_count=2")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "gpu_profile is l40s but this host has no NVIDIA GPU" in r.stdout, r.stdout
    assert started(host) == before  # nothing written, nothing restarted
    assert get(f"http://{address}:8000/v2/health/ready")[0] == 200  # the old revision still serves


def test_the_window_tuner_service_moves_the_window_live_and_provision_keeps_it(triton_host, project, address):
    """Issue 10: the tuner installed as a service (role window_tuner) steps the window under live traffic,
    records it on the host, a later provision keeps it (changed=0), and an inventory pin restores it."""
    host, _ = triton_host
    r = invoke("provision", "--host", host.name, "--inventory", "hosts", "--roles", "triton,window_tuner",
               "--set", "triton_window_tuner={target_p95_ms: 5000, interval_s: 1}", cwd=project, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec(["systemctl", "is-active", "bringup-window-tuner"], check=False).stdout.strip() == "active"
    served = lambda: json.loads(get(f"http://{address}:8000/v2/models/add/config")[1])[  # noqa: E731
        "dynamic_batching"]["max_queue_delay_microseconds"]
    assert served() == 800
    record, deadline, sent = {}, time.monotonic() + 90, 0
    while time.monotonic() < deadline:  # live traffic: a p95 far under the target widens the window
        assert infer(address, [1, 1, 1, 1]) == [3.0, 3.0, 3.0, 3.0]
        sent += 1
        text = host.exec(["cat", "/etc/bringup/triton-window.json"], check=False).stdout
        record = json.loads(text) if text.strip() else {}
        if (record.get("add") or {}).get("window_us", 800) >= 900:
            break
    host.exec(["systemctl", "stop", "bringup-window-tuner"])
    record = json.loads(host.exec(["cat", "/etc/bringup/triton-window.json"]).stdout)
    window = record["add"]["window_us"]
    assert window >= 900 and served() == window, (window, served(), sent)
    assert f"max_queue_delay_microseconds: {window}" in host.exec(["cat", f"{REPO}/add/config.pbtxt"]).stdout
    # The recorded window is what provision wants now (the tuner kept the role's manifest in step with the
    # config it rewrote): nothing to change, no restart.
    before = started(host)
    r = provision(project, host)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout
    assert f"max_queue_delay_microseconds: {window}" in host.exec(["cat", f"{REPO}/add/config.pbtxt"]).stdout
    assert started(host) == before
    # A window in the inventory pins it: provision puts it back, by reloading the model (no restart).
    r = provision(project, host, "--set", "triton_max_queue_delay_microseconds=800")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "max_queue_delay_microseconds: 800" in host.exec(["cat", f"{REPO}/add/config.pbtxt"]).stdout
    deadline = time.monotonic() + 30
    while served() != 800 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert served() == 800 and started(host) == before
    host.exec(["systemctl", "disable", "--now", "bringup-window-tuner"])
    host.exec(["rm", "-f", "/etc/bringup/triton-window.json"])


def test_bench_and_tune_window_against_the_sandbox_hosts_triton(triton_host, project, address):
    """Issue 10 against a sandbox host: the one-shot tune-window sweeps windows on the host's Triton (by
    Triton's model control API, which the role's compose allows), picks one, and leaves the deployed
    config served; every point's count agrees with Triton's statistics."""
    host, _ = triton_host
    before = json.loads(get(f"http://{address}:8000/v2/models/add/config")[1])
    r = invoke("tune-window", "--host", host.name, "--inventory", "hosts", "--address", address,
               "--target-p95-ms", "5000", "--windows", "200,1000", "--concurrency", "4", "--warmup", "0.5",
               "--duration", "1.5", "--processes", "1", cwd=project, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (doc_path,) = (project / "reports" / "bench").glob(f"{host.name}-tune-*.json")
    doc = json.loads(doc_path.read_text())
    assert sorted(p["window_us"] for p in doc["points"]) == [200, 1000]
    assert all(p["errors"] == 0 and p["counts_agree"] for p in doc["points"]), doc["points"]
    assert doc["tune"]["chosen_window_us"] in (200, 1000) and "meets 5000 ms" in doc["tune"]["why"]
    after = json.loads(get(f"http://{address}:8000/v2/models/add/config")[1])
    assert after["dynamic_batching"] == before["dynamic_batching"]  # the deployed window is served again
