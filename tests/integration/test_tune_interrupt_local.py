"""A signal or a lost Triton in the middle of ``invoke tune`` and ``tune-window`` (issue 34 item 10), against a
real Triton (the pytriton wheel's tritonserver, CPU, on 127.0.0.1), and the audit's view of a configuration
Triton serves that nothing records.

Each signal is sent once the tool is in the middle of a point: Triton's config API serves a configuration
the tool loaded and its statistics count the point's requests, never after a fixed time.  What is checked
goes through other channels than the tool's words: Triton's config API for what it serves after the tool
ended, /proc for the tool's client processes (every process it had started, by pid and start time), the
record file, the exit code and the last line on stderr.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import REPO
from .local_triton_fixture import local_server
from .test_tune_local import CLIENT_CPUS, _grpc, _record_path, _served, triton, work  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration

#: Long points: a signal sent once a point runs lands inside it.
LONG = ("--warmup", "0.5", "--duration", "30", "--processes", "2", "--client-cpus", CLIENT_CPUS,
        "--concurrency", "4")


def _start(cwd: Path, task: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), task, "--host", "local-01",
                             *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,   # its own process group, as a shell's job: Ctrl-C is killpg
                            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "250"})


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(state, parent, start time) of a process from /proc, None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2:].split()
    return f[0], int(f[1]), f[19]


def _descendants(pid: int) -> set[tuple[int, str]]:
    """Every process under ``pid`` now, as (pid, start time): a pid reused later is not taken for one."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st:
                parents.setdefault(st[1], []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            st = _stat(child)
            if st:
                out.add((child, st[2]))
                todo.append(child)
    return out


def _alive(procs: set[tuple[int, str]]) -> list[int]:
    return [pid for pid, start in procs if (st := _stat(pid)) and st[2] == start and st[0] != "Z"]


def _success(triton) -> int:
    c = _grpc(triton)
    try:
        st = c.get_inference_statistics("add", as_json=True)["model_stats"]
        return sum(int(m["inference_stats"].get("success", {}).get("count", 0) or 0) for m in st)
    finally:
        c.close()


def _in_a_point(proc: subprocess.Popen, triton, own: dict, timeout: float = 120) -> set[tuple[int, str]]:
    """Wait until the tool serves a configuration of its own and a point's load runs; its processes then."""
    deadline = time.monotonic() + timeout
    while _served(triton) == own:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the tool never loaded a configuration"
        time.sleep(0.1)
    first = _success(triton)
    while _success(triton) < first + 20:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no point's load reached Triton"
        time.sleep(0.1)
    clients = _descendants(proc.pid)
    assert len(clients) >= 2, clients   # the two client processes (and multiprocessing's resource tracker)
    return clients


def _ended(proc: subprocess.Popen, clients: set[tuple[int, str]]) -> tuple[str, str]:
    out, err = proc.communicate(timeout=120)
    deadline = time.monotonic() + 15
    while _alive(clients) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(clients), f"client processes left running: {_alive(clients)}\n{out}\n{err}"
    assert "Traceback" not in out + err, out + err
    return out, err


def _last_line(err: str) -> str:
    return [ln for ln in err.splitlines() if ln.strip()][-1]


@pytest.mark.reliability(item=34, fault="SIGTERM to `invoke tune` / Ctrl-C at its terminal (SIGINT to its whole "
                                        "process group) in the middle of a point, another configuration served",
                         checks=("exit code", "one clear line", "nothing touched", "no leftovers", "no hang"))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_mid_search_serves_the_models_own_configuration_again(work, triton, sig):
    from bringup.latency.serving import serving_of

    own = serving_of(triton.original).model_dump()
    assert _served(triton) == own
    pid = triton.proc.pid
    proc = _start(work, "tune", "--target-p95-ms", "10000", "--batch", "1", "--instances", "3,1", "--windows", "400",
                  "--budget", "5", "--record", str(_record_path(work)), *LONG)
    try:
        clients = _in_a_point(proc, triton, own)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)    # a terminal's Ctrl-C: the whole foreground group
        else:
            proc.send_signal(signal.SIGTERM)      # kill <pid>, a scheduler's stop
        out, err = _ended(proc, clients)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, out + err
    last = _last_line(err)
    assert last.startswith(f"interrupted by {sig.name} during a point (dropped) after 0 configuration(s) measured: "
                           "add serves its own configuration again; nothing recorded"), err
    assert f"{sig.name}: stopping: the point in flight is dropped" in err
    assert _served(triton) == own                       # Triton's own word, through its config API
    assert triton.proc.poll() is None and triton.proc.pid == pid
    assert not _record_path(work).exists()
    assert not list((work / "reports" / "bench").glob("local-01-tune-serving-*.json"))


@pytest.mark.reliability(item=34, fault="SIGTERM to `invoke tune-window` (one-shot sweep) in the middle of a point",
                         checks=("exit code", "one clear line", "nothing touched", "no leftovers"))
def test_a_signal_mid_window_sweep_serves_the_models_own_window_again(work, triton):
    from bringup.latency.serving import serving_of

    own = serving_of(triton.original).model_dump()
    proc = _start(work, "tune-window", "--target-p95-ms", "10000", "--windows", "400,1200", "--batch", "1",
                  "--record", str(_record_path(work)), *LONG)
    try:
        clients = _in_a_point(proc, triton, own)
        assert _served(triton)["window_us"] == 400
        proc.send_signal(signal.SIGTERM)
        out, err = _ended(proc, clients)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out + err
    assert _last_line(err).startswith("interrupted by SIGTERM during a point (dropped) after 0 point(s) measured: "
                                      "add serves its own configuration again; no report written"), err
    assert _served(triton) == own
    assert not _record_path(work).with_name("triton-trial.json").exists()   # the own window back: no trial left


@pytest.mark.reliability(item=34, fault="the Triton being tuned killed (SIGKILL) in the middle of a point",
                         checks=("exit code", "one clear line", "no leftovers", "no hang"))
def test_a_triton_killed_mid_search_is_one_unreachable_line(tmp_path):
    import yaml

    with local_server(tmp_path, {"add": {"sleep_s": 0.005, "window_us": 800}}) as t:
        c = _grpc(t)
        own = json.loads(json.dumps(c.get_model_config("add", as_json=True)["config"]))
        c.close()
        t.original = own
        host = {"ansible_connection": "local", "ansible_host": "127.0.0.1", "gpu_profile": "cpu",
                "latency_slo_p95_ms": 10000,
                "triton_ports": {"http": t.http_port, "grpc": t.grpc_port, "metrics": t.metrics_port},
                "triton_models": {"add": {"backend": "python", "max_batch_size": 8,
                                          "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
                                          "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}}}
        (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"local-01": host}}}))
        from bringup.latency.serving import serving_of

        proc = _start(tmp_path, "tune", "--target-p95-ms", "10000", "--batch", "1", "--instances", "2",
                      "--windows", "400", "--budget", "5", "--no-record", "--record", str(_record_path(tmp_path)),
                      *LONG)
        try:
            clients = _in_a_point(proc, t, serving_of(own).model_dump())
            t.proc.kill()
            t.proc.wait()
            out, err = _ended(proc, clients)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 4, out + err
    last = _last_line(err)
    assert last.startswith(f"unreachable: Triton at 127.0.0.1:{t.grpc_port} (host local-01) stopped answering "
                           "during the search (after 0 configuration(s) measured)"), err
    assert last.endswith("when it starts again it loads add's own configuration from its repository"), last


@pytest.mark.reliability(item=34, fault="Triton serves a configuration loaded through its model control API that "
                                        "neither the inventory nor the record says (3 instances, 400 µs)",
                         checks=("one clear line",))
def test_the_audit_sees_a_served_configuration_that_nothing_records(tmp_path):
    """The triton role's audit item, its read run on this machine against a real Triton serving what the role
    renders (the files and the record as the role wants them), then an override of the model control API."""
    from bringup.latency.serving import serving_of, with_serving
    from roles.triton.desired import Desired
    from tests.unit.test_auditkit import ROLES, _ctx

    spec = {"backend": "python", "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}
    with local_server(tmp_path, {"add": {}}) as t:
        ctx = _ctx("triton", gpu_profile="cpu", triton_models={"add": spec},
                   triton_ports={"http": t.http_port, "grpc": t.grpc_port, "metrics": t.metrics_port})
        # The repository holds what the role renders, as after a provision.
        (tmp_path / "repo" / "add" / "config.pbtxt").write_text(Desired(ctx).configs["add"])
        c = _grpc(t)
        try:
            c.load_model("add")
            item = next(i for i in ROLES["triton"].module.audit(ctx)
                        if i.name == "triton models serve their configuration")

            def judged() -> str | None:
                return item.judge(subprocess.run(["bash", "-c", item.read()], capture_output=True, text=True,
                                                 timeout=60).stdout)

            assert judged() is None
            config = c.get_model_config("add", as_json=True)["config"]
            cut_short = serving_of(config).model_copy(update={"instance_count": 3, "window_us": 400})
            c.load_model("add", config=json.dumps(with_serving(config, cut_short)))
            line = judged()
            repo = ctx.vars["triton_model_repository"]
            assert line == ("triton model add serves 3 instances, window 400 µs, while the inventory and the record "
                            "(/etc/bringup/triton-window.json) want 1 instance, window 800 µs: a configuration loaded "
                            "on the running server that nothing records (a tune cut short?); load the model's own "
                            f"back on the host: touch {repo}/add/config.pbtxt && curl -sX POST "
                            f"http://127.0.0.1:{t.http_port}/v2/repository/models/add/load, or restart Triton")
            c.load_model("add")     # a load without an override keeps it (the files did not change) ...
            assert judged() == line
            os.utime(tmp_path / "repo" / "add" / "config.pbtxt")   # ... the line's fix, on this repository
            c.load_model("add")
            assert judged() is None
        finally:
            c.close()


@pytest.mark.reliability(item=34, fault="the Triton being tuned stopped (SIGSTOP: it answers nothing) in the middle "
                                        "of a point, then SIGTERM twice",
                         checks=("exit code", "one clear line", "no leftovers", "no hang"))
def test_a_wedged_triton_two_signals_end_the_tune_saying_what_may_still_serve(tmp_path):
    import yaml

    from bringup.latency.serving import serving_of

    with local_server(tmp_path, {"add": {"sleep_s": 0.005, "window_us": 800}}) as t:
        c = _grpc(t)
        own = c.get_model_config("add", as_json=True)["config"]
        c.close()
        host = {"ansible_connection": "local", "ansible_host": "127.0.0.1", "gpu_profile": "cpu",
                "latency_slo_p95_ms": 10000,
                "triton_ports": {"http": t.http_port, "grpc": t.grpc_port, "metrics": t.metrics_port}}
        (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"local-01": host}}}))
        proc = _start(tmp_path, "tune", "--model", "add", "--target-p95-ms", "10000", "--batch", "1",
                      "--instances", "2", "--windows", "400", "--budget", "5", "--no-record",
                      "--record", str(_record_path(tmp_path)), *LONG)
        try:
            clients = _in_a_point(proc, t, serving_of(own).model_dump())
            t.proc.send_signal(signal.SIGSTOP)
            proc.send_signal(signal.SIGTERM)
            # The first signal is taken (the point dropped, its clients killed); the load of the model's own
            # configuration then waits on a Triton that answers nothing, until the second.
            deadline = time.monotonic() + 60
            while _alive(clients) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2)
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            out, err = _ended(proc, clients)
        finally:
            t.proc.send_signal(signal.SIGCONT)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out + err
    last = _last_line(err)
    assert last.startswith("interrupted by SIGTERM during a point (dropped) after 0 configuration(s) measured: "
                           "SIGTERM again abandoned loading add's own configuration back: Triton may still serve "
                           "2 instances, max batch 8, "), err
    assert last.endswith(", window 400 µs until it starts again; nothing recorded"), err
    # What may still serve is what the trial record on the host says, for the next tune or provision.
    assert json.loads(_record_path(tmp_path).with_name("triton-trial.json").read_text())["model"] == "add"


@pytest.mark.reliability(item=34, fault="the record cannot be written once the search chose (a folder put at its "
                                        "path during the search)",
                         checks=("exit code", "one clear line", "nothing touched"))
def test_a_result_that_cannot_be_recorded_is_not_left_serving(work, triton):
    from bringup.latency.serving import serving_of

    own = serving_of(triton.original).model_dump()
    record = _record_path(work)
    proc = _start(work, "tune", "--target-p95-ms", "10000", "--batch", "1", "--instances", "2", "--windows", "400",
                  "--budget", "5", "--record", str(record), "--warmup", "0.3", "--duration", "1", "--processes", "1",
                  "--client-cpus", CLIENT_CPUS, "--concurrency", "4")
    try:
        _in_a_point(proc, triton, own)
        record.mkdir(parents=True)           # a folder where the record goes: bringup never writes there
        out, err = _ended(proc, set())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, out + err
    assert _last_line(err) == (f"error: --record {record}: it is a folder, not bringup's record file; not "
                               "recorded, so add serves its own configuration again"), err
    assert _served(triton) == own


@pytest.mark.reliability(item=34, fault="SIGTERM (systemctl stop) to the host's window tuner service, the shipped "
                                        "module run alone, while it steps the window under load",
                         checks=("exit code", "no hang"))
def test_the_window_tuner_service_stopped_by_sigterm_leaves_the_served_window_recorded(work, triton):
    import shutil

    from .test_window_tuner_local import MODULE, Load

    shipped = work / "lib" / "window_tuner.py"
    shipped.parent.mkdir()
    shutil.copy(MODULE, shipped)
    rec = work / "etc" / "bringup" / "triton-window.json"
    with Load(triton):
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(shipped), "--target-p95-ms", "10000", "--interval",
                                 "0.4", "--http", f"http://127.0.0.1:{triton.http_port}", "--metrics",
                                 f"http://127.0.0.1:{triton.metrics_port}/metrics", "--record", str(rec), "--log",
                                 str(work / "tuner.jsonl")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            seen = []
            for line in proc.stdout:           # the second step's line: a window was loaded and recorded before
                seen.append(line)
                if sum("-> " in ln for ln in seen) >= 2:
                    break
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, "".join(seen) + out + err
    assert out.rstrip().endswith("stopped") and "Traceback" not in out + err
    served = _served(triton)["window_us"]
    assert json.loads(rec.read_text())["add"]["window_us"] == served > 800


def _killed_mid_search(work, triton, own: dict) -> dict:
    """A tune in the middle of a point, killed outright (SIGKILL to its process group: no handler runs); the
    trial record it left, as read from the file."""
    proc = _start(work, "tune", "--target-p95-ms", "10000", "--batch", "1", "--instances", "3,1", "--windows", "400",
                  "--budget", "5", "--record", str(_record_path(work)), *LONG)
    try:
        clients = _in_a_point(proc, triton, own)
        trial = _record_path(work).with_name("triton-trial.json")
        assert trial.exists(), "a trial configuration serves and no trial record says so"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while _alive(clients) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _served(triton) != own                      # what SIGKILL leaves: the trial still served
    return json.loads(trial.read_text())


@pytest.mark.reliability(item=40, fault="`invoke tune` killed by SIGKILL in the middle of its search, a trial "
                                        "configuration served", checks=("next run converges", "no leftovers"))
def test_a_tune_killed_outright_is_undone_by_the_next_provision_and_the_next_tune(work, triton):
    from bringup.latency.serving import serving_of
    from bringup.latency.trial import restore_command

    own = serving_of(triton.original).model_dump()
    assert _served(triton) == own
    trial = _record_path(work).with_name("triton-trial.json")

    # The record says what the model's own configuration is: what Triton served when the tune began.
    doc = _killed_mid_search(work, triton, own)
    assert doc["model"] == "add" and serving_of(doc["own_config"]).model_dump() == own
    # The next provision: the triton role's step, run here as the role runs it on the host.
    r = subprocess.run(["sh", "-c", restore_command(["add"], str(triton.repo), f"http://127.0.0.1:{triton.http_port}",
                                                    str(trial))], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert _served(triton) == own and not trial.exists()

    # The next tune: it loads the own configuration back before it measures, and says so.
    _killed_mid_search(work, triton, own)
    proc = _start(work, "tune", "--target-p95-ms", "10000", "--batch", "1", "--instances", "1", "--windows", "800",
                  "--max-batch", "8", "--budget", "5", "--no-record", "--record", str(_record_path(work)),
                  "--warmup", "0.3", "--duration", "1", "--processes", "1", "--client-cpus", CLIENT_CPUS)
    out, err = proc.communicate(timeout=300)
    assert "Traceback" not in out + err, out + err
    said = [ln for ln in out.splitlines() if ln.startswith("note: ") and "was cut short" in ln]
    assert said and said[0].endswith(f"; {trial} on local-01): add serves its own configuration again"), out
    assert _served(triton) == own and not trial.exists()
