"""A rolling run on six real sandbox hosts (issue 13): `--serial 2 --max-fail-percentage 0 --roles sysctl`,
the fourth host (second batch) made to fail by a value its kernel refuses (`ip_local_port_range` with
min > max: EINVAL at apply time).  The first batch converges, the third never starts, the drain/undrain
hooks (a script on the control machine appending its argv to a file) run in order, and the recap,
report, retry file and exit code say so.  Then `--limit @reports/last.retry` runs just the rest.

What happened on each host is checked through `docker exec`: the persisted sysctl file, the live
value, and the host's sshd log of logins (the never-started hosts were never connected to).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from .helpers import invoke, last_report, recap

pytestmark = pytest.mark.integration

NAMES = [f"rollout-{i}" for i in range(1, 7)]
PERSIST = "/etc/sysctl.d/90-trt-latency.conf"
REFUSED = {"net.ipv4.ip_local_port_range": "60000 1024"}

HOOK = """import sys
with open(sys.argv[1], "a") as f:
    f.write(" ".join(sys.argv[2:]) + "\\n")
"""


@pytest.fixture(scope="module")
def hosts(sandbox_host_factory):
    return {n: sandbox_host_factory(n) for n in NAMES}


def logins(host) -> int:
    out = host.exec("journalctl -u ssh.service -o cat --no-pager | grep -c '^Accepted ' || true").stdout
    return int(out.strip() or 0)


def has_file(host) -> bool:
    return host.exec(["test", "-e", PERSIST], check=False).returncode == 0


def inventory(path: Path, hosts, hook: Path, log: Path, failing: str | None) -> None:
    def vars_of(name, h):
        v = {**h.inventory_vars(),
             "drain_command": [sys.executable, str(hook), str(log), "drain"],
             "undrain_command": [sys.executable, str(hook), str(log), "undrain"]}
        if name == failing:
            v["sysctl"] = REFUSED
        return v

    path.write_text(yaml.safe_dump({"all": {"children": {"rack": {"hosts": {
        n: vars_of(n, h) for n, h in hosts.items()}}}}}))


def test_rollout_stops_after_the_failed_batch_and_the_retry_file_runs_the_rest(hosts, tmp_path):
    for h in hosts.values():
        h.exec(["rm", "-f", PERSIST])
    hook, log = tmp_path / "hook.py", tmp_path / "hooks.log"
    hook.write_text(HOOK)
    inventory(tmp_path / "hosts", hosts, hook, log, failing="rollout-4")
    before = {n: logins(hosts[n]) for n in ("rollout-5", "rollout-6")}

    r = invoke("provision", "--group", "rack", "--roles", "sysctl", "--serial", "2", "--max-fail-percentage", "0",
               cwd=tmp_path, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out

    # The recap: the four hosts that ran, the stop, who never started.
    rc = recap(out)
    assert set(rc) == {"rollout-1", "rollout-2", "rollout-3", "rollout-4"}, out
    assert rc["rollout-4"]["failed"] >= 1 and all(rc[n]["failed"] == 0 for n in NAMES[:3]), out
    assert all(rc[n]["changed"] >= 1 for n in NAMES[:3]), out
    assert "ROLLOUT STOPPED after batch 2 of 3: 1 of 2 host(s) failed, above --max-fail-percentage 0" in out, out
    assert "not started: rollout-5, rollout-6" in out, out
    report = last_report(tmp_path)
    assert {h["host"]: h["status"] for h in report["hosts"]} == {
        "rollout-1": "ok", "rollout-2": "ok", "rollout-3": "ok", "rollout-4": "failed",
        "rollout-5": "not started", "rollout-6": "not started"}

    # On the hosts: batches 1 and 2 (but the failed one) converged; the third batch was never connected to.
    assert all(has_file(hosts[n]) for n in NAMES[:3])
    assert hosts["rollout-1"].exec("sysctl -n net.ipv4.ip_local_port_range").stdout.split() == ["10240", "65535"]
    assert not has_file(hosts["rollout-4"])  # the refused value stopped the role before it was persisted
    assert not has_file(hosts["rollout-5"]) and not has_file(hosts["rollout-6"])
    assert {n: logins(hosts[n]) for n in before} == before

    # The hooks, in order: each host drained before and undrained after its run; batch 1 back in service
    # before batch 2 was drained; the failed host stays drained; the third batch untouched.
    lines = log.read_text().splitlines()
    at = {ln: i for i, ln in enumerate(lines)}
    assert len(at) == len(lines) == 7, lines
    for n in NAMES[:3]:
        assert at[f"drain {n} 127.0.0.1"] < at[f"undrain {n} 127.0.0.1"], lines
    assert max(at["undrain rollout-1 127.0.0.1"], at["undrain rollout-2 127.0.0.1"]) < \
        min(at["drain rollout-3 127.0.0.1"], at["drain rollout-4 127.0.0.1"]), lines
    assert "drain rollout-4 127.0.0.1" in at and "undrain rollout-4 127.0.0.1" not in at, lines

    # The retry file lists what did not converge; with rollout-4 fixed, it runs just those.
    retry = tmp_path / "reports" / "last.retry"
    assert [ln for ln in retry.read_text().splitlines() if not ln.startswith("#")] == NAMES[3:]
    assert "retry: --limit @reports/last.retry" in out, out
    inventory(tmp_path / "hosts", hosts, hook, log, failing=None)
    first = {n: logins(hosts[n]) for n in NAMES[:3]}
    r = invoke("provision", "--limit", "@reports/last.retry", "--roles", "sysctl", "--serial", "2",
               cwd=tmp_path, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert set(recap(out)) == set(NAMES[3:]), out
    assert all(has_file(hosts[n]) for n in NAMES)
    assert {n: logins(hosts[n]) for n in NAMES[:3]} == first  # the hosts already done were left alone
    assert not retry.exists()  # every host in it converged


# -- the health gate on a real (CPU) Triton --------------------------------------------------------

MODELS = Path(__file__).parent / "triton_models"
ADD = {"backend": "python", "max_batch_size": 16, "instance_count": 1,
       "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
       "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}


@pytest.fixture(scope="module")
def triton_project(sandbox_host_factory, tmp_path_factory):
    import shutil

    from harness import write_inventory
    from harness.triton_image import build_triton_image

    tag = build_triton_image()  # the TEST DOUBLE of NGC's image (tritonserver from the pytriton wheel)
    host = sandbox_host_factory("rollout-triton")
    host.exec("systemctl enable --now docker.service && "
              "for i in $(seq 60); do docker info >/dev/null 2>&1 && exit 0; sleep 0.5; done; exit 1")
    d = tmp_path_factory.mktemp("rollout-triton")
    shutil.copytree(MODELS / "add", d / "models" / "add")
    (d / "hook.py").write_text(HOOK)
    write_inventory(d / "hosts", [host], extra_vars={
        "triton_image": tag, "image_transfer": "push", "triton_shm_size": "256m", "models_dir": "models",
        "triton_models": {"add": ADD}, "triton_ready_timeout": 90, "rollout_health_timeout": 30,
        "drain_command": [sys.executable, str(d / "hook.py"), str(d / "hooks.log"), "drain"],
        "undrain_command": [sys.executable, str(d / "hook.py"), str(d / "hooks.log"), "undrain"]})
    return host, d


def test_health_gate_passes_on_a_serving_triton_and_fails_a_model_not_ready(triton_project):
    host, d = triton_project
    r = invoke("provision", "--host", host.name, "--roles", "triton", "--serial", "1", cwd=d, timeout=500)
    assert r.returncode == 0, r.stdout + r.stderr
    gate = {x["id"]: x for x in last_report(d)["hosts"][0]["resources"]}["health:triton"]
    assert gate["status"] == "ok" and gate["reason"].endswith("model(s) ready: add"), gate
    assert (d / "hooks.log").read_text().splitlines() == [f"drain {host.name} 127.0.0.1",
                                                          f"undrain {host.name} 127.0.0.1"]

    # The model unloaded behind bringup's back (Triton's repository API, on the host): nothing to change,
    # but the gate finds the model not ready and fails the host, which stays drained.
    unload = "curl -sf -X POST -d '{}' http://127.0.0.1:8000/v2/repository/models/add/%s"
    host.exec(unload % "unload")
    try:
        r = invoke("provision", "--host", host.name, "--roles", "triton", "--serial", "1", cwd=d, timeout=300)
    finally:
        host.exec(unload % "load")
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    res = last_report(d)["hosts"][0]
    gate = {x["id"]: x for x in res["resources"]}["health:triton"]
    assert gate["status"] == "failed" and '"name":"add"' in gate["error"] and "UNAVAILABLE" in gate["error"], gate
    assert res["status"] == "failed" and "stays drained" in res["message"]
    assert recap(out)[host.name]["changed"] == 0, out
    assert (d / "hooks.log").read_text().splitlines()[2:] == [f"drain {host.name} 127.0.0.1"]
