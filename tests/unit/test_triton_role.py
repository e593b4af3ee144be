"""The triton role's rendering: per-GPU-class configs, schema validation, compose file, tree sync plans."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from bringup.errors import InputError
from bringup.inventory.hosts import load_inventory
from bringup.resources import File
from bringup.resources.compose import ComposeUp
from bringup.resources.tree import Tree
from bringup.engine.roles import HostContext, Role
from bringup.engine.templates import Templates
from harness.captures import topology_from_numa

import roles.triton as T

#: The role as the engine checks it: its Vars model, then its validate hook.
CHECK = Role('triton', T).validate

REPO = Path(__file__).resolve().parents[2]
render = Templates(REPO / "templates").render


def host_vars(name: str) -> dict:
    h = load_inventory(REPO / "hosts").select(host=name)[0]
    return {**T.DEFAULTS, **h.vars}


def ctx(vars: dict, facts: dict | None = None) -> HostContext:
    return HostContext("h", vars, facts or {}, render)


def test_l40s_and_a10_get_their_batch_sizes_and_instances():
    smi = {"nvidia.smi": [{"index": 0}, {"index": 1}]}
    l40s = T.model_configs(host_vars("trt-l40s-01"), smi, render)["resnet_trt"]
    a10 = T.model_configs(host_vars("trt-a10-01"), {"nvidia.smi": [{"index": i} for i in range(4)]}, render)["resnet_trt"]
    # l40s's [2,4,8,16] is cut to max_batch_size 8, which Triton would otherwise refuse.
    assert "preferred_batch_size: [ 2, 4, 8 ]" in l40s and "{ kind: KIND_GPU count: 2 gpus: [ 0, 1 ] }" in l40s
    assert "preferred_batch_size: [ 1, 2, 4 ]" in a10 and "{ kind: KIND_GPU count: 3 gpus: [ 0, 1, 2, 3 ] }" in a10
    for text in (l40s, a10):
        assert 'platform: "tensorrt_plan"' in text and "max_batch_size: 8" in text
        assert "max_queue_delay_microseconds: 800" in text and "response_cache { enable: true }" in text
        assert 'dims: [ 3, 224, 224 ]' in text and 'name: "logits" data_type: TYPE_FP16 dims: [ 1000 ]' in text


def test_gpus_come_from_the_facts_then_gpu_count():
    v = host_vars("trt-l40s-01")
    assert "gpus: [ 1, 3 ]" in T.model_configs(v, {"nvidia.smi": [{"index": 3}, {"index": 1}]}, render)["resnet_trt"]
    assert "gpus: [ 0, 1 ]" in T.model_configs(v, {}, render)["resnet_trt"]  # gpu_count: 2
    with pytest.raises(InputError, match="no GPU found"):
        T.model_configs({**v, "gpu_count": None}, {}, render)


def test_cpu_profile_is_kind_cpu_without_gpus():
    v = {**host_vars("trt-l40s-01"), "gpu_profile": "cpu"}
    text = T.model_configs(v, {"nvidia.smi": [{"index": 0}]}, render)["resnet_trt"]
    assert "{ kind: KIND_CPU count: 1 }" in text and "gpus" not in text


@pytest.mark.parametrize("delay,ok", [(199, False), (200, True), (1500, True), (1501, False), ("800", False)])
def test_window_is_kept_within_bounds(delay, ok):
    v = {**host_vars("trt-a10-01"), "triton_max_queue_delay_microseconds": delay}
    if ok:
        CHECK(v)
    else:
        with pytest.raises(InputError, match="triton_max_queue_delay_microseconds"):
            CHECK(v)


def test_per_model_window_overrides_and_is_checked():
    v = host_vars("trt-a10-01")
    v["triton_models"] = {"resnet_trt": {**v["triton_models"]["resnet_trt"], "max_queue_delay_microseconds": 300}}
    assert "max_queue_delay_microseconds: 300" in T.model_configs(v, {}, render)["resnet_trt"]
    v["triton_models"]["resnet_trt"]["max_queue_delay_microseconds"] = 2000
    with pytest.raises(InputError, match=r"triton_models.resnet_trt.max_queue_delay_microseconds 2000: must be within 200-1500"):
        CHECK(v)


def test_a_typo_names_model_line_and_field():
    v = host_vars("trt-a10-01")
    spec = v["triton_models"]["resnet_trt"]
    v["triton_models"] = {"resnet_trt": {**spec, "output": [{"name": "logits", "data_type": "TYPE_FP61", "dims": [1000]}]}}
    with pytest.raises(InputError) as e:
        CHECK(v)
    msg = str(e.value)
    assert msg.startswith("model resnet_trt: config.pbtxt line 9: ") and "TYPE_FP61" in msg and "\n" not in msg
    v["triton_models"] = {"resnet_trt": {**spec, "extra": "model_warmup [ { nme: \"w\" } ]"}}
    with pytest.raises(InputError, match=r'line \d+: Message type "inference.ModelWarmup" has no field named "nme"'):
        CHECK(v)


def test_hand_written_config_in_models_dir_is_validated(tmp_path):
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\ninstance_grup [ ]\n')
    with pytest.raises(InputError, match=r"model m: .*config.pbtxt line 3: .*instance_grup"):
        CHECK({**T.DEFAULTS, "models_dir": str(tmp_path)})
    (tmp_path / "m" / "config.pbtxt").write_text('name: "other"\nbackend: "python"\n')
    with pytest.raises(InputError, match="must match its folder"):
        CHECK({**T.DEFAULTS, "models_dir": str(tmp_path)})


@pytest.mark.reliability(item=40, fault="a FIFO or an oversized config.pbtxt in models_dir (the hash waited for a "
                         "writer, the config was read whole)", variants=2, checks=("one clear line", "no hang"))
def test_a_fifo_or_a_huge_config_in_models_dir_is_one_line_at_once(tmp_path):
    import os
    import threading

    (tmp_path / "m" / "1").mkdir(parents=True)
    os.mkfifo(tmp_path / "m" / "1" / "model.py")
    got: list = []

    def check() -> None:
        try:
            CHECK({**T.DEFAULTS, "models_dir": str(tmp_path)})
        except InputError as e:
            got.append(str(e))

    t = threading.Thread(target=check, daemon=True)
    t.start()
    t.join(10)
    assert got and got[0] == f"{tmp_path}/m/1/model.py: not a regular file (a folder, a pipe, a socket or a " \
        "device); give a file to send", got
    (tmp_path / "m" / "1" / "model.py").unlink()
    with (tmp_path / "m" / "config.pbtxt").open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB long
    with pytest.raises(InputError, match=r"m/config.pbtxt: larger than 1024 KiB; is it a model's config\?$"):
        CHECK({**T.DEFAULTS, "models_dir": str(tmp_path)})


def test_compose_file_per_profile():
    v = {**host_vars("trt-l40s-01"), "triton_cpuset": "4-7,20-23"}
    res = T.resources(ctx(v, {"nvidia.smi": [{"index": 0}, {"index": 1}]}))
    compose_file = next(r for r in res if r.id == "file:/opt/triton/docker-compose.yml")
    svc = yaml.safe_load(compose_file.content)["services"]["triton"]
    assert svc["image"] == "nvcr.io/nvidia/tritonserver:24.06-py3" and svc["restart"] == "always"
    assert svc["cpuset"] == "4-7,20-23" and svc["shm_size"] == "1g"
    dev = svc["deploy"]["resources"]["reservations"]["devices"][0]
    assert dev["capabilities"] == ["gpu"] and dev["device_ids"] == ["0", "1"]
    cmd = svc["command"]
    for flag in ("--model-repository=/models", "--exit-on-error=false", "--rate-limit=execution_count",
                 "--metrics-config=summary_latencies=true", "--cache-config=local,size=268435456"):
        assert flag in cmd
    assert svc["ports"] == ["8000:8000", "8001:8001", "8002:8002"] and svc["volumes"] == ["/data/models:/models:ro"]
    rev = svc["labels"]["bringup.revision"]
    up = next(r for r in res if isinstance(r, ComposeUp))
    assert up.revision == rev
    # No response cache, no GPU: no --cache-config, no reservation; and a new revision.
    v2 = {**v, "gpu_profile": "cpu", "triton_models": {"resnet_trt": {**v["triton_models"]["resnet_trt"],
                                                                       "response_cache": False}}}
    svc2 = yaml.safe_load(next(r for r in T.resources(ctx(v2)) if r.id.endswith("docker-compose.yml")).content)
    svc2 = svc2["services"]["triton"]
    assert "deploy" not in svc2 and not any(a.startswith("--cache-config") for a in svc2["command"])
    assert svc2["labels"]["bringup.revision"] != rev


@pytest.mark.reliability(item=26, fault="triton_cpuset: 0 (CPU 0 dropped from compose) and false",
                         variants=2, checks=("one clear line",))
@pytest.mark.parametrize("profile", ["l40s", "cpu"])
def test_triton_cpuset_zero_is_cpu_zero_and_false_is_refused(profile):
    v = {**host_vars("trt-l40s-01"), "gpu_profile": profile, "triton_cpuset": 0}
    CHECK(v)
    res = T.resources(ctx(v, {"nvidia.smi": [{"index": 0}, {"index": 1}]}))
    svc = yaml.safe_load(next(r for r in res if r.id.endswith("docker-compose.yml")).content)["services"]["triton"]
    assert str(svc["cpuset"]) == "0", svc
    with pytest.raises(InputError, match="a CPU list"):
        CHECK({**v, "triton_cpuset": False})


@pytest.mark.parametrize("key,value", [("triton_image", "x; rm -rf /"), ("triton_cpuset", "0-3;x"),
                                       ("triton_shm_size", "lots"), ("triton_model_repository", "data"),
                                       ("gpu_profile", "h20"), ("gpu_profile", "H200"),
                                       ("triton_extra_args", ["-v"])])
def test_bad_values_are_refused(key, value):
    with pytest.raises(InputError):
        CHECK({**host_vars("trt-l40s-01"), key: value})


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_tree_ships_only_changed_files_and_removes_extras():
    files = {"add/1/model.py": (b"new\n", False), "add/1/same.bin": (b"same", False)}
    t = Tree("/data/models", files, keep={"add/config.pbtxt"})
    current = "\n".join(["type=dir", f"f={_sha(b'old')}  ./add/1/model.py", f"f={_sha(b'same')}  ./add/1/same.bin",
                         f"f={_sha(b'cfg')}  ./add/config.pbtxt", f"f={_sha(b'x')}  ./gone/1/model.py"])
    p = t.plan(current)
    assert set(p.changes) == {"add/1/model.py", "gone/1/model.py"}
    assert p.changes["gone/1/model.py"][1] == "absent"
    script = "\n".join(p.commands)
    assert "rm -f -- /data/models/gone/1/model.py" in script and "same.bin" not in script
    assert "config.pbtxt" not in script  # kept: another resource renders it
    assert "-empty -delete" in script
    same = "\n".join(["type=dir", f"f={_sha(b'new' + bytes([10]))}  ./add/1/model.py",
                      f"f={_sha(b'same')}  ./add/1/same.bin"])
    noop = t.plan(same)
    assert not noop.changed and "all 2 files have the same sha256" in noop.reason


def test_compose_up_plans_by_revision_label():
    up = ComposeUp("/opt/triton/docker-compose.yml", project="triton", container="triton", revision="abc")
    assert not up.plan("compose=docker-compose\nstate=running\nrevision=abc\n").changed
    p = up.plan("compose=docker-compose\nstate=running\nrevision=old\n")
    assert p.changes == {"container": ("running old", "running abc")} and "up -d" in p.commands[0]
    assert up.plan("compose=none\nstate=absent\n").changes["container"][0] == "absent"
    assert up.plan("compose=docker-compose\nstate=restarting\nrevision=abc\n").changed


def test_nothing_to_serve_skips_and_images_come_before_the_launch():
    (only,) = T.resources(ctx(dict(T.DEFAULTS)))
    assert only.plan("").skipped and "nothing to serve" in only.plan("").reason
    res = T.resources(ctx({**host_vars("trt-l40s-01"), "image_transfer": "push"}, PCI_GPU))
    kinds = [r.kind for r in res]
    assert kinds.index("image") == kinds.index("compose") - 1 and res[kinds.index("image")].source == "push"


@pytest.mark.parametrize("key,path,ok", [
    ("triton_model_repository", "/", False), ("triton_model_repository", "/etc", False),
    ("triton_model_repository", "/etc/", False), ("triton_model_repository", "/etc/triton", False),
    ("triton_model_repository", "/var", False), ("triton_model_repository", "/var/lib", False),
    ("triton_model_repository", "/usr/share/models", False), ("triton_model_repository", "/lib64", False),
    ("triton_model_repository", "/home", False), ("triton_model_repository", "/home/ann", False),
    ("triton_model_repository", "/root", False), ("triton_model_repository", "/opt", False),
    ("triton_model_repository", "/data", False), ("triton_model_repository", "/proc/x/y", False),
    ("triton_model_repository", "/data/models", True), ("triton_model_repository", "/var/lib/triton/models", True),
    ("triton_model_repository", "/srv/models", True), ("triton_model_repository", "/home/ann/models", True),
    ("triton_model_repository", "/opt/triton/models", False),  # inside the stack folder
    ("triton_model_repository", "/data/../etc", False),
    ("triton_stack_dir", "/opt", False), ("triton_stack_dir", "/usr", False), ("triton_stack_dir", "/", False),
    ("triton_stack_dir", "/data/models/stack", False),  # inside the repository: Triton would serve it
    ("triton_stack_dir", "/opt/triton", True), ("triton_stack_dir", "/srv/triton", True),
])
@pytest.mark.reliability(item=5, fault='a system or shared directory as model repository (role validation)')
def test_a_system_or_shared_directory_is_refused(key, path, ok):
    v = {**host_vars("trt-l40s-01"), key: path}
    if ok:
        CHECK(v)
        return
    with pytest.raises(InputError) as e:
        CHECK(v)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{key} {path!r}") and "set " in msg, msg


PCI_GPU = {"pci.devices": [{"address": "0000:41:00.0", "vendor": "0x10de", "kind": "gpu"}],
           "cpu.topology": topology_from_numa({"0": list(range(8))})}


@pytest.mark.reliability(item=8, fault='a GPU profile on a host without a GPU (role plan)')
def test_a_gpu_profile_needs_a_gpu_on_the_bus_not_just_gpu_count():
    v = host_vars("trt-l40s-01")  # gpu_count: 2
    (only,) = T.resources(ctx(v, {"pci.devices": []}))
    err = only.plan("").error
    assert err and "gpu_profile is l40s but this host has no NVIDIA GPU" in err
    # nvidia_without_gpu: install (image builders) sets the stack up, but Triton cannot reserve a GPU.
    (only,) = T.resources(ctx({**v, "nvidia_without_gpu": "install"}, {"pci.devices": []}))
    assert only.plan("").error
    res = T.resources(ctx(v, PCI_GPU))
    assert any(isinstance(r, ComposeUp) for r in res)
    assert "compose" in [r.kind for r in T.resources(ctx({**v, "gpu_profile": "cpu"}, {"pci.devices": []}))]


@pytest.mark.reliability(item=8, fault='a host wedged by an earlier version (role plan)')
def test_compose_up_clears_renamed_leftovers_of_its_container():
    up = ComposeUp("/opt/triton/docker-compose.yml", project="triton", container="triton", revision="abc")
    wedged = up.plan("compose=docker-compose\nstate=absent\nleftover=0123456789ab_triton\n")
    script = "\n".join(wedged.commands)
    assert "docker rm -f -- 0123456789ab_triton" in script and "up -d" in script
    assert wedged.changes["leftovers"] == (["0123456789ab_triton"], "removed")
    both = up.plan("compose=docker-compose\nstate=running\nrevision=abc\nleftover=0123456789ab_triton\n")
    assert both.changed and "up -d" not in "\n".join(both.commands)
    assert "[0-9a-f]{12}_triton" in up.read()


def test_triton_runs_on_the_planners_cpus_unless_the_inventory_sets_them():
    """Issue 9, defect 1: the topology plan reaches Triton's compose cpuset (GPU-local cores on each node)."""
    from bringup.engine.roles import FactView

    from .test_multinuma import A100_PCI, a100_host

    facts = {**a100_host(pci=A100_PCI), "nvidia.smi": [{"index": 0}, {"index": 1}]}  # 2×A100, 2 nodes
    v = {**host_vars("trt-l40s-01"), "gpu_count": None}
    planned = T.cpuset(v, facts)
    assert planned == "2-5,66-69"  # 4 per GPU after 2 IRQ CPUs, on each GPU's own node
    compose = next(r for r in T.resources(ctx(v, FactView(facts, T.FACTS, "triton")))
                   if isinstance(r, File) and r.path.endswith("docker-compose.yml"))
    assert 'cpuset: "2-5,66-69"' in compose.content.decode()
    pinned = next(r for r in T.resources(ctx({**v, "triton_cpuset": "8-11"}, facts))
                  if isinstance(r, File) and r.path.endswith("docker-compose.yml"))
    assert 'cpuset: "8-11"' in pinned.content.decode()
    # The planner's knobs move it, as they move cpu_tuning's exported cpuset.
    assert T.cpuset({**v, "triton_cpus_per_gpu": 2}, facts) == "2-3,66-67"
    # A CPU-only host has no Triton CPUs to plan: no cpuset.
    cpu = next(r for r in T.resources(ctx({**v, "gpu_profile": "cpu"}, facts))
               if isinstance(r, File) and r.path.endswith("docker-compose.yml"))
    assert b"cpuset" not in cpu.content
    with pytest.raises(InputError, match="set triton_cpuset"):
        T.cpuset(v, {"nvidia.smi": [{"index": 0}]})


@pytest.mark.reliability(item=16, fault='a misspelt key in a mapping variable')
def test_a_misspelt_model_setting_is_refused_with_the_closest_key():
    """Issue 12 item 16: `max_batch_sise` was ignored silently (the model got the default 8)."""
    v = host_vars("trt-l40s-01")
    spec = dict(v["triton_models"]["resnet_trt"])
    spec["max_batch_sise"] = spec.pop("max_batch_size")
    with pytest.raises(InputError, match=r"triton_models.resnet_trt: unknown key 'max_batch_sise'; "
                                         r"did you mean 'max_batch_size'\?"):
        CHECK({**v, "triton_models": {"resnet_trt": spec}})
