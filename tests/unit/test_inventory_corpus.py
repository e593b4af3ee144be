"""Issue 32 item 1: real inventories read by bringup exactly as `ansible-inventory --list` reads them.

The corpus (tests/fixtures/inventories/<name>/, each with a SOURCE file naming where it comes from): NVIDIA
DeepOps' example (INI, group_vars/ and host_vars/), Kubespray's sample (INI, group_vars/<group>/ folders),
and the inventory examples of Ansible's own documentation (INI and YAML, ranges, children, vars).  For each,
bringup's hosts, groups (every member, through child groups) and each host's variables, as raw values, equal
what ansible-core's `ansible-inventory --list` prints for the same paths.  ansible-core is a test dependency
(the `test` extra), never a run-time one; it is run here from this interpreter, offline, with no config file.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.errors import InventoryError
from bringup.inventory.hosts import load_inventory

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "inventories"
DOCS = CORPUS / "ansible-docs"

CASES = {
    "deepops": [CORPUS / "deepops" / "inventory"],
    "kubespray": [CORPUS / "kubespray" / "inventory.ini"],
    # Issue 41 item 7: real inventories of other public projects (each folder's SOURCE names them).
    "kolla-ansible": [CORPUS / "kolla-ansible" / "multinode"],
    "ceph-ansible": [CORPUS / "ceph-ansible" / "hosts"],
    "k3s-ansible": [CORPUS / "k3s-ansible" / "inventory-sample.yml"],
    # Three sources in one run, as the appliance is run; children name groups an earlier source declared.
    "stackhpc-slurm-appliance": [CORPUS / "stackhpc-slurm-appliance" / "environments" / e / "inventory"
                                 for e in ("common", "site", ".stackhpc")],
    **{f"docs-{p.name}": [p] for p in sorted(DOCS.iterdir()) if p.suffix in (".ini", ".yml")
       and p.name != "line0419.ini"},
    # `-i inventory_test -i inventory_staging` (the docs' "one inventory per environment"), given together.
    "docs-two-sources": [DOCS / "line0705.ini", DOCS / "line0720.ini"],
}


def ansible_inventory(paths: list[Path], tmp_path: Path, *more: str) -> subprocess.CompletedProcess:
    """`ansible-inventory --list` for ``paths`` from the installed ansible-core (no ansible.cfg, no network)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    (tmp_path / "ansible.cfg").write_text("")  # an empty config: Ansible's defaults, whatever the machine has
    env.update(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_HOME=str(tmp_path / "ansible-home"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_INVENTORY_UNPARSED_FAILED="1",
               ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="1", ANSIBLE_NOCOLOR="1")
    args = [a for p in paths for a in ("-i", str(p))]
    r = subprocess.run([sys.executable, "-m", "ansible.cli.inventory", *args, "--list", *more], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "No module named" not in r.stderr, f"ansible-core is a test dependency: pip install '.[test]'\n{r.stderr}"
    return r


def ansible_list(paths: list[Path], tmp_path: Path, *more: str) -> dict | str:
    """`ansible-inventory --list` as JSON (parsed), or as YAML text with ``--yaml``."""
    r = ansible_inventory(paths, tmp_path, *more)
    assert r.returncode == 0, f"ansible-inventory failed:\n{r.stderr}"
    return r.stdout if "--yaml" in more else json.loads(r.stdout)


def ansible_view(doc: dict) -> tuple[dict[str, set[str]], dict[str, dict]]:
    """Every group with all its hosts (through children), and each host's variables, from --list output."""
    direct = {g: set(v.get("hosts", [])) for g, v in doc.items() if g != "_meta"}
    children = {g: set(v.get("children", [])) for g, v in doc.items() if g != "_meta"}
    for kids in list(children.values()):
        for c in kids:
            direct.setdefault(c, set())
            children.setdefault(c, set())

    def members(g: str) -> set[str]:
        return direct[g].union(*(members(c) for c in children[g]))

    groups = {g: members(g) for g in direct}
    hostvars = doc.get("_meta", {}).get("hostvars", {})
    return groups, {h: hostvars.get(h, {}) for h in groups.get("all", set())}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bringup_reads_the_corpus_as_ansible_does(name, tmp_path):
    paths = CASES[name]
    groups, hostvars = ansible_view(ansible_list(paths, tmp_path))
    inv = load_inventory(paths if len(paths) > 1 else paths[0])
    assert set(inv.hosts) == set(hostvars), name
    assert inv.hosts, f"{name}: no host at all: the comparison would prove nothing"
    assert {g: set(m) for g, m in inv.groups.items()} == groups, name
    for h, expected in hostvars.items():
        assert inv.hosts[h].raw == expected, f"{name}: host {h}"


def test_the_corpus_carries_what_it_should_prove(tmp_path):
    """The comparisons above are not vacuous: the corpus holds ranges, strides, letters, group_vars folders,
    host_vars, typed INI values, a port and a ProxyCommand as DeepOps writes it."""
    deepops = load_inventory(CORPUS / "deepops" / "inventory")
    gpu01 = deepops.hosts["gpu01"]
    assert gpu01.raw["ansible_ssh_common_args"] == '-o ProxyCommand="ssh -W %h:%p -q ubuntu@10.0.0.1"'
    assert gpu01.raw["slurm_cluster_install_cuda"] is False  # host_vars/gpu01, no extension
    assert "host_vars/gpu01" in gpu01.sources["slurm_cluster_install_cuda"]
    assert gpu01.sources["ansible_ssh_common_args"].endswith("deepops/inventory:88 (group all)")
    assert "group_vars/k8s_cluster.yml" in gpu01.sources["kubeadm_enabled"]
    assert "kubeadm_enabled" not in deepops.hosts["login01"].raw  # not in k8s_cluster
    assert set(deepops.groups["k8s_cluster"]) == {"mgmt01", "mgmt02", "mgmt03", "gpu01", "gpu02"}
    kube = load_inventory(CORPUS / "kubespray" / "inventory.ini")
    assert kube.hosts["node4"].raw["etcd_data_dir"] == "/var/lib/etcd"
    assert "group_vars/all/etcd.yml" in kube.hosts["node4"].sources["etcd_data_dir"]
    assert kube.hosts["node1"].raw == {"ansible_host": "95.54.0.12", **{k: v for k, v in kube.hosts["node1"].raw.items()
                                                                         if k != "ansible_host"}}
    assert len(load_inventory(DOCS / "line0181.ini").hosts) == 50
    assert len(load_inventory(DOCS / "line0199.ini").hosts) == 25
    assert sorted(load_inventory(DOCS / "line0217.ini").hosts)[0] == "db-a.example.com"
    assert load_inventory(DOCS / "line0321.ini").hosts["badwolf.example.com"].raw == {"ansible_port": 5309}
    assert load_inventory(DOCS / "line0300.ini").hosts["host1"].raw["http_port"] == 80
    assert load_inventory(DOCS / "line0532.yml").hosts["h1"].raw["testvar"] == "a"  # ansible_group_priority


def test_what_ansible_refuses_bringup_refuses_naming_the_line(tmp_path):
    """The docs' [usa:children] example names groups declared nowhere: Ansible fails to parse it, so does bringup."""
    path = DOCS / "line0419.ini"
    r = ansible_inventory([path], tmp_path)
    assert r.returncode != 0 and "undefined group 'northeast'" in r.stderr
    with pytest.raises(InventoryError, match=r"line0419\.ini:21: \[usa:children\] names group 'northeast'"):
        load_inventory(path)


# Issue 41 item 6: `-i a -i b` where b's [g:children] names a group only a declared; Ansible resolves the
# children against everything read so far (its INI plugin looks in the whole inventory), so must bringup.
CROSS = {
    "ini-then-ini": [("a.ini", "[control]\nc01\nc02\n[compute]\ngpu01\n"),
                     ("b.ini", "[baremetal:children]\ncontrol\ncompute\n[gpu:children]\ncompute\n[gpu:vars]\ncuda=12\n"
                               "[control:vars]\nrole=ctl\n")],
    "yaml-then-ini": [("a.yml", "all:\n  children:\n    trt:\n      hosts:\n        h1: {x: 1}\n        h2:\n"),
                      ("b.ini", "[fleet:children]\ntrt\nlater\n[later]\nh3\n")],
    "folder-files": [("inv/10-hosts.ini", "[workers]\nw[1:3]\n"), ("inv/20-groups.ini", "[k8s:children]\nworkers\n")],
}


@pytest.mark.parametrize("case", sorted(CROSS))
def test_children_may_name_a_group_an_earlier_source_declared(case, tmp_path):
    files = CROSS[case]
    for name, text in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    paths = [tmp_path / "inv"] if case == "folder-files" else [tmp_path / n for n, _ in files]
    groups, hostvars = ansible_view(ansible_list(paths, tmp_path))
    inv = load_inventory(paths)
    assert {g: set(m) for g, m in inv.groups.items()} == groups
    assert {h: inv.hosts[h].raw for h in inv.hosts} == hostvars
    assert groups.get("baremetal", groups.get("fleet", groups.get("k8s")))  # the cross-source group has hosts


def test_children_naming_a_group_no_source_declares_is_still_refused(tmp_path):
    (tmp_path / "a.ini").write_text("[control]\nc01\n")
    (tmp_path / "b.ini").write_text("[baremetal:children]\ncontrol\nnowhere\n")
    paths = [tmp_path / "a.ini", tmp_path / "b.ini"]
    r = ansible_inventory(paths, tmp_path)
    assert r.returncode != 0 and "nowhere" in r.stderr
    with pytest.raises(InventoryError, match=r"b\.ini:3: \[baremetal:children\] names group 'nowhere'"):
        load_inventory(paths)
    # the order matters, as in Ansible: the later source's groups are not known to an earlier one
    with pytest.raises(InventoryError, match=r"names group 'control'"):
        load_inventory([tmp_path / "b.ini", tmp_path / "a.ini"])


#: Documents PyYAML's pure-Python reader refuses or reads otherwise, which libyaml (Ansible's loader, and bringup's
#: fast path) takes: a tab after a key's colon or at a line's end, a block scalar's header followed by '#', a BOM
#: at the start of a later line.  bringup must read each as ansible-inventory does.
LIBYAML_CASES = {
    "tab-after-colon": "all:\n  hosts:\n    h1:\n      gpu_profile:\tl40s\n",
    "tab-at-line-end": "all:\n  hosts:\n    h1:\n      gpu_profile: l40s\t\n",
    "block-header-comment": "all:\n  hosts:\n    h1:\n      note: |#\n        x\n",
    "bom-on-a-later-line": "all:\n  hosts:\n    h1:\n\ufeff    h2:\n",
}


@pytest.mark.parametrize("name", sorted(LIBYAML_CASES))
def test_where_libyaml_and_pure_python_yaml_differ_bringup_reads_as_ansible_does(name, tmp_path):
    path = tmp_path / f"{name}.yml"
    path.write_text(LIBYAML_CASES[name], encoding="utf-8")
    groups, hostvars = ansible_view(ansible_list([path], tmp_path))
    inv = load_inventory(path)
    assert set(inv.hosts) == set(hostvars) and inv.hosts, name
    for h, expected in hostvars.items():
        assert inv.hosts[h].raw == expected, f"{name}: host {h}"
