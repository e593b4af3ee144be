"""GPU profiles (issue 21, "GPU classes are a closed list"): a profile per datacenter class, keyed by what
the facts show, ``gpu_profile: auto`` by default, the inventory's own profiles through the same typed model.

Driven the way a run goes: the variables merged and checked by :func:`bringup.engine.runner.prepare` (before
anything connects), the triton role declared by a :class:`~bringup.engine.runner.HostRun` from the facts of a real
host (``tests/fixtures/hosts/``), and ``invoke checklist --facts`` / ``invoke plan`` as an operator runs them.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.checklist.pages import gpu_checks
from bringup.errors import BringupError, InputError
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.hardware.gpu_profiles import ClassUnknown, choose, shipped, table
from bringup.inventory.hosts import ConnectionVars, Host
from bringup.project import content_root
from bringup.engine.roles import load_roles
from bringup.engine.runner import HostRun, Options, prepare
from bringup.engine.templates import Templates

from .fixture_hosts import FIX, h200_facts

REPO = Path(__file__).resolve().parents[2]
ORDER, ROLES = load_roles(content_root())
EVERY = [ROLES[r] for r in ORDER]
PUBLIC = FIX / "public"

#: A model that allows batches of 32, so that a profile's whole preferred list shows in its config.
MODEL = {"resnet": {"platform": "tensorrt_plan", "max_batch_size": 32,
                    "input": [{"name": "input", "data_type": "TYPE_FP16", "dims": [3, 224, 224]}],
                    "output": [{"name": "logits", "data_type": "TYPE_FP16", "dims": [1000]}]}}


def smi_from_q(name: str) -> list[dict]:
    """``nvidia.smi`` entries as the query CSV gives them, from a stored ``nvidia-smi -q`` capture (its
    name, memory and bus id; -q prints no compute capability, so none is given)."""
    q = parse_nvidia_smi_q((PUBLIC / name).read_text())
    return [{"index": i, "name": g["product_name"], "memory_total_mib": g["fb_total_mib"],
             "pci_address": g["pci_address"], "driver_version": q["driver_version"]} for i, g in enumerate(q["gpus"])]


def mixed_facts() -> dict:
    """The H200 VM with one more GPU: an L40S as the public 2x L40S host's query CSV lists it (its bus id
    and index changed to fit this host): a host of two classes."""
    facts = h200_facts()
    l40s = dict(parse_query_gpu_csv((PUBLIC / "nvsmi-query-gpu-csv-2xl40s-sr665v3.txt").read_text())[0],
                index=1, pci_address="0000:00:07.0")
    gpu = next(d for d in facts["pci.devices"] if d["kind"] == "gpu")
    facts["pci.devices"] = facts["pci.devices"] + [dict(gpu, address="0000:00:07.0", device="0x26b9")]
    facts["nvidia.smi"] = facts["nvidia.smi"] + [l40s]
    return facts


def declared(host_vars: dict, facts: dict):
    """The triton role declared on a host of ``host_vars`` with ``facts``, as a plan does it: the variables
    merged and checked first (every role's defaults under them), nothing connected."""
    host = Host("h", ["all"], {"inventory_hostname": "h", "triton_models": MODEL, **host_vars},
                ConnectionVars(ansible_connection="local"))
    vars = prepare([host], [ROLES["triton"]], EVERY)["h"]
    run = HostRun(host, [ROLES["triton"]], vars, Options(check=True), Templates(content_root() / "templates"))
    run.facts = facts
    return run, vars


def config(run) -> str:
    _, _, resources = run.declare(ROLES["triton"])
    (f,) = [r for r in resources if r.id.endswith("/resnet/config.pbtxt")]
    return f.content.decode() if isinstance(f.content, bytes) else f.content


def invoke(*args, cwd):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def project(tmp_path: Path, facts: dict, **host_vars) -> Path:
    (tmp_path / "h.json").write_text(json.dumps({"host": "h", "facts": facts}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, **host_vars}}}}))
    return tmp_path


def checklist_rows(cwd: Path) -> tuple[subprocess.CompletedProcess, dict[str, tuple[str, str, str]]]:
    """``invoke checklist --facts``: the run, and {check: (status, seen, fix)} from its Markdown page."""
    r = invoke("checklist", "--host", "h", "--facts", "h.json", "--out", "pages", cwd=cwd)
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    rows = {}
    for line in (cwd / "pages" / "h.md").read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 5 and cells[0] in ("PASS", "WARN", "FAIL"):
            rows[cells[2]] = (cells[0], cells[3], cells[4])
    return r, rows


# ---------------------------------------------------------------- the shipped table


def test_every_class_of_the_issue_ships_complete_with_where_each_value_comes_from():
    profiles = shipped()
    assert {"h100", "h200", "a100", "l40s", "l40", "l4", "a10", "a30", "t4", "gh200", "gb200", "cpu"} <= set(profiles)
    for name, p in profiles.items():
        assert p.preferred_batch_size and p.instance_count >= 1, name
        assert p.source.preferred_batch_size and p.source.instance_count, name
        for why in (p.source.preferred_batch_size, p.source.instance_count):
            if name in ("l40s", "a10"):
                assert why.startswith("the guide: measured"), (name, why)  # the guide's two classes
            else:
                # Any other: a stated reason (memory, SM count, MIG), never a claim of the guide.
                assert "the guide" not in why and re.search(r"\d+ (GB|SMs)|MIG|SM count|instance|batches", why), (
                    name, why)
        if name != "cpu":
            assert p.kind == "KIND_GPU" and p.match is not None, name
    # The guide's numbers are the ones the role always rendered.
    assert (profiles["l40s"].preferred_batch_size, profiles["l40s"].instance_count) == ([2, 4, 8, 16], 2)
    assert (profiles["a10"].preferred_batch_size, profiles["a10"].instance_count) == ([1, 2, 4], 3)
    assert (profiles["cpu"].kind, profiles["cpu"].preferred_batch_size, profiles["cpu"].instance_count) == (
        "KIND_CPU", [1, 2, 4], 1)


@pytest.mark.parametrize("gpus,profile", [
    # Real captures (tests/fixtures/hosts/): nvidia-smi's name and memory as each host printed them.
    (lambda: h200_facts()["nvidia.smi"], "h200"),
    (lambda: parse_query_gpu_csv((PUBLIC / "nvsmi-query-gpu-csv-2xl40s-sr665v3.txt").read_text()), "l40s"),
    (lambda: parse_query_gpu_csv((PUBLIC / "nvsmi-query-gpu-csv-l40s-drv595.txt").read_text()), "l40s"),
    (lambda: smi_from_q("nvsmi-q-8xh100sxm-drv565.txt"), "h100"),
    (lambda: smi_from_q("nvsmi-q-2xh100nvl-drv550.txt"), "h100"),
    (lambda: smi_from_q("nvsmi-q-4xa100sxm80-drv555.txt"), "a100"),
    (lambda: smi_from_q("nvsmi-q-a10g.txt"), "a10"),
    (lambda: smi_from_q("nvsmi-q-l4.txt"), "l4"),
    # No capture stored: the name, compute capability and memory.total nvidia-smi prints for the class.
    (lambda: [{"index": 0, "name": "Tesla T4", "compute_cap": "7.5", "memory_total_mib": 15360}], "t4"),
    (lambda: [{"index": 0, "name": "NVIDIA A30", "compute_cap": "8.0", "memory_total_mib": 24576}], "a30"),
    (lambda: [{"index": 0, "name": "NVIDIA L40", "compute_cap": "8.9", "memory_total_mib": 46068}], "l40"),
    (lambda: [{"index": 0, "name": "NVIDIA GH200 480GB", "compute_cap": "9.0", "memory_total_mib": 97871}], "gh200"),
    (lambda: [{"index": 0, "name": "NVIDIA GB200", "compute_cap": "10.0", "memory_total_mib": 189471}], "gb200"),
], ids=["h200-vm", "2xl40s", "l40s-drv595", "8xh100sxm", "2xh100nvl", "4xa100sxm", "a10g", "l4", "t4", "a30",
        "l40", "gh200", "gb200"])
def test_auto_names_each_class_from_what_nvidia_smi_shows(gpus, profile):
    picked = choose({}, {"nvidia.smi": gpus()})  # gpu_profile unset: auto
    assert (picked.name, picked.detected) == (profile, True)


@pytest.mark.parametrize("gpu", [
    {"name": "NVIDIA RTX 6000 Ada Generation", "compute_cap": "8.9", "memory_total_mib": 49140},
    {"name": "GRID A100-20C", "compute_cap": "8.0", "memory_total_mib": 20480},     # a vGPU slice of an A100
    {"name": "NVIDIA H100 80GB HBM3", "compute_cap": "8.0", "memory_total_mib": 81559},  # a name that lies
], ids=["rtx6000ada", "a100-vgpu-slice", "wrong-compute-capability"])
def test_a_gpu_no_profile_matches_is_one_line_saying_how_to_add_one(gpu):
    with pytest.raises(InputError) as e:
        choose({}, {"nvidia.smi": [dict(gpu, index=0)]})
    msg = str(e.value)
    assert "\n" not in msg and gpu["name"] in msg and "matches no GPU profile" in msg, msg
    assert "define a profile for it under gpu_profiles" in msg, msg


# ---------------------------------------------------------------- auto on a real host, through a plan


def test_the_h200_host_gets_the_h200_profile_by_default():
    run, vars = declared({}, h200_facts())
    assert vars["gpu_profile"] == "auto"  # the default every role sees
    text = config(run)
    assert "gpu_profile h200" in text and "preferred_batch_size: [ 2, 4, 8, 16, 32 ]" in text, text
    assert "{ kind: KIND_GPU count: 2 gpus: [ 0 ] }" in text, text


def test_a_host_of_two_classes_is_one_error_naming_both_and_nothing_is_read(monkeypatch):
    run, _ = declared({}, mixed_facts())
    monkeypatch.setattr(HostRun, "gather", lambda self: self.facts)
    result = run.converge()
    assert result.status == "failed" and not result.resources and run.transport is None, result
    msg = result.message
    assert "\n" not in msg and msg.startswith("role triton: gpu_profile auto: GPUs of 2 classes on one host, "
                                              "h200 and l40s"), msg
    assert "NVIDIA H200" in msg and "NVIDIA L40S" in msg and "set gpu_profile to the one" in msg, msg
    # Told which, the host is served with it on all its GPUs.
    assert "gpus: [ 0, 1 ]" in config(declared({"gpu_profile": "h200"}, mixed_facts())[0])


def test_a_host_without_a_gpu_is_cpu_and_the_gpu_roles_skip():
    facts = h200_facts()
    facts["pci.devices"] = [d for d in facts["pci.devices"] if d["kind"] != "gpu"]
    facts["nvidia.smi"], facts["nvidia.query"] = [], {}
    run, _ = declared({}, facts)
    assert "{ kind: KIND_CPU count: 1 }" in config(run)
    _, _, res = run.declare(ROLES["nvidia_driver"])
    assert [r.reason for r in res] == ["no NVIDIA GPU on this host (no PCI display device of vendor 0x10de) and "
                                       "gpu_profile is auto (served as cpu)"]
    # No "driver version" FAIL on a host that has no GPU to drive.
    assert ROLES["nvidia_driver"].checks(run.context(ROLES["nvidia_driver"])) == []


def test_gpus_without_a_driver_skip_triton_until_nvidia_smi_names_their_class():
    facts = h200_facts()
    facts["nvidia.smi"], facts["nvidia.query"] = [], {}
    run, _ = declared({}, facts)
    _, _, res = run.declare(ROLES["triton"])
    assert [(r.id, r.reason) for r in res] == [("skip:triton", (
        "gpu_profile auto: NVIDIA GPUs on the PCI bus, but nvidia-smi lists none (no driver loaded): the class is "
        "read from nvidia-smi; install the driver first (invoke provision --roles nvidia_driver), or set "
        "gpu_profile"))], res
    with pytest.raises(ClassUnknown):
        choose({}, facts)


# ---------------------------------------------------------------- the inventory's own profiles


def test_an_inventory_profile_is_used_and_wins_over_the_shipped_one():
    mine = {"h200-measured": {"match": {"name": r"\bH200\b"}, "preferred_batch_size": [4, 8], "instance_count": 3,
                              "source": {"instance_count": "invoke bench on h, 2025-03"}}}
    run, _ = declared({"gpu_profiles": mine}, h200_facts())
    text = config(run)
    assert "gpu_profile h200-measured" in text and "preferred_batch_size: [ 4, 8 ]" in text, text
    assert "count: 3 gpus: [ 0 ]" in text, text
    p = table({"gpu_profiles": mine})["h200-measured"]
    assert p.source.instance_count == "invoke bench on h, 2025-03"
    assert p.source.preferred_batch_size == "the inventory's gpu_profiles.h200-measured"


def test_the_inventory_overrides_a_shipped_profile_key_by_key():
    run, _ = declared({"gpu_profiles": {"h200": {"instance_count": 4}}}, h200_facts())
    text = config(run)
    assert "count: 4 gpus: [ 0 ]" in text and "preferred_batch_size: [ 2, 4, 8, 16, 32 ]" in text, text
    p = table({"gpu_profiles": {"h200": {"instance_count": 4}}})["h200"]
    assert p.source.instance_count == "the inventory's gpu_profiles.h200"
    assert p.source.preferred_batch_size == shipped()["h200"].source.preferred_batch_size


def test_a_profile_named_by_the_inventory_needs_no_match():
    run, _ = declared({"gpu_profile": "big", "gpu_profiles": {"big": {"preferred_batch_size": [8, 16],
                                                                      "instance_count": 1}}}, h200_facts())
    assert "gpu_profile big" in config(run)


@pytest.mark.parametrize("host_vars,line", [
    ({"gpu_profiles": {"h200": {"instance_cont": 3}}},
     "gpu_profiles.h200: unknown key 'instance_cont'; did you mean 'instance_count'?"),
    ({"gpu_profiles": {"mine": {"match": {"nmae": "H200"}, "preferred_batch_size": [1], "instance_count": 1}}},
     "gpu_profiles.mine.match: unknown key 'nmae'; did you mean 'name'?"),
    ({"gpu_profiles": {"mine": {"instance_count": 2}}},
     "gpu_profiles.mine: a new profile needs preferred_batch_size (or name a shipped one to override: "),
    ({"gpu_profiles": {"h200": {"instance_count": 0}}},
     "gpu_profiles.h200.instance_count 0: must be a whole number from 1 to 32 (Triton instances per GPU)"),
    ({"gpu_profiles": {"mine": {"match": {"name": "H200("}, "preferred_batch_size": [1], "instance_count": 1}}},
     "gpu_profiles.mine.match.name 'H200(': is not a regular expression"),
    ({"gpu_profiles": {"mine": {"match": {"name": "(H+)+0$"}, "preferred_batch_size": [1], "instance_count": 1}}},
     "gpu_profiles.mine.match.name '(H+)+0$': repeats a repeated part (like (a+)+), which can take hours to match"),
    ({"gpu_profiles": {"h200": {"memory_bandwidth": [{"name": "(" * 130 + ")" * 130, "gbs": 1, "source": "x"}]}}},
     "gpu_profiles.h200.memory_bandwidth[0].name '" + "(" * 40),  # shortened in the line; the reason: its length
    ({"gpu_profile": "h20"}, "gpu_profile 'h20': is unknown (did you mean 'h200'?); use auto (the class the GPUs "
                             "show) or one of a10, a100, a30, cpu, gb200, gh200, h100, h200, l4, l40, l40s, t4, "
                             "or define it under gpu_profiles"),
], ids=["misspelt-key", "misspelt-match-key", "new-without-values", "zero-instances", "bad-regex",
        "nested-repeat-regex", "long-regex", "unknown-profile"])
def test_bad_profiles_are_one_line_before_anything_connects(host_vars, line):
    host = Host("h", ["all"], host_vars, ConnectionVars())
    for role in ("triton", "nvidia_driver"):  # every role that reads gpu_profile checks it
        with pytest.raises(InputError) as e:
            prepare([host], [ROLES[role]], EVERY)
        assert str(e.value).startswith(f"host h, role {role}: {line}") and "\n" not in str(e.value), e.value


def test_a_misspelt_key_through_invoke_plan_is_one_line_exit_1(tmp_path):
    project(tmp_path, h200_facts(), gpu_profiles={"h200": {"instance_cont": 3}})
    r = invoke("plan", "--host", "h", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.fullmatch(r"error: host h, role \w+: gpu_profiles\.h200: unknown key 'instance_cont'; did you mean "
                        r"'instance_count'\?", r.stderr.strip()), r.stderr
    assert "Traceback" not in r.stdout + r.stderr and not (tmp_path / "reports").exists()


# ---------------------------------------------------------------- the checklist


def test_checklist_on_the_h200_names_its_profile_and_where_the_values_come_from(tmp_path):
    r, rows = checklist_rows(project(tmp_path, h200_facts()))
    assert rows["GPU class matches gpu_profile h200"] == ("PASS", "NVIDIA H200 (gpu_profile auto)", ""), rows
    status, seen, fix = rows["GPU profile h200"]
    assert status == "PASS" and seen.startswith("2 instance(s) per GPU, preferred batch sizes [2, 4, 8, 16, 32] "
                                                "(gpu_profile auto); instances: h100's: the same 132 SMs"), seen
    assert fix == "confirm on this host: invoke bench, then invoke tune-window; pin what you measured under " \
                  "gpu_profiles.h200", fix
    assert "GPUs for the cpu profile" not in rows


def test_checklist_asks_to_confirm_only_what_nobody_measured():
    def fix(host_vars):
        (c,) = [c for c in gpu_checks(h200_facts(), host_vars) if c.name == "GPU profile h200"]
        return c.fix

    assert fix({}).startswith("confirm on this host: invoke bench, then invoke tune-window")
    assert fix({"gpu_profiles": {"h200": {"instance_count": 3}}}).startswith("confirm on this host")  # sizes: not
    assert fix({"gpu_profiles": {"h200": {"instance_count": 3, "preferred_batch_size": [2, 4]}}}) == ""


def test_checklist_fix_names_a_profile_that_exists(tmp_path):
    """The H200 with gpu_profile: cpu used to say "set gpu_profile to the GPU class", with no class to set."""
    r, rows = checklist_rows(project(tmp_path, h200_facts(), gpu_profile="cpu"))
    status, seen, fix = rows["GPUs for the cpu profile"]
    assert (status, seen) == ("WARN", "1 NVIDIA GPU(s) on the PCI bus"), rows
    assert fix == "set gpu_profile: h200 (the class nvidia-smi shows) or auto in the inventory", fix
    assert "h200" in shipped()


def test_checklist_on_a_host_of_two_classes_fails_naming_both(tmp_path):
    r, rows = checklist_rows(project(tmp_path, mixed_facts()))
    assert r.returncode == 2, r.stdout + r.stderr  # a FAIL line
    status, seen, fix = rows["GPU class (gpu_profile auto)"]
    assert status == "FAIL" and seen.startswith("GPUs of 2 classes on one host, h200 and l40s"), seen
    assert fix == "set gpu_profile to the one Triton is served with on this host (h200 or l40s), or move the odd GPU"


def test_checklist_explicit_profile_of_another_class_says_which_to_set():
    (c,) = [c for c in gpu_checks(h200_facts(), {"gpu_profile": "l40s"})
            if c.name == "GPU class matches gpu_profile l40s"]
    assert (c.status, c.seen, c.fix) == ("WARN", "NVIDIA H200",
                                         "set gpu_profile: h200 (the class nvidia-smi shows) or auto in the inventory")


def test_mig_stays_a_warn_and_its_instances_are_counted():
    from bringup.hardware.platform import checks as platform_checks

    facts = h200_facts()
    facts["nvidia.query"]["gpus"][0]["mig_mode_current"] = True
    (mig,) = [c for c in platform_checks(facts, {}) if c.name.endswith("MIG mode")]
    assert mig.status == "WARN"
    (c,) = [c for c in gpu_checks(facts, {}) if c.name == "MIG instances"]
    assert c.status == "WARN" and c.seen == ("MIG on 1 GPU(s) (00000000:00:06.0): the MIG instance count is not "
                                             "in the facts"), c
    assert "gpu_profile h200 is sized for a whole GPU" in c.fix
    facts["nvidia.query"]["gpus"][0]["mig_devices"] = 7
    (c,) = [c for c in gpu_checks(facts, {}) if c.name == "MIG instances"]
    assert c.seen == "MIG on 1 GPU(s) (00000000:00:06.0): 7 MIG instance(s)", c
    facts["nvidia.query"]["gpus"][0]["mig_mode_current"] = False
    assert not [c for c in gpu_checks(facts, {}) if c.name == "MIG instances"]


def test_existing_l40s_and_a10_inventories_render_as_before():
    """The shipped inventory's hosts: the guide's values, the profile named as before in the config."""
    import roles.triton as T
    from bringup.inventory.hosts import load_inventory

    inv = load_inventory(REPO / "hosts")
    for name, sizes, count in (("trt-l40s-01", "[ 2, 4, 8 ]", 2), ("trt-a10-01", "[ 1, 2, 4 ]", 3)):
        h = inv.select(host=name)[0]
        vars = prepare([h], [ROLES["triton"]], EVERY)[name]
        gpus = list(range(vars["gpu_count"]))
        text = T.model_configs(vars, {"nvidia.smi": [{"index": i} for i in gpus]},
                               Templates(content_root() / "templates").render)["resnet_trt"]
        assert text.startswith(f"# Managed by bringup (role triton, gpu_profile {vars['gpu_profile']}):"), text
        assert f"preferred_batch_size: {sizes}" in text, text
        assert f"count: {count} gpus: [ {', '.join(map(str, gpus))} ]" in text, text
