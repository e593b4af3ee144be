"""TensorRT engines (roles/trt_engines.py, bringup/resources/trt.py): trtexec command lines, the engine key,
rebuild decisions, validation, and the build script run for real with a stand-in ``docker``.

TensorRT cannot run here: the build script is run by bash against a TEST DOUBLE of ``docker`` (a shell
script that writes what trtexec would, or fails); everything around it (temporary names, renames, the key
file, the read script) is the real code.
"""
from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.errors import BringupError, InputError
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.inventory.hosts import ConnectionVars, Host, load_inventory
from bringup.project import content_root
from bringup.resources import Directory, DockerImage, Fail, Skip, TrtEngine, UploadedFile
from bringup.resources.guard import Unused
from bringup.resources.tree import Tree
from bringup.resources.trt import KEY_LABELS, EngineBuild, engine_key, key_digest, trtexec_argv
from bringup.engine.roles import FactView, HostContext, Role, load_roles
from bringup.engine.runner import prepare
from bringup.engine.templates import Templates

import roles.trt_engines as R

#: The role as the engine checks it: its Vars model, then its validate hook.
CHECK = Role('trt_engines', R).validate

from .fixture_hosts import FIX, REPO, h200_facts, l40s_pair_facts

ORDER, ROLES = load_roles(content_root())
EVERY = [ROLES[r] for r in ORDER]
render = Templates(REPO / "templates").render
GUIDE = {"min": [1, 3, 224, 224], "opt": [4, 3, 224, 224], "max": [8, 3, 224, 224]}


def l40s_facts() -> dict:
    """One L40S, driver 595.80: its query CSV and -q from the same capture (real outputs)."""
    d = FIX / "public"
    return {"nvidia.smi": parse_query_gpu_csv((d / "nvsmi-query-gpu-csv-l40s-drv595.txt").read_text()),
            "nvidia.query": parse_nvidia_smi_q((d / "nvsmi-q-l40s-drv595.txt").read_text()),
            "pci.devices": [{"kind": "gpu", "vendor": "0x10de"}]}


def a10_facts() -> dict:
    """One A10G from its real ``nvidia-smi -q`` (driver 535.247.01, CUDA 12.2).  No query CSV of an A10 was
    published: the smi row is built here from the -q values, with compute capability 8.6 (NVIDIA's CUDA GPU
    list for the A10/A10G), since -q does not print it."""
    q = parse_nvidia_smi_q((FIX / "public" / "nvsmi-q-a10g.txt").read_text())
    row = {"index": 0, "name": q["gpus"][0]["product_name"], "driver_version": q["driver_version"],
           "compute_cap": "8.6"}
    return {"nvidia.smi": [row], "nvidia.query": q, "pci.devices": [{"kind": "gpu", "vendor": "0x10de"}]}


@pytest.fixture
def onnx(tmp_path) -> Path:
    p = tmp_path / "resnet50.onnx"
    p.write_bytes(b"onnx model bytes")
    return p


def engine_vars(onnx_path: Path, **spec) -> dict:
    """The shipped inventory's l40s host with one engine for its resnet_trt model."""
    h = load_inventory(REPO / "hosts").select(host="trt-l40s-01")[0]
    h.vars["trt_engines"] = {"resnet_trt": {"onnx": str(onnx_path), "input": "input", "shapes": GUIDE, **spec}}
    return prepare([h], [ROLES["trt_engines"]], EVERY)["trt-l40s-01"]


def declare(vars: dict, facts: dict) -> list:
    role = ROLES["trt_engines"]
    return role.resources(HostContext("h", vars, FactView(facts, role.facts, role.name), render))


def engine_of(resources) -> TrtEngine:
    return next(r for r in resources if isinstance(r, TrtEngine))


# ---------------------------------------------------------------------------------------------------------
# Command lines


def test_fp16_trtexec_line_from_the_inventory(onnx):
    e = engine_of(declare(engine_vars(onnx), l40s_facts()))
    assert " ".join(e.docker_argv()) == (
        "docker run --rm --name bringup-trtexec-resnet_trt --gpus device=0 "
        "-v /opt/trt-engines/resnet_trt:/in:ro -v /data/models/resnet_trt/1:/out nvcr.io/nvidia/tensorrt:24.06-py3 "
        "trtexec --onnx=/in/model.onnx --saveEngine=/out/.model.plan.bringup-new --fp16 "
        "--minShapes=input:1x3x224x224 --optShapes=input:4x3x224x224 --maxShapes=input:8x3x224x224 "
        "--memPoolSize=workspace:4096 --skipInference")


def test_int8_line_reads_the_calibration_cache(onnx, tmp_path):
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8601-EntropyCalibration2\n")
    res = declare(engine_vars(onnx, precision="int8", calibration_cache=str(cache)), l40s_facts())
    e = engine_of(res)
    argv = e.docker_argv()
    assert argv[argv.index("trtexec"):] == [
        "trtexec", "--onnx=/in/model.onnx", "--saveEngine=/out/.model.plan.bringup-new", "--fp16", "--int8",
        "--calib=/in/calibration.cache", "--minShapes=input:1x3x224x224", "--optShapes=input:4x3x224x224",
        "--maxShapes=input:8x3x224x224", "--memPoolSize=workspace:4096", "--skipInference"]
    # Both files travel from the control machine into the folder mounted at /in.
    ups = {r.path: r.source for r in res if isinstance(r, UploadedFile)}
    assert ups == {"/opt/trt-engines/resnet_trt/model.onnx": onnx,
                   "/opt/trt-engines/resnet_trt/calibration.cache": cache}


def test_shapes_workspace_and_version_come_from_the_inventory(onnx):
    shapes = {"min": [1, 3, 256, 256], "opt": [2, 3, 256, 256], "max": [8, 3, 256, 256]}
    v = engine_vars(onnx, shapes=shapes, version=3, workspace_mib=2048,
                    trtexec_args=["--inputIOFormats=fp16:chw", "--outputIOFormats=fp16:chw"])
    e = engine_of(declare(v, l40s_facts()))
    argv = e.docker_argv()
    assert "-v" in argv and "/data/models/resnet_trt/3:/out" in argv
    assert argv[argv.index("trtexec") + 4:] == [
        "--minShapes=input:1x3x256x256", "--optShapes=input:2x3x256x256", "--maxShapes=input:8x3x256x256",
        "--memPoolSize=workspace:2048", "--inputIOFormats=fp16:chw", "--outputIOFormats=fp16:chw", "--skipInference"]


def test_an_input_name_with_a_colon_is_quoted_for_trtexec():
    b = EngineBuild("m", 1, "input_1:0", GUIDE)
    assert trtexec_argv(b, "/out/x")[4] == "--minShapes='input_1:0':1x3x224x224"


def test_the_build_runs_on_the_first_gpu_of_the_class():
    facts = {**l40s_pair_facts(), "pci.devices": [{"kind": "gpu"}]}
    # This capture's query had no index and compute_cap columns (the fact's own query has both): added here,
    # the rows listed 1, 0.
    facts["nvidia.smi"] = [{**g, "index": i, "compute_cap": "8.9"} for i, g in enumerate(facts["nvidia.smi"])][::-1]
    gpu = R.gpu_class(facts)
    assert (gpu.index, gpu.count, gpu.name, gpu.driver_version) == (0, 2, "NVIDIA L40S", "595.71.05")


# ---------------------------------------------------------------------------------------------------------
# The key and the rebuild decisions


def test_key_holds_gpu_driver_cuda_tensorrt_precision_shapes_and_onnx(onnx):
    e = engine_of(declare(engine_vars(onnx), l40s_facts()))
    import hashlib
    assert e.key == {
        "gpu_model": "NVIDIA L40S", "compute_capability": "8.9", "driver_version": "595.80", "cuda_version": "13.2",
        "tensorrt_version": "10.1.0", "precision": "fp16",
        "shapes": {"input": "input", **GUIDE}, "onnx_sha256": hashlib.sha256(b"onnx model bytes").hexdigest(),
        "calibration_sha256": None, "builder": ["--memPoolSize=workspace:4096"]}
    assert list(e.key) == list(KEY_LABELS)
    h200 = engine_of(declare(engine_vars(onnx), {**h200_facts(), "pci.devices": [{"kind": "gpu"}]}))
    assert (h200.key["gpu_model"], h200.key["compute_capability"], h200.key["driver_version"],
            h200.key["cuda_version"]) == ("NVIDIA H200", "9.0", "580.159.04", "13.0")


def _host_state(key: dict, plan_sha: str = "ab" * 32, **extra) -> str:
    doc = {"key": key_digest(key), "parts": key, "plan_sha256": plan_sha, **extra}
    return f"plan_sha256={plan_sha}\nkey={base64.b64encode(json.dumps(doc).encode()).decode()}\n"


def test_same_key_nothing_to_do_and_says_why(onnx):
    e = engine_of(declare(engine_vars(onnx), l40s_facts()))
    p = e.plan(_host_state(e.key))
    assert not p.changed and p.reason == (f"engine up to date: key {e.digest[:12]} matches "
                                          "(NVIDIA L40S, TensorRT 10.1.0, fp16)")


@pytest.mark.parametrize("part,old", [
    ("gpu_model", "NVIDIA A10G"), ("compute_capability", "8.6"), ("driver_version", "550.127.05"),
    ("cuda_version", "12.4"), ("tensorrt_version", "10.0.1"), ("precision", "int8"),
    ("shapes", {"input": "input", "min": [1, 3, 224, 224], "opt": [8, 3, 224, 224], "max": [16, 3, 224, 224]}),
    ("onnx_sha256", "0" * 64), ("calibration_sha256", "1" * 64), ("builder", ["--memPoolSize=workspace:1024"]),
])
def test_each_changed_key_part_rebuilds_and_is_named(onnx, part, old):
    e = engine_of(declare(engine_vars(onnx), l40s_facts()))
    p = e.plan(_host_state({**e.key, part: old}))
    label = KEY_LABELS[part]
    assert p.changed and p.commands == [e.build_script()]
    assert set(p.changes) == {label, "engine"} and p.reason == f"rebuilt: {label} changed"
    assert p.changes[label][1] != p.changes[label][0]


def test_a_plan_built_on_an_l40s_is_not_valid_on_an_a10(onnx):
    v = engine_vars(onnx)
    built = engine_of(declare(v, l40s_facts()))
    a10 = engine_of(declare(v, a10_facts()))
    p = a10.plan(_host_state(built.key))
    assert p.changed
    assert p.changes["GPU model"] == ("NVIDIA L40S", "NVIDIA A10G")
    assert p.changes["compute capability"] == ("8.9", "8.6")
    assert p.changes["driver"] == ("595.80", "535.247.01") and p.changes["CUDA"] == ("13.2", "12.2")
    assert "ONNX sha256" not in p.changes and "shapes" not in p.changes


def test_no_plan_yet_builds_and_a_plan_bringup_did_not_build_is_left_alone(onnx):
    e = engine_of(declare(engine_vars(onnx), l40s_facts()))
    first = e.plan("plan=absent\n")
    assert first.changed and first.reason == "no engine yet" and first.changes == {
        "engine": ("absent", f"key {e.digest[:12]}")}
    foreign = e.plan("plan_sha256=" + "cd" * 32 + "\n")
    assert foreign.error and "without model.plan.key.json" in foreign.error and not foreign.commands
    # A plan swapped by hand after bringup built it: the key's record of the plan no longer matches.
    swapped = e.plan(_host_state(e.key, plan_sha="ef" * 32).replace("plan_sha256=" + "ef" * 32, "plan_sha256=" + "12" * 32))
    assert swapped.changed and swapped.reason == "the plan changed since bringup built it"


# ---------------------------------------------------------------------------------------------------------
# Validation: before connecting, one line each


def _bad(onnx: Path, tmp_path: Path):
    cache = tmp_path / "c.cache"
    cache.write_bytes(b"x")
    return [
        ({"precision": "int8"}, "trt_engines.resnet_trt: precision int8 needs calibration_cache"),
        ({"calibration_cache": str(cache)}, "calibration_cache is only read with precision int8"),
        ({"precision": "bf16"}, "trt_engines.resnet_trt.precision 'bf16': must be fp16 or int8"),
        ({"shapes": {"min": [4, 3, 224, 224], "opt": [1, 3, 224, 224], "max": [8, 3, 224, 224]}},
         "min [4, 3, 224, 224] <= opt [1, 3, 224, 224] <= max [8, 3, 224, 224] must hold"),
        ({"shapes": {"min": [1, 3, 224, 224], "opt": [4, 3, 224], "max": [8, 3, 224, 224]}}, "of one rank"),
        ({"shapes": {"min": [1, 3, 224, 224], "max": [8, 3, 224, 224]}}, "shapes needs min, opt and max"),
        ({"precison": "fp16"}, "trt_engines.resnet_trt: unknown key 'precison'; did you mean 'precision'?"),
        ({"onnx": str(tmp_path / "nope.onnx")}, "nope.onnx': no such file on the control machine"),
        ({"trtexec_args": ["--fp16"]}, "--fp16 is set by bringup from the engine's other keys"),
        ({"trtexec_args": ["verbose"]}, "'verbose' is not a trtexec flag"),
        ({"version": 0}, "trt_engines.resnet_trt.version 0: must be a whole number >= 1"),
        ({"input": "in put"}, "trt_engines.resnet_trt.input 'in put': must be an input name"),
        ({"input": "images"}, "trt_engines.resnet_trt.input 'images' is not an input of triton_models.resnet_trt"),
        ({"shapes": {"min": [1, 3, 224, 224], "opt": [2, 3, 224, 224], "max": [4, 3, 224, 224]}},
         "shapes.max batch 4 is below triton_models.resnet_trt.max_batch_size 8: Triton refuses the plan"),
    ]


def test_every_bad_engine_is_one_line_naming_where(onnx, tmp_path):
    for spec, want in _bad(onnx, tmp_path):
        with pytest.raises(InputError) as e:
            CHECK(engine_vars(onnx, **spec))
        assert want in str(e.value), (spec, str(e.value))
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("override,want", [
    ({"tensorrt_image": "nvcr.io/nvidia/tensorrt:24.09-py3"},
     "tensorrt_image nvcr.io/nvidia/tensorrt:24.09-py3: the TensorRT version of this release is not in "
     "bringup/data/version_matrix.yaml; set tensorrt_version"),
    ({"tensorrt_image": "nvcr.io/nvidia/tensorrt:24.05-py3"},
     "builds with TensorRT 10.0.1 but triton_image nvcr.io/nvidia/tritonserver:24.06-py3 serves with TensorRT "
     "10.1.0"),
    ({"tensorrt_version": "ten"}, "tensorrt_version 'ten': a version like 10.1.0"),
    ({"trt_engine_dir": "/data/models/src"}, "trt_engine_dir /data/models/src lies in the model repository"),
    ({"trt_engine_dir": "/etc"}, "trt_engine_dir '/etc' is a system folder"),
    ({"trt_engine_dir": "relative"}, "trt_engine_dir 'relative': must be an absolute path"),
    ({"trt_engines": ["resnet"]}, "trt_engines ['resnet']: must be a mapping"),
    ({"triton_models": {"resnet_trt": {"platform": "onnxruntime_onnx"}}}, "served by onnxruntime_onnx"),
])
def test_images_folders_and_triton_agreement_are_checked(onnx, override, want):
    with pytest.raises(InputError, match=None) as e:
        CHECK({**engine_vars(onnx), **override})
    assert want in str(e.value) and "\n" not in str(e.value)


def test_an_explicit_tensorrt_version_serves_an_unknown_release(onnx):
    v = {**engine_vars(onnx), "tensorrt_image": "nvcr.io/nvidia/tensorrt:24.09-py3", "tensorrt_version": "10.4.0",
         "triton_image": "nvcr.io/nvidia/tritonserver:24.09-py3"}
    CHECK(v)
    assert engine_of(declare(v, l40s_facts())).key["tensorrt_version"] == "10.4.0"


def test_a_plan_also_shipped_from_models_dir_is_refused(onnx, tmp_path):
    plan = tmp_path / "models" / "resnet_trt" / "1" / "model.plan"
    plan.parent.mkdir(parents=True)
    plan.write_bytes(b"plan")
    with pytest.raises(InputError, match="is also shipped from models_dir by the triton role; keep one"):
        CHECK({**engine_vars(onnx), "models_dir": str(tmp_path / "models")})


def test_the_cli_refuses_bad_input_in_one_line_before_connecting(tmp_path):
    """trt-l40s-01 does not resolve here: reaching a connection would be a different error."""
    cp = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "engines", "--host",
                         "trt-l40s-01", "--inventory", str(REPO / "hosts"), "--check", "--set",
                         "trt_engines={resnet_trt: {onnx: missing.onnx, input: input, shapes: {min: [1,3,224,224], "
                         "opt: [4,3,224,224], max: [8,3,224,224]}}}"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert cp.stderr.strip().splitlines() == [
        "error: host trt-l40s-01, role trt_engines: trt_engines.resnet_trt.onnx 'missing.onnx': no such file on "
        f"the control machine (relative paths are read from {tmp_path})"]
    assert "Traceback" not in cp.stdout and not (tmp_path / "reports").exists()


# ---------------------------------------------------------------------------------------------------------
# The role on hosts that cannot build


def test_nothing_declared_or_no_gpu_skips_with_the_reason(onnx):
    v = engine_vars(onnx)
    empty = declare({**v, "trt_engines": {}}, l40s_facts())
    assert [type(r) for r in empty] == [Unused] and empty[0].reason == "no engines declared: trt_engines is empty"
    cpu = declare({**v, "gpu_profile": "cpu"}, {"nvidia.smi": [], "pci.devices": []})
    assert [type(r) for r in cpu] == [Skip] and "no NVIDIA GPU" in cpu[0].reason


def test_a_driver_not_loaded_or_mixed_gpus_fail_with_why(onnx):
    v = engine_vars(onnx)
    unloaded = declare(v, {"nvidia.smi": [], "nvidia.query": {}, "pci.devices": [{"kind": "gpu"}]})
    assert [type(r) for r in unloaded] == [Fail] and "nvidia-smi lists no GPU" in unloaded[0].error
    mixed = l40s_facts()
    mixed["nvidia.smi"] = mixed["nvidia.smi"] + [{**a10_facts()["nvidia.smi"][0], "index": 1}]
    with pytest.raises(BringupError, match=r"more than one class on this host \(NVIDIA A10G, NVIDIA L40S\)"):
        R.gpu_class(mixed)
    old = l40s_facts()
    old["nvidia.smi"][0]["compute_cap"] = None
    assert "compute capability (nvidia-smi compute_cap)" in declare(v, old)[0].error


def test_the_role_stages_pulls_and_builds_in_order(onnx):
    res = declare(engine_vars(onnx), l40s_facts())
    assert [type(r) for r in res] == [Directory, DockerImage, UploadedFile, TrtEngine]
    assert res[1].ref == "nvcr.io/nvidia/tensorrt:24.06-py3" and res[-1].notify == (R.RELOAD,)
    assert ORDER.index("trt_engines") < ORDER.index("triton") and ROLES["trt_engines"].waits_for_reboot


# ---------------------------------------------------------------------------------------------------------
# The build script, run by bash with a TEST DOUBLE of docker


DOCKER_DOUBLE = r"""#!/bin/sh
# TEST DOUBLE of docker: `docker run ... -v SRC:/out ... trtexec ... --saveEngine=/out/NAME` writes NAME in SRC
# (or fails, per $DOUBLE_FAIL, after writing half a plan as a crashed trtexec would); records its argv.
echo "$*" >> "$DOUBLE_LOG"
[ "$1" = run ] || exit 0
out=""; save=""
while [ $# -gt 0 ]; do
  case "$1" in
    -v) case "$2" in *:/out) out="${2%:/out}";; esac; shift;;
    --saveEngine=/out/*) save="${1#--saveEngine=/out/}";;
  esac
  shift
done
if [ -n "$DOUBLE_FAIL" ]; then printf half > "$out/$save"; echo "[E] [TRT] ModelImporter: parse error"; \
  echo "&&&& FAILED TensorRT.trtexec"; exit 1; fi
printf 'plan built by the double' > "$out/$save"
echo "&&&& PASSED TensorRT.trtexec"
"""


@pytest.fixture
def site(tmp_path, onnx):
    """A host's folders under tmp_path, the staged ONNX, and the docker double first on PATH."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "docker").write_text(DOCKER_DOUBLE)
    (bin_ / "docker").chmod(0o755)
    src, repo = tmp_path / "host" / "trt", tmp_path / "host" / "models"
    (src / "resnet_trt").mkdir(parents=True)
    (src / "resnet_trt" / "model.onnx").write_bytes(onnx.read_bytes())
    v = {**engine_vars(onnx), "trt_engine_dir": str(src), "triton_model_repository": str(repo)}
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "DOUBLE_LOG": str(tmp_path / "docker.log")}
    return v, env, repo / "resnet_trt" / "1", tmp_path / "docker.log"


def bash(script: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def test_the_plan_lands_only_after_trtexec_succeeded_and_the_key_last(site):
    v, env, out, log = site
    e = engine_of(declare(v, l40s_facts()))
    res = bash(e.build_script(), env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (out / "model.plan").read_bytes() == b"plan built by the double"
    assert sorted(p.name for p in out.iterdir()) == ["model.plan", "model.plan.key.json"]
    doc = json.loads((out / "model.plan.key.json").read_text())
    import hashlib
    assert doc["parts"] == e.key and doc["key"] == e.digest
    assert doc["plan_sha256"] == hashlib.sha256(b"plan built by the double").hexdigest()
    assert stat.S_IMODE((out / "model.plan").stat().st_mode) == 0o644
    assert "trtexec --onnx=/in/model.onnx" in log.read_text()
    # Read back through the resource's own read script: converged, nothing to do.
    again = e.plan(bash(e.read(), env).stdout)
    assert not again.changed and again.reason.startswith("engine up to date")


def test_a_failed_build_leaves_the_previous_plan_and_key_and_no_partial_file(site):
    v, env, out, log = site
    old = engine_of(declare({**v, "trt_engines": {"resnet_trt": {**v["trt_engines"]["resnet_trt"],
                                                                 "workspace_mib": 1024}}}, l40s_facts()))
    assert bash(old.build_script(), env).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    e = engine_of(declare(v, l40s_facts()))
    plan = e.plan(bash(e.read(), env).stdout)
    assert plan.reason == "rebuilt: trtexec options changed"
    res = bash(plan.commands[0], {**env, "DOUBLE_FAIL": "1"})
    assert res.returncode == 1
    assert "trtexec failed for resnet_trt: the previous plan (if any) is left as it was" in res.stdout
    assert "ModelImporter: parse error" in res.stdout
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no .model.plan.bringup-new left
    assert e.plan(bash(e.read(), env).stdout).changed  # the next run tries again


def test_leftovers_of_a_cut_short_build_are_cleared_and_a_wrong_onnx_is_refused(site, tmp_path):
    v, env, out, log = site
    e = engine_of(declare(v, l40s_facts()))
    out.mkdir(parents=True)
    (out / ".model.plan.bringup-new").write_bytes(b"from a build whose connection was lost")
    assert bash(e.build_script(), env).returncode == 0
    assert "rm -f -- bringup-trtexec-resnet_trt" in log.read_text()
    assert sorted(p.name for p in out.iterdir()) == ["model.plan", "model.plan.key.json"]
    (Path(v["trt_engine_dir"]) / "resnet_trt" / "model.onnx").write_bytes(b"another model")
    log.write_text("")
    e2 = engine_of(declare({**v, "trt_engines": {"resnet_trt": {**v["trt_engines"]["resnet_trt"],
                                                                "workspace_mib": 512}}}, l40s_facts()))
    res = bash(e2.build_script(), env)
    assert res.returncode == 1 and "is not the file planned" in res.stdout
    assert "run" not in log.read_text().split()  # trtexec never started


def test_the_triton_role_keeps_the_built_plan_and_counts_no_drift(site, tmp_path):
    """The triton role's tree never touches files it did not ship: after a build, its plan is a no-op."""
    v, env, out, log = site
    tv = {**v, "triton_stack_dir": str(tmp_path / "host" / "stack")}
    facts = h200_facts()  # the real H200 VM: the triton role plans its cpuset from its topology
    role = ROLES["triton"]
    tree = next(r for r in role.resources(HostContext("h", tv, FactView(facts, role.facts, "triton"), render))
                if isinstance(r, Tree))
    shipped = tree.plan(bash(tree.read(), env).stdout)
    assert bash("\n".join(shipped.commands), env).returncode == 0
    e = engine_of(declare(v, l40s_facts()))
    assert bash(e.build_script(), env).returncode == 0
    again = tree.plan(bash(tree.read(), env).stdout)
    assert not again.changed, again.changes
    assert "left as they are: 2 file(s) bringup did not ship" in again.reason
    assert (out / "model.plan").read_bytes() == b"plan built by the double"


UPLOAD_ROLE = '''
from pathlib import Path
from bringup.resources import UploadedFile

def resources(host):
    return [UploadedFile("{dest}", Path("{source}"))]
'''


def test_the_onnx_travels_by_stream_and_only_when_its_sha256_differs(tmp_path):
    """Through the tool on ``ansible_connection: local``: the file is streamed, renamed into place, then left."""
    (tmp_path / "roles").mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "roles" / "__init__.py").write_text("ORDER = ['up']\n")
    source, dest = tmp_path / "big.onnx", tmp_path / "host" / "trt" / "m" / "model.onnx"
    source.write_bytes(os.urandom(3 << 20))
    (tmp_path / "roles" / "up.py").write_text(UPLOAD_ROLE.format(dest=dest, source=source))
    (tmp_path / "hosts").write_text(json.dumps({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))

    def provision() -> subprocess.CompletedProcess:
        # roles/ and templates/ in cwd: this project's one role runs, not the repository's.
        return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "--host", "me",
                               "--verbose"], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    first = provision()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "me : ok=1 changed=1" in first.stdout.replace("  ", " ")
    assert dest.read_bytes() == source.read_bytes() and stat.S_IMODE(dest.stat().st_mode) == 0o644
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model.onnx"]  # no temporary file left
    again = provision()
    assert "changed=0" in again.stdout and f"{dest} has the sha256 of {source}" in again.stdout


@pytest.mark.reliability(item=40, fault="vault: a vaulted tensorrt_image still showed its TensorRT version (10.0.1) "
                                        "in the engine's no-op line and key changes", variants=2,
                         checks=("secret never shown",))
def test_a_vaulted_tensorrt_image_never_shows_its_tensorrt_version(onnx):
    from bringup.secrets import HIDDEN, Vaulted
    from roles.trt_engines import tensorrt_version

    image = Vaulted("nvcr.io/nvidia/tensorrt:24.05-py3")
    trt = tensorrt_version({"tensorrt_image": image})
    assert trt == "10.0.1" and isinstance(trt, Vaulted)  # the text builds; it is shown as ********
    assert isinstance(tensorrt_version({"tensorrt_version": Vaulted("10.4.0")}), Vaulted)
    assert not isinstance(tensorrt_version({"tensorrt_image": str(image)}), Vaulted)
    v = {**engine_vars(onnx), "tensorrt_image": image, "triton_image": Vaulted("nvcr.io/nvidia/tritonserver:24.05-py3")}
    e = engine_of(declare(v, l40s_facts()))
    assert e.key["tensorrt_version"] == "10.0.1"
    assert key_digest(e.key) == key_digest({**e.key, "tensorrt_version": "10.0.1"})  # the same key as plain text
    noop = e.plan(_host_state(e.key))
    assert not noop.changed and "10.0.1" not in noop.reason and f"TensorRT {HIDDEN}" in noop.reason, noop.reason
    rebuilt = e.plan(_host_state({**e.key, "precision": "int8", "tensorrt_version": "9.9.9"}))
    assert rebuilt.changes["TensorRT"] == ("9.9.9", HIDDEN), rebuilt.changes
