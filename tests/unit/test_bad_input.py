"""Issue 12 items 13, 15, 16, 17: bad input is one line on stderr, exit 1, no host touched, never a traceback.

Through the CLI in a subprocess, from a temporary folder.  Inventories point at 127.0.0.1 port 9, where
nothing listens (a run connects to its first hosts while it checks the input: the only traffic is a
refused connection on this machine), or at ``ansible_connection: local`` in check mode; ``invoke hosts``
alone, which connects to nothing, lists 192.0.2.x (TEST-NET) addresses.  The second channel: no report
is written (a run that reached a host writes one), and stderr holds no traceback.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _invoke(*args, cwd):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _provision(tmp_path, inventory, *args):
    return _invoke("provision", "--host", "h1", "--inventory", str(inventory), "--check", *args, cwd=tmp_path)


def _refused(r, tmp_path, *words):
    """Exit 1, one `error:` line naming ``words``, no traceback, no report (nothing ran)."""
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "Traceback" not in out, out
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for w in words:
        assert w in lines[0], lines[0]
    assert not (tmp_path / "reports").exists(), "a report was written: something ran"
    return lines[0]


def _write(tmp_path, text: str | bytes) -> Path:
    p = tmp_path / "hosts"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


# --- item 13: tracebacks -----------------------------------------------------------------------------

@pytest.mark.reliability(item=13, fault='non-UTF-8 inventory bytes',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_non_utf8_inventory_names_line_and_byte(tmp_path):
    inv = _write(tmp_path, b"all:\n  hosts:\n    h1: {ansible_host: \"\xff\xfe\"}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "hosts:3:25", "0xff", "not UTF-8")


@pytest.mark.reliability(item=13, fault='/dev/zero as inventory',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_dev_zero_as_inventory_is_refused_without_reading_it_whole(tmp_path):
    _refused(_provision(tmp_path, "/dev/zero"), tmp_path, "/dev/zero", "not a regular file")


@pytest.mark.reliability(item=26, fault='an inventory that is a terminal or a device (its read may never end), or a '
                                        'regular file over 16 MiB', variants=2,
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_devices_and_oversized_files_as_inventory_are_refused(tmp_path):
    _refused(_provision(tmp_path, "/dev/null"), tmp_path, "/dev/null", "not a regular file")
    big = tmp_path / "big.yml"
    with big.open("wb") as f:
        f.truncate(16 * 2**20 + 1)  # sparse: nothing written
    _refused(_provision(tmp_path, str(big)), tmp_path, str(big), "larger than 16 MiB")


@pytest.mark.reliability(item=13, fault='an unhashable YAML key',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_unhashable_key_names_its_line(tmp_path):
    inv = _write(tmp_path, "all:\n  hosts:\n    ? [a, b]\n    : {}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "hosts:3:7", "a list cannot be a key")


def _nested_groups(levels: int) -> str:
    text, ind = "all:\n  children:\n", "    "
    for i in range(levels):
        text += f"{ind}g{i}:\n{ind}  children:\n"
        ind += "    "
    return text + f"{ind}last:\n{ind}  hosts:\n{ind}    h1: {{ansible_host: 127.0.0.1, ansible_port: 9}}\n"


@pytest.mark.reliability(item=13, fault='group nesting too deep (70 and 400 levels)',
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("levels, words", [(70, ("nested 65 groups deep", "at most 64")),
                                            (400, ("nested too deeply",))])
def test_deep_group_nesting(tmp_path, levels, words):
    _refused(_provision(tmp_path, _write(tmp_path, _nested_groups(levels))), tmp_path, *words)


@pytest.mark.reliability(item=13, fault='a YAML alias bomb / recursive alias',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["all:", "  vars:", "    a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    lines += ["  hosts:", "    h1: {ansible_host: 127.0.0.1, ansible_port: 9, v: *a9}"]
    _refused(_provision(tmp_path, _write(tmp_path, "\n".join(lines) + "\n")), tmp_path,
             "hosts:9:9", "expands to more than 1,000,000 YAML nodes")


@pytest.mark.reliability(item=13, fault='a YAML alias bomb / recursive alias',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_recursive_alias_is_refused(tmp_path):
    inv = _write(tmp_path, "all:\n  vars:\n    r: &r [1, *r]\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "hosts:3:", "recursive")


@pytest.mark.reliability(item=13, fault='--forks not a whole number in 1..256',
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("forks", ["many", "0", "3.5", "100000"])
def test_forks_must_be_a_whole_number_in_range(tmp_path, forks):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    _refused(_provision(tmp_path, inv, "--forks", forks), tmp_path, f"--forks '{forks}'", "whole number from 1 to")


@pytest.mark.reliability(item=17, fault='YAML merge keys, and duplicate keys still refused',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_duplicate_key_still_refused_with_file_name(tmp_path):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 22, ansible_port: 23}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "hosts:3:53", "duplicate key 'ansible_port'")


@pytest.fixture
def not_ssh_port():
    """A port on 127.0.0.1 that answers with an HTTP line and closes: not sshd."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(60)

    def serve():
        try:
            conn, _ = srv.accept()
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    srv.close()
    t.join(5)


@pytest.mark.reliability(item=13, fault="a port that answers but is not SSH (paramiko's banner traceback)",
                         checks=('exit code',))
def test_port_that_is_not_ssh_is_one_unreachable_line(tmp_path, not_ssh_port):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: %d, "
                           "ssh_connect_timeout: 5}\n" % not_ssh_port)
    r = _provision(tmp_path, inv)
    out = r.stdout + r.stderr
    assert r.returncode == 4, out  # unreachable, not bad input
    assert "Traceback" not in out and "Exception (client)" not in out, out
    assert f"host h1: port {not_ssh_port} of 127.0.0.1 answers but is not SSH (no SSH banner" in out, out
    assert "unreachable=1" in out, out


# --- item 17: merge keys -----------------------------------------------------------------------------

@pytest.mark.reliability(item=17, fault='YAML merge keys, and duplicate keys still refused')
def test_merge_keys_resolve_as_yaml_says(tmp_path):
    """`<<: *base` and `<<: [*a, *b]` work; the mapping's own keys win over merged ones; real duplicates are
    still refused.  Checked through `invoke hosts` (the merged address and connection)."""
    inv = _write(tmp_path, """\
all:
  vars:
    base: &base {ansible_host: 192.0.2.7, ansible_port: 2201}
    more: &more {ansible_user: ops, ansible_port: 2202}
  hosts:
    h1:
      <<: *base
      ansible_port: 2222
    h2:
      <<: [*more, *base]
""")
    r = _invoke("hosts", "--inventory", str(inv), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "root@192.0.2.7:2222" in r.stdout, r.stdout  # own key overrides the merged one
    assert "ops@192.0.2.7:2202" in r.stdout, r.stdout  # the first of a merge list wins
    dup = _write(tmp_path, "all:\n  vars:\n    b: &b {x: 1}\n  hosts:\n    h1: {<<: *b, y: 1, y: 2}\n")
    _refused(_provision(tmp_path, dup), tmp_path, "duplicate key 'y'")


# --- item 15: booleans are booleans ------------------------------------------------------------------

_BOOLS = ["irq_affinity_in_containers", "irq_affinity_persist", "docker_hold", "container_toolkit_hold",
          "container_toolkit_default_runtime", "isolate_triton_cpus", "monitoring_stack",
          "monitoring_node_exporter", "nvidia_driver_hold", "nvidia_driver_blacklist_nouveau",
          "nvidia_driver_allow_downgrade"]


@pytest.mark.reliability(item=15, fault='a quoted "false" for every boolean variable',
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("var", _BOOLS)
def test_quoted_false_is_refused_for_every_boolean(tmp_path, var):
    """`irq_affinity_in_containers: "false"` (a string, true in Python) used to move the IRQs anyway."""
    inv = _write(tmp_path, f'all:\n  hosts:\n    h1: {{ansible_host: 127.0.0.1, ansible_port: 9, {var}: "false"}}\n')
    _refused(_provision(tmp_path, inv), tmp_path, "host h1", var, "'false'", "must be true or false")


@pytest.mark.reliability(item=15, fault="--set docker_hold='no' (quoted) against YAML's own no",
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_set_no_is_a_boolean_and_quoted_no_is_not(tmp_path):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_connection: local}\n")
    _refused(_provision(tmp_path, inv, "--set", "docker_hold='no'"), tmp_path, "docker_hold 'no'")
    import roles.docker as D
    from bringup.inventory.vars import check
    check(D.Vars, {"docker_hold": False})  # yes/no/on/off load as bool: accepted
    import yaml
    assert yaml.safe_load("no") is False and yaml.safe_load("on") is True


# --- item 16: a misspelt key in a mapping variable names the closest known key -----------------------

@pytest.mark.reliability(item=16, fault='a misspelt key in a mapping variable',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_misspelt_registry_auth_key_suggests_the_known_one(tmp_path, monkeypatch):
    monkeypatch.setenv("NGC_API_KEY", "not-a-real-key")  # the reference resolves; the key's name is wrong
    inv = _write(tmp_path, "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n      registry_auths:\n"
                           "        nvcr.io: {username: $oauthtoken, pasword: {env: NGC_API_KEY}}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "registry_auths.nvcr.io: unknown key 'pasword'",
             "did you mean 'password'?")


@pytest.mark.reliability(item=16, fault='a misspelt key in a mapping variable', variants=3)
def test_check_keys_helper_for_triton_models():
    """The helper the triton role can call for each triton_models entry."""
    from bringup.errors import InputError
    from bringup.inventory.vars import check_keys

    with pytest.raises(InputError, match=r"triton_models\.resnet: unknown key 'max_batch_sise'; "
                                         r"did you mean 'max_batch_size'\?"):
        check_keys({"max_batch_sise": 8}, ["platform", "max_batch_size"], "triton_models.resnet")
    with pytest.raises(InputError, match="known keys: max_batch_size, platform"):
        check_keys({"zzz": 1}, ["platform", "max_batch_size"], "triton_models.resnet")
    check_keys({"platform": "x"}, ["platform", "max_batch_size"], "triton_models.resnet")


# --- item 14: refused before connecting, not an error after ------------------------------------------

@pytest.mark.reliability(item=14, fault='role variables of the wrong kind (wait, governor, THP mode, EPP)',
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("setting,words", [
    ("dcgm_exporter_wait=soon", ["dcgm_exporter_wait 'soon'", "whole seconds"]),
    ("cpu_governor=turbo;reboot", ["cpu_governor 'turbo;reboot'", "performance"]),
    ("thp=sometimes", ["thp 'sometimes'", "madvise"]),
    ("cpu_epp=fast", ["cpu_epp 'fast'", "balance_performance"]),
])
def test_role_variables_are_refused_before_connecting(tmp_path, setting, words):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    _refused(_provision(tmp_path, inv, "--set", setting), tmp_path, *words)


# --- item 16 for every mapping variable: the typed models (bringup.inventory.vars) refuse an unknown key -------

@pytest.mark.reliability(item=16, fault='a misspelt key in each mapping variable (typed role models)',
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("setting,words", [
    ("docker_repo: {url: 'https://m.example/docker', sute: stable, key_url: 'https://m.example/gpg'}",
     ["docker_repo: unknown key 'sute'", "did you mean 'suite'?"]),
    ("nvidia_driver_repo: {url: 'https://m.example/cuda', key_url: 'https://m.example/k', compnents: [main]}",
     ["nvidia_driver_repo: unknown key 'compnents'", "did you mean 'components'?"]),
    ("container_toolkit_repo: {url: 'https://m.example/ctk', suite: /, keyurl: 'https://m.example/k'}",
     ["container_toolkit_repo: unknown key 'keyurl'", "did you mean 'key_url'?"]),
    ("triton_ports: {http: 8000, grpc: 8001, metrcs: 8002}", ["triton_ports: unknown key 'metrcs'",
                                                              "did you mean 'metrics'?"]),
    ("monitoring_ports: {triton: 8002, dcgm: 9400, node: 9100, prometheus: 9090, grafna: 3000}",
     ["monitoring_ports: unknown key 'grafna'", "did you mean 'grafana'?"]),
    ("monitoring_images: {prometheus: 'p:1', grafana: 'g:1', node_exportr: 'n:1'}",
     ["monitoring_images: unknown key 'node_exportr'", "did you mean 'node_exporter'?"]),
    ("triton_window_tuner: {target_p95_ms: 50, intervl_s: 10}",
     ["triton_window_tuner: unknown key 'intervl_s'", "did you mean 'interval_s'?"]),
    ("triton_models: {m: {platform: onnxruntime_onnx, max_batch_sise: 8, input: [{name: i, data_type: TYPE_FP32, "
     "dims: [3]}], output: [{name: o, data_type: TYPE_FP32, dims: [3]}]}}",
     ["triton_models.m: unknown key 'max_batch_sise'", "did you mean 'max_batch_size'?"]),
    ("triton_models: {m: {platform: onnxruntime_onnx, input: [{name: i, data_type: TYPE_FP32, dim: [3]}], "
     "output: [{name: o, data_type: TYPE_FP32, dims: [3]}]}}",
     ["triton_models.m.input[0]: unknown key 'dim'", "did you mean 'dims'?"]),
])
def test_unknown_key_in_every_mapping_variable_names_the_closest(tmp_path, setting, words):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n  vars:\n    " + setting + "\n")
    _refused(_provision(tmp_path, inv), tmp_path, "host h1, role ", *words)


# --- item 14, by class: what the types refuse before connecting ---------------------------------------

@pytest.mark.reliability(item=14, fault="a path with '..' (it is not the folder it seems)",
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("setting", ["monitoring_dir=/opt/monitoring/../../etc", "sysfs_root=/sys/../tmp"])
def test_path_with_dot_dot_is_refused_before_connecting(tmp_path, setting):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    name, value = setting.split("=", 1)
    _refused(_provision(tmp_path, inv, "--set", setting), tmp_path, f"{name} {value!r}", "without '..'")


@pytest.mark.reliability(item=14, fault='a non-finite number (.inf, .nan) in a number variable',
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("number", [".inf", ".nan"])
def test_non_finite_number_is_refused_before_connecting(tmp_path, number):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                           f"      triton_window_tuner: {{target_p95_ms: {number}}}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "triton_window_tuner.target_p95_ms", "a number above 0")


@pytest.mark.reliability(item=14, fault='a YAML date where text is wanted',
                         checks=('one clear line', 'exit code', 'nothing touched'))
def test_date_where_text_is_wanted_is_refused_before_connecting(tmp_path):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9, models_dir: 2024-01-01}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "role triton", "models_dir datetime.date(2024, 1, 1)",
             "must be text")


@pytest.mark.reliability(item=14, fault="a brace in docker_repo that str.format would read ({IFS}, ${IFS}, a lone {)",
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("url,words", [("https://m.example/{IFS}", ["url: {IFS} is not a placeholder", "{codename}"]),
                                       ("https://m.example/${IFS}x", ["url: {IFS} is not a placeholder"]),
                                       ("https://m.example/{id.__class__}", ["{id.__class__} is not a placeholder"]),
                                       ("https://m.example/{", ["url: a lone { or }"])])
def test_repository_url_braces_are_refused_before_connecting(tmp_path, url, words):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n      docker_source: docker\n"
                           f"      docker_repo: {{url: '{url}', suite: '{{codename}}', components: [stable], "
                           "key_url: 'https://m.example/gpg'}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "role docker: docker_repo: ", *words)


@pytest.mark.reliability(item=26, fault="docker_repo suite or components malformed (refused only after connecting)",
                         variants=3, checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("repo,words", [
    ("{url: 'https://m.example/d', suite: 'sta ble', components: [stable], key_url: 'https://m.example/gpg'}",
     ["docker_repo: suite 'sta ble' is malformed"]),
    ("{url: 'https://m.example/d', suite: '{codename}', components: ['main;rm'], key_url: 'https://m.example/gpg'}",
     ["docker_repo: components: 'main;rm' is malformed"]),
    ("{url: 'https://m.example/d', suite: '{codename}', components: [], key_url: 'https://m.example/gpg'}",
     ["needs components"]),
])
def test_repository_suite_and_components_are_refused_before_connecting(tmp_path, repo, words):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n      docker_source: docker\n"
                           f"      docker_repo: {repo}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "role docker: ", *words)


@pytest.mark.reliability(item=26, fault='--roles "" (planned every role) and --roles " , " (ran none, exit 0)',
                         variants=2, checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("roles, words", [("", ["--roles ''", "empty"]), (" , ", ["--roles", "names no role"])])
def test_roles_naming_no_role_is_one_line(tmp_path, roles, words):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    _refused(_provision(tmp_path, inv, "--roles", roles), tmp_path, *words)


# --- issue 32: inventory sources as Ansible reads them -----------------------------------------------

_INV = dict(item=32, checks=("one clear line", "exit code", "nothing touched"))
_H1 = "h1 ansible_host=127.0.0.1 ansible_port=9"


@pytest.mark.reliability(fault="a broken INI inventory line (no key=value, an open quote, an unknown "
                               "[group:kind], a bad section header)", variants=4, **_INV)
@pytest.mark.parametrize("text, words", [
    (f"[gpu]\n{_H1} gpu_profile\n", ["hosts:2:", "expected key=value", "'gpu_profile'"]),
    (f"[gpu]\n{_H1} note='open\n", ["hosts:2:", "cannot split host line", "close the quote"]),
    (f"[gpu]\n{_H1}\n[gpu:hostvars]\nx=1\n", ["hosts:3:", "[gpu:hostvars] has unknown kind 'hostvars'"]),
    (f"[gpu]\n{_H1}\n[rack 1]\n", ["hosts:3:", "'[rack 1]' is not a section header"]),
])
def test_broken_ini_inventory_is_one_line(tmp_path, text, words):
    _refused(_provision(tmp_path, _write(tmp_path, text)), tmp_path, *words)


@pytest.mark.reliability(fault="a host range that expands to nothing or to 100,000 hosts (INI and YAML)",
                         variants=3, **_INV)
@pytest.mark.parametrize("text, words", [
    (f"[gpu]\n{_H1}\ngpu[9:1]\n", ["hosts:3:", "'gpu[9:1]' gives no host"]),
    (f"[gpu]\n{_H1}\ngpu[000001:100000]\n", ["hosts:3:", "more than 10,000 hosts"]),
    ("all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n    gpu[1:100000]:\n",
     ["hosts: group 'all':", "'gpu[1:100000]' gives more than 10,000 hosts"]),
])
def test_bad_host_range_is_one_line(tmp_path, text, words):
    _refused(_provision(tmp_path, _write(tmp_path, text)), tmp_path, *words)


@pytest.mark.reliability(fault="a group_vars or host_vars file that is not a mapping", variants=2, **_INV)
@pytest.mark.parametrize("rel, text", [("group_vars/gpu.yml", "- gpu_profile: l40s\n"),
                                       ("host_vars/h1", "just text\n")])
def test_vars_file_not_a_mapping_is_one_line(tmp_path, rel, text):
    inv = _write(tmp_path, f"[gpu]\n{_H1}\n")
    (tmp_path / rel).parent.mkdir()
    (tmp_path / rel).write_text(text)
    _refused(_provision(tmp_path, inv), tmp_path, rel, "a vars file must be a mapping")


@pytest.mark.reliability(fault="an inventory script that hangs, prints garbage or fails", variants=3,
                         checks=("one clear line", "exit code", "nothing touched", "no hang"), item=32)
@pytest.mark.parametrize("body, words", [
    ("import time; time.sleep(120)", ["gave no answer to --list within 2 s (killed)"]),
    # Where it broke, never what it printed (JSON broken near its start could show a password it held).
    ("print('<html>503 Service Unavailable</html>')", ["output is not JSON (line 1 column 1", "it printed 37 bytes"]),
    ("import sys; sys.exit('cloud API: 401 Unauthorized')", ["exited 1: cloud API: 401 Unauthorized"]),
])
def test_bad_inventory_script_is_one_line(tmp_path, body, words):
    script = tmp_path / "cloud.py"
    script.write_text(f"#!{sys.executable}\n{body}\n")
    script.chmod(0o755)
    env_cmd = ["env", "BRINGUP_INVENTORY_SCRIPT_TIMEOUT=2", sys.executable, "-m", "invoke", "--search-root", str(REPO),
               "provision", "--host", "h1", "--inventory", str(script), "--check"]
    r = subprocess.run(env_cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    _refused(r, tmp_path, "cloud.py", *words)
    assert "<html>" not in r.stdout + r.stderr


@pytest.mark.reliability(fault="a {{ template }} beyond a plain reference in a variable bringup uses (a role's, a "
                               "connection's)", variants=2, **_INV)
@pytest.mark.parametrize("text, words", [
    ("all:\n  vars: {hold: 'yes'}\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9, "
     "docker_hold: '{{ hold | bool }}'}\n",
     ["host h1, role docker:", "hosts:4 (host h1)", "docker_hold = '{{ hold | bool }}'", "a filter"]),
    ("[gpu]\nh1 ansible_host='{{ bmc_ip }}' ansible_port=9\n",
     ["hosts:2 (host h1)", "ansible_host = '{{ bmc_ip }}'", "no variable 'bmc_ip' is set for this host"]),
])
def test_unrendered_template_is_one_line_where_used(tmp_path, text, words):
    _refused(_provision(tmp_path, _write(tmp_path, text)), tmp_path, *words)


def test_plain_references_reach_the_connection(tmp_path):
    inv = _write(tmp_path, "[gpu]\nh1 ansible_host='{{ net }}.7' ansible_port='{{ p }}'\n[gpu:vars]\nnet=192.0.2\np=2202\n")
    r = _invoke("hosts", "--inventory", str(inv), cwd=tmp_path)
    assert r.returncode == 0 and "root@192.0.2.7:2202" in r.stdout, r.stdout + r.stderr


# --- issue 34 item 16: the remaining smaller inputs --------------------------------------------------

_SMALL = dict(item=34, checks=("one clear line", "exit code", "nothing touched"))
_H1_YAML = "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n  vars:\n    "


@pytest.mark.reliability(fault="counts without a bound: a gpu_profiles instance_count of 1,000,000,000 (it passed "
                               "and a plan deployed 100000), a max_batch_size or preferred batch size of 10**9",
                         variants=5, **_SMALL)
@pytest.mark.parametrize("setting, words", [
    ("gpu_profiles: {h200: {instance_count: 1000000000}}",
     ["gpu_profiles.h200.instance_count 1000000000", "from 1 to 32"]),
    ("gpu_profiles: {h200: {preferred_batch_size: [4, 1000000000]}}",
     ["gpu_profiles.h200.preferred_batch_size[1] 1000000000", "from 1 to 65536"]),
    ("triton_models: {m: {platform: onnxruntime_onnx, instance_count: 100000, input: [{name: i, data_type: "
     "TYPE_FP32, dims: [3]}], output: [{name: o, data_type: TYPE_FP32, dims: [3]}]}}",
     ["triton_models.m.instance_count 100000", "from 1 to 32"]),
    ("triton_models: {m: {platform: onnxruntime_onnx, max_batch_size: 1000000000, input: [{name: i, data_type: "
     "TYPE_FP32, dims: [3]}], output: [{name: o, data_type: TYPE_FP32, dims: [3]}]}}",
     ["triton_models.m.max_batch_size 1000000000", "from 1 to 65536"]),
    ("triton_models: {m: {platform: onnxruntime_onnx, preferred_batch_size: [1000000000], input: [{name: i, "
     "data_type: TYPE_FP32, dims: [3]}], output: [{name: o, data_type: TYPE_FP32, dims: [3]}]}}",
     ["triton_models.m.preferred_batch_size[0] 1000000000", "from 1 to 65536"]),
])
def test_serving_counts_are_bounded(tmp_path, setting, words):
    _refused(_provision(tmp_path, _write(tmp_path, _H1_YAML + setting + "\n"), "--roles", "triton"), tmp_path,
             *words)


@pytest.mark.reliability(fault="a models_dir file name that is not UTF-8, or holds a newline (was 'internal error' "
                               "after connecting)", variants=2, **_SMALL)
@pytest.mark.parametrize("name, shown", [(b"model\xff.onnx", "model\\xff.onnx"), (b"a\nb.onnx", "a\\nb.onnx")])
def test_models_dir_file_name_is_named_before_connecting(tmp_path, name, shown):
    models = tmp_path / "models"
    (models / "m" / "1").mkdir(parents=True)
    (models / "m" / "1" / "model.onnx").write_bytes(b"onnx")
    with open(bytes(models / "m" / "1") + b"/" + name, "wb") as f:
        f.write(b"onnx")
    inv = _write(tmp_path, _H1_YAML + f"models_dir: {models}\n")
    _refused(_provision(tmp_path, inv, "--roles", "triton"), tmp_path, f"models/m/1/{shown}", "models_dir",
             "rename")


@pytest.mark.reliability(fault="ansible_become_user that is not a user name ('root; touch x', a space, empty)",
                         variants=3, **_SMALL)
@pytest.mark.parametrize("user", ["root; touch x", "trit on", ""])
def test_become_user_must_be_a_user_name(tmp_path, user):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9, ansible_become: true, "
                           f"ansible_become_user: '{user}'}}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "host 'h1'", "ansible_become_user must be a user name",
             repr(user))


def test_become_user_names_sudo_takes_pass(tmp_path):
    from bringup.inventory.hosts import ConnectionVars

    for user in ("root", "triton", "svc-gpu.ops", "_apt", "#0", "ops$"):
        assert ConnectionVars.model_validate({"ansible_become_user": user}).ansible_become_user == user


@pytest.mark.reliability(fault="ansible_ssh_private_key_file missing or a folder (was UNREACHABLE after trying "
                               "to connect)", variants=2, **_SMALL)
@pytest.mark.parametrize("key, why", [("missing_key", "no such file"), ("a-folder", "not a file")])
def test_missing_private_key_file_is_refused_before_connecting(tmp_path, key, why):
    (tmp_path / "a-folder").mkdir()
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9, "
                           f"ansible_ssh_private_key_file: {tmp_path / key}}}\n")
    _refused(_provision(tmp_path, inv), tmp_path, "host 'h1'", f"ansible_ssh_private_key_file '{tmp_path / key}'",
             why, "hosts:3")


def _record_fact(tmp_path, make) -> dict | None:
    """The triton.window fact as its own command reads a record made by ``make(path)`` (the command run by sh,
    with the record's path moved under ``tmp_path``), through its parser."""
    from bringup.facts.triton import WINDOW_RECORD, TritonWindow, parse_triton_window

    record = tmp_path / "triton-window.json"
    make(record)
    command = TritonWindow.command.replace(WINDOW_RECORD, str(record))
    assert command != TritonWindow.command
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10).stdout
    return parse_triton_window(out)


@pytest.mark.reliability(fault="the host's window record a folder, a FIFO, or JSON nested 100,000 deep (was "
                               "read as nothing tuned, or a fact error the triton role did not see)", variants=3,
                         checks=("one clear line", "no hang"), **{k: v for k, v in _SMALL.items() if k != "checks"})
@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), "is a folder, not the tuner's record"),
    (lambda p: os.mkfifo(p), "is not a regular file, not the tuner's record"),
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "is not JSON (nested more than 64 levels deep"),
])
def test_a_window_record_that_is_no_record_is_named(tmp_path, make, words):
    import roles.triton as T
    from bringup.errors import BringupError
    from bringup.engine.templates import Templates

    fact = _record_fact(tmp_path, make)
    assert fact is not None and words in fact["error"], fact
    spec = {"backend": "python", "input": [{"name": "I", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "O", "data_type": "TYPE_FP32", "dims": [4]}]}
    render = Templates(REPO / "templates").render
    with pytest.raises(BringupError) as e:
        T.model_configs({**T.DEFAULTS, "triton_models": {"m": spec}}, {"triton.window": fact}, render)
    assert "\n" not in str(e.value) and "/etc/bringup/triton-window.json" in str(e.value) and words in str(e.value)


def test_a_window_record_file_is_read_and_no_file_is_nothing_tuned(tmp_path):
    assert _record_fact(tmp_path, lambda p: None) is None
    fact = _record_fact(tmp_path, lambda p: p.write_text('{"m": {"window_us": 400}}'))
    assert fact == {"windows": {"m": 400}, "configs": {}, "error": None}


@pytest.mark.reliability(fault="a window record nested 100,000 deep where tune and tune-window --follow write "
                               "(a RecursionError traceback)", checks=("one clear line",),
                         **{k: v for k, v in _SMALL.items() if k != "checks"})
def test_a_deeply_nested_record_is_not_bringups_record(tmp_path):
    from bringup.latency.window_tuner import local_record_problem, record_text

    folder = tmp_path / "bringup"
    folder.mkdir()
    deep = "[" * 100_000 + "]" * 100_000
    (folder / "triton-window.json").write_text(deep)
    assert "not a record bringup wrote (not JSON)" in local_record_problem(str(folder / "triton-window.json"))
    assert json.loads(record_text(deep, "m", 400, "why", "when"))["m"]["window_us"] == 400


_SWAP_PROBE = """
import os, sys
from bringup.latency import window_tuner as w
path = sys.argv[1]
import stat
def looked(real, as_a_file):
    def look(p):  # a look sees the regular file that was there; by the open it is a FIFO
        if p != path:
            return real(p)
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path); os.mkfifo(path)
        return as_a_file
    return look
os.path.exists, os.path.isfile = looked(os.path.exists, True), looked(os.path.isfile, True)
os.path.isdir, os.path.islink = looked(os.path.isdir, False), looked(os.path.islink, False)
print(w.local_record_problem(path))
"""


@pytest.mark.reliability(fault="a window record swapped for a FIFO between the look and the read (tune, tune-window)",
                         checks=("no hang", "one clear line"), **{k: v for k, v in _SMALL.items() if k != "checks"})
def test_a_record_swapped_for_a_fifo_after_the_look_is_never_waited_on(tmp_path):
    folder = tmp_path / "bringup"
    folder.mkdir()
    record = folder / "triton-window.json"
    record.write_text("{}")
    try:
        r = subprocess.run([sys.executable, "-c", _SWAP_PROBE, str(record)], capture_output=True, text=True,
                           timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the record was opened by name after the look: the read waited on the FIFO")
    assert r.returncode == 0 and r.stdout.strip() and r.stdout.strip() != "None", (r.stdout, r.stderr[-400:])
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.reliability(fault="the host's tune record with instance_count 100000 (a plan deployed it)",
                         checks=("one clear line",), **{k: v for k, v in _SMALL.items() if k != "checks"})
def test_a_recorded_instance_count_is_bounded_as_the_inventory_is():
    import roles.triton as T
    from bringup.errors import BringupError
    from bringup.facts.triton import parse_triton_window
    from bringup.engine.templates import Templates

    spec = {"backend": "python", "input": [{"name": "I", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "O", "data_type": "TYPE_FP32", "dims": [4]}]}
    render = Templates(REPO / "templates").render
    v = {**T.DEFAULTS, "gpu_profile": "cpu", "triton_models": {"m": spec}}
    fact = parse_triton_window('{"m": {"window_us": 400, "instance_count": 100000}}')
    with pytest.raises(BringupError) as e:
        T.model_configs(v, {"triton.window": fact}, render)
    assert "\n" not in str(e.value) and "instance_count 100000" in str(e.value) and "1-32" in str(e.value), e.value
    fact = parse_triton_window('{"m": {"window_us": 400, "instance_count": 3}}')
    assert "count: 3" in T.model_configs(v, {"triton.window": fact}, render)["m"]


@pytest.mark.reliability(item=34, fault="a window record with a key twice, NaN, or numbers past any window or batch "
                         "size", variants=4, checks=("one clear line",))
@pytest.mark.parametrize("text, words", [
    ('{"m": {"window_us": 400}, "m": {"window_us": 1}}', "the key 'm' is given twice"),
    ('{"m": {"window_us": NaN}}', "NaN is not a JSON number"),
    ('{"m": {"window_us": ' + "9" * 30 + '}}', "has no whole window_us"),
    ('{"m": {"window_us": 400, "max_batch_size": ' + "9" * 30 + '}}', "malformed serving configuration"),
])
def test_a_window_record_of_hostile_values_is_not_taken_as_the_tuners(text, words):
    """Found by a hostile-input review: each read as a record (the last key winning, a 30-digit window)."""
    from bringup.facts.triton import parse_triton_window

    got = parse_triton_window(text)
    assert got["windows"] == {} and got["configs"] == {} and words in got["error"], got


@pytest.mark.reliability(item=34, fault="a connection time limit past any use (1e400, 1e308, .inf), or an address "
                         "holding a port, a user or a pattern, or a number the resolver reads as another host's "
                         "address", variants=11,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("var, value, words", [
    ("ssh_connect_timeout", '"1e400"', "ssh_connect_timeout must be a number of seconds > 0, at most 3600"),
    ("ssh_connect_timeout", "1e308", "ssh_connect_timeout must be a number of seconds > 0, at most 3600"),
    ("command_timeout", ".inf", "command_timeout must be a number of seconds > 0, at most 604800"),
    ("ansible_host", '"x,*"', "ansible_host must be a host name or IP address as it is"),
    ("ansible_host", '"a:22"', "ansible_host must be a host name or IP address as it is"),
    ("ansible_host", '"ops@a"', "ansible_host must be a host name or IP address as it is"),
    ("ansible_host", '"[a]:1"', "ansible_host must be a host name or IP address as it is"),
    # The resolver's inet_aton reads these as addresses of other hosts: 10.0.0.1, 1.0.0.5, 0.0.0.16, 8.0.0.1.
    ("ansible_host", '"10.1"', "a number that is no dotted-quad IPv4 address"),
    ("ansible_host", '"1.5"', "a number that is no dotted-quad IPv4 address"),
    ("ansible_host", '"0x10"', "a number that is no dotted-quad IPv4 address"),
    ("ansible_host", '"010.0.0.1"', "a number that is no dotted-quad IPv4 address"),
])
def test_connection_values_past_any_use_are_one_line_before_connecting(tmp_path, var, value, words):
    """Found by a hostile-input review: an OverflowError traceback (1e400), 'timestamp out of range' as an
    unreachable host (1e308), an endless command_timeout taken, Fabric's traceback for 'a:22', and 'x,*'
    written into known_hosts as a pattern matching every host."""
    address = value if var == "ansible_host" else "127.0.0.1"
    inv = _write(tmp_path, f"all:\n  hosts:\n    h1: {{ansible_host: {address}, ansible_port: 9}}\n  vars:\n    "
                 f"{var}: {value}\n")
    _refused(_provision(tmp_path, inv), tmp_path, words)


@pytest.mark.reliability(item=13, fault="--set values past an inventory's limits (nesting, digits, recursive alias, "
                                        "a control character)", variants=5,
                         checks=('one clear line', 'exit code', 'nothing touched'))
@pytest.mark.parametrize("value, words", [
    ("[" * 5000, "nested too deeply"),
    ("1" * 100_000, "a number of 100,000 characters"),
    ("&a [*a]", "recursive structure"),
    ("\x1b[31mred", "control character U+001B"),
    ("{a: 1, a: 2}", "duplicate key 'a'"),
])
def test_set_values_have_the_inventory_limits(tmp_path, value, words):
    inv = _write(tmp_path, "h1 ansible_host=127.0.0.1\n")
    _refused(_invoke("hosts", "-i", str(inv), "--set", f"k={value}", cwd=tmp_path), tmp_path, "--set k", words)


@pytest.mark.reliability(item=40, fault="a path flag whose name the system refuses to look at (too long): "
                         "--inventory, --vault-password-file, --vault-id, --testinfra, --export-testinfra",
                         variants=5, checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("flags", [
    ("hosts", "--inventory", "{long}"),
    ("hosts", "--inventory", "{inv}", "--vault-password-file", "{long}"),
    ("hosts", "--inventory", "{inv}", "--vault-id", "l@{long}"),
    ("audit", "--host", "h1", "--inventory", "{inv}", "--testinfra", "{long}"),
    ("audit", "--host", "h1", "--inventory", "{inv}", "--export-testinfra", "{long}"),
])
def test_a_path_too_long_to_look_at_is_one_line(tmp_path, flags):
    # pathlib's exists() and is_file() raise on a name the system will not look at (ENAMETOOLONG): each flag's
    # value became a traceback (found by a hostile-input pass, issue 40 item 8).  bringup.userfile.kind says it.
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    long = str(tmp_path / ("a" * 300))
    r = _invoke(*[f.format(long=long, inv=inv) for f in flags], cwd=tmp_path)
    line = _refused(r, tmp_path, "File name too long", flags[-2])
    assert line.endswith("give a path this user can look at"), line


@pytest.mark.reliability(item=40, fault="a flag value holding a newline and an ESC sequence (a faked second line of "
                         "output)", variants=2, checks=("one clear line", "exit code", "data shown as data"))
@pytest.mark.parametrize("flags", [("checklist", "--host", "h1", "--inventory", "{inv}", "--facts", "{bad}"),
                                   ("audit", "--host", "h1", "--inventory", "{inv}", "--testinfra", "{bad}")])
def test_a_newline_in_a_flag_value_never_makes_a_second_line(tmp_path, flags):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1, ansible_port: 9}\n")
    # A newline, an ESC sequence and the Unicode line separator (a line break to Python's splitlines).
    bad = str(tmp_path / "x") + "\n\x1b[32mok: all checks passed\u2028ok: so is this"
    line = _refused(_invoke(*[f.format(inv=inv, bad=bad) for f in flags], cwd=tmp_path), tmp_path, flags[-2])
    assert "x\\n\\x1b[32mok: all checks passed\\u2028ok: so is this" in line and "\x1b" not in line, line


def test_read_capped_says_a_path_holding_a_nul_byte_in_its_unreadable_line():
    # The shared reader: os.open raises ValueError (not OSError) for such a name, which was a traceback through
    # every reader of a path the operator names (ssh_config, -F, a vault password file, a --limit @file, ...).
    from bringup.errors import InputError
    from bringup.userfile import read_capped

    with pytest.raises(InputError) as e:
        read_capped("/tmp/x\0y", 10, InputError, missing="gone", unreadable="cannot read /tmp/x\\x00y: ",
                    too_large="big", not_regular="not a file")
    assert str(e.value) == "cannot read /tmp/x\\x00y: a path holding a NUL byte"


@pytest.mark.reliability(item=40, fault="a NUL byte in a path variable (ssh_config in the inventory or --set, "
                                        "a secret file, ssh_known_hosts): a ValueError traceback", variants=4,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("var, extra, said", [
    ('ssh_config: "/tmp\\0x"', (), "host 'h1': ssh_config: cannot read ssh config file /tmp\\x00x: a path holding "
                                   "a NUL byte"),
    ("", ("--set", 'ssh_config="/tmp/\\0x"'), "host 'h1': ssh_config: cannot read ssh config file /tmp/\\x00x: a path "
                                              "holding a NUL byte"),
    ('ansible_become_password: {file: "/tmp/x\\0y"}', (), "host 'h1': ansible_become_password: secret reference "
                                                         "{file: '/tmp/x\\x00y'}: file is a path holding a NUL byte"),
    ('ssh_known_hosts: "/tmp/kh\\0x"', (), "host 'h1': known_hosts file /tmp/kh\\x00x (set by ssh_known_hosts): a "
                                          "path holding a NUL byte"),
], ids=["ssh_config", "--set", "secret-file", "ssh_known_hosts"])
def test_a_path_holding_a_nul_byte_is_one_line(tmp_path, var, extra, said):
    inv = _write(tmp_path, "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                           + (f"      {var}\n" if var else ""))
    _refused(_provision(tmp_path, inv, *extra), tmp_path, said)


@pytest.mark.reliability(item=40, fault="a known_hosts file that is none (/etc/passwd) or an address that is none "
                                        "(-o HostName=10.99, HostName %r in ssh_config): refused only at the login, "
                                        "with a run report and exit 2", variants=3,
                         checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("var, said", [
    ("ssh_known_hosts: /etc/passwd", "host 'h1': known_hosts file /etc/passwd (set by ssh_known_hosts): line 1 is "
                                     "not a known_hosts entry"),
    ('ansible_ssh_common_args: "-o HostName=10.99"', "host 'h1': the address to connect to is a number that is no "
                                                      "dotted-quad IPv4 address"),
    ("ssh_config: cfg", "host 'h1': the address to connect to is not a host name or IP address"),
], ids=["known_hosts", "HostName=10.99", "HostName-%r"])
def test_a_known_hosts_file_or_an_address_that_is_none_is_refused_before_connecting(tmp_path, var, said):
    (tmp_path / "cfg").write_text("Host *\n  HostName %r\n")
    inv = _write(tmp_path, f"all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                           f"      {var}\n")
    _refused(_provision(tmp_path, inv), tmp_path, said)


@pytest.mark.reliability(item=40, fault="UserKnownHostsFile=/dev/null (ssh's idiom) refused a command that never "
                                        "connects (topology/checklist --facts FILE): the route's known_hosts check "
                                        "ran for every selected host", variants=6,
                         checks=("one clear line", "exit code"))
@pytest.mark.parametrize("args, connects", [
    (("topology", "--facts", "{facts}"), False),
    (("checklist", "--facts", "{facts}", "--out", "{tmp}/pages"), False),
    (("hosts",), False),
    (("topology",), True),
    (("checklist", "--out", "{tmp}/pages"), True),
    (("facts",), True),
], ids=["topology-facts", "checklist-facts", "hosts", "topology", "checklist", "facts"])
def test_a_known_hosts_file_is_the_business_of_commands_that_connect(tmp_path, args, connects):
    # A run from saved facts reaches no host: the host's route (its ssh config, Match exec, key and known_hosts
    # files) is not worked out, and /dev/null plans offline as it did.  A command that connects still refuses it,
    # in one line, before connecting (the login refuses it too: host keys are checked strictly).
    facts = REPO / "tests" / "fixtures" / "hosts" / "h200-vm" / "facts-raw.json"
    inv = _write(tmp_path, "all:\n  hosts:\n    h200-vm:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n"
                           '      ansible_ssh_common_args: "-o StrictHostKeyChecking=no -o '
                           'UserKnownHostsFile=/dev/null"\n')
    argv = [a.format(facts=facts, tmp=tmp_path) for a in args]
    r = _invoke(argv[0], *([] if argv[0] == "hosts" else ["--host", "h200-vm"]), "--inventory", str(inv), *argv[1:],
                cwd=tmp_path)
    out = r.stdout + r.stderr
    if connects:
        _refused(r, tmp_path, "error: host 'h200-vm': known_hosts file /dev/null (set by UserKnownHostsFile): not a "
                              "regular file; name a known_hosts file")
    else:
        # (the test's folder is named after it: "known_hosts" is in every path printed)
        assert r.returncode == 0 and "UserKnownHostsFile" not in out and "Traceback" not in out, out
        assert not [ln for ln in r.stderr.splitlines() if ln.startswith("error:")], out
        if argv[0] == "checklist":
            assert (tmp_path / "pages" / "h200-vm.md").is_file(), out
