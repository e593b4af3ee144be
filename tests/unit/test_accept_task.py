"""``invoke accept`` as an operator runs it, through ``ansible_connection: local`` on this machine (no GPU, no
libcuda, no dcgmi): bad input is one line and exit 1 with nothing written; a Triton serving requests (a
stand-in metrics endpoint on 127.0.0.1 whose nv_inference_request_success rises, from the captured Triton
metrics) is refused in one line with nothing run; a host without the driver gets its pages with the one named
line; the results are saved and the rack checklist shows the newest with its age.  Also the saved results and
the Prometheus textfile (bringup.acceptance.saved).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from bringup.acceptance.saved import checklist_lines, latest, save, write_prometheus
from bringup.checks import line

REPO = Path(__file__).resolve().parents[2]
METRICS = (REPO / "tests/fixtures/triton/metrics-2.51-summary.txt").read_text()


def invoke(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180)


def project(tmp_path: Path, **host_vars) -> Path:
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"gpu-01": {
        "ansible_connection": "local", **host_vars}}}}))
    return tmp_path


@pytest.mark.reliability(item=31, fault="bad accept flags (--seconds, --dcgm-level, --prometheus)",
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("args, said", [
    (("--seconds", "0"), "--seconds"),
    (("--seconds", "600"), "--seconds"),
    (("--seconds", "ten"), "--seconds"),
    (("--dcgm-level", "4"), "--dcgm-level '4': 0 (off), 1 (quick), 2 (medium) or 3 (long)"),
    (("--prometheus", "x.txt"), "--prometheus x.txt: the node exporter's textfile collector reads only *.prom"),
])
def test_bad_flags_are_one_line_and_nothing_is_written(tmp_path, args, said):
    p = invoke("accept", "--host", "gpu-01", "--out", "out", *args, cwd=project(tmp_path))
    assert p.returncode == 1 and said in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.reliability(item=31, fault="bad accept_thresholds in the inventory",
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_bad_thresholds_in_the_inventory_are_one_line(tmp_path):
    p = invoke("accept", "--host", "gpu-01", "--out", "out",
               cwd=project(tmp_path, accept_thresholds={"pcie_warn": 2}))
    assert p.returncode == 1 and "accept_thresholds.pcie_warn 2.0: must be a fraction" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture
def serving():
    """A stand-in of Triton's metrics endpoint: the captured text, one request more at every read."""
    count = {"n": 50}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            count["n"] += 1
            body = METRICS.replace('nv_inference_request_success{model="add",version="1"} 50\n',
                                   f'nv_inference_request_success{{model="add",version="1"}} {count["n"]}\n')
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.reliability(item=31, fault="accept while Triton serves requests",
                         checks=('one clear line', 'exit code', 'nothing executed'))
def test_a_triton_serving_requests_is_refused_and_nothing_runs(tmp_path, serving):
    ports = {"http": 1, "grpc": 2, "metrics": serving}
    p = invoke("accept", "--host", "gpu-01", "--out", "out", cwd=project(tmp_path, triton_ports=ports))
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        f"error: gpu-01: Triton is serving requests (nv_inference_request_success rose by 1 in 3 s on its metrics "
        f"port {serving}): an acceptance load now would slow the requests and measure less than the hardware "
        "gives; drain the host first, or pass --force"]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.reliability(item=31, fault="accept on a host without the NVIDIA driver",
                         checks=('one clear line', 'exit code', 'report written'))
def test_no_driver_writes_the_pages_with_the_one_named_line_and_the_checklist_shows_it(tmp_path, serving):
    ports = {"http": 1, "grpc": 2, "metrics": serving}
    p = invoke("accept", "--host", "gpu-01", "--out", "out", "--force", "--seconds", "1",
               "--prometheus", "accept.prom", cwd=project(tmp_path, triton_ports=ports))
    assert p.returncode == 2, p.stdout + p.stderr  # a FAIL, as the checklist exits
    page = json.loads((tmp_path / "out/gpu-01.json").read_text())
    fails = [k for k in page["checks"] if k["status"] == "FAIL"]
    assert [(k["name"], k["seen"]) for k in fails] == [
        ("acceptance probe", "libcuda.so.1 not found: install the NVIDIA driver")]
    assert {"gpu-01.md", "gpu-01.html", "gpu-01.json"} <= {x.name for x in (tmp_path / "out").iterdir()}
    assert "<h2>Topology</h2>" not in (tmp_path / "out/gpu-01.html").read_text()  # issue 41: no empty heading
    assert "| FAIL | acceptance | acceptance probe | libcuda.so.1 not found" in p.stdout
    saved = latest("gpu-01", tmp_path / "out")
    assert saved is not None and json.loads(saved.read_text())["probe"]["error"].startswith("libcuda.so.1")
    assert 'bringup_accept_check_status{check="acceptance probe",host="gpu-01",subject=""} 2.0' in \
        (tmp_path / "accept.prom").read_text()
    shown = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path / "out")
    assert shown[0].name == "acceptance probe" and "(measured " in shown[0].seen and str(saved) in shown[0].seen


def test_the_checklist_says_not_measured_without_a_result(tmp_path):
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path)
    assert (k.status, k.area) == ("WARN", "acceptance") and k.seen.startswith("not measured")
    assert "accept --host gpu-01" in k.fix


def test_the_newest_result_is_shown_with_its_age(tmp_path):
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    old = [line("acceptance", "host-to-device bandwidth", "FAIL", "13.1 GB/s", subject="GPU 00000000:18:00.0",
                value=13.1, limit=63.0, unit="GB/s")]
    new = [line("acceptance", "host-to-device bandwidth", "PASS", "55.4 GB/s", subject="GPU 00000000:18:00.0",
                value=55.4, limit=63.0, unit="GB/s")]
    save("gpu-01", {}, old, tmp_path, now - timedelta(days=3))
    save("gpu-01", {}, new, tmp_path, now - timedelta(hours=2))
    save("gpu-010", {}, old, tmp_path, now)  # another host whose name starts the same
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path, now=now)
    assert (k.status, k.value, k.limit, k.unit, k.subject) == ("PASS", 55.4, 63.0, "GB/s", "GPU 00000000:18:00.0")
    assert "(measured 2 h ago: " in k.seen
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically: no temporary file left


@pytest.mark.reliability(item=31, fault="a damaged saved acceptance result read by the checklist",
                         checks=('one clear line',))
def test_a_damaged_saved_result_is_a_warn_not_a_traceback(tmp_path):
    (tmp_path / "gpu-01-20261204T120000Z.json").write_text('{"lines": [')  # cut short
    (k,) = checklist_lines({"inventory_hostname": "gpu-01"}, tmp_path)
    assert k.status == "WARN" and "not a saved acceptance result" in k.seen


def test_the_textfile_never_replaces_another_exporters_file(tmp_path):
    other = tmp_path / "node.prom"
    other.write_text("# TYPE node_x gauge\nnode_x 1\n")
    with pytest.raises(FileExistsError):
        write_prometheus({"gpu-01": ([], 0.0)}, other)
    assert other.read_text() == "# TYPE node_x gauge\nnode_x 1\n"


@pytest.mark.parametrize("out", [None, "newdir"])
def test_an_unreachable_host_gets_its_fail_pages_in_an_out_folder_not_made_yet(tmp_path, out):
    """F8: the pages went into a folder only a measurement had made: `--out newdir: No such file or directory`,
    exit 1, no page.  The folder is made, the FAIL pages written, exit 2."""
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h1": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "nobody"}}}}))
    p = invoke("accept", "--host", "h1", *(("--out", out) if out else ()), cwd=tmp_path)
    folder = tmp_path / (out or "reports/accept")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "error:" not in p.stderr, p.stdout + p.stderr
    assert sorted(x.name for x in folder.iterdir()) == ["h1.html", "h1.json", "h1.md"]
    assert "FAIL" in (folder / "h1.md").read_text()
