"""Parsers of os.* and cpu.* facts, on recorded real outputs."""
from __future__ import annotations

from pathlib import Path

from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.os_ import OsBootId, parse_os_release, parse_uname
from harness.captures import parse_lscpu_json, parse_lscpu_plain, parse_numactl_hardware, parse_size_kib

REPO = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"
PUB = FIX / "public"


def sections(path: Path) -> list[str]:
    """A fixture file's sections (the captures separate commands with ``---`` lines)."""
    out, cur = [], []
    for line in path.read_text().splitlines():
        if line == "---":
            out.append("\n".join(cur) + "\n")
            cur = []
        else:
            cur.append(line)
    out.append("\n".join(cur) + "\n")
    return out


# ---------------------------------------------------------------- os.*

def test_os_release_h200():
    rel = parse_os_release((H200 / "os.txt").read_text())  # uname -a line first: ignored
    assert rel["id"] == "ubuntu"
    assert rel["version_id"] == "24.04"
    assert rel["codename"] == "noble"
    assert rel["pretty_name"] == "Ubuntu 24.04.3 LTS"
    assert rel["ID_LIKE"] == "debian"
    assert rel["VERSION"] == "24.04.3 LTS (Noble Numbat)"
    assert "Linux vm" not in " ".join(rel)


def test_os_release_codename_fallbacks():
    rel = parse_os_release('ID=debian\nVERSION_ID="11"\nVERSION="11 (bullseye)"\n')
    assert rel["codename"] == "bullseye"
    rel = parse_os_release("ID=ubuntu\nUBUNTU_CODENAME=jammy\n")
    assert rel["codename"] == "jammy"
    rel = parse_os_release("ID='rocky'\nPRETTY_NAME=\"Rocky Linux 9.4 (Blue Onyx)\"\n")
    assert rel["id"] == "rocky" and rel["codename"] == "" and rel["pretty_name"].startswith("Rocky")
    assert parse_os_release("") == {}


def test_uname_a_h200():
    k = parse_uname((H200 / "os.txt").read_text().splitlines()[0])
    assert k["sysname"] == "Linux"
    assert k["release"] == "6.18.44-fc-v973-gpu"
    assert k["machine"] == "x86_64"
    assert k["version"] == "#1 SMP PREEMPT_DYNAMIC @0"
    assert k["release_tuple"] == [6, 18, 44]


def test_uname_fact_format_and_srm():
    k = parse_uname("sysname=Linux\nrelease=6.8.0-71-generic\nversion=#71-Ubuntu SMP PREEMPT_DYNAMIC\nmachine=x86_64\n")
    assert k == {
        "sysname": "Linux",
        "release": "6.8.0-71-generic",
        "version": "#71-Ubuntu SMP PREEMPT_DYNAMIC",
        "machine": "x86_64",
        "release_tuple": [6, 8, 0],
    }
    k = parse_uname("Linux 5.15.0-1063-nvidia aarch64\n")
    assert (k["release"], k["machine"], k["release_tuple"]) == ("5.15.0-1063-nvidia", "aarch64", [5, 15, 0])
    assert parse_uname("") == {}


def test_boot_id():
    assert OsBootId.process("467d123f-773b-3524-f9fc-810065421e23\n") == "467d123f-773b-3524-f9fc-810065421e23"
    assert OsBootId.process("") is None


# ---------------------------------------------------------------- cpu.topology (lscpu -p)

def test_lscpu_p_h200_new_colon_cache_layout():
    topo = parse_lscpu_parse(sections(H200 / "lscpu.txt")[2])
    assert topo["cpu_count"] == 16
    assert topo["online"] == list(range(16))
    assert topo["socket_count"] == 1
    assert topo["sockets"] == {"0": list(range(16))}
    assert topo["numa_known"] is True
    assert topo["numa_nodes"] == {"0": list(range(16))}
    assert topo["l3_groups"] == {"0": list(range(16))}
    assert topo["threads_per_core"] == 1
    assert topo["core_count"] == 16
    assert topo["smt_siblings"] == []
    assert topo["cpus"][5] == {"cpu": 5, "core": 5, "socket": 0, "node": 0, "l3": 0}


def test_lscpu_p_dell_r710_old_layout_two_sockets():
    # Old lscpu: "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3" with separate cache columns.
    topo = parse_lscpu_parse((PUB / "lscpu-p-2s-2numa-dell-r710.txt").read_text())
    assert topo["cpu_count"] == 16
    assert topo["socket_count"] == 2
    assert topo["numa_nodes"] == {"0": [0, 2, 4, 6, 8, 10, 12, 14], "1": [1, 3, 5, 7, 9, 11, 13, 15]}
    assert topo["sockets"] == topo["numa_nodes"]
    assert topo["l3_groups"] == topo["numa_nodes"]
    assert topo["threads_per_core"] == 2
    assert topo["core_count"] == 8
    assert topo["smt_siblings"] == [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]]
    assert topo["cpus"][9] == {"cpu": 9, "core": 1, "socket": 1, "node": 1, "l3": 1}


def test_lscpu_p_empty_node_column_means_numa_unknown():
    out = "# CPU,Core,Socket,Node,L1d:L1i:L2:L3\n0,0,0,,0:0:0:0\n1,0,0,,0:0:0:0\n2,1,0,,1:1:1:0\n3,1,0,,1:1:1:0\n"
    topo = parse_lscpu_parse(out)
    assert topo["numa_known"] is False
    assert all(c["node"] == 0 for c in topo["cpus"])
    assert topo["numa_nodes"] == {"0": [0, 1, 2, 3]}
    assert topo["smt_siblings"] == [[0, 1], [2, 3]]
    assert topo["threads_per_core"] == 2


def test_lscpu_p_no_l3_in_header():
    out = "# CPU,Core,Socket,Node,L1d:L1i:L2\n0,0,0,0,0:0:0\n1,1,0,0,1:1:0\n"
    topo = parse_lscpu_parse(out)
    assert topo["l3_groups"] == {}
    assert topo["cpus"][0]["l3"] is None


def test_lscpu_p_without_header_takes_last_cache_field():
    topo = parse_lscpu_parse("0,0,0,0,0:0:0:3\n1,1,0,0,1:1:1:3\n")
    assert topo["l3_groups"] == {"3": [0, 1]}


def test_topology_sysfs_nodes_add_sparse_cpuless_nodes():
    # numactl fixture of a host with nodes 0,8 (CPUs) and 252-255 (memory only):
    # rebuild what the fact prints (lscpu -p rows + sysfs "node N cpulist").
    numa = parse_numactl_hardware((PUB / "numactl-H-sparse-nodes-0-8-252-255.txt").read_text())
    rows = ["# CPU,Core,Socket,Node,L1d:L1i:L2:L3"]
    for node, cpus in numa["cpu_nodes"].items():
        for c in cpus:
            rows.append(f"{c},{c},{0 if node == '0' else 1},{node},{c}:{c}:{c}:{node}")
    rows.append("---")
    rows += [f"node {n} " + ",".join(map(str, cpus)) for n, cpus in numa["cpu_nodes"].items()]
    topo = parse_lscpu_parse("\n".join(rows) + "\n")
    assert list(topo["numa_nodes"]) == ["0", "8", "252", "253", "254", "255"]
    assert topo["numa_nodes"]["8"] == list(range(64, 128))
    assert topo["numa_nodes"]["252"] == []
    assert topo["cpu_count"] == 128


def test_topology_sysfs_fallback_format():
    out = (
        "# CPU,Core,Socket,Node,L3 source=sysfs\n0,0,0,0,0\n1,1,0,0,0\n2,0,1,1,1\n3,1,1,1,1\n"
        "---\nnode 0 0-1\nnode 1 2-3\n"
    )
    topo = parse_lscpu_parse(out)
    assert topo["source"] == "sysfs"
    assert topo["l3_groups"] == {"0": [0, 1], "1": [2, 3]}
    # sysfs core ids repeat per package: siblings are keyed by (socket, core).
    assert topo["smt_siblings"] == [] and topo["core_count"] == 4


def test_lscpu_p_empty():
    assert parse_lscpu_parse("") == {}


# ---------------------------------------------------------------- plain lscpu, -J

def test_lscpu_plain_h200():
    info = parse_lscpu_plain(sections(H200 / "lscpu.txt")[0])
    assert info["cpu_count"] == 16
    assert info["sockets"] == 1
    assert info["cores_per_socket"] == 16
    assert info["threads_per_core"] == 1
    assert info["numa_nodes"] == {"0": list(range(16))}
    assert info["hypervisor_vendor"] == "KVM"
    assert info["l3"] == {"text": "300 MiB (1 instance)", "kib": 300 * 1024, "instances": 1}


def test_lscpu_json_h200_matches_plain():
    secs = sections(H200 / "lscpu.txt")
    assert parse_lscpu_json(secs[1]) == parse_lscpu_plain(secs[0])


def test_lscpu_json_nested_children():
    out = '{"lscpu": [{"field": "CPU(s):", "data": "8", "children": [{"field": "NUMA node0 CPU(s):", "data": "0-7"}]}]}'
    info = parse_lscpu_json(out)
    assert info["cpu_count"] == 8 and info["numa_nodes"] == {"0": list(range(8))}
    assert parse_lscpu_json("not json") == {}


def test_lscpu_plain_xeon8562y_two_sockets_interleaved():
    info = parse_lscpu_plain((PUB / "lscpu-2s-xeon8562y-l40s.txt").read_text())
    assert info["cpu_count"] == 128
    assert info["sockets"] == 2
    assert info["cores_per_socket"] == 32
    assert info["threads_per_core"] == 2
    assert info["numa_node_count"] == 2
    assert info["numa_nodes"]["0"] == list(range(0, 128, 2))
    assert info["numa_nodes"]["1"] == list(range(1, 128, 2))
    assert info["model_name"] == "INTEL(R) XEON(R) PLATINUM 8562Y+"
    assert info["l3"] == {"text": "120 MiB (2 instances)", "kib": 120 * 1024, "instances": 2}


def test_lscpu_plain_old_r710_sizes():
    info = parse_lscpu_plain((PUB / "lscpu-p-2s-2numa-dell-r710.txt").read_text())
    assert info["sockets"] == 2 and info["cores_per_socket"] == 4 and info["threads_per_core"] == 2
    assert info["l3"] == {"text": "8192K", "kib": 8192, "instances": None}
    assert info["numa_nodes"]["1"] == [1, 3, 5, 7, 9, 11, 13, 15]


def test_size_kib():
    assert parse_size_kib("32 MiB (16 instances)") == 32768
    assert parse_size_kib("256K") == 256
    assert parse_size_kib("1.5 GiB") == 1572864
    assert parse_size_kib("n/a") is None


# ---------------------------------------------------------------- numactl -H

def test_numactl_two_nodes_c5n():
    numa = parse_numactl_hardware((PUB / "numactl-H-2node-c5n18xlarge.txt").read_text())
    assert numa["available"] == 2
    assert numa["node_ids"] == [0, 1]
    assert numa["nodes"]["0"]["cpus"] == list(range(0, 18)) + list(range(36, 54))
    assert numa["nodes"]["1"]["cpus"] == list(range(18, 36)) + list(range(54, 72))
    assert numa["nodes"]["0"]["size_mb"] == 94590 and numa["nodes"]["1"]["free_mb"] == 79679
    assert numa["distances"] == {"0": {"0": 10, "1": 21}, "1": {"0": 21, "1": 10}}


def test_numactl_sparse_nodes():
    numa = parse_numactl_hardware((PUB / "numactl-H-sparse-nodes-0-8-252-255.txt").read_text())
    assert numa["available"] == 6
    assert numa["node_ids"] == [0, 8, 252, 253, 254, 255]
    assert numa["nodes"]["0"]["cpus"] == list(range(64))
    assert numa["nodes"]["8"]["cpus"] == list(range(64, 128))
    for n in ("252", "253", "254", "255"):
        assert numa["nodes"][n]["cpus"] == []
        assert numa["nodes"][n]["size_mb"] == 16128
    assert numa["distances"]["8"]["0"] == 40
    assert numa["distances"]["252"]["252"] == 10
    assert numa["distances"]["255"]["8"] == 80


def test_numactl_empty():
    assert parse_numactl_hardware("") == {}
