"""Issue 32 items 1 and 4: each inventory source on its own (ranges, INI, group_vars/host_vars, folders,
scripts, --list output, {{ }} references), the precedence against `ansible-inventory`, `invoke hosts --host`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.errors import InventoryError
from bringup.inventory.hosts import load_inventory
from bringup.inventory.sources.ini import parse_ini
from bringup.inventory.sources.model import SourceError
from bringup.inventory.sources.ranges import MAX_HOSTS, RangeError, expand
from bringup.inventory.sources.script import run_script

from .test_inventory_corpus import CORPUS, ansible_list, ansible_view

REPO = Path(__file__).resolve().parents[2]


def same_as_ansible(paths, tmp_path):
    """bringup's view of ``paths`` equals ansible-inventory's; returns bringup's inventory."""
    groups, hostvars = ansible_view(ansible_list(paths, tmp_path))
    inv = load_inventory(paths)
    assert {g: set(m) for g, m in inv.groups.items()} == groups
    assert {h: inv.hosts[h].raw for h in inv.hosts} == hostvars
    return inv


# --- ranges ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern, first, last, count", [
    ("gpu[01:50]", "gpu01", "gpu50", 50), ("n[0:10:2]", "n0", "n10", 6), ("rack[a:f]-x", "racka-x", "rackf-x", 6),
    ("r[1:2]n[01:03]", "r1n01", "r2n03", 6), ("db[:3]", "db0", "db3", 4), ("plain", "plain", "plain", 1),
])
def test_ranges_expand_as_ansible_does(pattern, first, last, count):
    names = expand(pattern)
    assert (names[0], names[-1], len(names)) == (first, last, count)


@pytest.mark.parametrize("pattern, words", [
    ("gpu[5:1]", "gives no host"), ("gpu[1:100000]", f"more than {MAX_HOSTS:,} hosts"),
    ("gpu[01:100]", "pads the start to 2 digits"), ("gpu[1:3", "without ']'"), ("gpu[1:x]", "neither numbers"),
    ("gpu[1:4:0]", "step 0"), ("gpu[f:a]", "starts after it ends"),
    ("a[1:200]b[1:200]", f"more than {MAX_HOSTS:,} hosts"),
])
def test_bad_ranges_are_one_line(pattern, words):
    with pytest.raises(RangeError, match=words.replace("[", r"\[")):
        expand(pattern)


# --- INI ---------------------------------------------------------------------------------------------

INI = """\
loose ansible_host=192.0.2.9
[gpu]
gpu[01:02]:2222 n=8 f=1.5 b=True s='two words' d="{'a': 1}" y=yes l=[1,2] t=1,2 empty= # comment
gpu03 cmd="a 'b' c"
[gpu:vars]
ansible_user = ops
path=/opt/x # not a comment here
quoted="a b"
[rack:children]
gpu
"""


def test_ini_values_typed_and_quoted_as_ansible_does(tmp_path):
    p = tmp_path / "hosts.ini"
    p.write_text(INI)
    inv = same_as_ansible([p], tmp_path)
    g1 = inv.hosts["gpu01"].raw
    assert g1["ansible_port"] == 2222 and g1["n"] == 8 and g1["b"] is True and g1["s"] == "two words"
    assert g1["d"] == {"a": 1} and g1["y"] == "yes" and g1["l"] == [1, 2] and g1["t"] == [1, 2]
    assert g1["path"] == "/opt/x # not a comment here" and g1["quoted"] == "a b" and g1["ansible_user"] == "ops"
    assert inv.groups["ungrouped"] == ["loose"] and set(inv.groups["rack"]) == {"gpu01", "gpu02", "gpu03"}
    assert inv.hosts["gpu01"].sources["n"] == f"{p}:3 (host gpu01)"
    assert inv.hosts["gpu01"].sources["path"] == f"{p}:7 (group gpu)"


@pytest.mark.parametrize("text, words", [
    ("[gpu]\nh1 ansible_host\n", "hosts:2: expected key=value after the host name, got 'ansible_host'"),
    ("[gpu]\nh1 a='unclosed\n", "hosts:2: cannot split host line"),
    ("[gpu:hostvars]\nh1\n", "hosts:1: section [gpu:hostvars] has unknown kind 'hostvars'"),
    ("[gpu ]\n", "hosts:1: '[gpu ]' is not a section header"),
    ("[gpu:vars]\na=1\n", "hosts:1: [gpu:vars] is for group 'gpu', which is declared nowhere"),
    ("[gpu]\nh[3:1]\n", "hosts:2: host range 'h[3:1]' gives no host"),
    ("[gpu]\nh1:\n", "hosts:2: host 'h1:' ends in ':' with no port"),
    ("[gpu]\nh1\n[gpu:vars]\nnovalue\n", "hosts:4: expected key=value in [gpu:vars]"),
])
def test_bad_ini_lines_name_file_and_line(tmp_path, text, words):
    with pytest.raises(SourceError) as e:
        parse_ini(text, "hosts")
    assert str(e.value).startswith(words), str(e.value)


def test_yaml_that_is_not_yaml_and_not_ini_says_the_yaml_error(tmp_path):
    p = tmp_path / "hosts"
    p.write_text("all:\n  hosts:\n    h1: {a: [}\n")
    with pytest.raises(InventoryError, match=r"hosts:3:\d+: YAML error"):
        load_inventory(p)


def test_an_inventory_plugin_config_names_the_way_through_ansible_inventory(tmp_path):
    p = tmp_path / "aws_ec2.yml"
    p.write_text("plugin: amazon.aws.aws_ec2\nregions: [us-east-1]\n")
    with pytest.raises(InventoryError, match=r"aws_ec2\.yml: the configuration of Ansible's inventory plugin "
                                             r"'amazon\.aws\.aws_ec2'.*ansible-inventory -i .* --list"):
        load_inventory(p)


# --- group_vars / host_vars, precedence ---------------------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_precedence_with_vars_folders_equals_ansible(tmp_path):
    """Every layer sets `who`, and layers under it set their own name: the winner of each is Ansible's."""
    inv = tmp_path / "inv"
    _tree(inv, {
        "hosts": "[all:vars]\nwho=inv-all\nall_only=inv-all\n"
                 "[parent:children]\nchild\n[parent:vars]\nwho=inv-parent\nparent_only=inv-parent\n"
                 "[child]\nh1 who=inv-host\nh2\n[child:vars]\nwho=inv-child\nchild_only=inv-child\n"
                 "[zz]\nh2\n[zz:vars]\nwho=inv-zz\nprio=zz\n[aa]\nh2\n[aa:vars]\nprio=aa\nansible_group_priority=5\n",
        "group_vars/all/10-first.yml": "who: gv-all-10\nall_only: gv-all-10\nfolder: first\n",
        "group_vars/all/20-second.yaml": "folder: second\n",
        "group_vars/all/notes.txt": "folder: never read\n",
        "group_vars/all/.hidden.yml": "folder: never read\n",
        "group_vars/parent.yml": "who: gv-parent\nparent_only: gv-parent\n",
        "group_vars/child": "who: gv-child\n",
        "group_vars/child.yml": "who: never read, the file without extension is found first\n",
        "host_vars/h1.json": json.dumps({"who": "hv-h1", "n": 8}),
    })
    got = same_as_ansible([inv / "hosts"], tmp_path)
    h1, h2 = got.hosts["h1"], got.hosts["h2"]
    assert h1.raw["who"] == "hv-h1" and h2.raw["who"] == "gv-child"
    assert h1.raw["all_only"] == "gv-all-10" and h1.raw["folder"] == "second" and h1.raw["parent_only"] == "gv-parent"
    assert h2.raw["prio"] == "aa"  # ansible_group_priority 5 beats zz's default 1 at the same depth
    assert h1.sources["who"].endswith("host_vars/h1.json:1 (host h1)")
    assert h2.sources["who"].endswith("group_vars/child:1 (group child)")
    assert h1.sources["folder"].endswith("group_vars/all/20-second.yaml:1 (group all)")


def test_a_vars_file_that_is_not_a_mapping_is_one_line(tmp_path):
    _tree(tmp_path, {"hosts": "[gpu]\nh1\n", "group_vars/gpu.yml": "- a\n- b\n"})
    with pytest.raises(InventoryError, match=r"group_vars/gpu\.yml: a vars file must be a mapping .* got list"):
        load_inventory(tmp_path / "hosts")


# --- folders, several sources, --list output, scripts ----------------------------------------------

def test_inventory_folder_and_several_sources_equal_ansible(tmp_path):
    folder = tmp_path / "inventory"
    _tree(folder, {
        "01-static": "[gpu]\ngpu[01:03]\n",
        "02-groups.yml": "all:\n  children:\n    rack1:\n      hosts:\n        gpu01:\n        gpu02: {slot: 2}\n",
        "03-sub/more.ini": "[cpu]\ncpu01\n",
        "README.md": "# not an inventory\n",
        "old.bak": "[gpu]\nnever\n",
        "group_vars/gpu.yml": "gpu_profile: l40s\n",
    })
    other = tmp_path / "extra.yml"
    other.write_text("gpu:\n  hosts:\n    gpu09:\n  vars: {gpu_profile: a10}\n")
    inv = same_as_ansible([folder, other], tmp_path)
    assert set(inv.hosts) == {"gpu01", "gpu02", "gpu03", "cpu01", "gpu09"}
    assert inv.hosts["gpu01"].raw["gpu_profile"] == "l40s"  # group_vars/ beats the inventory's group vars


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_list_output_of_ansible_inventory_reads_as_its_source(tmp_path, form):
    """`ansible-inventory --list` (JSON, _meta.hostvars) and `--list --yaml` (the YAML format, vars per host)."""
    source = CORPUS / "deepops" / "inventory"
    listed = tmp_path / f"deepops.{form}"
    listed.write_text(json.dumps(ansible_list([source], tmp_path)) if form == "json"
                      else ansible_list([source], tmp_path, "--yaml"))
    direct = load_inventory(source)
    via_list = load_inventory(listed)
    assert {h: v.raw for h, v in via_list.hosts.items()} == {h: v.raw for h, v in direct.hosts.items()}
    assert via_list.groups == direct.groups


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "inventory.py"
    p.write_text(f"#!{sys.executable}\nimport json, sys, time\n{body}\n")
    p.chmod(0o755)
    return p


def test_inventory_script_with_and_without_meta_equals_ansible(tmp_path):
    doc = {"gpu": {"hosts": ["g1", "g2"], "vars": {"gpu_profile": "l40s"}}, "rack": {"children": ["gpu"]},
           "_meta": {"hostvars": {"g1": {"ansible_host": "192.0.2.1"}}}}
    s = _script(tmp_path, f"print(json.dumps({doc!r}))")
    inv = same_as_ansible([s], tmp_path)
    assert inv.hosts["g1"].raw == {"ansible_host": "192.0.2.1", "gpu_profile": "l40s"}
    no_meta = {"gpu": ["g1", "g2"]}
    s = _script(tmp_path, f"if sys.argv[1] == '--list': print(json.dumps({no_meta!r}))\n"
                          "else: print(json.dumps({'asked': sys.argv[2]}))")
    inv = same_as_ansible([s], tmp_path)
    assert inv.hosts["g2"].raw == {"asked": "g2"}


def test_an_inventory_script_named_without_a_folder_is_the_file_here(tmp_path, monkeypatch):
    # "-i inventory.py" runs ./inventory.py, as ansible-inventory does; Popen alone searched PATH for it.
    _script(tmp_path, "print(json.dumps({'gpu': ['g1']}))")
    monkeypatch.chdir(tmp_path)
    assert list(load_inventory(Path("inventory.py")).hosts) == ["g1"]


@pytest.mark.parametrize("body, words", [
    ("time.sleep(60)", "gave no answer to --list within 1 s (killed)"),
    ("print('garbage')", "output is not JSON"),
    ("sys.exit('no credentials for the cloud API')", "exited 1: no credentials for the cloud API"),
    ("print(json.dumps({'gpu': {'hosts': 'g1'}}))", "group 'gpu': hosts must be a list of names"),
])
def test_bad_inventory_scripts_are_one_line(tmp_path, body, words):
    with pytest.raises(SourceError, match=words.replace("(", r"\(").replace(")", r"\)")):
        run_script(str(_script(tmp_path, body)), timeout=1)


def test_an_executable_inventory_without_shebang_is_read_not_run(tmp_path):
    """INI or YAML with the x bit (copied from a share): Ansible's run of it fails and it falls back; so read."""
    p = tmp_path / "hosts"
    p.write_text("[gpu]\ngpu01 n=1\n")
    p.chmod(0o755)
    assert same_as_ansible([p], tmp_path).hosts["gpu01"].raw == {"n": 1}


def test_vault_files_without_a_password_are_one_line(tmp_path):
    vault = "$ANSIBLE_VAULT;1.1;AES256\n6162636465666768\n"
    (tmp_path / "hosts").write_text("[gpu]\ngpu01\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text(vault)
    with pytest.raises(InventoryError,
                       match=r"group_vars/gpu\.yml: encrypted with ansible-vault and no vault password given"):
        load_inventory(tmp_path / "hosts")
    (tmp_path / "hosts").write_text(vault)
    with pytest.raises(InventoryError, match=r"hosts: encrypted with ansible-vault and no vault password given"):
        load_inventory(tmp_path / "hosts")


# --- {{ }} -------------------------------------------------------------------------------------------

def test_plain_references_render_and_others_are_named_where_used(tmp_path):
    p = tmp_path / "hosts.yml"
    p.write_text("all:\n  vars: {base_ip: 192.0.2.7, port: 2201, user: ops}\n  hosts:\n"
                 "    h1: {ansible_host: '{{ base_ip }}', ansible_port: '{{ port }}', note: 'on {{ inventory_hostname }}',"
                 " fancy: \"{{ user | upper }}\"}\n")
    h1 = same_as_ansible([p], tmp_path).hosts["h1"]
    assert h1.raw["ansible_host"] == "{{ base_ip }}"  # as ansible-inventory prints it
    assert h1.vars["ansible_host"] == h1.address == "192.0.2.7" and h1.connection.ansible_port == 2201
    assert h1.vars["note"] == "on h1"
    assert "fancy" in h1.unrendered and h1.vars["fancy"] == "{{ user | upper }}"
    with pytest.raises(InventoryError, match=r"hosts\.yml:4 \(host h1\): host 'h1': fancy = .*a filter"):
        h1.refuse_unrendered(["fancy"])
    p.write_text("all:\n  hosts:\n    h1: {ansible_user: \"{{ lookup('env', 'USER') }}\"}\n")
    with pytest.raises(InventoryError, match=r"host 'h1': ansible_user = .* does not render"):
        load_inventory(p)


# --- invoke hosts --host ----------------------------------------------------------------------------

def test_hosts_task_shows_each_variable_with_its_source():
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "inventory",
                        "--host", "gpu01", "--json"], cwd=CORPUS / "deepops", capture_output=True, text=True,
                       timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ansible_ssh_common_args"] == {"value": '-o ProxyCommand="ssh -W %h:%p -q ubuntu@10.0.0.1"',
                                              "source": "inventory:88 (group all)"}
    assert doc["slurm_cluster_install_cuda"] == {"value": False, "source": "host_vars/gpu01:6 (host gpu01)"}
    assert doc["ansible_host"]["source"] == "inventory:16 (host gpu01)"
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "inventory",
                        "--host", "gpu01"], cwd=CORPUS / "deepops", capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0 and "group_vars/k8s_cluster.yml:2 (group k8s_cluster)" in r.stdout, r.stdout + r.stderr


@pytest.mark.reliability(item=40, fault="-i .env of 'export PGPASSWORD=...', 'export OPENAI_API_KEY=...', 'export "
                                        "AWS_SECRET_ACCESS_KEY=...': hosts --host export (with or without -j) printed "
                                        "all three in clear (secret_place knew none of the masker's names)",
                         variants=2, checks=("secret never shown",))
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_shell_env_file_given_as_the_inventory_shows_no_credential(tmp_path, as_json):
    secrets = {"PGPASSWORD": "hunter2x", "OPENAI_API_KEY": "sk-abcdef123", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI"}
    (tmp_path / ".env").write_text("".join(f"export {k}={v}\n" for k, v in secrets.items()))
    # ansible-inventory lists it so (a host 'export' with three variables); bringup refuses the line, unquoted
    # (a value no credential name marks, DB_HOST=..., was printed, and plan dialed a host 'export').
    assert ansible_view(ansible_list([tmp_path / ".env"], tmp_path))[1] == {"export": secrets}
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", ".env",
                        "--host", "export", *(["--json"] if as_json else [])], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 1 and "not an inventory host" in r.stderr and "Traceback" not in r.stderr, r.stderr
    for name, value in secrets.items():
        assert name not in r.stdout + r.stderr and value not in r.stdout + r.stderr, r.stderr


def test_inventory_flag_given_twice_merges_both(tmp_path):
    """`-i a -i b` reaches load_inventory as both paths (Invoke's iterable flag), later ones overriding."""
    (tmp_path / "a.ini").write_text("[gpu]\ngpu01 ansible_host=192.0.2.1\n")
    (tmp_path / "b.yml").write_text("gpu:\n  hosts:\n    gpu01: {ansible_host: 192.0.2.9}\n    gpu02:\n")
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "hosts", "-i", "a.ini",
                        "--inventory", "b.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "root@192.0.2.9:22" in r.stdout and "root@gpu02:22" in r.stdout and "192.0.2.1" not in r.stdout, r.stdout


@pytest.mark.reliability(item=40, fault="an inventory of NUL bytes or with a control character (YAML's reader "
                                        "refuses it)", variants=2, checks=("one clear line",))
def test_a_binary_or_control_character_inventory_is_one_line(tmp_path):
    (tmp_path / "zeros").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "ctl").write_text("all:\n  hosts:\n    a\x01b:\n")
    for name, words in (("zeros", "zeros:1: character U+0000"), ("ctl", "ctl:3: character U+0001")):
        with pytest.raises(InventoryError, match=re.escape(words)) as e:
            load_inventory(tmp_path / name)
        assert "\n" not in str(e.value)


@pytest.mark.reliability(item=40, fault="an INI literal with a key no inventory value has (tuple, ..., 1j)",
                         checks=("data shown as data",))
@pytest.mark.parametrize("text", ["{(1,):2}", "{...:1}", "{1j:1}", "1j", "[1, ...]"])
def test_an_ini_literal_no_inventory_holds_stays_text(text):
    from bringup.inventory.sources.ini import parse_value

    assert parse_value(text) == text
    assert parse_value("{1: (2, {3})}") == {1: [2, [3]]}


@pytest.mark.reliability(item=40, fault="inventory: a template bomb (10 references a level, 9 levels: 2 GB of text)",
                         checks=("one clear line", "no hang"))
def test_references_repeated_within_references_stop_at_the_rendered_cap():
    from bringup.inventory.sources.templating import MAX_RENDERED, render

    variables = {f"v{i}": "{{ v%d }}" % (i + 1) * 10 for i in range(9)} | {"v9": "ab", "x": "{{ v0 }}"}
    rendered, failed = render(variables)
    assert "renders to more than" in failed["v0"] and "v0" in failed["x"]
    assert rendered["v4"] == "ab" * 10 ** 5 and "renders to more than" in failed["v3"] and MAX_RENDERED < 2 * 10 ** 6
    assert rendered["x"] == "{{ v0 }}"


@pytest.mark.reliability(item=40, fault="an inventory script with no _meta whose --host answers slowly, for 40 hosts",
                         checks=("one clear line", "no hang"))
def test_an_inventory_script_has_one_deadline_for_all_its_host_calls(tmp_path):
    import sys
    import time

    from bringup.inventory.sources.model import SourceError
    from bringup.inventory.sources.script import run_script

    script = tmp_path / "inv.py"
    script.write_text(f"#!{sys.executable}\nimport json, sys, time\n"
                      "if sys.argv[1] == '--list':\n"
                      "    print(json.dumps({'all': {'hosts': [f'h{i}' for i in range(40)]}}))\n"
                      "else:\n    time.sleep(0.3)\n    print('{}')\n")
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"inv\.py: the inventory script's --host calls took over 2 s in all") as e:
        run_script(str(script), timeout=1.0)
    assert time.monotonic() - started < 6 and "\n" not in str(e.value)
