"""Issue 26 item 2: every option of bench, tune-window and tune is checked like inventory input.

Through the CLI in a subprocess, from a temporary folder, against an inventory host whose Triton ports
answer nothing (free ports on 127.0.0.1): a value that is refused must be refused before anything is
contacted, as one ``error:`` line and exit 1.  Before these checks the same commands went on to Triton
(exit 4, "unreachable"), ran with NaN, or ended in Invoke's traceback.  The second channel: no report is
written and no record file appears.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .test_bad_input import _refused

REPO = Path(__file__).resolve().parents[2]
CHECKS = ("one clear line", "exit code", "nothing touched")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _three_ports() -> dict[str, int]:
    """Three distinct free ports: each socket stays bound until all are chosen (separate calls can repeat one)."""
    socks = [socket.socket() for _ in range(3)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return dict(zip(("http", "grpc", "metrics"), (s.getsockname()[1] for s in socks)))
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def work(tmp_path):
    spec = {"backend": "python", "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}]}
    host = {"ansible_connection": "local", "ansible_host": "127.0.0.1", "gpu_profile": "cpu",
            "triton_ports": _three_ports(),
            "triton_models": {"add": spec}}
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"local-01": host}}}))
    return tmp_path


def _invoke(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


CPU_TOO_HIGH = str(max(os.sched_getaffinity(0)) + 1000)


@pytest.mark.reliability(item=26, fault="bench options: NaN, inf, words, out-of-range CPUs and ports, --out a file",
                         variants=1, checks=CHECKS)
@pytest.mark.parametrize("args, words", [
    (["--warmup", "nan"], ["--warmup", "finite"]),
    (["--duration", "inf"], ["--duration", "finite"]),
    (["--duration", "0"], ["--duration"]),
    (["--warmup", "abc"], ["--warmup", "number"]),
    (["--processes", "x"], ["--processes", "whole number"]),
    (["--processes", "100000"], ["--processes"]),
    (["--cpu-limit", "nan"], ["--cpu-limit", "finite"]),
    (["--client-cpus", CPU_TOO_HIGH], ["--client-cpus", CPU_TOO_HIGH, "not a CPU"]),
    (["--concurrency", "1,100000000"], ["--concurrency", "100000000"]),
    (["--grpc-port", "70000"], ["--grpc-port", "70000"]),
    (["--microbatch-max", "0", "--microbatch-us", "100"], ["--microbatch-max"]),
    (["--out", "hosts"], ["--out", "hosts", "not a folder"]),
    (["--input-name", "INPUT0", "--input-shape", "3,0,224", "--dtype", "FP32"], ["--input-shape"]),
    (["--input-name", "INPUT0", "--input-shape", "100000,100000,100000", "--dtype", "FP32"], ["--input-shape"]),
    (["--repeats", "0"], ["--repeats", "whole number"]),
    (["--stability", "nan"], ["--stability", "finite"]),
    (["--stability", "0"], ["--stability", "above 0"]),
    (["--repeats", "3", "--max-windows", "2"], ["--max-windows 2", "below --repeats 3"]),
])
def test_bench_options_are_refused_before_triton_is_contacted(work, args, words):
    _refused(_invoke(work, "bench", "--host", "local-01", "--model", "add", *args), work, *words)


@pytest.mark.reliability(item=26, fault="tune-window options: --interval nan, NaN/inf targets and durations, --steps 0",
                         variants=1, checks=CHECKS + ("no hang",))
@pytest.mark.parametrize("args, words", [
    (["--follow", "--target-p95-ms", "50", "--interval", "nan", "--steps", "1"], ["--interval", "finite"]),
    (["--follow", "--target-p95-ms", "50", "--interval", "0.001", "--steps", "1"], ["--interval"]),
    (["--follow", "--target-p95-ms", "50", "--for", "inf"], ["--for", "finite"]),
    (["--follow", "--target-p95-ms", "50", "--steps", "0"], ["--steps"]),
    (["--target-p95-ms", "nan"], ["--target-p95-ms", "finite"]),
    (["--target-p95-ms", "inf"], ["--target-p95-ms", "finite"]),
    (["--target-p95-ms", "50", "--windows", "200,9000"], ["--windows", "9000"]),
    (["--target-p95-ms", "50", "--client-cpus", CPU_TOO_HIGH], ["--client-cpus", "not a CPU"]),
    (["--target-p95-ms", "50", "--out", "hosts"], ["--out", "not a folder"]),
    (["--follow", "--target-p95-ms", "50", "--http-port", "0"], ["--http-port"]),
])
def test_tune_window_options_are_refused_before_triton_is_contacted(work, args, words):
    _refused(_invoke(work, "tune-window", "--host", "local-01", *args), work, *words)


@pytest.mark.reliability(item=26, fault="tune options: --budget NaN/inf/0, instance counts outside 1-4, bad lists",
                         variants=1, checks=CHECKS)
@pytest.mark.parametrize("args, words", [
    (["--budget", "nan"], ["--budget", "finite"]),
    (["--budget", "inf"], ["--budget", "finite"]),
    (["--budget", "0"], ["--budget"]),
    (["--instances", "0,2"], ["--instances"]),
    (["--instances", "1,5"], ["--instances", "5"]),
    (["--target-p95-ms", "-1"], ["--target-p95-ms"]),
    (["--max-batch", "x"], ["--max-batch"]),
    (["--client-cpus", CPU_TOO_HIGH], ["--client-cpus", "not a CPU"]),
    (["--budget", "0.01"], ["--budget", "shorter than one"]),
])
def test_tune_options_are_refused_before_triton_is_contacted(work, args, words):
    base = ["--target-p95-ms", "30"] if "--target-p95-ms" not in args else []
    _refused(_invoke(work, "tune", "--host", "local-01", "--model", "add", *base, *args), work, *words)


_SEQ = ",".join(map(str, range(1, 20001)))  # 108,893 characters, as `seq -s, 1 20000` gives


@pytest.mark.reliability(item=34, fault="a 109 kB --instances (seq 1..20000, or one long word) repeated whole in "
                                        "the error line", variants=3, checks=CHECKS)
@pytest.mark.parametrize("args, words", [
    (["--instances", _SEQ], ["--instances '1,2,3,4,5", f"({len(_SEQ):,} characters)", "must be at most 4"]),
    (["--instances", "x" * 109_000], ["--instances 'xxxx", "(109,000 characters)", "not a whole number"]),
    (["--windows", _SEQ], ["--windows '1,2,3,4,5", f"({len(_SEQ):,} characters)"]),
])
def test_a_long_flag_value_is_quoted_bounded(work, args, words):
    line = _refused(_invoke(work, "tune", "--host", "local-01", "--model", "add", "--target-p95-ms", "30", *args),
                    work, *words)
    assert len(line) < 400, f"{len(line):,} characters: {line[:400]}"


@pytest.mark.reliability(item=34, fault="bench/tune-window --out /proc/x or /sys/x (a folder no one may write in, "
                                        "even root): a traceback after measuring", variants=3, checks=CHECKS)
@pytest.mark.parametrize("task, out", [("bench", "/proc/x"), ("bench", "/sys/bench/x"), ("tune-window", "/proc/x")])
def test_an_out_folder_that_cannot_be_written_is_refused_before_measuring(work, task, out):
    more = ["--target-p95-ms", "30"] if task == "tune-window" else []
    _refused(_invoke(work, task, "--host", "local-01", "--model", "add", "--out", out, *more), work,
             f"--out '{out}'", "cannot write")


# --------------------------------------------------------------------------- the tuner's record


def _record_args(path) -> list[str]:
    return ["tune-window", "--host", "local-01", "--follow", "--target-p95-ms", "50", "--interval", "1", "--steps",
            "1", "--record", str(path)]


@pytest.mark.reliability(item=26, fault="tune-window --record naming a file bringup did not write (/etc/passwd, "
                         "a JSON of another program, a link, a device)", variants=1,
                         checks=("one clear line", "exit code", "nothing touched", "others' files kept"))
@pytest.mark.parametrize("case", ["passwd", "passwd-in-bringup", "other-json", "link", "device", "relative"])
def test_a_record_path_that_is_not_bringups_file_is_refused(work, case):
    bringup_dir = work / "etc" / "bringup"
    bringup_dir.mkdir(parents=True)
    if case == "passwd":          # the reported one, as a copy: the rule is the file's, not /etc's
        path = work / "etc" / "passwd"
        path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    elif case == "passwd-in-bringup":
        path = bringup_dir / "passwd"
        path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    elif case == "other-json":    # in bringup's folder, named .json, but not a record bringup wrote
        path = bringup_dir / "other.json"
        path.write_text(json.dumps({"registry-mirrors": ["https://m"]}))
    elif case == "link":
        target = work / "etc" / "passwd"
        target.write_text("root:x:0:0:root:/root:/bin/bash\n")
        path = bringup_dir / "triton-window.json"
        path.symlink_to(target)
    elif case == "device":
        path = Path("/dev/null")
    else:
        path = Path("etc/bringup/triton-window.json")
    before = {p: p.read_bytes() for p in (work / "etc").rglob("*") if p.is_file() and not p.is_symlink()}
    line = _refused(_invoke(work, *_record_args(path)), work, "--record")
    assert "Traceback" not in line
    assert {p: p.read_bytes() for p in (work / "etc").rglob("*") if p.is_file() and not p.is_symlink()} == before
    assert sorted(p.name for p in bringup_dir.iterdir()) == sorted(
        ["triton-window.json"] if case == "link" else ["passwd"] if case == "passwd-in-bringup" else
        ["other.json"] if case == "other-json" else [])


@pytest.mark.reliability(item=26, fault="tune-window --record naming a folder (recorded nothing, left temporary "
                         "files, exit 0)", checks=("one clear line", "exit code", "no leftovers"))
@pytest.mark.parametrize("how", ["folder/", "a folder named like the record"])
def test_a_record_path_naming_a_folder_is_refused_and_leaves_nothing(work, how):
    folder = work / "etc" / "bringup"
    folder.mkdir(parents=True)
    if how == "folder/":
        arg = str(folder) + "/"
    else:
        (folder / "triton-window.json").mkdir()
        arg = str(folder / "triton-window.json")
    _refused(_invoke(work, *_record_args(arg)), work, "--record", "folder")
    assert [p.name for p in folder.rglob("*")] == ([] if how == "folder/" else ["triton-window.json"])


@pytest.mark.reliability(item=26, fault="a record write onto a folder or a link (the last guard, on the host)",
                         checks=("no leftovers", "others' files kept"))
def test_the_host_side_write_never_moves_a_file_into_a_folder_or_through_a_link(tmp_path):
    from bringup.ssh.connection import LocalTransport
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.latency.follow import replace_remote, remote_record
    from bringup.latency.window_tuner import TunerError

    t = LocalTransport(Host(name="ctl", groups=["all"], vars={},
                            connection=ConnectionVars(ansible_connection="local")))
    folder = tmp_path / "bringup" / "triton-window.json"
    folder.mkdir(parents=True)
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    link = tmp_path / "bringup" / "w.json"
    link.symlink_to(target)
    # The record's own check at every write ...
    with pytest.raises(TunerError, match="folder"):
        remote_record(t, str(folder))("add", 900, "why", "now")
    with pytest.raises(TunerError, match="symbolic link"):
        remote_record(t, str(link))("add", 900, "why", "now")
    # ... and the write itself, the last guard: mv would have moved the file into the folder.
    for path in (folder, link):
        with pytest.raises(TunerError, match="not a regular file"):
            replace_remote(t, str(path), "{}")
    assert list(folder.iterdir()) == []
    assert target.read_text() == "root:x:0:0\n" and link.is_symlink()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["triton-window.json", "w.json"]


def _record_on_this_machine(tmp_path):
    """A local transport, the record's path (its folder made) and model add's config.pbtxt path (its folder made)."""
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.ssh.connection import LocalTransport

    t = LocalTransport(Host(name="ctl", groups=["all"], vars={},
                            connection=ConnectionVars(ansible_connection="local", command_timeout=60)))
    record = tmp_path / "bringup" / "triton-window.json"
    record.parent.mkdir()
    cfg = tmp_path / "repo" / "add" / "config.pbtxt"
    cfg.parent.mkdir(parents=True)
    return t, record, cfg


@pytest.mark.reliability(item=40, fault="tune's record step reading the host's config.pbtxt and manifest: a FIFO, a "
                         "link to /dev/zero", variants=2, checks=("no hang", "others' files kept"))
@pytest.mark.parametrize("what", ["fifo", "zero"])
def test_the_record_step_never_reads_a_fifo_or_an_endless_file_of_the_host(tmp_path, what):
    """``cat`` read whatever lay there: a FIFO held tune until command_timeout (30 min); /dev/zero was cut at the
    transport's cap already (kept here: it is not read at all now)."""
    from bringup.latency.follow import remote_record
    from tests.unit.test_saved_reads import _bounded

    t, record, cfg = _record_on_this_machine(tmp_path)
    if what == "fifo":
        os.mkfifo(cfg)
    else:
        cfg.symlink_to("/dev/zero")
    _bounded(lambda: remote_record(t, str(record), str(tmp_path / "repo"))("add", 900, "why", "now"), 20)
    assert json.loads(record.read_text())["add"]["window_us"] == 900
    assert (cfg.is_fifo() if what == "fifo" else os.readlink(cfg) == "/dev/zero")  # not bringup's: left as it was


_RENDERED = ("name: \"add\"\ndynamic_batching {\n  # The batching window: the inventory.\n"
             "  max_queue_delay_microseconds: 100\n}\n")


@pytest.mark.reliability(item=40, fault="tune's record step on a host whose config.pbtxt or manifest is a symbolic "
                         "link, a FIFO or larger than the bound (skipped without a line before)", variants=4,
                         checks=("one clear line", "others' files kept"))
@pytest.mark.parametrize("what", ["config link", "config fifo", "config large", "manifest link"])
def test_the_record_step_names_a_config_it_does_not_rewrite(tmp_path, what):
    from bringup.latency.follow import READ_MAX, remote_record
    from tests.unit.test_saved_reads import _bounded

    t, record, cfg = _record_on_this_machine(tmp_path)
    manifest = tmp_path / "models.manifest"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(_RENDERED)
    manifest.write_text(f"{'0' * 64}  ./add/config.pbtxt\n")
    if what == "config link":
        cfg.symlink_to(elsewhere)
    elif what == "config fifo":
        os.mkfifo(cfg)
    elif what == "config large":
        cfg.write_text(_RENDERED + "#" * READ_MAX)
    else:
        cfg.write_text(_RENDERED)
        manifest.rename(elsewhere)
        manifest.symlink_to(elsewhere)
    before = elsewhere.read_text()
    said: list[str] = []
    _bounded(lambda: remote_record(t, str(record), str(tmp_path / "repo"), str(manifest), warn=said.append)(
        "add", 900, "why", "now"), 20)
    assert json.loads(record.read_text())["add"]["window_us"] == 900
    named = manifest if what == "manifest link" else cfg
    word = {"config link": "a symbolic link", "config fifo": "not a regular file", "config large": "larger than 4 MiB",
            "manifest link": "a symbolic link"}[what]
    assert len(said) == 1 and said[0].startswith(f"on the host: {named} is {word}"), said
    assert "not rewritten" in said[0] and str(record) in said[0] and "\n" not in said[0]
    assert elsewhere.read_text() == before                       # nothing written through the link
    assert (named.is_symlink() if "link" in what else True)     # the link itself kept


@pytest.mark.reliability(item=40, fault="the host's tuner service on a config.pbtxt that is a symbolic link or a FIFO "
                         "(read through the link and replaced, or held on the FIFO, before)", variants=2,
                         checks=("one clear line", "others' files kept", "no hang"))
@pytest.mark.parametrize("what", ["link", "fifo"])
def test_the_hosts_tuner_names_a_config_it_does_not_rewrite(tmp_path, capsys, what):
    from bringup.latency.window_tuner import write_local_config
    from tests.unit.test_saved_reads import _bounded

    cfg = tmp_path / "repo" / "add" / "config.pbtxt"
    cfg.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(_RENDERED)
    cfg.symlink_to(elsewhere) if what == "link" else os.mkfifo(cfg)
    assert _bounded(lambda: write_local_config(str(tmp_path / "repo"), "add", 900, None, "/r.json"), 20) is False
    err = capsys.readouterr().err
    assert f"WARN: {cfg} is {'a symbolic link' if what == 'link' else 'not a regular file'}" in err, err
    assert err.count("\n") == 1 and "/r.json" in err
    assert elsewhere.read_text() == _RENDERED and (cfg.is_symlink() if what == "link" else cfg.is_fifo())
    # A sound config is still rewritten.
    cfg.unlink()
    cfg.write_text(_RENDERED)
    assert write_local_config(str(tmp_path / "repo"), "add", 900) is True
    assert "max_queue_delay_microseconds: 900" in cfg.read_text()


@pytest.mark.reliability(item=40, fault="a model name from Triton's index or a flag that is no folder name ('../other', "
                         "'a/b', '..', NUL): joined into <repository>/<model>/config.pbtxt, a config outside the "
                         "repository rewritten", variants=4, checks=("others' files kept", "one clear line"))
@pytest.mark.parametrize("model", ["../other", "a/../../other", "..", "x\x00y"])
def test_a_model_name_that_is_no_folder_never_becomes_a_path(tmp_path, model):
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.latency.follow import remote_record
    from bringup.latency.window_tuner import TunerError, Unreadable, ready_of, write_local_config
    from bringup.ssh.connection import LocalTransport

    t = LocalTransport(Host(name="ctl", groups=["all"], vars={},
                            connection=ConnectionVars(ansible_connection="local")))
    (tmp_path / "repo").mkdir()
    outside = tmp_path / "other" / "config.pbtxt"
    outside.parent.mkdir()
    outside.write_text(_RENDERED)
    record = tmp_path / "bringup" / "triton-window.json"
    record.parent.mkdir()
    with pytest.raises(TunerError, match="is not a model name"):
        remote_record(t, str(record), str(tmp_path / "repo"))(model, 900, "why", "now")
    with pytest.raises(TunerError, match="is not a model name"):
        write_local_config(str(tmp_path / "repo"), model, 900)
    with pytest.raises(Unreadable, match="is not a model name"):
        ready_of([{"name": model, "state": "READY"}])
    assert outside.read_text() == _RENDERED and not record.exists()


@pytest.mark.reliability(item=26, fault="the host's tuner service given a record that is not its own",
                         checks=("one clear line", "exit code", "others' files kept"))
def test_the_hosts_service_refuses_a_record_that_is_not_its_own(tmp_path):
    module = REPO / "bringup" / "latency" / "window_tuner.py"
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0\n")
    cp = subprocess.run([sys.executable, "-I", "-S", str(module), "--target-p95-ms", "50", "--interval", "1",
                         "--steps", "1", "--http", f"http://127.0.0.1:{_free_port()}", "--record", str(passwd),
                         "--log", str(tmp_path / "log.jsonl")], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2 and "--record" in cp.stderr and "Traceback" not in cp.stderr, cp.stderr
    assert passwd.read_text() == "root:x:0:0\n"
    cp = subprocess.run([sys.executable, "-I", "-S", str(module), "--target-p95-ms", "50", "--interval", "nan",
                         "--http", f"http://127.0.0.1:{_free_port()}", "--record", str(tmp_path / "bringup" / "w.json"),
                         "--log", str(tmp_path / "log.jsonl")], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2 and "--interval" in cp.stderr and "Traceback" not in cp.stderr, cp.stderr


# --------------------------------------------------------------------------- --input-shape


@pytest.mark.reliability(item=26, fault="--input-shape with a repeated size (3,224,224 became [3, 224])",
                         checks=("one clear line",))
def test_input_shape_keeps_every_dimension():
    from bringup.inventory.hosts import ConnectionVars, Host
    from bringup.latency.target import resolve

    host = Host(name="h", groups=["all"], vars={}, connection=ConnectionVars(ansible_connection="local"))
    t = resolve(host, {}, model="m", input_name="x", input_shape="3,224,224", dtype="FP16")
    assert t.input.dims == [3, 224, 224]
    t = resolve(host, {}, model="m", input_name="x", input_shape="2,2,2,2", dtype="FP32")
    assert t.input.dims == [2, 2, 2, 2]


# --------------------------------------------------------------------------- issue 34 item 13


@pytest.mark.reliability(item=34, fault="tune --windows 100 or 0: a window the triton role refuses (before: "
                         "recorded, and every later provision and audit failed)", variants=1, checks=CHECKS)
@pytest.mark.parametrize("task, window", [("tune", "100"), ("tune", "0"), ("tune", "400,150"),
                                          ("tune-window", "100")])
def test_tune_refuses_a_window_the_triton_role_refuses(work, task, window):
    model = ["--model", "add"] if task == "tune" else []
    line = _refused(_invoke(work, task, "--host", "local-01", *model, "--target-p95-ms", "30", "--windows", window),
                    work, "--windows", "triton_max_queue_delay_microseconds", "200-1500")
    assert line.startswith(f"error: --windows '{window}': ")
    assert not (work / "etc").exists()  # no record anywhere


@pytest.mark.parametrize("window", [0, 1, 100, 199, 200, 201, 800, 1500, 1501, 100_000])
def test_tune_accepts_exactly_the_windows_the_triton_role_accepts(window):
    """One range: what tune may record is what the role's variable takes (roles/triton/variables.py)."""
    from bringup.errors import InputError as Refused
    from bringup.latency.options import TuneOptions, TuneWindowOptions, read
    from bringup.engine.roles import Role
    import roles.triton as T

    def role_takes() -> bool:
        try:
            Role("triton", T).validate({**T.DEFAULTS, "triton_max_queue_delay_microseconds": window})
        except Refused:
            return False
        return True

    for cls in (TuneOptions, TuneWindowOptions):
        try:
            read(cls, {"windows": "--windows"}, target_p95_ms=30.0, windows=[window])
            tune_takes = True
        except Refused:
            tune_takes = False
        assert tune_takes == role_takes(), (cls.__name__, window)


@pytest.mark.reliability(item=40, fault="bench --address that is no host name or address (bytes that are not UTF-8, "
                         "a number the resolver fills in, an option)", variants=4, checks=CHECKS)
@pytest.mark.parametrize("address, words", [
    ("x\udcff", "--address 'x\\xff': not a host name or IP address"),
    ("1.5", "--address '1.5': a number that is no dotted-quad IPv4 address"),
    ("0x10", "--address '0x10': a number that is no dotted-quad IPv4 address"),
    ("-1", "--address '-1': not a host name or IP address"),
])
def test_bench_address_is_a_host_name_or_address(work, address, words):
    # A value that were taken as it is: gRPC's traceback for a byte that is not UTF-8, and '1.5' dialled as
    # 1.0.0.5 (found by a hostile-input pass, issue 40 item 8).  Refused before anything is contacted.
    _refused(_invoke(work, "bench", "--host", "local-01", "--no-plot", "--address", address), work, words)


def test_an_ipv6_address_is_taken_bare_or_in_brackets_and_bracketed_in_every_url():
    # '[::1]' was refused by the address check, and '::1' built '::1:8001' (an address, no port) for gRPC (review).
    from bringup.latency.target import Target, host_port
    from bringup.tasks.latency_flags import address_flag

    assert address_flag("[::1]") == address_flag("::1") == "::1"
    assert Target("h", "::1", 8001, "m").url == "[::1]:8001" and Target("h", "10.0.0.5", 8001, "m").url == \
        "10.0.0.5:8001"
    assert host_port("gpu-01") == "gpu-01" and host_port("fe80::1%eth0") == "[fe80::1%eth0]"
